/* Deflate (RFC 1951) with literals and runs only: the fast coder behind PNG's default efforts.
 *
 * Why written here rather than taken from a library. A PNG's filtered rows of a rendered or photographed
 * frame are mostly small residuals with few repeated strings: zlib spends its time in the LZ77 match
 * search and finds little (a 4K frame at level 2 came out *larger*, 13.5 MB, than with no match search at
 * all, 12.1 MB with Z_HUFFMAN_ONLY, and took 24 ns a byte on the development machine; Z_RLE was no
 * faster). libdeflate compresses twice as fast as zlib but cannot end a stream without a final block
 * (it has no sync flush), and a PNG compressed in strips on several threads must join them into one
 * stream. So this coder does what fpnge (Google's fast PNG encoder) showed is enough for image rows:
 * literals, runs of the previous byte (distance 1: a flat region filters to runs of zeros), and one
 * Huffman code per block built from that block's counts. It knows every bit it writes, so a stream can
 * end at a byte boundary for the next strip (an empty stored block, as zlib's Z_SYNC_FLUSH).
 *
 * Correctness is checked by inflating with zlib (tests/test_deflate_runs.c) and by decoding every PNG
 * with libspng (tests/test_encode.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes hp_deflate_runs() writes for len input bytes. */
size_t hp_deflate_runs_bound(size_t len);

/* Compresses src[0..len) into dst (at least hp_deflate_runs_bound(len) bytes) as raw deflate blocks and
 * sets *out_len. final: the last block is marked final; otherwise the output ends with an empty stored
 * block, byte-aligned, so that another stream's blocks can follow it. Runs refer only to bytes of src, so
 * pieces compressed apart can be joined in order. Thread-safe; false only when scratch memory (128 KiB)
 * cannot be allocated. */
bool hp_deflate_runs(const uint8_t *src, size_t len, bool final, uint8_t *dst, size_t *out_len);

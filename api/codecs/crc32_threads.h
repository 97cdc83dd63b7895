/* The CRC-32 of a large buffer on several threads (PNG's chunk CRC, ISO 3309 / RFC 1952's polynomial): each
 * thread takes a contiguous piece with libdeflate's crc32 (carry-less multiplication where the CPU has it),
 * and zlib's crc32_combine joins the pieces' CRCs in order (it shifts a CRC past a piece's length in
 * O(log length) steps). A 4K frame's 10 MB IDAT took about 0.9 ms on one core of the H200 host: most of
 * the encode once the GPU has deflated the frame, and part of one client's latency (docs/BENCHMARKS.md).
 *
 * No library offers it threaded; this is the join, not a CRC of its own. */
#ifndef HP_CRC32_THREADS_H
#define HP_CRC32_THREADS_H

#include <stddef.h>
#include <stdint.h>

/* Below this, one thread: starting threads costs tens of microseconds each. */
#define HP_CRC32_THREADS_MIN_BYTES ((size_t)4 << 20)
/* Each thread's piece is at least this long. */
#define HP_CRC32_THREADS_PIECE ((size_t)2 << 20)

/* crc continued over data[0, len), as libdeflate_crc32(crc, data, len), on up to `threads` threads (this one
 * among them); a thread that cannot start has its piece done here. *helper_cpu_ms (when not NULL) is set to
 * the CPU time the other threads spent, for an encoder's count of its CPU. */
uint32_t hp_crc32_threads(uint32_t crc, const uint8_t *data, size_t len, unsigned threads, double *helper_cpu_ms);

#endif

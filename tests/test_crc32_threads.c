/* The CRC-32 of a large buffer on several threads (api/codecs/crc32_threads.h) against zlib's crc32 of the whole
 * buffer, an implementation of its own: lengths below, at and past the threaded path's threshold, uneven
 * pieces, 1 to 16 threads, and a CRC continued from a nonzero one; the helper threads' CPU time counted. */
#include <stdlib.h>
#include <zlib.h>

#include "api/codecs/crc32_threads.h"
#include "tap.h"

int main(void)
{
    size_t cap = HP_CRC32_THREADS_MIN_BYTES * 3 + 7;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return tap_bail("out of memory");
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < cap; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
        buf[i] = (uint8_t)(s >> 24);
    }
    const size_t lengths[] = {0, 1, 1000, HP_CRC32_THREADS_MIN_BYTES - 1, HP_CRC32_THREADS_MIN_BYTES,
                              HP_CRC32_THREADS_MIN_BYTES + 3 * HP_CRC32_THREADS_PIECE + 5, cap};
    const unsigned threads[] = {1, 2, 3, 7, 16};
    const uint32_t starts[] = {0, 0x12345678u};
    for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
        bool same = true;
        uint32_t got = 0, want = 0;
        for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++)
            for (size_t k = 0; k < 2; k++) {
                want = (uint32_t)crc32(starts[k], buf, (uInt)lengths[l]);
                got = hp_crc32_threads(starts[k], buf, lengths[l], threads[t], NULL);
                same = same && got == want;
            }
        tap_ok(same, "%zu bytes on 1 to 16 threads, from 0 and from a CRC: zlib's crc32 (%08x, %08x)", lengths[l],
               got, want);
    }
    double helpers = -1, alone = -1;
    hp_crc32_threads(0, buf, cap, 4, &helpers);
    hp_crc32_threads(0, buf, cap, 1, &alone);
    tap_ok(helpers > 0 && alone == 0, "the other threads' CPU time is counted (%.3f ms on 4 threads, %.3f on one)",
           helpers, alone);
    free(buf);
    return tap_done();
}

/* The run-length deflate coder (api/codecs/deflate_runs.h) against zlib's inflate, the reference decoder every PNG
 * reader builds on. Every stream must inflate to exactly its input (bit-exact, no tolerance), within
 * hp_deflate_runs_bound(), ending where the format says: a final stream at its last block, a non-final one
 * at an empty stored block so that the next stream joins it. Inputs chosen for the coder's edges: empty,
 * one byte, runs of every length around the minimum and the 258-byte maximum, runs across the 65535-byte
 * block boundary, incompressible noise (stored blocks), a single repeated symbol (a one-symbol code),
 * every byte value at once (deep Huffman trees), a skewed distribution that forces the 15-bit length limit,
 * and filtered rows of the real frame in tests/data. Several streams compressed apart and concatenated
 * must inflate to the concatenation: how PNG strips are joined. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/codecs/deflate_runs.h"
#include "tap.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Inflates raw deflate src into out (cap bytes); returns the bytes out, or -1. *ended: the stream reached
 * its final block. *used: input bytes consumed. */
static long inflate_raw(const uint8_t *src, size_t len, uint8_t *out, size_t cap, bool *ended, size_t *used)
{
    z_stream z = {0};
    if (inflateInit2(&z, -15) != Z_OK)
        return -1;
    z.next_in = (uint8_t *)src, z.avail_in = (uInt)len;
    z.next_out = out, z.avail_out = (uInt)cap;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    *ended = rc == Z_STREAM_END;
    *used = len - z.avail_in;
    long n = rc == Z_STREAM_END || rc == Z_OK || rc == Z_BUF_ERROR ? (long)(cap - z.avail_out) : -1;
    inflateEnd(&z);
    return n;
}

/* One stream, final or not: inflates back to src, uses every byte it wrote, within the bound. Returns the
 * compressed size (0 on failure). */
static size_t round_trip(const char *what, const uint8_t *src, size_t len, bool final)
{
    size_t bound = hp_deflate_runs_bound(len), out_len = 0;
    uint8_t *z = malloc(bound + 64), *back = malloc(len + 64);
    memset(z + bound, 0xa5, 64); /* a guard past the bound */
    bool ok = hp_deflate_runs(src, len, final, z, &out_len);
    bool guard = true;
    for (size_t i = 0; i < 64; i++)
        guard = guard && z[bound + i] == 0xa5;
    bool ended = false;
    size_t used = 0;
    long n = ok ? inflate_raw(z, out_len, back, len + 64, &ended, &used) : -1;
    bool same = n == (long)len && (len == 0 || memcmp(back, src, len) == 0);
    tap_ok(ok && guard && out_len <= bound && same && ended == final && used == out_len,
           "%s (%zu bytes, %s): inflates back exactly (%zu -> %zu bytes, bound %zu, %s)", what, len,
           final ? "final" : "then more", len, out_len, bound, ended ? "final block seen" : "open");
    free(z);
    free(back);
    return ok && same ? out_len : 0;
}

/* Pieces compressed apart (all but the last not final), joined, inflate to the whole. */
static void joined(const char *what, const uint8_t *src, size_t len, unsigned pieces)
{
    size_t cap = 0;
    for (unsigned i = 0; i < pieces; i++)
        cap += hp_deflate_runs_bound(len / pieces + 1);
    uint8_t *z = malloc(cap), *back = malloc(len + 64);
    size_t at = 0;
    bool ok = true;
    for (unsigned i = 0; i < pieces && ok; i++) {
        size_t a = len * i / pieces, b = len * (i + 1) / pieces, n = 0;
        ok = hp_deflate_runs(src + a, b - a, i + 1 == pieces, z + at, &n);
        at += n;
    }
    bool ended = false;
    size_t used = 0;
    long n = ok ? inflate_raw(z, at, back, len + 64, &ended, &used) : -1;
    tap_ok(ok && n == (long)len && memcmp(back, src, len) == 0 && ended && used == at,
           "%s: %u pieces compressed apart and joined inflate to the whole (%zu -> %zu bytes)", what, pieces, len,
           at);
    free(z);
    free(back);
}

/* PNG-style rows: each row's Up residual of a smooth gradient plus noise of the given amplitude. */
static void make_rows(uint8_t *p, size_t len, unsigned noise)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)((i % 11521 == 0 ? 2 : 0) + (noise ? rnd() % (2 * noise + 1) - noise : 0));
}

int main(void)
{
    const size_t big = 3u << 20;
    uint8_t *buf = calloc(1, big);
    if (!buf)
        return tap_bail("no memory for the test buffers");

    round_trip("empty", buf, 0, true);
    round_trip("empty", buf, 0, false);
    buf[0] = 7;
    round_trip("one byte", buf, 1, true);
    round_trip("one byte", buf, 1, false);

    /* Runs of every length from 1 to 300 and at the edges of MIN_RUN and 258, separated by other bytes. */
    size_t n = 0;
    for (unsigned r = 1; r <= 300; r++) {
        buf[n++] = (uint8_t)(r * 37);
        memset(buf + n, r & 1 ? 0 : (int)(r & 0xff), r);
        n += r;
    }
    round_trip("runs of every length 1..300", buf, n, true);
    round_trip("runs of every length 1..300", buf, n, false);

    /* Runs whose longest length code is 284 (227-257 bytes) and none of 258: the literal/length code then
     * ends at symbol 284, right before the distance code's lengths in the header (a bug once counted
     * those in the literal/length code). Then every other top length code, 257..285, alone. */
    for (unsigned top = 256; top <= 258; top++) {
        n = 0;
        for (unsigned k = 0; k < 400; k++) {
            buf[n++] = (uint8_t)(k * 7 + 1);
            unsigned r = 227 + k % (top - 227 + 1);
            memset(buf + n, (int)(k & 3), r);
            n += r;
        }
        char what[96];
        snprintf(what, sizeof(what), "runs of 227..%u bytes between literals", top);
        round_trip(what, buf, n, true);
    }
    for (unsigned lc = 0; lc < 29; lc++) {
        static const uint16_t base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                          31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
        n = 0;
        for (unsigned k = 0; k < 300 && n + 300 < big; k++) {
            buf[n++] = (uint8_t)(k * 13 + 5);
            unsigned r = base[lc] + 1 < 4 ? 4 : base[lc] + 1; /* a run of this length code alone */
            memset(buf + n, (int)(k & 1), r);
            n += r;
        }
        bool ok = true;
        size_t bound = hp_deflate_runs_bound(n), zl = 0;
        uint8_t *z = malloc(bound), *back = malloc(n);
        bool ended = false;
        size_t used = 0;
        ok = hp_deflate_runs(buf, n, true, z, &zl) && inflate_raw(z, zl, back, n, &ended, &used) == (long)n &&
             memcmp(back, buf, n) == 0 && ended;
        free(z);
        free(back);
        if (!ok || lc == 28)
            tap_ok(ok, "every length code as the block's only one (%u of 29 round trips; the first failure at "
                   "code %u)", ok ? 29 : lc, 257 + lc);
        if (!ok)
            break;
    }

    /* Random blocks: random alphabets, run lengths drawn from random ranges, random sizes. */
    {
        unsigned failures = 0, streams = 300;
        for (unsigned k = 0; k < streams; k++) {
            size_t len = 1 + rnd() % 150000;
            unsigned alphabet = 1 + rnd() % 256, lo = 1 + rnd() % 258, hi = lo + rnd() % (300 - lo);
            for (size_t i = 0; i < len;) {
                uint8_t b = (uint8_t)(rnd() % alphabet);
                size_t r = rnd() % 3 ? 1 : lo + rnd() % (hi - lo + 1);
                for (size_t j = 0; j < r && i < len; j++)
                    buf[i++] = b;
            }
            size_t bound = hp_deflate_runs_bound(len), zl = 0, used = 0;
            uint8_t *z = malloc(bound), *back = malloc(len);
            bool ended = false;
            bool final = rnd() % 2;
            bool ok = hp_deflate_runs(buf, len, final, z, &zl) && zl <= bound &&
                      inflate_raw(z, zl, back, len, &ended, &used) == (long)len && memcmp(back, buf, len) == 0 &&
                      ended == final && used == zl;
            failures += !ok;
            free(z);
            free(back);
        }
        tap_ok(failures == 0, "%u random streams (alphabets, run lengths, sizes, final or not) inflate back: %u "
               "failures", streams, failures);
    }

    memset(buf, 0, 200000);
    round_trip("200000 zeros (runs across the 65535-byte block boundary)", buf, 200000, true);
    memset(buf, 0x55, 65535);
    round_trip("one block of a single byte value", buf, 65535, true);
    memset(buf, 0x55, 65536);
    round_trip("a block and one byte of a single value", buf, 65536, true);

    for (size_t i = 0; i < 300000; i++)
        buf[i] = (uint8_t)rnd();
    size_t noise = round_trip("noise (stored blocks)", buf, 300000, true);
    tap_ok(noise <= 300000 + 300000 / 65535 * 6 + 20, "noise costs at most its stored size (%zu bytes)", noise);
    round_trip("noise then more", buf, 300000, false);

    for (size_t i = 0; i < 65535 * 2; i++)
        buf[i] = (uint8_t)i;
    round_trip("every byte value, evenly", buf, 65535 * 2, true);

    /* Counts falling by half per symbol: the Huffman tree wants depths past 15 and must be limited. */
    n = 0;
    for (unsigned s = 0; s < 24 && n < 2000000; s++) {
        size_t count = (size_t)1 << (24 - s > 20 ? 20 : 24 - s);
        for (size_t k = 0; k < count && n < 2000000; k++)
            buf[n++] = (uint8_t)(s * 3 + (k & 1) * 97); /* alternating: no runs, so every byte is a literal */
    }
    for (size_t i = n; i > 1; i--) { /* shuffle so blocks see the skew */
        size_t j = rnd() % i;
        uint8_t t = buf[i - 1];
        buf[i - 1] = buf[j], buf[j] = t;
    }
    round_trip("skewed counts (15-bit length limit)", buf, n, true);

    /* Fibonacci counts over 22 symbols (46367 bytes, one block): the optimal tree is 21 deep. */
    n = 0;
    for (unsigned s = 0, a = 1, b = 1; s < 22; s++, b = a + b, a = b - a)
        for (unsigned k = 0; k < a; k++)
            buf[n++] = (uint8_t)(s * 11);
    for (size_t i = n; i > 1; i--) {
        size_t j = rnd() % i;
        uint8_t t = buf[i - 1];
        buf[i - 1] = buf[j], buf[j] = t;
    }
    round_trip("Fibonacci counts (a 21-deep tree limited to 15)", buf, n, true);

    make_rows(buf, big, 0);
    size_t flat = round_trip("flat filtered rows", buf, big, true);
    tap_ok(flat > 0 && flat < big / 100, "flat filtered rows compress over 100x (%zu -> %zu)", (size_t)big, flat);
    joined("flat filtered rows", buf, big, 16);
    make_rows(buf, big, 3);
    size_t residual = round_trip("noisy filtered rows", buf, big, true);
    tap_ok(residual > 0 && residual < big / 2, "rows of residuals within +-3 compress over 2x (%zu -> %zu)",
           (size_t)big, residual);
    joined("noisy filtered rows", buf, big, 7);
    joined("noisy filtered rows", buf, 1000, 3);

    /* The real frame's bytes, as a worst case of ordinary content: not filtered, so few runs. */
    FILE *f = fopen(HP_TEST_DATA "/blender_street_960x540_singlelayer.exr", "rb");
    size_t got = f ? fread(buf, 1, big, f) : 0;
    if (f)
        fclose(f);
    if (tap_ok(got > 100000, "read the Blender frame's file (%zu bytes)", got)) {
        round_trip("an EXR file's bytes", buf, got, true);
        joined("an EXR file's bytes", buf, got, 5);
    }
    free(buf);
    return tap_done();
}

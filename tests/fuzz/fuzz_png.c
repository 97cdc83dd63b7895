/* Fuzz target: the PNG encoder (api/codecs/encode.c: our filters and deflate_runs.c in strips on several threads at
 * efforts 0-2, libspng above) as a round trip: the input chooses a size, a bit depth, alpha, an effort and
 * the strips' threads, and its bytes are the pixels; the PNG made from them, decoded again by libspng, must
 * give the same samples. A difference, a crash or a sanitizer report is a finding. */
#include <spng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/encode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The PNG back as 8- or 16-bit RGBA in host order (libspng's SPNG_FMT_RGBA8/16), alpha max where none. */
static uint8_t *decode(const hp_encoded *e, bool sixteen, size_t *len)
{
    spng_ctx *ctx = spng_ctx_new(0);
    uint8_t *px = NULL;
    int fmt = sixteen ? SPNG_FMT_RGBA16 : SPNG_FMT_RGBA8;
    int rc = ctx ? spng_set_png_buffer(ctx, e->data, e->size) : SPNG_EMEM;
    if (!rc)
        rc = spng_decoded_image_size(ctx, fmt, len);
    if (!rc && !(px = malloc(*len)))
        rc = SPNG_EMEM;
    if (!rc)
        rc = spng_decode_image(ctx, px, *len, fmt, 0);
    spng_ctx_free(ctx);
    if (rc) {
        fprintf(stderr, "fuzz_png: libspng refused our PNG: %s\n", spng_strerror(rc));
        abort();
    }
    return px;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    /* The shape: width 1..256, height 1..32, 8 or 16 bits, alpha, effort 0..6, 1..4 strip threads; frames
     * are split into strips from 1 pixel on here (1 Mpixel in the daemon), so that the strips' join (the
     * previous strip's window as a dictionary, the sync flushes, adler32_combine) runs on every input. At
     * most 64 KiB of pixels, twice deflate's 32 KiB window, so matches still reach across it: heights to 256
     * made images eight times larger for no code that the smaller ones miss (edges 804 either way) and held
     * the target to about a hundred round trips a second. */
    uint32_t w = 1 + data[0], h = 1 + data[1] % 32;
    bool sixteen = data[2] & 1, alpha = data[2] & 2;
    unsigned effort = (data[2] >> 2) % 7, threads = 1 + (data[3] & 3);
    size_t bytes = (size_t)w * h * (sixteen ? 8 : 4);
    uint8_t *px = calloc(1, bytes);
    if (!px)
        return 0;
    /* The pixels: the input's bytes, repeated (runs and repeats are what the deflate coder looks for). */
    for (size_t i = 0; size > 4 && i < bytes; i++)
        px[i] = data[4 + i % (size - 4)];
    hp_encode_set_png_threads(threads);
    hp_encode_set_png_strip_min(1);
    hp_output_params out = {.format = HP_OUTPUT_PNG, .effort = effort, .bit_depth = sixteen ? 16 : 8};
    hp_encoded e = {0};
    hp_err err = {0};
    if (hp_encode(px, w, h, sixteen ? 16 : 8, alpha, HP_ENCODING_SRGB, &out, &e, &err) != HP_OK) {
        fprintf(stderr, "fuzz_png: %ux%u %u-bit: %s\n", w, h, sixteen ? 16 : 8, err.message);
        abort();
    }
    size_t len = 0;
    uint8_t *back = decode(&e, sixteen, &len);
    if (len != bytes)
        abort();
    /* Alpha left out: the decoder gives it as the maximum; compare the colour and that. */
    static const uint8_t max_alpha[2] = {0xff, 0xff};
    for (size_t p = 0; p < (size_t)w * h; p++) {
        size_t s = sixteen ? 8 : 4, a = s / 4; /* a: bytes of one sample */
        bool same = alpha ? !memcmp(px + p * s, back + p * s, s)
                          : !memcmp(px + p * s, back + p * s, s - a) && !memcmp(back + p * s + s - a, max_alpha, a);
        if (!same) {
            fprintf(stderr, "fuzz_png: %ux%u %u-bit alpha %d effort %u threads %u: pixel %zu differs\n", w, h,
                    sixteen ? 16 : 8, alpha, effort, threads, p);
            abort();
        }
    }
    free(back);
    free(px);
    hp_encoded_free(&e);
    return 0;
}

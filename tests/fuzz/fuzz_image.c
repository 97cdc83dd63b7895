/* Fuzz target: the image decoders (api/image.h) as the daemon runs them on a request's body: probe the
 * header under the daemon's limits, then decode into memory sized from the probe, as RGBA16F when the
 * frame is half-exact and RGBA32F otherwise, with a depth plane when the probe found one. One target per
 * format (HP_FUZZ_FORMAT: 1 OpenEXR, 2 Radiance, 3 PFM, the hp_image_format values) so that each has its own
 * corpus and coverage; an input of another format is passed over (the format is found from the bytes, as in
 * the daemon). Beyond "no crash, no sanitizer report", a failure must say why (a message), and a success
 * must fill the frame it probed (the decoder writes only what it announced: ASan watches the bounds). The
 * daemon's limits are lowered to 1024 x 1024 here so that a header may not make the fuzzer allocate a
 * 4 GiB frame (the limits themselves are tested in test_image and test_security). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "api/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (hp_image_detect(data, size) != (hp_image_format)HP_FUZZ_FORMAT)
        return 0;
    hp_decode_options opt = HP_DECODE_OPTIONS_DEFAULTS;
    opt.max_width = opt.max_height = 1024;
    opt.max_pixels = 1024 * 1024;
    opt.threads = 2; /* the EXR reader's chunk threads too */
    hp_image_info info;
    hp_err err = {0};
    if (hp_image_probe(data, size, &opt, &info, &err) != HP_OK) {
        if (!err.message[0])
            abort(); /* a refusal that says nothing */
        return 0;
    }
    size_t n = (size_t)info.width * info.height;
    hp_pixel_layout layout = info.half_exact ? HP_LAYOUT_RGBA16F : HP_LAYOUT_RGBA32F;
    void *pixels = malloc(n * hp_pixel_layout_size(layout));
    float *depth = info.has_depth ? malloc(n * sizeof(float)) : NULL;
    if (pixels && (!info.has_depth || depth)) {
        hp_err derr = {0};
        if (hp_image_decode(data, size, &opt, &info, pixels, layout, depth, &derr) != HP_OK && !derr.message[0])
            abort();
    }
    free(pixels);
    free(depth);
    return 0;
}

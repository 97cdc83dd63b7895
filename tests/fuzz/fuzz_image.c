/* Fuzz target: the image decoders (api/codecs/image.h) as the daemon runs them on a request's body: probe the
 * header under the daemon's limits, then decode into memory sized from the probe, as RGBA16F when the
 * frame is half-exact and RGBA32F otherwise, with a depth plane when the probe found one. One target per
 * format (HP_FUZZ_FORMAT: 1 OpenEXR, 2 Radiance, 3 PFM, the hp_image_format values) so that each has its own
 * corpus and coverage; an input of another format is passed over (the format is found from the bytes, as in
 * the daemon). Beyond "no crash, no sanitizer report", a failure must say why (a message), and a success
 * must fill the frame it probed: decoded twice, over memory filled with 0x00 and with 0xFF, the two must be
 * the same (a byte left unwritten would differ; ASan watches the bounds). The
 * daemon's limits are lowered to 1024 x 1024 here so that a header may not make the fuzzer allocate a
 * 4 GiB frame (the limits themselves are tested in test_image and test_security). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image.h"
#include "pipeline/exr_zip_gpu.h"

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
    size_t bytes = n * hp_pixel_layout_size(layout), depth_bytes = info.has_depth ? n * sizeof(float) : 0;
    uint8_t *out[2] = {malloc(bytes + depth_bytes), malloc(bytes + depth_bytes)};
    hp_code code[2] = {HP_ERR_OUT_OF_MEMORY, HP_ERR_OUT_OF_MEMORY};
    for (int k = 0; k < 2 && out[0] && out[1]; k++) {
        memset(out[k], k ? 0xff : 0x00, bytes + depth_bytes);
        hp_image_info again = info;
        hp_err derr = {0};
        code[k] = hp_image_decode(data, size, &opt, &again, out[k], layout,
                                  info.has_depth ? (float *)(out[k] + bytes) : NULL, &derr);
        if (code[k] != HP_OK && !derr.message[0])
            abort(); /* a failure that says nothing */
    }
    if (code[0] == HP_OK && code[1] == HP_OK && memcmp(out[0], out[1], bytes + depth_bytes) != 0) {
        fprintf(stderr, "fuzz_image: a %ux%u frame decoded with bytes left unwritten\n", info.width, info.height);
        abort();
    }
#if HP_FUZZ_FORMAT == 1
    /* The split's CPU half (exr_zip_decoder split), into memory of exactly the size the daemon gives it
     * (api/frames/early_decode.c's zip_split): within bounds whatever the file says, a refusal says why, and a
     * frame it takes the CPU's decoder takes too (else the GPU would finish a frame the CPU refuses). */
    hp_exr_zip_frame zl;
    hp_image_info zinfo = info;
    if (hp_image_zip_fits(data, size, &opt, &zinfo, &zl, NULL, &err) == HP_OK) {
        size_t chunks = zl.chunk_count;
        size_t zbytes = chunks * sizeof(hp_exr_zip_chunk) + n * zl.pixel_bytes + 4 * chunks;
        uint8_t *dst = malloc(zbytes);
        hp_exr_zip_frame f;
        hp_err zerr = {0};
        hp_code z = dst ? hp_image_zip_inflate(data, size, &opt, &zinfo, dst, zbytes, &f, &zerr) : HP_ERR_OUT_OF_MEMORY;
        if (z != HP_OK && !zerr.message[0])
            abort(); /* a refusal that says nothing */
        if (z == HP_OK && out[0] && out[1] && code[0] != HP_OK && code[0] != HP_ERR_OUT_OF_MEMORY) {
            fprintf(stderr, "fuzz_image: the split inflated a frame the CPU's decoder refuses\n");
            abort();
        }
        free(dst);
    }
#endif
    free(out[0]);
    free(out[1]);
    return 0;
}

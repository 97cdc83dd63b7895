/* Portable Float Map: "PF" (RGB) or "Pf" (grey), width, height and a scale whose sign gives the byte
 * order (negative: little endian), each followed by whitespace; then raw 32-bit floats, rows from the
 * bottom of the image up (Paul Debevec's description, as pfstools and netpbm's pfmtopam read it).
 *
 * Hand-written: Debian packages no C library for PFM (netpbm and pfstools are programs, and OpenImageIO
 * is C++), and the format is simple enough that a strict parser is shorter than any binding. The header
 * is checked token by token and the data must be exactly width * height * channels * 4 bytes, so a
 * truncated or misaligned file is an error rather than a shifted image. |scale| is reported, never
 * applied: nearly every writer puts 1, and readers disagree on what else would mean. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image_decoder.h"

typedef struct pfm_header {
    uint32_t width, height, channels;
    bool little_endian;
    double scale;
    size_t data_offset;
} pfm_header;

static bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Skips whitespace, then copies one token (at most size - 1 bytes) and leaves *pos on the byte after it. */
static bool next_token(const uint8_t *bytes, size_t len, size_t *pos, char *token, size_t size)
{
    size_t p = *pos;
    while (p < len && is_space(bytes[p]))
        p++;
    size_t n = 0;
    while (p < len && !is_space(bytes[p])) {
        if (n + 1 >= size)
            return false;
        token[n++] = (char)bytes[p++];
    }
    token[n] = '\0';
    *pos = p;
    return n > 0;
}

static bool parse_dimension(const char *token, uint32_t *out)
{
    uint64_t v = 0;
    if (!token[0])
        return false;
    for (const char *p = token; *p; p++) {
        if (*p < '0' || *p > '9' || p - token >= 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v == 0 || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

static hp_code parse_header(const uint8_t *bytes, size_t len, const hp_decode_options *opt, pfm_header *hdr,
                            hp_err *err)
{
    hdr->channels = bytes[1] == 'F' ? 3 : 1;
    size_t pos = 2;
    char token[64];
    const char *names[2] = {"width", "height"};
    uint32_t dims[2];
    for (int i = 0; i < 2; i++) {
        size_t at = pos;
        if (!next_token(bytes, len, &pos, token, sizeof(token)) || !parse_dimension(token, &dims[i]))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                           "PFM header: the %s after byte %zu is missing or not a positive whole number", names[i],
                           at);
    }
    size_t at = pos;
    char *end;
    if (!next_token(bytes, len, &pos, token, sizeof(token)))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "PFM header: the scale after byte %zu is missing", at);
    double scale = strtod(token, &end);
    if (*end != '\0' || !isfinite(scale) || scale == 0.0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "PFM header: scale '%s' after byte %zu is not a finite non-zero number (its sign gives the "
                       "byte order)", token, at);
    /* exactly one whitespace byte ends the header */
    if (pos >= len || !is_space(bytes[pos]))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "PFM truncated after the header (%zu bytes in all)", len);
    pos++;

    hp_code code = hp_image_check_limits("PFM", dims[0], dims[1], opt, err);
    if (code != HP_OK)
        return code;
    uint64_t expected;
    if (__builtin_mul_overflow((uint64_t)dims[0] * dims[1], (uint64_t)hdr->channels * 4, &expected) ||
        len - pos != expected)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "PFM pixel data is %zu bytes from byte %zu; %u x %u x %u floats need %llu%s", len - pos, pos,
                       dims[0], dims[1], hdr->channels, (unsigned long long)expected,
                       len - pos < expected ? " (truncated)" : "");
    hdr->width = dims[0], hdr->height = dims[1];
    hdr->little_endian = signbit(scale);
    hdr->scale = fabs(scale);
    hdr->data_offset = pos;
    return HP_OK;
}

static hp_code pfm_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                        hp_err *err)
{
    pfm_header hdr;
    hp_code code = parse_header(bytes, len, opt, &hdr, err);
    if (code != HP_OK)
        return code;
    hp_image_info_whole(info, hdr.width, hdr.height);
    info->channel_count = hdr.channels;
    snprintf(info->channel_list, sizeof(info->channel_list), "%s", hdr.channels == 3 ? "R,G,B" : "Y");
    info->grey = hdr.channels == 1;
    info->pfm_scale = hdr.scale;
    return HP_OK;
}

static float load_float(const uint8_t *p, bool little_endian)
{
    uint32_t u = little_endian ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                               : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static hp_code pfm_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                          const hp_image_dest *dest, hp_depth_stats *stats, hp_err *err)
{
    (void)stats; /* no depth in a PFM file */
    (void)info;
    pfm_header hdr;
    hp_code code = parse_header(bytes, len, opt, &hdr, err);
    if (code != HP_OK)
        return code;
    size_t row_bytes = (size_t)hdr.width * hdr.channels * 4;
    for (uint32_t y = 0; y < hdr.height; y++) {
        /* file row y is image row height - 1 - y */
        const uint8_t *row = bytes + hdr.data_offset + (size_t)y * row_bytes;
        size_t out = (size_t)(hdr.height - 1 - y) * hdr.width;
        for (uint32_t x = 0; x < hdr.width; x++) {
            const uint8_t *p = row + (size_t)x * hdr.channels * 4;
            float r = load_float(p, hdr.little_endian);
            float g = hdr.channels == 3 ? load_float(p + 4, hdr.little_endian) : r;
            float b = hdr.channels == 3 ? load_float(p + 8, hdr.little_endian) : r;
            hp_image_store_pixel(dest, out + x, r, g, b, 1.0f);
        }
    }
    return HP_OK;
}

/* "PF" or "Pf" then the whitespace that ends the token: "PFx" is not a PFM. */
static bool pfm_sniff(const uint8_t *bytes, size_t len)
{
    return len >= 3 && bytes[0] == 'P' && (bytes[1] == 'F' || bytes[1] == 'f') &&
           (bytes[2] == '\n' || bytes[2] == '\r' || bytes[2] == ' ' || bytes[2] == '\t');
}

const hp_image_decoder hp_pfm_decoder = {
    .name = "pfm", .magic = "PFM (\"PF\" or \"Pf\")",
    .sniff = pfm_sniff, .probe = pfm_probe, .decode = pfm_decode,
};

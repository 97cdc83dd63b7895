/* Radiance RGBE (.hdr), after Greg Ward's Radiance: src/common/header.c, resolu.c and color.c
 * (freadcolrs, oldreadcolrs, colr_color).
 *
 * Hand-written: Debian has no maintained C library for the format apart from stb_image (libstb-dev),
 * whose header parser and RLE reader were not written for hostile input, and this parses untrusted
 * network bytes. So every length below is checked before it is used, and the message of every failure
 * says what was wrong and at which byte or scanline.
 *
 * Supported: FORMAT=32-bit_rle_rgbe (required; XYZE colour is refused), EXPOSURE= lines (their product is
 * reported, the values are left as stored), the standard orientation -Y H +X W (top row first, left to
 * right; the seven others are refused), and all three scanline encodings: new-style RLE (each component
 * run-length coded on its own), flat (plain 4-byte pixels) and old-style RLE (1,1,1,n repeats the
 * previous pixel n << shift times). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/codecs/image_decoder.h"

#define RGBE_MAX_LINE 4096          /* bytes in one header line */
#define RGBE_MAX_HEADER (64 * 1024) /* bytes before the resolution line */
#define RGBE_MIN_RLE_WIDTH 8        /* Radiance's MINELEN and MAXELEN: new-style RLE only for widths */
#define RGBE_MAX_RLE_WIDTH 0x7fff   /* in [8, 32767], as its length is 15 bits */
#define RGBE_MAX_RUN 127            /* new-style RLE: a run's count byte is 128 + n, n in [1, 127] */

typedef struct rgbe_header {
    uint32_t width, height;
    double exposure;
    bool has_primaries;          /* a PRIMARIES= line */
    hp_chromaticities primaries;
    size_t data_offset; /* first byte after the resolution line */
} rgbe_header;

/* One line of text starting at *pos, without its '\n' (and a '\r' before it); *pos moves past it. */
static hp_code read_line(const uint8_t *bytes, size_t len, size_t *pos, char *line, const char *what, hp_err *err)
{
    size_t start = *pos, end = start;
    while (end < len && bytes[end] != '\n') {
        if (end - start >= RGBE_MAX_LINE - 1)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                           "Radiance HDR %s at byte %zu is longer than %d bytes (not a header line)", what, start,
                           RGBE_MAX_LINE - 1);
        end++;
    }
    if (end == len)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR truncated in the %s at byte %zu (%zu bytes in all)",
                       what, start, len);
    size_t n = end - start;
    if (n > 0 && bytes[end - 1] == '\r')
        n--;
    memcpy(line, bytes + start, n);
    line[n] = '\0';
    if (memchr(line, '\0', n))
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR %s at byte %zu holds a NUL byte", what, start);
    *pos = end + 1;
    return HP_OK;
}

/* A decimal count of 1 to 9 digits; *s moves past it. */
static bool parse_count(const char **s, uint32_t *out)
{
    const char *p = *s;
    uint32_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 10) {
        v = v * 10 + (uint32_t)(*p - '0');
        p++, digits++;
    }
    if (digits == 0 || digits > 9)
        return false;
    *out = v;
    *s = p;
    return true;
}

/* Decompression bombs (issue 21, item 5): a 98 KB file of old-style runs declared 8192 x 8192 pixels and
 * decoded to 2.3 GB. The densest coding a Radiance writer uses is new-style RLE (Radiance's fwritecolrs in
 * src/common/color.c): each of the 4 components of a scanline is coded apart, and a run is 2 bytes (128 + n,
 * then the value) for at most RGBE_MAX_RUN = 127 values, so a pixel takes at least 4 * 2 / 127 bytes, and a
 * scanline 4 more for its mark; flat pixels take 4. So no file in these codings holds more than 127 / 8 =
 * 15.875 pixels per byte of scanline data. Old-style runs (1,1,1,n, each further one adding n << 8 more:
 * oldreadcolrs) have no such limit: 12 bytes repeat a pixel 16 million times. Radiance writes old-style
 * scanlines only for widths outside [8, 32767] (fwritecolrs), and a row of under 8 pixels holds at most
 * 7 / 4 pixels a byte anyway. A file that needs more than 127 / 8 pixels a byte is refused before anything is
 * allocated for it: the format cannot justify that many. */
static hp_code check_body_justifies(uint32_t width, uint32_t height, size_t len, size_t data_offset, hp_err *err)
{
    uint64_t data = len - data_offset;
    uint64_t justified = data > UINT64_MAX / RGBE_MAX_RUN ? UINT64_MAX : data * RGBE_MAX_RUN / 8;
    uint64_t pixels = (uint64_t)width * height;
    if (pixels <= justified)
        return HP_OK;
    return hp_fail(err, HP_ERR_TOO_LARGE,
                   "Radiance HDR: the %zu-byte file declares %ux%u = %llu pixels in %llu bytes of scanlines; at most "
                   "%d/8 = %.3f pixels per byte (%llu here) can be justified by its run-length coding (a run of at "
                   "most %d values in 2 bytes, per component); old-style runs that pack more are refused",
                   len, width, height, (unsigned long long)pixels, (unsigned long long)data, RGBE_MAX_RUN,
                   RGBE_MAX_RUN / 8.0, (unsigned long long)justified, RGBE_MAX_RUN);
}

/* "PRIMARIES= rx ry gx gy bx by wx wy" (Radiance's header, src/common/color.h PRIMARYSTR): the CIE xy of the
 * primaries and the white that the file's RGB stands for. */
static hp_code parse_primaries(const char *text, size_t at, rgbe_header *hdr, hp_err *err)
{
    double v[8];
    const char *p = text;
    for (int i = 0; i < 8; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p || !isfinite(v[i]))
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR PRIMARIES line at byte %zu: '%.80s' is not "
                           "eight numbers (the xy of red, green, blue and white)", at, text);
        p = end;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '\0')
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR PRIMARIES line at byte %zu: '%.80s' has more than "
                       "eight numbers", at, text);
    hdr->has_primaries = true;
    hdr->primaries = (hp_chromaticities){{v[0], v[1]}, {v[2], v[3]}, {v[4], v[5]}, {v[6], v[7]}};
    return HP_OK;
}

static hp_code parse_header(const uint8_t *bytes, size_t len, const hp_decode_options *opt, rgbe_header *hdr,
                            hp_err *err)
{
    char line[RGBE_MAX_LINE];
    size_t pos = 0;
    hp_code code = read_line(bytes, len, &pos, line, "signature line", err);
    if (code != HP_OK)
        return code;

    bool format_seen = false;
    hdr->exposure = 1.0;
    hdr->has_primaries = false;
    for (;;) {
        if (pos > RGBE_MAX_HEADER)
            return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR header is longer than %d bytes",
                           RGBE_MAX_HEADER);
        size_t at = pos;
        if ((code = read_line(bytes, len, &pos, line, "header", err)) != HP_OK)
            return code;
        if (line[0] == '\0')
            break; /* the empty line that ends the header */
        if (strncmp(line, "FORMAT=", 7) == 0) {
            const char *value = line + 7;
            if (strcmp(value, "32-bit_rle_rgbe") != 0)
                return hp_fail(err, HP_ERR_UNUSABLE,
                               "Radiance HDR FORMAT=%.64s (byte %zu) is not supported; only 32-bit_rle_rgbe%s", value,
                               at, strcmp(value, "32-bit_rle_xyze") == 0 ? " (XYZE colour would need a conversion)" : "");
            format_seen = true;
        } else if (strncmp(line, "EXPOSURE=", 9) == 0) {
            char *end;
            double e = strtod(line + 9, &end);
            while (*end == ' ' || *end == '\t')
                end++;
            if (end == line + 9 || *end != '\0' || !isfinite(e) || e <= 0.0)
                return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                               "Radiance HDR EXPOSURE line at byte %zu: '%.64s' is not a positive number", at, line + 9);
            hdr->exposure *= e;
        } else if (strncmp(line, "PRIMARIES=", 10) == 0) {
            if ((code = parse_primaries(line + 10, at, hdr, err)) != HP_OK)
                return code;
        }
        /* Other lines (comments, SOFTWARE=, GAMMA=, VIEW=, PIXASPECT=, COLORCORR=) are ignored. */
    }
    if (!format_seen)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "Radiance HDR header has no FORMAT=32-bit_rle_rgbe line (header ends at byte %zu)", pos);
    if (!isfinite(hdr->exposure) || hdr->exposure <= 0.0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR EXPOSURE lines multiply to %g", hdr->exposure);

    size_t at = pos;
    if ((code = read_line(bytes, len, &pos, line, "resolution line", err)) != HP_OK)
        return code;
    /* "<sign><axis> <n> <sign><axis> <n>": the first axis is the one that changes slowest. */
    char s1, a1, s2, a2;
    const char *p = line;
    uint32_t n1, n2;
    bool shaped = (p[0] == '-' || p[0] == '+') && (p[1] == 'X' || p[1] == 'Y') && p[2] == ' ';
    if (shaped) {
        s1 = p[0], a1 = p[1];
        p += 3;
        shaped = parse_count(&p, &n1) && p[0] == ' ' && (p[1] == '-' || p[1] == '+') &&
                 (p[2] == 'X' || p[2] == 'Y') && p[3] == ' ';
        if (shaped) {
            s2 = p[1], a2 = p[2];
            p += 4;
            shaped = parse_count(&p, &n2) && *p == '\0' && a1 != a2;
        }
    }
    if (!shaped)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "Radiance HDR resolution line at byte %zu: '%.64s' is not of the form '-Y <height> +X <width>'",
                       at, line);
    if (!(s1 == '-' && a1 == 'Y' && s2 == '+' && a2 == 'X'))
        return hp_fail(err, HP_ERR_UNUSABLE,
                       "Radiance HDR orientation '%c%c %u %c%c %u' is not supported; only '-Y <height> +X <width>' "
                       "(rows top to bottom, left to right)",
                       s1, a1, n1, s2, a2, n2);
    if (n1 == 0 || n2 == 0)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR image is empty (%u x %u)", n2, n1);
    if ((code = hp_image_check_limits("Radiance HDR", n2, n1, opt, err)) != HP_OK)
        return code;
    if ((code = check_body_justifies(n2, n1, len, pos, err)) != HP_OK)
        return code;
    hdr->height = n1, hdr->width = n2;
    hdr->data_offset = pos;
    return HP_OK;
}

static hp_code rgbe_probe(const uint8_t *bytes, size_t len, const hp_decode_options *opt, hp_image_info *info,
                         hp_err *err)
{
    rgbe_header hdr;
    hp_code code = parse_header(bytes, len, opt, &hdr, err);
    if (code != HP_OK)
        return code;
    hp_image_info_whole(info, hdr.width, hdr.height);
    info->channel_count = 3;
    snprintf(info->channel_list, sizeof(info->channel_list), "R,G,B");
    info->rgbe_exposure = hdr.exposure;
    info->has_chromaticities = hdr.has_primaries;
    info->chromaticities = hdr.primaries;
    return HP_OK;
}

/* --- Scanlines ------------------------------------------------------------------------------------- */

typedef struct rgbe_cursor {
    const uint8_t *bytes;
    size_t len, pos;
    uint32_t width, height, row;
} rgbe_cursor;

static hp_code truncated(const rgbe_cursor *c, hp_err *err)
{
    return hp_fail(err, HP_ERR_INVALID_ARGUMENT, "Radiance HDR truncated in scanline %u of %u (the data ends at byte %zu)",
                   c->row, c->height, c->len);
}

/* Flat pixels and old-style runs (Radiance's oldreadcolrs), from pixel x on; the 4 bytes of pixel x may
 * already be in scan (have_first). */
static hp_code read_old_style(rgbe_cursor *c, uint8_t *scan, uint32_t x, bool have_first, hp_err *err)
{
    int shift = 0;
    while (x < c->width) {
        uint8_t px[4];
        if (have_first) {
            memcpy(px, scan + (size_t)x * 4, 4);
            have_first = false;
        } else {
            if (c->len - c->pos < 4)
                return truncated(c, err);
            memcpy(px, c->bytes + c->pos, 4);
            c->pos += 4;
        }
        if (px[0] == 1 && px[1] == 1 && px[2] == 1) {
            /* a run: repeat the previous pixel px[3] << shift times; consecutive runs add higher bytes */
            if (x == 0)
                return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                               "Radiance HDR scanline %u: a run at byte %zu has no pixel before it", c->row,
                               c->pos - 4);
            if (shift > 16)
                return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                               "Radiance HDR scanline %u: more than three run bytes in a row at byte %zu", c->row,
                               c->pos - 4);
            uint32_t count = (uint32_t)px[3] << shift;
            if (count > c->width - x)
                return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                               "Radiance HDR scanline %u: a run of %u at pixel %u (byte %zu) passes the width %u",
                               c->row, count, x, c->pos - 4, c->width);
            for (uint32_t i = 0; i < count; i++, x++)
                memcpy(scan + (size_t)x * 4, scan + (size_t)(x - 1) * 4, 4);
            shift += 8;
        } else {
            memcpy(scan + (size_t)x * 4, px, 4);
            x++;
            shift = 0;
        }
    }
    return HP_OK;
}

/* New-style RLE (Radiance's freadcolrs): each of the 4 components in turn, as runs (a count above 128
 * then one byte) and literals (a count up to 128 then that many bytes). */
static hp_code read_new_style(rgbe_cursor *c, uint8_t *scan, hp_err *err)
{
    for (int comp = 0; comp < 4; comp++) {
        uint32_t x = 0;
        while (x < c->width) {
            if (c->pos >= c->len)
                return truncated(c, err);
            size_t at = c->pos;
            uint32_t code = c->bytes[c->pos++];
            if (code > 128) {
                uint32_t count = code - 128;
                if (count > c->width - x)
                    return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                                   "Radiance HDR scanline %u, component %d: a run of %u at pixel %u (byte %zu) passes "
                                   "the width %u", c->row, comp, count, x, at, c->width);
                if (c->pos >= c->len)
                    return truncated(c, err);
                uint8_t v = c->bytes[c->pos++];
                for (uint32_t i = 0; i < count; i++, x++)
                    scan[(size_t)x * 4 + (size_t)comp] = v;
            } else {
                if (code == 0 || code > c->width - x)
                    return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                                   "Radiance HDR scanline %u, component %d: a literal of %u at pixel %u (byte %zu) "
                                   "%s", c->row, comp, code, x, at, code == 0 ? "is empty" : "passes the width");
                if (c->len - c->pos < code)
                    return truncated(c, err);
                for (uint32_t i = 0; i < code; i++, x++)
                    scan[(size_t)x * 4 + (size_t)comp] = c->bytes[c->pos++];
            }
        }
    }
    return HP_OK;
}

static hp_code read_scanline(rgbe_cursor *c, uint8_t *scan, hp_err *err)
{
    if (c->width < RGBE_MIN_RLE_WIDTH || c->width > RGBE_MAX_RLE_WIDTH)
        return read_old_style(c, scan, 0, false, err);
    if (c->len - c->pos < 4)
        return truncated(c, err);
    const uint8_t *b = c->bytes + c->pos;
    c->pos += 4;
    if (b[0] != 2 || b[1] != 2 || (b[2] & 0x80)) {
        memcpy(scan, b, 4); /* not a new-style mark: the line's first pixel */
        return read_old_style(c, scan, 0, true, err);
    }
    uint32_t declared = ((uint32_t)b[2] << 8) | b[3];
    if (declared != c->width)
        return hp_fail(err, HP_ERR_INVALID_ARGUMENT,
                       "Radiance HDR scanline %u (byte %zu) declares %u pixels; the image is %u wide", c->row,
                       c->pos - 4, declared, c->width);
    return read_new_style(c, scan, err);
}

static hp_code rgbe_decode(const uint8_t *bytes, size_t len, const hp_decode_options *opt, const hp_image_info *info,
                           const hp_image_dest *dest, hp_depth_stats *stats, hp_err *err)
{
    (void)stats; /* no depth in an RGBE file */
    (void)info;
    rgbe_header hdr;
    hp_code code = parse_header(bytes, len, opt, &hdr, err);
    if (code != HP_OK)
        return code;

    /* Radiance's colr_color: (mantissa + 0.5) * 2^(exponent - 136), the centre of the interval a writer's
     * truncation left; exponent 0 is black. Exact in float (9 significant bits, scale >= 2^-137). */
    float scale[256];
    scale[0] = 0.0f;
    for (int e = 1; e < 256; e++)
        scale[e] = ldexpf(1.0f, e - 136);

    uint8_t *scan = malloc((size_t)hdr.width * 4);
    if (!scan)
        return hp_fail(err, HP_ERR_OUT_OF_MEMORY, "Radiance HDR: out of memory for a scanline of %u pixels",
                       hdr.width);
    rgbe_cursor c = {.bytes = bytes, .len = len, .pos = hdr.data_offset, .width = hdr.width,
                     .height = hdr.height};
    for (uint32_t y = 0; y < hdr.height && code == HP_OK; y++) {
        c.row = y;
        if ((code = read_scanline(&c, scan, err)) != HP_OK)
            break;
        for (uint32_t x = 0; x < hdr.width; x++) {
            const uint8_t *p = scan + (size_t)x * 4;
            float f = scale[p[3]];
            float r = p[3] ? ((float)p[0] + 0.5f) * f : 0.0f;
            float g = p[3] ? ((float)p[1] + 0.5f) * f : 0.0f;
            float b = p[3] ? ((float)p[2] + 0.5f) * f : 0.0f;
            hp_image_store_pixel(dest, (size_t)y * hdr.width + x, r, g, b, 1.0f);
        }
    }
    free(scan);
    return code;
}

static bool starts_with(const uint8_t *bytes, size_t len, const char *magic)
{
    size_t n = strlen(magic);
    return len >= n && memcmp(bytes, magic, n) == 0;
}

static bool rgbe_sniff(const uint8_t *bytes, size_t len)
{
    return starts_with(bytes, len, "#?RADIANCE") || starts_with(bytes, len, "#?RGBE");
}

const hp_image_decoder hp_rgbe_decoder = {
    .name = "rgbe", .magic = "Radiance HDR (\"#?RADIANCE\" or \"#?RGBE\")",
    .sniff = rgbe_sniff, .probe = rgbe_probe, .decode = rgbe_decode,
};

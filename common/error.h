/* Errors travel as values: a numbered code for the caller to branch on (the HTTP layer maps codes to
 * status codes) and a sentence for the person who reads it. Every failure path fills one, frees what it
 * made and returns the code (the VkFFT habit). */
#ifndef HP_ERROR_H
#define HP_ERROR_H

typedef enum hp_code {
    HP_OK = 0,
    HP_ERR_INVALID_ARGUMENT = 1, /* a caller passed something outside the documented range */
    HP_ERR_NO_DEVICE = 2,        /* no Vulkan device, or none matching the configured selection */
    HP_ERR_MISSING_FEATURE = 3,  /* the device lacks a feature or limit hdrpostd needs */
    HP_ERR_VULKAN = 4,           /* a Vulkan call failed unexpectedly */
    HP_ERR_OUT_OF_MEMORY = 5,    /* host or device memory exhausted */
    HP_ERR_TOO_LARGE = 6,        /* a frame exceeds what the device can hold */
    HP_ERR_DEVICE_LOST = 7,      /* VK_ERROR_DEVICE_LOST: the device must be recreated */
    HP_ERR_IO = 8,               /* a file could not be read or written */
    HP_ERR_INTERNAL = 9,         /* a bug: an invariant did not hold */
    HP_ERR_UNSUPPORTED_FORMAT = 10, /* input in a format hdrpostd does not read (unknown magic bytes) */
    HP_ERR_UNUSABLE = 11,        /* a valid file hdrpostd cannot use (no colour channels, depth size differs) */
} hp_code;

typedef struct hp_err {
    hp_code code;
    char message[1024]; /* room for a list of valid names (an OCIO config's colour spaces and roles) */
    char field[128]; /* the request parameter at fault ("tonemap.white_point"), or empty */
    /* The word the HTTP answer's error carries where the code's usual one would not say it (a static string:
     * "no_ocio_config"), or NULL. */
    const char *word;
} hp_err;

const char *hp_code_name(hp_code code);

/* Sets *err (when err is not NULL) and returns code, so a failure path reads
 *     return hp_fail(err, HP_ERR_IO, "cannot open %s: %s", path, strerror(errno));  */
hp_code hp_fail(hp_err *err, hp_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same, naming the request parameter at fault, which the HTTP error body reports as "field". */
hp_code hp_fail_field(hp_err *err, hp_code code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with the answer's error word (hp_err.word). */
hp_code hp_fail_word(hp_err *err, hp_code code, const char *word, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif

#include "error.h"

#include <stdarg.h>
#include <stdio.h>

const char *hp_code_name(hp_code code)
{
    switch (code) {
    case HP_OK: return "ok";
    case HP_ERR_INVALID_ARGUMENT: return "invalid_argument";
    case HP_ERR_NO_DEVICE: return "no_device";
    case HP_ERR_MISSING_FEATURE: return "missing_feature";
    case HP_ERR_VULKAN: return "vulkan_error";
    case HP_ERR_OUT_OF_MEMORY: return "out_of_memory";
    case HP_ERR_TOO_LARGE: return "too_large";
    case HP_ERR_DEVICE_LOST: return "device_lost";
    case HP_ERR_IO: return "io_error";
    case HP_ERR_INTERNAL: return "internal_error";
    case HP_ERR_UNSUPPORTED_FORMAT: return "unsupported_format";
    case HP_ERR_UNUSABLE: return "unusable_image";
    }
    return "unknown";
}

/* Every failure's one shape: the code, the sentence, the field ("" for none) and the answer's word. A reused
 * hp_err must not keep an earlier failure's field or word. */
static void fill(hp_err *err, hp_code code, const char *word, const char *field, const char *fmt, va_list ap)
{
    err->code = code;
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
    err->word = word;
}

hp_code hp_fail(hp_err *err, hp_code code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, code, NULL, NULL, fmt, ap);
        va_end(ap);
    }
    return code;
}

hp_code hp_fail_field(hp_err *err, hp_code code, const char *field, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, code, NULL, field, fmt, ap);
        va_end(ap);
    }
    return code;
}

hp_code hp_fail_word(hp_err *err, hp_code code, const char *word, const char *field, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        fill(err, code, word, field, fmt, ap);
        va_end(ap);
    }
    return code;
}

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

hp_code hp_fail(hp_err *err, hp_code code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        err->field[0] = '\0'; /* a reused hp_err must not keep an earlier failure's field */
        err->word = NULL;
    }
    return code;
}

hp_code hp_fail_field(hp_err *err, hp_code code, const char *field, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        err->word = NULL;
    }
    return code;
}

hp_code hp_fail_word(hp_err *err, hp_code code, const char *word, const char *field, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
        err->word = word;
    }
    return code;
}

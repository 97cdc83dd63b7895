/* UTF-8 (RFC 3629) for text that goes into JSON and log lines: jansson refuses a string that is not UTF-8,
 * and with it the whole body it was to be part of. */
#ifndef HP_COMMON_UTF8_H
#define HP_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The code point of the well-formed UTF-8 sequence at s (n bytes left) and its length, or 0 when there is
 * none: overlong forms, surrogates and values above U+10FFFF are not UTF-8 (RFC 3629, section 3). */
size_t hp_utf8_sequence(const unsigned char *s, size_t n, uint32_t *cp);

/* Every byte of the NUL-terminated s that is not part of a well-formed sequence replaced by '?', in place:
 * for client bytes (a form part's name, a path, a name from a file) quoted in an answer. */
void hp_utf8_clean(char *s);

#endif

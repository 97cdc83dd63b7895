#include "common/utf8.h"

#include <string.h>

size_t hp_utf8_sequence(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len;
    if (s[0] < 0x80)
        len = 1, *cp = s[0];
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        len = 2, *cp = s[0] & 0x1Fu;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        len = 3, *cp = s[0] & 0x0Fu;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        len = 4, *cp = s[0] & 0x07u;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        *cp = *cp << 6 | (s[i] & 0x3Fu);
    }
    if ((len == 3 && *cp < 0x800) || (len == 4 && *cp < 0x10000) || *cp > 0x10FFFF ||
        (*cp >= 0xD800 && *cp <= 0xDFFF))
        return 0;
    return len;
}

void hp_utf8_clean(char *s)
{
    unsigned char *p = (unsigned char *)s;
    for (size_t left = strlen(s); left;) {
        uint32_t cp;
        size_t n = hp_utf8_sequence(p, left, &cp);
        if (!n) {
            *p = '?';
            n = 1;
        }
        p += n;
        left -= n;
    }
}

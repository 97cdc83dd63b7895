/* common/bigbuf.h: large buffers come back warm for a request of the same size; small ones are plain
 * malloc; the limit holds; NULL is harmless. */
#include <stdint.h>
#include <string.h>

#include "common/bigbuf.h"
#include "tap.h"

int main(void)
{
    size_t big = 66u << 20;
    unsigned char *a = hp_bigbuf_get(big);
    tap_ok(a && ((uintptr_t)a % 16) == 0, "a 66 MB buffer, 16-byte aligned at least");
    memset(a, 7, big);
    hp_bigbuf_put(a);
    tap_ok(hp_bigbuf_kept() == big, "put back, it is kept (%zu bytes)", hp_bigbuf_kept());
    unsigned char *b = hp_bigbuf_get(big - 1000);
    tap_ok(b == a && b[big - 1001] == 7 && hp_bigbuf_kept() == 0,
           "the next request of about that size gets the same memory, already paged in");
    unsigned char *c = hp_bigbuf_get(big / 3);
    tap_ok(c && c != a, "a request for a third of it is not handed a buffer three times its size");
    hp_bigbuf_put(b);
    hp_bigbuf_put(c);
    unsigned char *small = hp_bigbuf_get(100);
    hp_bigbuf_put(small);
    tap_ok(small && hp_bigbuf_kept() == big + big / 3, "small buffers are not kept (%zu bytes kept)",
           hp_bigbuf_kept());
    hp_bigbuf_set_limit(big);
    tap_ok(hp_bigbuf_kept() <= big, "lowering the limit lets the oldest go (%zu bytes kept)", hp_bigbuf_kept());
    hp_bigbuf_set_limit(0);
    unsigned char *d = hp_bigbuf_get(big);
    hp_bigbuf_put(d);
    tap_ok(hp_bigbuf_kept() == 0, "with a limit of 0 nothing is kept");
    hp_bigbuf_put(NULL);
    tap_ok(hp_bigbuf_get(SIZE_MAX) == NULL, "an impossible size is NULL, not an overflowed allocation");
    return tap_done();
}

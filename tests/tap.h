/* A few lines of TAP (Test Anything Protocol) so that meson counts every check of every test program
 * (meson's protocol: 'tap') and .ci/run can sum them. Each check is one test point; a test program that
 * crashes midway loses its plan line and meson reports it failed. */
#ifndef HP_TAP_H
#define HP_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static int tap_count, tap_failed;

__attribute__((format(printf, 2, 3))) static inline bool tap_ok(bool pass, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", pass ? "" : "not ", ++tap_count);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    tap_failed += !pass;
    return pass;
}

/* A diagnostic line: shown by meson -v and in the test log, ignored by the count. */
__attribute__((format(printf, 1, 2))) static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* Prints the plan; the exit status is 0 only when every point passed. */
static inline int tap_done(void)
{
    printf("1..%d\n", tap_count);
    fflush(stdout);
    return tap_failed ? 1 : 0;
}

/* A test that cannot even start is one failed point, never a skip. */
__attribute__((format(printf, 1, 2))) static inline int tap_bail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("not ok %d - ", ++tap_count);
    vprintf(fmt, ap);
    printf("\n1..%d\n", tap_count);
    va_end(ap);
    return 1;
}

#endif

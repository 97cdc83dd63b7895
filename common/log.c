#include "log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static _Atomic int g_level = HP_LOG_INFO;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void hp_log_set_level(hp_log_level level) { atomic_store(&g_level, (int)level); }
hp_log_level hp_log_get_level(void) { return (hp_log_level)atomic_load(&g_level); }

int hp_log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (name && strcasecmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

void hp_logv(hp_log_level level, const char *fmt, va_list ap)
{
    if ((int)level > atomic_load(&g_level))
        return;

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);

    char line[2048];
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     level_names[level]);
    if (n < 0)
        return;
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : ((size_t)m < sizeof(line) - (size_t)n - 1 ? (size_t)m : sizeof(line) - (size_t)n - 2));
    line[len] = '\n';
    line[len + 1] = '\0';

    pthread_mutex_lock(&g_lock);
    fputs(line, stderr);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

void hp_log(hp_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hp_logv(level, fmt, ap);
    va_end(ap);
}

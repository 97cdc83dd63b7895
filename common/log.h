/* Leveled logging to stderr, one line per event.
 *
 * Every line starts with an ISO-8601 UTC timestamp and the level, so the daemon's output reads the same
 * under systemd, in a container log and in a terminal. Thread-safe: a line is written with one
 * fputs() while holding a lock, so lines from the HTTP threads and the GPU worker never interleave. */
#ifndef HP_LOG_H
#define HP_LOG_H

#include <stdarg.h>

typedef enum hp_log_level {
    HP_LOG_ERROR = 0,
    HP_LOG_WARN  = 1,
    HP_LOG_INFO  = 2,
    HP_LOG_DEBUG = 3,
} hp_log_level;

void hp_log_set_level(hp_log_level level);
hp_log_level hp_log_get_level(void);
/* Parses "error", "warn", "info" or "debug"; returns -1 for anything else. */
int hp_log_level_parse(const char *name);

void hp_log(hp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hp_logv(hp_log_level level, const char *fmt, va_list ap);

#define hp_error(...) hp_log(HP_LOG_ERROR, __VA_ARGS__)
#define hp_warn(...)  hp_log(HP_LOG_WARN, __VA_ARGS__)
#define hp_info(...)  hp_log(HP_LOG_INFO, __VA_ARGS__)
#define hp_debug(...) hp_log(HP_LOG_DEBUG, __VA_ARGS__)

#endif

/* common/log.h - leveled logging to stderr, one line per event:
 *   2026-11-29T08:30:00.123Z WARN storaged req=42 ... message: strerror(err)
 * The level test happens before any argument is evaluated, so a filtered
 * call costs one compare. Never call from a signal handler. */
#ifndef COMMON_LOG_H
#define COMMON_LOG_H
#include "common/compiler.h"

enum cm_log_level {
    CM_LOG_DEBUG = 0,
    CM_LOG_INFO = 1,
    CM_LOG_WARN = 2,
    CM_LOG_ERROR = 3,
    CM_LOG_OFF = 4,
};

extern int cm_log_min; /* messages below this level are dropped */

/* Sets the program name printed on each line (borrows @prog: keep it alive)
 * and the minimum level. */
void cm_log_init(const char *prog, int min_level);
/* Parses "debug", "info", "warn", "error", "off"; returns the level or -EINVAL.
 */
int cm_log_parse_level(const char *s);
/* Writes one line; @err is an errno value (0 = none) whose strerror is
 * appended. */
void cm_log_write(int level, int err, const char *fmt, ...) CM_PRINTF(3, 4);

#define cm_log(lvl, err, ...)                                                  \
    do {                                                                       \
        if ((lvl) >= cm_log_min)                                               \
            cm_log_write((lvl), (err), __VA_ARGS__);                           \
    } while (0)

#endif /* COMMON_LOG_H */

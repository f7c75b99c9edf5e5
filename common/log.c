/* common/log.c - leveled logging to stderr, one line per event.
 *
 * Each line is formatted into a stack buffer and written with a single
 * write(2), so lines from concurrent threads never interleave (stderr is
 * usually a pipe to journald or a file opened O_APPEND; writes under
 * PIPE_BUF are atomic on pipes). Over-long messages are truncated and end
 * with "...". The timestamp is RFC 3339 UTC with milliseconds. */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/timefmt.h"

int cm_log_min = CM_LOG_INFO;
static const char *log_prog = "ecfs";

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

/* Sets the program name (borrowed) and the minimum level (clamped). */
void cm_log_init(const char *prog, int min_level)
{
    if (prog != NULL)
        log_prog = prog;
    if (min_level < CM_LOG_DEBUG)
        min_level = CM_LOG_DEBUG;
    if (min_level > CM_LOG_OFF)
        min_level = CM_LOG_OFF;
    cm_log_min = min_level;
}

/* Maps a level name (case-insensitive) to its value, or -EINVAL. "warning"
 * is accepted as an alias of "warn". */
int cm_log_parse_level(const char *s)
{
    if (s == NULL)
        return -EINVAL;
    if (strcasecmp(s, "debug") == 0)
        return CM_LOG_DEBUG;
    if (strcasecmp(s, "info") == 0)
        return CM_LOG_INFO;
    if (strcasecmp(s, "warn") == 0 || strcasecmp(s, "warning") == 0)
        return CM_LOG_WARN;
    if (strcasecmp(s, "error") == 0)
        return CM_LOG_ERROR;
    if (strcasecmp(s, "off") == 0 || strcasecmp(s, "none") == 0)
        return CM_LOG_OFF;
    return -EINVAL;
}

/* Formats "TIME LEVEL prog message[: strerror(err)]\n" and writes it with
 * one write(2). Never fails visibly: logging errors are dropped. Keeps
 * errno unchanged so callers may log between a failing call and its
 * errno check. */
void cm_log_write(int level, int err, const char *fmt, ...)
{
    char line[4096];
    char ts[CM_TIME_RFC3339_LEN + 1];
    char ebuf[128];
    struct timespec now;
    size_t len, cap = sizeof(line) - 1; /* keep room for '\n' */
    int saved_errno = errno;
    int n;
    va_list ap;

    if (level < CM_LOG_DEBUG || level >= CM_LOG_OFF)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    cm_time_rfc3339(now.tv_sec, (int)(now.tv_nsec / 1000000), ts);
    n = snprintf(line, cap, "%s %s %s ", ts, level_names[level], log_prog);
    if (n < 0)
        goto out;
    len = (size_t)n < cap ? (size_t)n : cap - 1;

    va_start(ap, fmt);
    n = vsnprintf(line + len, cap - len, fmt, ap);
    va_end(ap);
    if (n < 0)
        goto out;
    len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;

    if (err != 0 && len < cap - 1) {
        const char *es = strerror_r(err < 0 ? -err : err, ebuf, sizeof(ebuf));
        n = snprintf(line + len, cap - len, ": %s", es);
        if (n > 0)
            len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }
    if (len >= cap - 1) /* truncated: mark it */
        memcpy(line + cap - 4, "...", 3);
    line[len++] = '\n';
    /* One write: the line stays whole; a short write is not retried. */
    if (write(STDERR_FILENO, line, len) < 0) {
        /* nothing sensible to do */
    }
out:
    errno = saved_errno;
}

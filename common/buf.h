/* common/buf.h - growable byte buffer with a hard size cap.
 * A cm_buf owns its storage; a failed append frees it and leaves the buffer
 * empty, so callers never clean up after an error (curl's dynbuf contract).
 * The data is always NUL-terminated when data != NULL (not counted in len). */
#ifndef COMMON_BUF_H
#define COMMON_BUF_H
#include "common/compiler.h"
#include <stdarg.h>
#include <stddef.h>

struct cm_buf {
    char *data;   /* owned; NULL until the first append */
    size_t len;   /* bytes used */
    size_t cap;   /* bytes allocated */
    size_t limit; /* appends that would grow len past this fail with -E2BIG */
};

#define CM_BUF_NOLIMIT ((size_t)-1)

void cm_buf_init(struct cm_buf *b, size_t limit);
/* 0, -ENOMEM or -E2BIG (buffer freed and emptied on failure). */
CM_MUST_CHECK int cm_buf_append(struct cm_buf *b, const void *p, size_t n);
CM_MUST_CHECK int cm_buf_appends(struct cm_buf *b, const char *s);
CM_MUST_CHECK int cm_buf_appendc(struct cm_buf *b, char c);
CM_MUST_CHECK int cm_buf_appendf(struct cm_buf *b, const char *fmt, ...)
    CM_PRINTF(2, 3);
CM_MUST_CHECK int cm_buf_vappendf(struct cm_buf *b, const char *fmt, va_list ap)
    CM_PRINTF(2, 0);
/* Makes room for @n more bytes without changing len. */
CM_MUST_CHECK int cm_buf_reserve(struct cm_buf *b, size_t n);
/* Drops the first @n bytes (memmove), for consumed input. */
void cm_buf_consume(struct cm_buf *b, size_t n);
/* Sets len to 0, keeps the allocation. */
void cm_buf_reset(struct cm_buf *b);
/* Returns the data (caller owns it, free()) and empties the buffer. */
char *cm_buf_steal(struct cm_buf *b);
void cm_buf_fini(struct cm_buf *b);

#endif /* COMMON_BUF_H */

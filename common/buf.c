/* common/buf.c - growable byte buffer with a hard size cap.
 *
 * DESIGN: curl's dynbuf contract. Every append either succeeds completely or
 * frees the storage and leaves the buffer empty (len 0, data NULL), so a
 * caller building a reply can bail out on the first error without cleanup
 * and without ever sending a half-built value. Growth doubles, starting at
 * 64 bytes, and never allocates past limit+1 (the +1 is the NUL). */
#include "common/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_MIN_ALLOC 64

/* Initialises an empty buffer that may grow to @limit bytes. */
void cm_buf_init(struct cm_buf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
}

/* Frees the storage; the buffer is empty and reusable (same limit). */
void cm_buf_fini(struct cm_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

/* Ensures cap >= len + n + 1. On failure frees the buffer and returns
 * -E2BIG (limit) or -ENOMEM. */
int cm_buf_reserve(struct cm_buf *b, size_t n)
{
    size_t need, ncap;
    char *p;

    if (n > b->limit || b->len > b->limit - n) {
        cm_buf_fini(b);
        return -E2BIG;
    }
    need = b->len + n;
    if (need == SIZE_MAX) {
        cm_buf_fini(b);
        return -ENOMEM;
    }
    need += 1; /* NUL */
    if (b->data != NULL && need <= b->cap)
        return 0;
    ncap = b->cap ? b->cap : BUF_MIN_ALLOC;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) {
            ncap = need;
            break;
        }
        ncap *= 2;
    }
    /* Never allocate much beyond what the limit allows. */
    if (b->limit != CM_BUF_NOLIMIT && ncap > b->limit + 1)
        ncap = b->limit + 1 > need ? b->limit + 1 : need;
    p = realloc(b->data, ncap);
    if (p == NULL) {
        cm_buf_fini(b);
        return -ENOMEM;
    }
    b->data = p;
    b->cap = ncap;
    b->data[b->len] = '\0';
    return 0;
}

/* Appends @n bytes of @p. 0, -E2BIG or -ENOMEM (buffer emptied). */
int cm_buf_append(struct cm_buf *b, const void *p, size_t n)
{
    int ret = cm_buf_reserve(b, n);

    if (ret < 0)
        return ret;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* Appends the NUL-terminated string @s (without its NUL). */
int cm_buf_appends(struct cm_buf *b, const char *s)
{
    return cm_buf_append(b, s, strlen(s));
}

/* Appends one byte. */
int cm_buf_appendc(struct cm_buf *b, char c)
{
    return cm_buf_append(b, &c, 1);
}

/* Appends printf-style output; -EINVAL on a formatting error (buffer
 * emptied, like every other failure). Formats straight into the spare
 * capacity first, so the common case costs one vsnprintf pass. */
int cm_buf_vappendf(struct cm_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    size_t room = b->data != NULL ? b->cap - b->len : 0;
    int n, ret;

    va_copy(ap2, ap);
    n = vsnprintf(room > 0 ? b->data + b->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        cm_buf_fini(b);
        return -EINVAL;
    }
    if ((size_t)n < room) { /* fitted in the spare capacity */
        if ((size_t)n > b->limit - b->len) {
            cm_buf_fini(b);
            return -E2BIG;
        }
        b->len += (size_t)n;
        return 0;
    }
    ret = cm_buf_reserve(b, (size_t)n); /* enforces the limit */
    if (ret < 0)
        return ret;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

/* Varargs front end of cm_buf_vappendf. */
int cm_buf_appendf(struct cm_buf *b, const char *fmt, ...)
{
    va_list ap;
    int ret;

    va_start(ap, fmt);
    ret = cm_buf_vappendf(b, fmt, ap);
    va_end(ap);
    return ret;
}

/* Drops the first @n bytes (all of them if n >= len). */
void cm_buf_consume(struct cm_buf *b, size_t n)
{
    if (n >= b->len) {
        cm_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

/* Empties the buffer, keeping its allocation. */
void cm_buf_reset(struct cm_buf *b)
{
    b->len = 0;
    if (b->data != NULL)
        b->data[0] = '\0';
}

/* Hands the storage to the caller (may be NULL when nothing was appended)
 * and leaves the buffer empty. */
char *cm_buf_steal(struct cm_buf *b)
{
    char *p = b->data;

    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

/* storaged/s3/xout.h - XML response helpers shared by the S3 operations
 * (ops.c, versioning.c, lifecycle.c, ...).
 *
 * Every append is checked once, at xml_done(): a failed append leaves the
 * buffer empty with limit 0, so every later append fails too and
 * xml_done() sees it (sticky failure). Small static inlines: each file
 * that answers XML includes this. */
#ifndef STORAGED_S3_XOUT_H
#define STORAGED_S3_XOUT_H
#include "common/buf.h"
#include "common/compiler.h"
#include "common/timefmt.h"
#include "common/uri.h"
#include "common/xml.h"
#include "storaged/s3/s3_i.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Empties @b and makes every later append fail. */
static inline void x_fail(struct cm_buf *b)
{
    cm_buf_fini(b);
    cm_buf_init(b, 0);
}

/* Appends literal @s (sticky failure). */
static inline void x_lit(struct cm_buf *b, const char *s)
{
    if (cm_buf_appends(b, s) < 0)
        x_fail(b);
}

static inline void x_fmt(struct cm_buf *b, const char *fmt, ...)
    CM_PRINTF(2, 3);
/* Appends formatted text (sticky failure). */
static inline void x_fmt(struct cm_buf *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (cm_buf_vappendf(b, fmt, ap) < 0)
        x_fail(b);
    va_end(ap);
}

/* <tag> (or </tag> with @end), without a printf: a listing writes three
 * elements per key (sticky failure). */
static inline void x_tag(struct cm_buf *b, const char *tag, bool end)
{
    size_t tl = strlen(tag);
    char *p;

    if (cm_buf_reserve(b, tl + 3) < 0) {
        x_fail(b);
        return;
    }
    p = b->data + b->len;
    *p++ = '<';
    if (end)
        *p++ = '/';
    memcpy(p, tag, tl);
    p += tl;
    *p++ = '>';
    *p = '\0';
    b->len = (size_t)(p - b->data);
}

/* Appends @v in decimal (sticky failure). */
static inline void x_u64(struct cm_buf *b, uint64_t v)
{
    char d[20];
    size_t i = sizeof(d);

    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (cm_buf_append(b, d + i, sizeof(d) - i) < 0)
        x_fail(b);
}

/* <tag>escaped text</tag>, url-encoded first when @url. The url encoding
 * (unreserved bytes, '/', %XX) has no byte that XML escapes, so it is
 * written straight into @b. */
static inline void x_elem(struct cm_buf *b, const char *tag, const char *s,
                          size_t n, bool url)
{
    x_tag(b, tag, false);
    if (url ? cm_uri_encode(b, s, n, true) < 0 : cm_xml_escape(b, s, n) < 0)
        x_fail(b);
    x_tag(b, tag, true);
}

/* <tag>s</tag> for a NUL-terminated (or NULL: empty) string. */
static inline void x_str(struct cm_buf *b, const char *tag, const char *s,
                         bool url)
{
    x_elem(b, tag, s ? s : "", s ? strlen(s) : 0, url);
}

/* Finishes an XML response: 200 unless set, Content-Type. */
static inline void xml_done(struct stor_s3_req *r)
{
    if (r->http.resp.body.limit == 0) {
        /* an append failed (ENOMEM) */
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = r->http.resp.status ? r->http.resp.status : 200;
    if (stor_resp_hdr(&r->http.resp, "Content-Type", "application/xml") < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* XML timestamps: "2015-08-30T12:36:00.000Z". */
static inline void time_iso(time_t t, int ms, char out[CM_TIME_RFC3339_LEN + 1])
{
    cm_time_rfc3339(t, ms, out);
}

#endif /* STORAGED_S3_XOUT_H */

/* storaged/http/parse.c - HTTP/1.1 request heads and chunked bodies.
 *
 * DESIGN: the head parser is stateless and zero-copy (picohttpparser's
 * contract): the connection calls it again from the start of its buffer
 * each time more bytes arrive, which is cheap because heads are small, and
 * every string it returns points into that buffer. It is strict where
 * leniency would let two parsers disagree (request smuggling): no obs-fold,
 * no whitespace before ':', no bare CR, no control bytes in values.
 *
 * The chunk decoder is the opposite: bodies are large and arrive in pieces,
 * so it keeps a small resumable state (nginx-style) and hands decoded bytes
 * to callbacks without copying them. The same decoder serves
 * Transfer-Encoding: chunked and aws-chunked (whose chunk extension carries
 * the chunk signature and whose trailers carry x-amz-checksum-*). */
#include "storaged/http/parse.h"

#include <errno.h>
#include <string.h>

/* RFC 9110 tchar */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A header value byte: HTAB, SP, VCHAR or obs-text. */
static bool is_vchar_or_ws(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Finds the next line in [p, end): sets *line_end to its end without the
 * CR LF and returns the start of the following line, NULL when no LF has
 * arrived yet, or (const char *)-1 on a bare CR inside the line. */
static const char *next_line(const char *p, const char *end,
                             const char **line_end)
{
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    const char *e;

    if (lf == NULL)
        return NULL;
    e = lf;
    if (e > p && e[-1] == '\r')
        e--;
    if (memchr(p, '\r', (size_t)(e - p)) != NULL)
        return (const char *)-1;
    *line_end = e;
    return lf + 1;
}

/* Parses the request line [p, e) into @h. 0 or -EBADMSG / -E2BIG. */
static int parse_request_line(const char *p, const char *e,
                              struct stor_http_head *h)
{
    const char *m = p;

    while (p < e && is_tchar((unsigned char)*p))
        p++;
    if (p == m || p >= e || *p != ' ')
        return -EBADMSG;
    h->method = m;
    h->method_len = (size_t)(p - m);
    p++;
    m = p;
    while (p < e && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f)
        p++;
    if (p == m || p >= e || *p != ' ')
        return -EBADMSG;
    if ((size_t)(p - m) > STOR_HTTP_MAX_TARGET)
        return -E2BIG;
    h->target = m;
    h->target_len = (size_t)(p - m);
    p++;
    if (e - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9')
        return -EBADMSG;
    h->minor_version = p[7] - '0';
    return 0;
}

/* Parses one header line [p, e) into @hdr. 0 or -EBADMSG. */
static int parse_header_line(const char *p, const char *e,
                             struct stor_http_hdr *hdr)
{
    const char *n = p;
    const char *v;

    while (p < e && is_tchar((unsigned char)*p))
        p++;
    if (p == n || p >= e || *p != ':')
        return -EBADMSG;
    hdr->name = n;
    hdr->name_len = (size_t)(p - n);
    p++;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    v = p;
    for (; p < e; p++)
        if (!is_vchar_or_ws((unsigned char)*p))
            return -EBADMSG;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    hdr->value = v;
    hdr->value_len = (size_t)(e - v);
    return 0;
}

/* See header. */
int stor_http_parse_head(const char *buf, size_t len, struct stor_http_head *h)
{
    const char *p = buf, *end = buf + len, *le = NULL, *next;
    size_t cap = h->nhdrs;
    int ret;

    h->nhdrs = 0;
    /* RFC 9112 2.2: ignore at least one empty line before the request. */
    while (p < end && (*p == '\r' || *p == '\n')) {
        if (*p == '\r' && (p + 1 >= end || p[1] != '\n'))
            return p + 1 >= end ? -EAGAIN : -EBADMSG;
        p += *p == '\r' ? 2 : 1;
    }
    next = next_line(p, end, &le);
    if (next == NULL)
        goto incomplete;
    if (next == (const char *)-1)
        return -EBADMSG;
    ret = parse_request_line(p, le, h);
    if (ret < 0)
        return ret;
    p = next;
    for (;;) {
        next = next_line(p, end, &le);
        if (next == NULL)
            goto incomplete;
        if (next == (const char *)-1)
            return -EBADMSG;
        if (le == p) /* empty line: end of head */
            break;
        if (*p == ' ' || *p == '\t') /* obs-fold */
            return -EBADMSG;
        if (h->nhdrs >= cap)
            return -E2BIG;
        ret = parse_header_line(p, le, &h->hdrs[h->nhdrs]);
        if (ret < 0)
            return ret;
        h->nhdrs++;
        p = next;
    }
    if ((size_t)(next - buf) > STOR_HTTP_MAX_HEAD)
        return -E2BIG;
    return (int)(next - buf);

incomplete:
    /* Scan what we have for early errors cheaply: a head that is already
     * too long will never become valid. */
    if (len >= STOR_HTTP_MAX_HEAD)
        return -E2BIG;
    return -EAGAIN;
}

/* See header. */
bool stor_http_ieq(const char *s, size_t n, const char *lit)
{
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char a = (unsigned char)s[i], b = (unsigned char)lit[i];

        if (b == 0)
            return false;
        if (a >= 'A' && a <= 'Z')
            a = (unsigned char)(a + 32);
        if (b >= 'A' && b <= 'Z')
            b = (unsigned char)(b + 32);
        if (a != b)
            return false;
    }
    return lit[n] == 0;
}

/* See header. */
const struct stor_http_hdr *stor_http_find(const struct stor_http_head *h,
                                           const char *name)
{
    size_t i;

    for (i = 0; i < h->nhdrs; i++)
        if (stor_http_ieq(h->hdrs[i].name, h->hdrs[i].name_len, name))
            return &h->hdrs[i];
    return NULL;
}

/* See header. */
int stor_http_parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (n == 0 || n > 19)
        return -EINVAL;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* ---- chunk decoder ---- */

enum {
    CH_SIZE = 0, /* reading "hex[;ext]" CRLF */
    CH_DATA,     /* chunk data */
    CH_DATA_CR,  /* CRLF after data */
    CH_DATA_LF,
    CH_TRAILER, /* trailer lines until an empty one */
    CH_DONE,
};

/* See header. */
void stor_chunk_init(struct stor_chunk_dec *d, uint64_t max_total)
{
    memset(d, 0, sizeof(*d));
    d->state = CH_SIZE;
    d->max_total = max_total;
}

/* Accumulates bytes up to and including LF into d->line. Returns the bytes
 * consumed and sets *complete when a whole line (without CR LF) is in
 * d->line[0..linelen); -EBADMSG when the line is too long. */
static ssize_t take_line(struct stor_chunk_dec *d, const char *in, size_t n,
                         bool *complete)
{
    const char *lf = memchr(in, '\n', n);
    size_t take = lf ? (size_t)(lf - in) + 1 : n;
    size_t copy = lf ? take - 1 : take;

    *complete = false;
    if (d->linelen + copy > sizeof(d->line) - 1)
        return -EBADMSG;
    memcpy(d->line + d->linelen, in, copy);
    d->linelen += copy;
    if (lf) {
        if (d->linelen > 0 && d->line[d->linelen - 1] == '\r')
            d->linelen--;
        if (memchr(d->line, '\r', d->linelen) != NULL)
            return -EBADMSG;
        d->line[d->linelen] = 0;
        *complete = true;
    }
    return (ssize_t)take;
}

/* Parses the chunk-size line in d->line; leaves the extension (after ';',
 * trimmed) at d->line + *ext_off. 0 or -EBADMSG. */
static int parse_size_line(struct stor_chunk_dec *d, size_t *ext_off)
{
    const char *p = d->line, *e = d->line + d->linelen;
    uint64_t v = 0;
    int digits = 0;

    for (; p < e; p++) {
        int x;

        if (*p >= '0' && *p <= '9')
            x = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            x = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            x = *p - 'A' + 10;
        else
            break;
        if (++digits > 15)
            return -EBADMSG;
        v = v * 16 + (uint64_t)x;
    }
    if (digits == 0)
        return -EBADMSG;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if (p < e && *p != ';')
        return -EBADMSG;
    if (p < e)
        p++;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(e - p) > STOR_CHUNK_MAX_EXT)
        return -EBADMSG;
    *ext_off = (size_t)(p - d->line);
    d->size = v;
    d->remaining = v;
    return 0;
}

/* Handles one complete trailer line; 0, or a callback's error, or
 * -EBADMSG on a malformed field. */
static int trailer_line(struct stor_chunk_dec *d,
                        const struct stor_chunk_cb *cb)
{
    const char *p = d->line, *e = d->line + d->linelen, *n = p, *v;

    while (p < e && is_tchar((unsigned char)*p))
        p++;
    if (p == n || p >= e || *p != ':')
        return -EBADMSG;
    v = p + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (cb->trailer == NULL)
        return 0;
    return cb->trailer(cb->arg, n, (size_t)(p - n), v, (size_t)(e - v));
}

/* See header. */
ssize_t stor_chunk_decode(struct stor_chunk_dec *d, const char *in, size_t n,
                          const struct stor_chunk_cb *cb)
{
    size_t pos = 0;
    size_t ext_off = 0;
    bool complete;
    ssize_t r;
    int ret;

    while (pos < n && d->state != CH_DONE) {
        switch (d->state) {
        case CH_SIZE:
            r = take_line(d, in + pos, n - pos, &complete);
            if (r < 0)
                return r;
            pos += (size_t)r;
            if (!complete)
                break;
            ret = parse_size_line(d, &ext_off);
            if (ret < 0)
                return ret;
            if (d->total + d->size > d->max_total)
                return -E2BIG;
            /* The extension is needed at the chunk's end: keep it at the
             * start of the line buffer, which is free until then. */
            memmove(d->line, d->line + ext_off, d->linelen - ext_off);
            d->linelen -= ext_off;
            d->line[d->linelen] = 0;
            if (d->size == 0) {
                if (cb->chunk_end) {
                    ret = cb->chunk_end(cb->arg, d->line, d->linelen, 0);
                    if (ret < 0)
                        return ret;
                }
                d->linelen = 0;
                d->state = CH_TRAILER;
            } else {
                d->state = CH_DATA;
            }
            break;
        case CH_DATA: {
            size_t take = CM_MIN((uint64_t)(n - pos), d->remaining);

            if (cb->data) {
                ret = cb->data(cb->arg, in + pos, take);
                if (ret < 0)
                    return ret;
            }
            pos += take;
            d->remaining -= take;
            d->total += take;
            if (d->remaining == 0)
                d->state = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (in[pos] == '\r') {
                pos++;
                d->state = CH_DATA_LF;
                break;
            }
            /* a bare LF is tolerated */
            __attribute__((fallthrough));
        case CH_DATA_LF:
            if (in[pos] != '\n')
                return -EBADMSG;
            pos++;
            if (cb->chunk_end) {
                ret = cb->chunk_end(cb->arg, d->line, d->linelen, d->size);
                if (ret < 0)
                    return ret;
            }
            d->linelen = 0;
            d->state = CH_SIZE;
            break;
        case CH_TRAILER:
            r = take_line(d, in + pos, n - pos, &complete);
            if (r < 0)
                return r;
            pos += (size_t)r;
            if (!complete)
                break;
            if (d->linelen == 0) {
                d->state = CH_DONE;
                d->done = true;
                break;
            }
            ret = trailer_line(d, cb);
            if (ret < 0)
                return ret;
            d->linelen = 0;
            break;
        default:
            return -EBADMSG;
        }
    }
    return (ssize_t)pos;
}

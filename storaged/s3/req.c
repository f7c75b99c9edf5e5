/* storaged/s3/req.c - the S3 side of a request: decoding the target into
 * path, bucket, key and query (path-style addressing), the S3 error
 * response (status + XML), and jobs run on the transport's workers.
 *
 * DESIGN: the transport hands over the raw target; what it means (a bucket,
 * a key, sub-resources in the query) is S3's business, so decoding lives
 * here, next to the error XML that quotes it back (<Resource>, <Key>). */
#include "storaged/s3/s3_i.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/codec.h"
#include "common/uri.h"
#include "common/xml.h"

/* See s3_i.h. */
const char *stor_s3_query(const struct stor_s3_req *r, const char *name)
{
    size_t i;

    if (!(r->qfirst >> ((unsigned char)name[0] & 63) & 1))
        return NULL; /* no name starts with that byte (decode_query) */
    for (i = 0; i < r->nquery; i++)
        if (strcmp(r->query[i].name, name) == 0)
            return r->query[i].value;
    return NULL;
}

/* See s3_i.h. */
bool stor_s3_has_query(const struct stor_s3_req *r, const char *name)
{
    return stor_s3_query(r, name) != NULL;
}

/* See s3_i.h. */
void stor_s3_error(struct stor_s3_req *r, enum stor_s3_err e)
{
    stor_s3_error_msg(r, e, NULL);
}

/* See s3_i.h. */
void stor_s3_error_msg(struct stor_s3_req *r, enum stor_s3_err e,
                       const char *msg)
{
    const struct stor_s3_err_info *ei = stor_s3_err_info(e);
    struct stor_resp *rs = &r->http.resp;
    int ret;

    cm_buf_reset(&rs->body);
    rs->status = ei->status;
    r->err = e;
    /* a body that does not match its Content-MD5, x-amz-checksum-* or
     * x-amz-content-sha256 may be mis-framed (a client that sent more
     * bytes than its Content-Length, as s3-tests' content-length-below
     * test does): what follows it would be read as the next request, so
     * that connection ends with this answer */
    if (e == S3E_BAD_DIGEST || e == S3E_CHECKSUM_MISMATCH ||
        e == S3E_SHA256_MISMATCH)
        rs->close = true;
    rs->has_length = false;
    if (r->http.is_head || e == S3E_NOT_MODIFIED) {
        rs->no_body = true;
        return;
    }
    ret = cm_buf_appendf(&rs->body,
                         "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                         "<Error><Code>%s</Code><Message>",
                         ei->code);
    if (ret == 0 && msg)
        ret = cm_xml_escape(&rs->body, msg, strlen(msg));
    else if (ret == 0)
        ret = cm_buf_appends(&rs->body, ei->message);
    if (ret == 0)
        ret = cm_buf_appends(&rs->body, "</Message>");
    if (ret == 0 && r->path)
        ret = cm_buf_appends(&rs->body, "<Resource>");
    if (ret == 0 && r->path)
        ret = cm_xml_escape(&rs->body, r->path, r->path_len);
    if (ret == 0 && r->path)
        ret = cm_buf_appends(&rs->body, "</Resource>");
    if (ret == 0 && r->bucket[0]) {
        ret =
            cm_buf_appendf(&rs->body, "<BucketName>%s</BucketName>", r->bucket);
    }
    if (ret == 0 && r->has_key && (e == S3E_NO_SUCH_KEY)) {
        ret = cm_buf_appends(&rs->body, "<Key>");
        if (ret == 0)
            ret = cm_xml_escape(&rs->body, r->key, r->key_len);
        if (ret == 0)
            ret = cm_buf_appends(&rs->body, "</Key>");
    }
    if (ret == 0)
        ret = cm_buf_appendf(&rs->body,
                             "<RequestId>%016llX</RequestId>"
                             "<HostId>storaged</HostId></Error>",
                             (unsigned long long)r->http.id);
    if (ret == 0)
        ret = stor_resp_hdr(rs, "Content-Type", "application/xml");
    if (ret < 0)
        cm_buf_reset(&rs->body);
}

/* See s3_i.h. Runs without '%' or '+' are copied whole (the query of a
 * presigned GET is ~300 bytes with a handful of escapes). */
long stor_s3_pct_decode(char *dst, const char *src, size_t n)
{
    size_t i = 0, o = 0;

    while (i < n) {
        size_t start = i;

        while (i < n && src[i] != '%' && src[i] != '+')
            i++;
        memcpy(dst + o, src + start, i - start);
        o += i - start;
        if (i >= n)
            break;
        if (src[i] == '%') {
            int hi, lo;

            if (i + 2 >= n)
                return -1;
            hi = cm_hex_digit(src[i + 1]);
            lo = cm_hex_digit(src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            dst[o++] = (char)(hi * 16 + lo);
            i += 3;
        } else {
            dst[o++] = ' ';
            i++;
        }
    }
    dst[o] = 0;
    return (long)o;
}

/* The path's decoding into @dst (room for @n + 1 bytes): as
 * cm_uri_decode without plus_is_space ('+' stays '+'; a '%' not followed
 * by two hex digits is an error). Its length, or -1. */
static long path_decode(char *dst, const char *src, size_t n)
{
    size_t i = 0, o = 0;

    while (i < n) {
        const char *pc = memchr(src + i, '%', n - i);
        size_t run = pc ? (size_t)(pc - (src + i)) : n - i;
        int hi, lo;

        memcpy(dst + o, src + i, run);
        o += run;
        i += run;
        if (i >= n)
            break;
        if (n - i < 3 || (hi = cm_hex_digit(src[i + 1])) < 0 ||
            (lo = cm_hex_digit(src[i + 2])) < 0)
            return -1;
        dst[o++] = (char)(hi << 4 | lo);
        i += 3;
    }
    dst[o] = 0;
    return (long)o;
}

/* Decodes query @q (@tlen bytes after the '?'): name[=value]&... into
 * @qb (room for 2 * @tlen + 2 bytes) as NUL-terminated strings,
 * r->query pointing into them. */
static enum stor_s3_err decode_query(struct stor_s3_req *r, const char *q,
                                     size_t tlen, char *qb)
{
    while (tlen > 0) {
        const char *amp = memchr(q, '&', tlen);
        size_t plen2 = amp ? (size_t)(amp - q) : tlen;
        const char *eq = memchr(q, '=', plen2);
        size_t nlen = eq ? (size_t)(eq - q) : plen2;
        struct cm_kv *kv;
        long n;

        if (plen2 > 0) {
            if (r->nquery >= STOR_MAX_QUERY)
                return S3E_INVALID_ARGUMENT;
            kv = &r->query[r->nquery++];
            n = stor_s3_pct_decode(qb, q, nlen);
            if (n < 0)
                return S3E_INVALID_ARGUMENT;
            kv->name = qb;
            kv->name_len = (size_t)n;
            r->qfirst |= 1ULL << ((unsigned char)qb[0] & 63);
            qb += n + 1;
            n = eq ? stor_s3_pct_decode(qb, eq + 1, plen2 - nlen - 1) : 0;
            if (n < 0)
                return S3E_INVALID_ARGUMENT;
            qb[n] = 0;
            kv->value = qb;
            kv->value_len = (size_t)n;
            qb += n + 1;
        }
        if (amp == NULL)
            break;
        tlen -= plen2 + 1;
        q = amp + 1;
    }
    return S3E_NONE;
}

/* With --domain D, the bucket of a request whose Host is BUCKET.D[:port]
 * (any case): a pointer into the Host value and its length in *@n; NULL
 * for path style (no --domain, no Host, Host D itself or another name such
 * as 127.0.0.1). */
static const char *vhost_bucket(const struct stor_s3_req *r, size_t *n)
{
    const char *h, *colon;
    size_t hn, dn = r->s3 ? r->s3->domain_len : 0;

    if (dn == 0 || (h = stor_s3_hdr(r, "host", &hn)) == NULL)
        return NULL;
    colon = memchr(h, ':', hn);
    if (colon != NULL)
        hn = (size_t)(colon - h);
    if (hn > 0 && h[hn - 1] == '.')
        hn--; /* a fully qualified name's root */
    if (hn < dn + 2 || h[hn - dn - 1] != '.' ||
        strncasecmp(h + hn - dn, r->s3->domain, dn) != 0)
        return NULL;
    *n = hn - dn - 1;
    return h;
}

/* See s3_i.h. */
enum stor_s3_err stor_s3_decode_target(struct stor_s3_req *r)
{
    const char *t = r->http.head.target, *q;
    size_t tlen = r->http.head.target_len, plen, qlen;
    const char *p, *slash, *vb;
    char *blk;
    long n;

    /* absolute-form (RFC 9112 3.2.2, sent through proxies): drop the
     * scheme and authority, keep the path */
    if (tlen > 7 && (strncasecmp(t, "http://", 7) == 0 ||
                     (tlen > 8 && strncasecmp(t, "https://", 8) == 0))) {
        const char *auth = t + (t[4] == ':' ? 7 : 8);
        const char *pathp = memchr(auth, '/', tlen - (size_t)(auth - t));

        if (pathp == NULL)
            return S3E_BAD_REQUEST;
        tlen -= (size_t)(pathp - t);
        t = pathp;
    }
    if (tlen == 0 || t[0] != '/')
        return S3E_BAD_REQUEST;
    q = memchr(t, '?', tlen);
    plen = q ? (size_t)(q - t) : tlen;
    qlen = q ? tlen - plen - 1 : 0;
    /* one block: the decoded path, then the query's strings (each
     * decoding is no longer than its input); it was four allocations */
    blk = malloc(plen + 1 + (q ? 2 * qlen + 2 : 0));
    if (blk == NULL)
        return S3E_INTERNAL;
    n = path_decode(blk, t, plen);
    if (n < 0 || memchr(blk, 0, (size_t)n) != NULL) {
        free(blk);
        return n < 0 ? S3E_BAD_REQUEST : S3E_INVALID_ARGUMENT;
    }
    r->path_len = (size_t)n;
    r->path = blk;
    p = r->path + 1;
    if ((vb = vhost_bucket(r, &plen)) != NULL) {
        /* virtual-hosted style: the bucket is Host's first labels, the
         * whole path the key */
        r->vhost = true;
        slash = r->path;
        p = vb;
    } else {
        /* path-style: /bucket[/key] */
        slash = memchr(p, '/', r->path_len - 1);
        plen = slash ? (size_t)(slash - p) : r->path_len - 1;
    }
    if (plen >= sizeof(r->bucket))
        return S3E_INVALID_BUCKET_NAME;
    memcpy(r->bucket, p, plen);
    r->bucket[plen] = 0;
    if (r->vhost) { /* a host name is any case; a bucket name lowercase */
        size_t i;

        for (i = 0; i < plen; i++)
            r->bucket[i] = (char)tolower((unsigned char)r->bucket[i]);
    }
    if (slash) {
        r->key_len = r->path_len - (size_t)(slash + 1 - r->path);
        r->key = malloc(r->key_len + 1);
        if (r->key == NULL)
            return S3E_INTERNAL;
        memcpy(r->key, slash + 1, r->key_len);
        r->key[r->key_len] = 0;
        r->has_key = r->key_len > 0;
        if (r->key_len > STOR_MAX_KEY_LEN)
            return S3E_KEY_TOO_LONG;
        /* as S3: a key is UTF-8; anything else would be stored and then
         * break every listing that quotes it */
        if (!cm_utf8_valid(r->key, r->key_len))
            return S3E_INVALID_URI;
    }
    if (q == NULL)
        return S3E_NONE;
    return decode_query(r, q + 1, qlen, blk + (q - t) + 1);
}

/* See s3_i.h. */
void stor_s3_target_fini(struct stor_s3_req *r)
{
    free(r->path); /* the query's strings too */
    free(r->key);
    r->path = r->key = NULL;
}

/* Worker: the transport's job of an S3 request. */
static void job_run(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);

    r->run(r);
}

/* Loop: the job came back. */
static void job_done(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);

    r->done(r);
}

/* See s3_i.h. */
void stor_s3_submit(struct stor_s3_req *r, void (*run)(struct stor_s3_req *),
                    void (*done)(struct stor_s3_req *))
{
    r->run = run;
    r->done = done;
    stor_req_submit(&r->http, job_run, job_done);
}

/* common/sigv4.c - AWS Signature Version 4 for both sides of S3.
 *
 * DESIGN: requests are described once (struct cm_sigv4_req, decoded path
 * and query, headers as sent) and every step of the algorithm is a
 * separate function, so the server can recompute exactly what a client
 * signed and tests can compare each intermediate string with the
 * published vectors. Sorting never copies the caller's pairs: we sort an
 * index array (on the stack for up to SORT_STACK entries, else malloc'd)
 * and compare the *encoded* forms lazily, byte by byte, without building
 * them. Header values are trimmed and inner whitespace runs collapsed to
 * one space (botocore's ' '.join(v.split())); duplicate header names are
 * joined with ',' in the order they were given. S3 paths are encoded once
 * and never normalised ("//a/./b" stays as is). */
#include "common/sigv4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/hash.h"
#include "common/timefmt.h"
#include "common/uri.h"

#define SORT_STACK 64
#define SIGV4_TERM "aws4_request"

static const char hex_upper[] = "0123456789ABCDEF";

/* --- encoded-form comparison ------------------------------------------ */

/* Walks the SigV4 encoding of a byte string without materialising it. */
struct enc_it {
    const unsigned char *s;
    size_t n, i;
    int k; /* 0: at a byte, 1: '%' sent, 2: high digit sent */
};

/* True for RFC 3986 unreserved bytes. */
static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
           c == '~';
}

/* Next byte of the encoded form, or -1 at the end. */
static int enc_next(struct enc_it *it)
{
    unsigned char c;

    if (it->i >= it->n)
        return -1;
    c = it->s[it->i];
    if (unreserved(c)) {
        it->i++;
        return c;
    }
    switch (it->k) {
    case 0:
        it->k = 1;
        return '%';
    case 1:
        it->k = 2;
        return hex_upper[c >> 4];
    default:
        it->k = 0;
        it->i++;
        return hex_upper[c & 0xf];
    }
}

/* strcmp of the encoded forms of a and b (shorter prefix sorts first). */
static int enc_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    struct enc_it ia = {(const unsigned char *)a, an, 0, 0};
    struct enc_it ib = {(const unsigned char *)b, bn, 0, 0};
    int ca, cb;

    do {
        ca = enc_next(&ia);
        cb = enc_next(&ib);
    } while (ca == cb && ca >= 0);
    return ca - cb;
}

/* ASCII lowercase of one byte. */
static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Compares two header names case-insensitively (ASCII). */
static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t i, n = CM_MIN(an, bn);

    for (i = 0; i < n; i++) {
        int d =
            (int)lower((unsigned char)a[i]) - (int)lower((unsigned char)b[i]);
        if (d != 0)
            return d;
    }
    return an < bn ? -1 : an > bn;
}

/* --- sorting pairs through an index array ----------------------------- */

/* Two arrays seen as one: index i < na is a[i], else b[i - na]. */
struct kv_view {
    const struct cm_kv *a, *b;
    size_t na, nb;
};

static const struct cm_kv *kv_at(const struct kv_view *v, size_t i)
{
    return i < v->na ? &v->a[i] : &v->b[i - v->na];
}

/* qsort_r order for query params: encoded name, encoded value, position. */
static int query_order(const void *x, const void *y, void *arg)
{
    const struct kv_view *v = arg;
    size_t ix = *(const size_t *)x, iy = *(const size_t *)y;
    const struct cm_kv *p = kv_at(v, ix), *q = kv_at(v, iy);
    int d;

    d = enc_cmp(p->name, p->name_len, q->name, q->name_len);
    if (d == 0)
        d = enc_cmp(p->value, p->value_len, q->value, q->value_len);
    if (d == 0)
        d = ix < iy ? -1 : ix > iy;
    return d;
}

/* qsort_r order for headers: lowercase name, then position (stable, so
 * repeated headers keep their order when joined). */
static int header_order(const void *x, const void *y, void *arg)
{
    const struct kv_view *v = arg;
    size_t ix = *(const size_t *)x, iy = *(const size_t *)y;
    const struct cm_kv *p = kv_at(v, ix), *q = kv_at(v, iy);
    int d = name_cmp(p->name, p->name_len, q->name, q->name_len);

    return d != 0 ? d : (ix < iy ? -1 : ix > iy);
}

/* Fills @idx (stack or heap) with the sorted order of @v's pairs.
 * Returns the index array (== stack when it fits) or NULL on ENOMEM.
 * DESIGN: up to SORT_STACK pairs are insertion-sorted: clients send them
 * in order or nearly so (botocore's presigned query puts SignedHeaders
 * before Expires), so that costs about n comparisons, where qsort_r's
 * merge sort cost ~2 % of a presigned 4 KiB GET's server CPU. Both orders
 * end in the request's position, so every sort gives the same result. */
static size_t *sort_index(const struct kv_view *v, size_t stack[SORT_STACK],
                          int (*order)(const void *, const void *, void *))
{
    size_t i, j, n = v->na + v->nb;
    size_t *idx = stack;

    if (n > SORT_STACK) {
        idx = calloc(n, sizeof(*idx));
        if (idx == NULL)
            return NULL;
    }
    for (i = 0; i < n; i++)
        idx[i] = i;
    if (n > SORT_STACK) {
        qsort_r(idx, n, sizeof(*idx), order, (void *)(uintptr_t)v);
        return idx;
    }
    for (i = 1; i < n; i++) {
        size_t x = idx[i];

        for (j = i; j > 0 && order(&idx[j - 1], &x, (void *)(uintptr_t)v) > 0;
             j--)
            idx[j] = idx[j - 1];
        idx[j] = x;
    }
    return idx;
}

/* Releases what sort_index returned. */
static void sort_free(size_t *idx, size_t stack[SORT_STACK])
{
    if (idx != stack)
        free(idx);
}

/* --- canonical pieces -------------------------------------------------- */

/* Appends the canonical query string of @v (sorted, encoded, "name=value"
 * joined with '&'). */
static int canonical_query(const struct kv_view *v, struct cm_buf *out)
{
    size_t stack[SORT_STACK], *idx, i, n = v->na + v->nb;
    int ret = 0;

    idx = sort_index(v, stack, query_order);
    if (idx == NULL) {
        cm_buf_fini(out);
        return -ENOMEM;
    }
    for (i = 0; i < n && ret == 0; i++) {
        const struct cm_kv *p = kv_at(v, idx[i]);
        if (i > 0)
            ret = cm_buf_appendc(out, '&');
        if (ret == 0)
            ret =
                cm_uri_encode(out, p->name ? p->name : "", p->name_len, false);
        if (ret == 0)
            ret = cm_buf_appendc(out, '=');
        if (ret == 0)
            ret = cm_uri_encode(out, p->value ? p->value : "", p->value_len,
                                false);
    }
    sort_free(idx, stack);
    return ret;
}

/* True for the whitespace botocore's str.split() removes (ASCII part). */
static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
}

/* Appends @s trimmed, with each inner whitespace run replaced by one
 * space. */
static int append_trimmed(struct cm_buf *out, const char *s, size_t n)
{
    size_t i = 0, start;
    bool first = true;
    int ret;

    for (;;) {
        while (i < n && is_ws(s[i]))
            i++;
        if (i >= n)
            return 0;
        start = i;
        while (i < n && !is_ws(s[i]))
            i++;
        if (!first) {
            ret = cm_buf_appendc(out, ' ');
            if (ret < 0)
                return ret;
        }
        first = false;
        ret = cm_buf_append(out, s + start, i - start);
        if (ret < 0)
            return ret;
    }
}

/* Appends @s lowercased. */
static int append_lower(struct cm_buf *out, const char *s, size_t n)
{
    size_t i, start = out->len;
    int ret = cm_buf_append(out, s, n);

    if (ret < 0)
        return ret;
    for (i = start; i < out->len; i++)
        out->data[i] = (char)lower((unsigned char)out->data[i]);
    return 0;
}

/* Appends the canonical headers block (when @lines) or the signed headers
 * list (otherwise) of @r. */
static int headers_block(const struct cm_sigv4_req *r, struct cm_buf *out,
                         bool lines)
{
    struct kv_view v = {r->headers, NULL, r->nheaders, 0};
    size_t stack[SORT_STACK], *idx, i;
    const struct cm_kv *prev = NULL;
    int ret = 0;

    idx = sort_index(&v, stack, header_order);
    if (idx == NULL) {
        cm_buf_fini(out);
        return -ENOMEM;
    }
    for (i = 0; i < r->nheaders && ret == 0; i++) {
        const struct cm_kv *h = kv_at(&v, idx[i]);
        bool same = prev != NULL && name_cmp(prev->name, prev->name_len,
                                             h->name, h->name_len) == 0;
        if (same && lines) {
            ret = cm_buf_appendc(out, ',');
        } else if (!same) {
            if (lines && prev != NULL)
                ret = cm_buf_appendc(out, '\n');
            else if (!lines && prev != NULL)
                ret = cm_buf_appendc(out, ';');
            if (ret == 0)
                ret = append_lower(out, h->name, h->name_len);
            if (ret == 0 && lines)
                ret = cm_buf_appendc(out, ':');
        }
        if (ret == 0 && lines)
            ret = append_trimmed(out, h->value ? h->value : "", h->value_len);
        prev = h;
    }
    if (ret == 0 && lines && prev != NULL)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = cm_buf_reserve(out, 0); /* data non-NULL even when empty */
    sort_free(idx, stack);
    return ret;
}

/* Appends the signed-headers list: sorted, lowercased, deduplicated, ';'. */
int cm_sigv4_signed_headers(const struct cm_sigv4_req *r, struct cm_buf *out)
{
    return headers_block(r, out, false);
}

/* Appends the canonical request built from @r and the extra query params
 * @extra (presigning adds its X-Amz-* params this way). */
static int canonical_request(const struct cm_sigv4_req *r,
                             const struct cm_kv *extra, size_t nextra,
                             const char *payload_hash, struct cm_buf *out)
{
    struct kv_view qv = {r->query, extra, r->query ? r->nquery : 0, nextra};
    int ret;

    ret = cm_buf_appends(out, r->method);
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0) {
        if (r->path == NULL || r->path_len == 0)
            ret = cm_buf_appendc(out, '/');
        else
            ret = cm_uri_encode(out, r->path, r->path_len, true);
    }
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = canonical_query(&qv, out);
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = headers_block(r, out, true);
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = headers_block(r, out, false);
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = cm_buf_appends(out,
                             payload_hash ? payload_hash : CM_SIGV4_UNSIGNED);
    return ret;
}

/* Appends the canonical request of @r (see sigv4.h). */
int cm_sigv4_canonical_request(const struct cm_sigv4_req *r, struct cm_buf *out)
{
    return canonical_request(r, NULL, 0, r->payload_hash, out);
}

/* Appends "YYYYMMDD/region/service/aws4_request"; @amz_date must hold at
 * least 8 characters (-EINVAL otherwise). */
int cm_sigv4_scope(const char *amz_date, const char *region,
                   const char *service, struct cm_buf *out)
{
    if (strnlen(amz_date, 8) < 8) {
        cm_buf_fini(out);
        return -EINVAL;
    }
    /* pieces instead of printf: a server builds one per request */
    {
        int ret = cm_buf_append(out, amz_date, 8);

        if (ret == 0)
            ret = cm_buf_appendc(out, '/');
        if (ret == 0)
            ret = cm_buf_appends(out, region);
        if (ret == 0)
            ret = cm_buf_appendc(out, '/');
        if (ret == 0)
            ret = cm_buf_appends(out, service);
        if (ret == 0)
            ret = cm_buf_appends(out, "/" SIGV4_TERM);
        return ret;
    }
}

/* Appends the string to sign for @canonical. */
int cm_sigv4_string_to_sign(const char *amz_date, const char *scope,
                            const struct cm_buf *canonical, struct cm_buf *out)
{
    char hash[2 * CM_SHA256_LEN + 1];

    int ret;

    cm_sha256_hex(canonical->data ? canonical->data : "", canonical->len, hash);
    ret = cm_buf_appends(out, CM_SIGV4_ALGO "\n");
    if (ret == 0)
        ret = cm_buf_appends(out, amz_date);
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = cm_buf_appends(out, scope);
    if (ret == 0)
        ret = cm_buf_appendc(out, '\n');
    if (ret == 0)
        ret = cm_buf_append(out, hash, 2 * CM_SHA256_LEN);
    return ret;
}

/* The last signing key each thread derived: a client signs every request
 * with the same secret, date, region and service, and so does a server
 * verifying one user, so four HMACs per request become four string
 * compares. Thread-local, so no locking. Inputs too long for the fixed
 * fields are simply not cached. */
struct key_cache {
    bool valid;
    char secret[128];
    char date8[9];
    char region[64];
    char service[32];
    uint8_t key[32];
};
static _Thread_local struct key_cache key_cache;

/* Copies @s into @dst (size @cap) if it fits; false otherwise. */
static bool fits_copy(char *dst, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        return false;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return true;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date8), region), service),
 * "aws4_request"), answered from this thread's cache when the inputs
 * repeat. */
void cm_sigv4_signing_key(const char *secret, const char *date8,
                          const char *region, const char *service,
                          uint8_t key[32])
{
    struct key_cache *kc = &key_cache;
    uint8_t k[CM_SHA256_LEN];
    size_t slen = strlen(secret), dlen = strnlen(date8, 8);
    size_t rlen = strlen(region), svlen = strlen(service);
    char *kdate;
    char stackbuf[256];

    if (kc->valid && strcmp(kc->secret, secret) == 0 &&
        strncmp(kc->date8, date8, 8) == 0 && kc->date8[dlen] == '\0' &&
        strcmp(kc->region, region) == 0 && strcmp(kc->service, service) == 0) {
        memcpy(key, kc->key, 32);
        return;
    }
    /* "AWS4" + secret: secrets are 40 chars; tolerate longer ones. */
    kdate = slen + 5 <= sizeof(stackbuf) ? stackbuf : malloc(slen + 5);
    if (kdate == NULL)
        abort(); /* void contract; a few bytes of heap missing is fatal */
    memcpy(kdate, "AWS4", 4);
    memcpy(kdate + 4, secret, slen);
    cm_hmac_sha256(kdate, slen + 4, date8, dlen, k);
    if (kdate != stackbuf)
        free(kdate);
    cm_hmac_sha256(k, sizeof(k), region, rlen, k);
    cm_hmac_sha256(k, sizeof(k), service, svlen, k);
    cm_hmac_sha256(k, sizeof(k), SIGV4_TERM, strlen(SIGV4_TERM), key);

    kc->valid = fits_copy(kc->secret, sizeof(kc->secret), secret, slen) &&
                fits_copy(kc->date8, sizeof(kc->date8), date8, dlen) &&
                fits_copy(kc->region, sizeof(kc->region), region, rlen) &&
                fits_copy(kc->service, sizeof(kc->service), service, svlen);
    if (kc->valid)
        memcpy(kc->key, key, 32);
}

/* Hex HMAC-SHA256(@key, @sts). */
void cm_sigv4_signature(const uint8_t key[32], const char *sts, size_t sts_len,
                        char out[65])
{
    uint8_t mac[CM_SHA256_LEN];

    cm_hmac_sha256(key, 32, sts, sts_len, mac);
    cm_hex_encode(mac, sizeof(mac), out);
}

/* Computes scope, canonical request, string to sign and signature of @r
 * (with @extra query params) at @amz_date. Fills @scope and @sig. */
static int compute(const struct cm_sigv4_cred *c, const struct cm_sigv4_req *r,
                   const struct cm_kv *extra, size_t nextra,
                   const char *payload_hash, const char *amz_date,
                   struct cm_buf *scope, char sig[65])
{
    struct cm_buf canon, sts;
    uint8_t key[32];
    int ret;

    cm_buf_init(&canon, CM_BUF_NOLIMIT);
    cm_buf_init(&sts, CM_BUF_NOLIMIT);
    ret = canonical_request(r, extra, nextra, payload_hash, &canon);
    if (ret < 0)
        goto out;
    ret = cm_sigv4_string_to_sign(amz_date, scope->data, &canon, &sts);
    if (ret < 0)
        goto out;
    cm_sigv4_signing_key(c->secret_key, amz_date, c->region, c->service, key);
    cm_sigv4_signature(key, sts.data, sts.len, sig);
out:
    cm_buf_fini(&sts);
    cm_buf_fini(&canon);
    return ret;
}

/* Appends the Authorization header value for @r signed at @now. */
int cm_sigv4_sign(const struct cm_sigv4_cred *c, const struct cm_sigv4_req *r,
                  time_t now, struct cm_buf *out)
{
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1], sig[65];
    struct cm_buf scope;
    int ret;

    cm_time_iso_basic(now, amz_date);
    cm_buf_init(&scope, CM_BUF_NOLIMIT);
    ret = cm_sigv4_scope(amz_date, c->region, c->service, &scope);
    if (ret < 0)
        goto out;
    ret = compute(c, r, NULL, 0, r->payload_hash, amz_date, &scope, sig);
    if (ret < 0)
        goto out;
    ret = cm_buf_appendf(out, CM_SIGV4_ALGO " Credential=%s/%s, SignedHeaders=",
                         c->access_key, scope.data);
    if (ret == 0)
        ret = cm_sigv4_signed_headers(r, out);
    if (ret == 0)
        ret = cm_buf_appendf(out, ", Signature=%s", sig);
out:
    cm_buf_fini(&scope);
    if (ret < 0)
        cm_buf_fini(out);
    return ret;
}

/* Builds a cm_kv over NUL-terminated strings. */
static struct cm_kv kv(const char *name, const char *value)
{
    struct cm_kv p = {name, strlen(name), value, strlen(value)};
    return p;
}

/* Appends the presigned query string for @r (see sigv4.h). */
int cm_sigv4_presign(const struct cm_sigv4_cred *c,
                     const struct cm_sigv4_req *r, time_t now, unsigned expires,
                     struct cm_buf *out)
{
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1], sig[65], exp[16];
    struct cm_buf scope, cred, signed_hdrs;
    struct cm_kv extra[5];
    struct kv_view qv;
    int ret;

    if (expires < 1 || expires > CM_SIGV4_MAX_PRESIGN_EXPIRES) {
        cm_buf_fini(out);
        return -EINVAL;
    }
    cm_time_iso_basic(now, amz_date);
    snprintf(exp, sizeof(exp), "%u", expires);
    cm_buf_init(&scope, CM_BUF_NOLIMIT);
    cm_buf_init(&cred, CM_BUF_NOLIMIT);
    cm_buf_init(&signed_hdrs, CM_BUF_NOLIMIT);
    ret = cm_sigv4_scope(amz_date, c->region, c->service, &scope);
    if (ret == 0)
        ret = cm_buf_appendf(&cred, "%s/%s", c->access_key, scope.data);
    if (ret == 0)
        ret = cm_sigv4_signed_headers(r, &signed_hdrs);
    if (ret < 0)
        goto out;
    extra[0] = kv("X-Amz-Algorithm", CM_SIGV4_ALGO);
    extra[1] = kv("X-Amz-Credential", cred.data);
    extra[2] = kv("X-Amz-Date", amz_date);
    extra[3] = kv("X-Amz-Expires", exp);
    extra[4] = kv("X-Amz-SignedHeaders", signed_hdrs.data);
    ret = compute(c, r, extra, 5, CM_SIGV4_UNSIGNED, amz_date, &scope, sig);
    if (ret < 0)
        goto out;
    qv.a = r->query;
    qv.na = r->query ? r->nquery : 0;
    qv.b = extra;
    qv.nb = 5;
    ret = canonical_query(&qv, out);
    if (ret == 0)
        ret = cm_buf_appendf(out, "&X-Amz-Signature=%s", sig);
out:
    cm_buf_fini(&signed_hdrs);
    cm_buf_fini(&cred);
    cm_buf_fini(&scope);
    if (ret < 0)
        cm_buf_fini(out);
    return ret;
}

/* --- server side parsing ----------------------------------------------- */

/* True when s[0..n) is exactly @lit. */
static bool eq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* Parses "AK/YYYYMMDD/region/service/aws4_request". The access key is
 * everything before the last four '/'-separated fields, so it may not be
 * empty but is otherwise taken as is. 0 or -EINVAL. */
int cm_sigv4_parse_credential(const char *s, size_t n, struct cm_sigv4_auth *a)
{
    size_t slash[4], i, k = 0;

    if (s == NULL)
        return -EINVAL;
    for (i = n; i > 0 && k < 4; i--)
        if (s[i - 1] == '/')
            slash[k++] = i - 1; /* slash[0] is the last one */
    if (k < 4)
        return -EINVAL;
    /* s = AK / date / region / service / term */
    if (!eq(s + slash[0] + 1, n - slash[0] - 1, SIGV4_TERM))
        return -EINVAL;
    if (slash[3] == 0 || slash[2] - slash[3] - 1 != 8 ||
        slash[1] - slash[2] - 1 == 0 || slash[0] - slash[1] - 1 == 0)
        return -EINVAL;
    for (i = slash[3] + 1; i < slash[2]; i++)
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
    a->access_key = s;
    a->access_key_len = slash[3];
    a->date8 = s + slash[3] + 1;
    a->region = s + slash[2] + 1;
    a->region_len = slash[1] - slash[2] - 1;
    a->service = s + slash[1] + 1;
    a->service_len = slash[0] - slash[1] - 1;
    return 0;
}

/* True for a character allowed in a SignedHeaders list: lowercase header
 * name characters (RFC 9110 tchar, lowercased) and ';'. */
static bool signed_hdr_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == ';' || c == '_' || c == '.' || c == '!' || c == '#' ||
           c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
           c == '+' || c == '^' || c == '`' || c == '|' || c == '~';
}

/* Parses an Authorization header value (see sigv4.h). The three
 * components may come in any order, each exactly once, separated by ','
 * with optional spaces. SignedHeaders must be a non-empty ';' list with no
 * empty names; Signature must be 64 lowercase hex digits. */
int cm_sigv4_parse_authorization(const char *s, size_t n,
                                 struct cm_sigv4_auth *a)
{
    static const size_t alen = sizeof(CM_SIGV4_ALGO) - 1;
    bool have_cred = false, have_sh = false, have_sig = false;
    size_t i, end, eqpos;

    if (s == NULL || n <= alen || memcmp(s, CM_SIGV4_ALGO, alen) != 0 ||
        s[alen] != ' ')
        return -EINVAL;
    memset(a, 0, sizeof(*a));
    i = alen;
    while (i < n) {
        const char *val;
        size_t vlen, k;

        while (i < n && s[i] == ' ')
            i++;
        if (i >= n)
            break;
        for (end = i; end < n && s[end] != ','; end++)
            ;
        for (eqpos = i; eqpos < end && s[eqpos] != '='; eqpos++)
            ;
        if (eqpos >= end)
            return -EINVAL;
        val = s + eqpos + 1;
        vlen = end - eqpos - 1;
        while (vlen > 0 && val[vlen - 1] == ' ')
            vlen--;
        if (eq(s + i, eqpos - i, "Credential")) {
            if (have_cred || cm_sigv4_parse_credential(val, vlen, a) < 0)
                return -EINVAL;
            have_cred = true;
        } else if (eq(s + i, eqpos - i, "SignedHeaders")) {
            if (have_sh || vlen == 0 || val[0] == ';' || val[vlen - 1] == ';')
                return -EINVAL;
            for (k = 0; k < vlen; k++)
                if (!signed_hdr_char(val[k]) ||
                    (val[k] == ';' && val[k + 1] == ';'))
                    return -EINVAL;
            a->signed_headers = val;
            a->signed_headers_len = vlen;
            have_sh = true;
        } else if (eq(s + i, eqpos - i, "Signature")) {
            if (have_sig || vlen != 64)
                return -EINVAL;
            for (k = 0; k < vlen; k++)
                if (!((val[k] >= '0' && val[k] <= '9') ||
                      (val[k] >= 'a' && val[k] <= 'f')))
                    return -EINVAL;
            a->signature = val;
            have_sig = true;
        } else {
            return -EINVAL;
        }
        i = end < n ? end + 1 : end;
        if (end < n && i >= n)
            return -EINVAL; /* trailing comma */
    }
    return have_cred && have_sh && have_sig ? 0 : -EINVAL;
}

/* Compares @n bytes of @a and @b in time independent of their contents. */
bool cm_sigv4_equal(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    size_t i;

    /* no early exit; the empty asm keeps the compiler from adding one
     * (a volatile accumulator cost a load and a store per byte: 1 % of a
     * presigned 4 KiB GET) */
    for (i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    __asm__ volatile("" : "+r"(d));
    return d == 0;
}

/* HMAC of a '\n'-joined list of strings under @key, as hex. Uses a stack
 * buffer; the inputs here are bounded (dates, scopes, hex digests) and an
 * oversized scope falls back to the heap. */
static void sign_lines(const uint8_t key[32], const char *const *parts,
                       size_t nparts, char out[65])
{
    char stackbuf[512], *buf = stackbuf;
    size_t i, len = 0, total = 0;

    for (i = 0; i < nparts; i++)
        total += strlen(parts[i]) + 1;
    if (total > sizeof(stackbuf)) {
        buf = malloc(total);
        if (buf == NULL)
            abort(); /* void contract; see cm_sigv4_signing_key */
    }
    for (i = 0; i < nparts; i++) {
        size_t l = strlen(parts[i]);
        if (i > 0)
            buf[len++] = '\n';
        memcpy(buf + len, parts[i], l);
        len += l;
    }
    cm_sigv4_signature(key, buf, len, out);
    if (buf != stackbuf)
        free(buf);
}

/* Signature of one aws-chunked chunk (see sigv4.h). */
void cm_sigv4_chunk_signature(const uint8_t key[32], const char *amz_date,
                              const char *scope, const char *prev_sig,
                              const char *chunk_sha256_hex, char out[65])
{
    const char *parts[] = {
        CM_SIGV4_ALGO "-PAYLOAD", amz_date,        scope, prev_sig,
        CM_SIGV4_EMPTY_SHA256,    chunk_sha256_hex};

    sign_lines(key, parts, CM_ARRAY_SIZE(parts), out);
}

/* Signature of the aws-chunked trailer block (see sigv4.h). */
void cm_sigv4_trailer_signature(const uint8_t key[32], const char *amz_date,
                                const char *scope, const char *prev_sig,
                                const char *trailer_sha256_hex, char out[65])
{
    const char *parts[] = {CM_SIGV4_ALGO "-TRAILER", amz_date, scope, prev_sig,
                           trailer_sha256_hex};

    sign_lines(key, parts, CM_ARRAY_SIZE(parts), out);
}

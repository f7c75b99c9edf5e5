/* storaged/s3/auth.c - SigV4 and SigV2 verification on the server side.
 *
 * DESIGN: the request is described to common/sigv4 exactly as the client
 * described it when signing (decoded path, decoded query, the headers named
 * in SignedHeaders), and the signature recomputed; comparison is constant
 * time. The region is the one the client put in its credential scope (S3
 * clients disagree about what to send to a single-region server: "us-east-1",
 * "US", "other-v2-signature"...), the service must be "s3". The signing key
 * and scope are kept in the request so that aws-chunked chunk signatures,
 * which chain from the header signature, can be verified as they arrive.
 *
 * SigV2 (common/sigv2.h) is verified beside it and ends in the same
 * identity (stor_auth_secret: root or r->iam_user), so authorisation never
 * knows which signature a request carried. Its body is unsigned (as a
 * presigned SigV4 URL's: Content-MD5, or a hex x-amz-content-sha256 if
 * sent, is still checked against it). The header form obeys the same
 * 15-minute skew as SigV4, taken from x-amz-date or else Date. */
#include "storaged/s3/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/codec.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/sigv2.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/s3_i.h"

#define MAX_SIGNED_HEADERS 64

/* Collects the request headers named in @list (';'-separated, lowercase)
 * into @out. Returns the count, or -1 when a named header is absent (the
 * client signed something we did not receive) or there are too many. */
static int signed_headers(const struct stor_s3_req *r, const char *list,
                          size_t len, struct cm_kv *out, size_t cap)
{
    size_t n = 0, i;
    const char *p = list, *end = list + len;

    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        size_t nl = semi ? (size_t)(semi - p) : (size_t)(end - p);
        bool found = false;

        for (i = 0; i < r->http.head.nhdrs; i++) {
            const struct stor_http_hdr *h = &r->http.hdrs[i];

            if (nl > 0 && h->name_len == nl &&
                strncasecmp(h->name, p, nl) == 0) {
                if (n >= cap)
                    return -1;
                out[n].name = h->name;
                out[n].name_len = h->name_len;
                out[n].value = h->value;
                out[n].value_len = h->value_len;
                n++;
                found = true;
            }
        }
        if (!found)
            return -1;
        p += nl + 1;
    }
    return (int)n;
}

/* The signing key for (@date8, @region) under @secret, into @key, and the
 * same key prepared for HMAC (cm_hmac_sha256_pre). DESIGN: it changes
 * once a day, so each loop thread keeps the last one it derived
 * (thread-local: no lock) and skips four HMACs per request, and two more
 * SHA-256 blocks of the signature's HMAC. */
static const struct cm_hmac_sha256_key *signing_key(const char *secret,
                                                    const char *date8,
                                                    const char *region,
                                                    uint8_t key[32])
{
    static __thread char c_date[9], c_region[64], c_secret[128];
    static __thread uint8_t c_key[32];
    static __thread struct cm_hmac_sha256_key c_hmac;

    /* compared by content: users' secrets live in snapshots that come
     * and go, so an address may be reused for another secret */
    if (strcmp(c_secret, secret) != 0 || strcmp(c_date, date8) != 0 ||
        strcmp(c_region, region) != 0) {
        cm_sigv4_signing_key(secret, date8, region, "s3", c_key);
        cm_hmac_sha256_key_init(&c_hmac, c_key, sizeof(c_key));
        snprintf(c_date, sizeof(c_date), "%s", date8);
        snprintf(c_region, sizeof(c_region), "%s", region);
        snprintf(c_secret, sizeof(c_secret), "%s", secret);
    }
    memcpy(key, c_key, 32);
    return &c_hmac;
}

/* The method @r was signed with, or NULL for one S3 has no use for. */
static const char *method_name(const struct stor_s3_req *r)
{
    return r->http.is_get      ? "GET"
           : r->http.is_head   ? "HEAD"
           : r->http.is_put    ? "PUT"
           : r->http.is_post   ? "POST"
           : r->http.is_delete ? "DELETE"
                               : NULL;
}

/* This thread's three scratch buffers (canonical request, string to sign,
 * scope), reused across requests: SigV4 runs on every request and malloc
 * showed in profiles. DESIGN: they hang off a pthread key whose destructor
 * frees them when the thread exits (as store/drive.c does with its rings),
 * so no thread has to remember to clean up after auth. */
struct auth_scratch {
    struct cm_buf b[3];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

/* Key destructor: the exiting thread's scratch buffers. */
static void scratch_free(void *p)
{
    struct auth_scratch *sc = p;
    int i;

    for (i = 0; i < 3; i++)
        cm_buf_fini(&sc->b[i]);
    free(sc);
}

static void scratch_key_init(void)
{
    if (pthread_key_create(&scratch_key, scratch_free) != 0)
        abort(); /* only with the process out of keys: a bug */
}

/* This thread's scratch buffers, emptied; NULL on ENOMEM. */
static struct cm_buf *scratch(void)
{
    struct auth_scratch *sc;
    int i;

    pthread_once(&scratch_once, scratch_key_init);
    sc = pthread_getspecific(scratch_key);
    if (sc == NULL) {
        sc = malloc(sizeof(*sc));
        if (sc == NULL)
            return NULL;
        for (i = 0; i < 3; i++)
            cm_buf_init(&sc->b[i], CM_BUF_NOLIMIT);
        if (pthread_setspecific(scratch_key, sc) != 0) {
            free(sc);
            return NULL;
        }
    }
    for (i = 0; i < 3; i++)
        cm_buf_reset(&sc->b[i]);
    return sc->b;
}

/* See header. */
enum stor_s3_err stor_auth_secret(struct stor_s3_req *r, const char *ak,
                                  size_t n, const char **secret)
{
    stor_iam_snap_unref(r->iam_snap);
    r->iam_snap = NULL;
    r->iam_user = NULL;
    if (n == strlen(r->s3->root_user) && memcmp(ak, r->s3->root_user, n) == 0) {
        *secret = r->s3->root_secret;
        return S3E_NONE;
    }
    /* a user kept in the store (iam.h); the snapshot reference is the
     * request's until req_fini */
    r->iam_user = stor_iam_user_lookup(r->s3->iam, ak, n, &r->iam_snap);
    if (r->iam_user == NULL)
        return stor_iam_ready(r->s3->iam) ? S3E_INVALID_ACCESS_KEY
                                          : S3E_INDEX_REBUILDING;
    *secret = stor_iam_user_secret(r->iam_user);
    /* empty: its secret could not be decrypted */
    return (*secret)[0] ? S3E_NONE : S3E_ACCESS_DENIED;
}

/* snprintf(dst, cap, "%s", src) without the printf machinery (two of
 * them per request showed in the 4 KiB GET profile). */
static void copy_trunc(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);

    memcpy(dst, src, n);
    dst[n] = 0;
}

/* Computes the expected signature of @r and compares it with @a's. Fills
 * the request's signing state. */
static enum stor_s3_err verify(struct stor_s3_req *r,
                               const struct cm_sigv4_auth *a,
                               const char *amz_date, const char *payload_hash,
                               bool presigned)
{
    struct cm_kv hdrs[MAX_SIGNED_HEADERS];
    struct cm_kv q[STOR_MAX_QUERY];
    struct cm_sigv4_req sr = {0};
    /* Scratch buffers reused by this thread's requests (cleared, not
     * freed): SigV4 runs on every request and malloc showed in profiles. */
    struct cm_buf *bufs = scratch();
    struct cm_buf canon, sts, scope;
    char region[64], sig[65], date8[9];
    size_t i, nq = 0;
    int nh, ret;
    enum stor_s3_err e = S3E_NONE;
    const char *secret;

    if (bufs == NULL)
        return S3E_INTERNAL;
    canon = bufs[0];
    sts = bufs[1];
    scope = bufs[2];
    e = stor_auth_secret(r, a->access_key, a->access_key_len, &secret);
    if (e != S3E_NONE)
        return e;
    if (a->service_len != 2 || memcmp(a->service, "s3", 2) != 0 ||
        a->region_len >= sizeof(region))
        return presigned ? S3E_AUTH_QUERY_INVALID : S3E_INVALID_ARGUMENT;
    if (memcmp(a->date8, amz_date, 8) != 0)
        return S3E_SIGNATURE_MISMATCH;
    memcpy(region, a->region, a->region_len);
    region[a->region_len] = 0;
    memcpy(date8, amz_date, 8);
    date8[8] = 0;
    nh = signed_headers(r, a->signed_headers, a->signed_headers_len, hdrs,
                        MAX_SIGNED_HEADERS);
    if (nh < 0)
        return S3E_SIGNATURE_MISMATCH;
    for (i = 0; i < r->nquery; i++) {
        if (presigned && strcmp(r->query[i].name, "X-Amz-Signature") == 0)
            continue;
        q[nq++] = r->query[i];
    }
    sr.method = method_name(r);
    if (sr.method == NULL)
        return S3E_METHOD_NOT_ALLOWED;
    sr.path = r->path;
    sr.path_len = r->path_len;
    sr.query = q;
    sr.nquery = nq;
    sr.headers = hdrs;
    sr.nheaders = (size_t)nh;
    sr.payload_hash = payload_hash;
    cm_buf_reset(&canon);
    cm_buf_reset(&sts);
    cm_buf_reset(&scope);
    ret = cm_sigv4_canonical_request(&sr, &canon);
    if (ret == 0)
        ret = cm_sigv4_scope(amz_date, region, "s3", &scope);
    if (ret == 0)
        ret = cm_sigv4_string_to_sign(amz_date, scope.data, &canon, &sts);
    if (ret < 0) {
        e = S3E_INTERNAL;
        goto out;
    }
    {
        uint8_t mac[CM_SHA256_LEN];

        /* cm_sigv4_signature(r->sign_key, sts), on the prepared key */
        cm_hmac_sha256_pre(signing_key(secret, date8, region, r->sign_key),
                           sts.data, sts.len, mac);
        cm_hex_encode(mac, sizeof(mac), sig);
    }
    if (!cm_sigv4_equal(sig, a->signature, 64)) {
        cm_log(CM_LOG_DEBUG, 0,
               "req=%016llX signature mismatch; canonical:\n%s",
               (unsigned long long)r->http.id, canon.data);
        e = S3E_SIGNATURE_MISMATCH;
        goto out;
    }
    if (r->iam_user && !stor_iam_user_enabled(r->iam_user)) {
        e = S3E_ACCESS_DENIED; /* disabled: refused once it is proven */
        goto out;
    }
    memcpy(r->prev_sig, sig, 65);
    copy_trunc(r->amz_date, sizeof(r->amz_date), amz_date);
    copy_trunc(r->scope, sizeof(r->scope), scope.data);
out:
    if (canon.cap > 64 * 1024)
        cm_buf_fini(&canon); /* do not keep a huge request's buffer */
    bufs[0] = canon;
    bufs[1] = sts;
    bufs[2] = scope;
    return e;
}

/* Sets r->payload from the x-amz-content-sha256 value. */
static enum stor_s3_err payload_mode(struct stor_s3_req *r, const char *v,
                                     size_t n)
{
    size_t i;

    if (stor_http_ieq(v, n, CM_SIGV4_UNSIGNED) &&
        n == strlen(CM_SIGV4_UNSIGNED)) {
        r->payload = STOR_PAYLOAD_UNSIGNED;
    } else if (n == strlen(CM_SIGV4_STREAMING) &&
               memcmp(v, CM_SIGV4_STREAMING, n) == 0) {
        r->payload = STOR_PAYLOAD_STREAMING;
    } else if (n == strlen(CM_SIGV4_STREAMING_TRAILER) &&
               memcmp(v, CM_SIGV4_STREAMING_TRAILER, n) == 0) {
        r->payload = STOR_PAYLOAD_STREAMING_TRAILER;
    } else if (n == strlen(CM_SIGV4_STREAMING_UNSIGNED_TRAILER) &&
               memcmp(v, CM_SIGV4_STREAMING_UNSIGNED_TRAILER, n) == 0) {
        r->payload = STOR_PAYLOAD_UNSIGNED_TRAILER;
    } else if (n == 64) {
        for (i = 0; i < 64; i++)
            if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
                return S3E_INVALID_ARGUMENT;
        r->payload = STOR_PAYLOAD_SHA256;
        memcpy(r->payload_sha256, v, 64);
        r->payload_sha256[64] = 0;
    } else {
        return S3E_INVALID_ARGUMENT;
    }
    return S3E_NONE;
}

/* A request date from a Date header (SigV2, or SigV4 without
 * x-amz-date) or SigV2's x-amz-date: an HTTP-date (IMF-fixdate, RFC 850,
 * asctime), the
 * "+0000"-style numeric zone AWS's own examples use, or ISO 8601 basic.
 * Before 1970 counts as invalid. 0 and *t, or -EINVAL. */
static int req_date(const char *s, size_t n, time_t now, time_t *t)
{
    char imf[CM_TIME_HTTP_LEN + 1];

    if (cm_time_parse_http_any(s, n, now, t) == 0 ||
        (n == CM_TIME_ISO_BASIC_LEN && cm_time_parse_iso_basic(s, n, t) == 0))
        return *t < 0 ? -EINVAL : 0;
    /* "Tue, 27 Mar 2007 19:36:42 +0000" (+HHMM or -HHMM) */
    if (n == CM_TIME_HTTP_LEN + 2 && s[25] == ' ' &&
        (s[26] == '+' || s[26] == '-')) {
        int hh, mm, i;
        long off;

        for (i = 27; i < 31; i++)
            if (s[i] < '0' || s[i] > '9')
                return -EINVAL;
        hh = (s[27] - '0') * 10 + (s[28] - '0');
        mm = (s[29] - '0') * 10 + (s[30] - '0');
        if (hh > 23 || mm > 59)
            return -EINVAL;
        memcpy(imf, s, 26);
        memcpy(imf + 26, "GMT", 4);
        if (cm_time_parse_http(imf, CM_TIME_HTTP_LEN, t) < 0)
            return -EINVAL;
        off = (hh * 60L + mm) * 60L;
        *t += s[26] == '+' ? -off : off;
        return *t < 0 ? -EINVAL : 0;
    }
    return -EINVAL;
}

/* Header-based SigV4. */
static enum stor_s3_err check_header(struct stor_s3_req *r, const char *auth,
                                     size_t alen, time_t now)
{
    struct cm_sigv4_auth a;
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1];
    const char *v;
    size_t n;
    time_t t;
    enum stor_s3_err e;

    if (cm_sigv4_parse_authorization(auth, alen, &a) < 0)
        return S3E_ACCESS_DENIED;
    v = stor_s3_hdr(r, "x-amz-date", &n);
    if (v != NULL) {
        if (n != CM_TIME_ISO_BASIC_LEN || cm_time_parse_iso_basic(v, n, &t) < 0)
            return S3E_ACCESS_DENIED;
        memcpy(amz_date, v, n);
        amz_date[n] = 0;
    } else {
        /* without x-amz-date the Date header is the request time, as AWS
         * takes it; the string to sign holds it in ISO basic form
         * (botocore's own signer sends Date, "... -0000", when the
         * request already has one) */
        v = stor_s3_hdr(r, "date", &n);
        if (v == NULL || req_date(v, n, now, &t) < 0)
            return S3E_ACCESS_DENIED;
        cm_time_iso_basic(t, amz_date);
    }
    if (t > now + CM_SIGV4_SKEW_SECONDS || t < now - CM_SIGV4_SKEW_SECONDS)
        return S3E_SKEWED;
    v = stor_s3_hdr(r, "x-amz-content-sha256", &n);
    if (v == NULL) {
        /* S3 requires it with header auth. */
        return S3E_INVALID_REQUEST;
    }
    e = payload_mode(r, v, n);
    if (e != S3E_NONE)
        return e;
    {
        char ph[80];

        memcpy(ph, v, n);
        ph[n] = 0;
        e = verify(r, &a, amz_date, ph, false);
    }
    return e;
}

/* The query parameters the auth check looks at, found in one pass over
 * the query (a presigned GET has about six; scanning the list once per
 * name showed in the 4 KiB GET profile). Each borrows from the request. */
struct auth_query {
    const char *alg, *cred, *date, *exp, *sh, *sig, *ph;
    bool sigv2; /* AWSAccessKeyId or Signature: a SigV2 query string */
};

/* Fills @q from @r's query; a repeated name keeps its first value, as
 * stor_s3_query does. */
static void auth_query_scan(const struct stor_s3_req *r, struct auth_query *q)
{
    static const char amz[] = "X-Amz-";
    size_t i;

    memset(q, 0, sizeof(*q));
    for (i = 0; i < r->nquery; i++) {
        const char *n = r->query[i].name, *v = r->query[i].value;
        const char **slot = NULL;

        if (strncmp(n, amz, sizeof(amz) - 1) != 0) {
            if (strcmp(n, "AWSAccessKeyId") == 0 || strcmp(n, "Signature") == 0)
                q->sigv2 = true;
            continue;
        }
        n += sizeof(amz) - 1;
        if (strcmp(n, "Algorithm") == 0)
            slot = &q->alg;
        else if (strcmp(n, "Credential") == 0)
            slot = &q->cred;
        else if (strcmp(n, "Date") == 0)
            slot = &q->date;
        else if (strcmp(n, "Expires") == 0)
            slot = &q->exp;
        else if (strcmp(n, "SignedHeaders") == 0)
            slot = &q->sh;
        else if (strcmp(n, "Signature") == 0)
            slot = &q->sig;
        else if (strcmp(n, "Content-Sha256") == 0)
            slot = &q->ph;
        if (slot && *slot == NULL)
            *slot = v;
    }
}

/* Presigned query SigV4; @q is auth_query_scan's view of @r's query. */
static enum stor_s3_err check_presigned(struct stor_s3_req *r,
                                        const struct auth_query *q, time_t now)
{
    const char *alg = q->alg, *cred = q->cred, *date = q->date;
    const char *exp = q->exp, *sh = q->sh, *sig = q->sig, *ph = q->ph;
    char phb[80];
    struct cm_sigv4_auth a;
    uint64_t expires;
    time_t t;
    size_t i;

    if (alg == NULL || strcmp(alg, CM_SIGV4_ALGO) != 0 || cred == NULL ||
        date == NULL || exp == NULL || sh == NULL || sig == NULL)
        return S3E_AUTH_QUERY_INVALID;
    memset(&a, 0, sizeof(a));
    if (cm_sigv4_parse_credential(cred, strlen(cred), &a) < 0)
        return S3E_AUTH_QUERY_INVALID;
    if (strlen(date) != CM_TIME_ISO_BASIC_LEN ||
        cm_time_parse_iso_basic(date, strlen(date), &t) < 0)
        return S3E_AUTH_QUERY_INVALID;
    /* a negative or over-a-week X-Amz-Expires is malformed (400
     * AuthorizationQueryParametersError, as AWS); 0 is a URL that expired
     * when it was made (403 below, once the signature is checked) */
    if (stor_http_parse_u64(exp, strlen(exp), &expires) < 0 ||
        expires > CM_SIGV4_MAX_PRESIGN_EXPIRES)
        return S3E_AUTH_QUERY_INVALID;
    if (strlen(sig) != 64)
        return S3E_SIGNATURE_MISMATCH;
    for (i = 0; i < 64; i++)
        if (!((sig[i] >= '0' && sig[i] <= '9') ||
              (sig[i] >= 'a' && sig[i] <= 'f')))
            return S3E_SIGNATURE_MISMATCH;
    a.signed_headers = sh;
    a.signed_headers_len = strlen(sh);
    a.signature = sig;
    if (t > now + CM_SIGV4_SKEW_SECONDS)
        return S3E_ACCESS_DENIED; /* not valid yet */
    r->presigned = true;
    r->payload = STOR_PAYLOAD_UNSIGNED;
    if (ph == NULL) {
        /* the payload hash a presigning client used: the query's
         * X-Amz-Content-Sha256, else an x-amz-content-sha256 header, else
         * UNSIGNED-PAYLOAD; a hex digest is then checked against the body
         * (XAmzContentSHA256Mismatch), as with header auth */
        size_t n = 0;
        const char *v = stor_s3_hdr(r, "x-amz-content-sha256", &n);

        if (v && n < sizeof(phb)) {
            memcpy(phb, v, n);
            phb[n] = 0;
            ph = phb;
        } else if (v) {
            return S3E_INVALID_ARGUMENT;
        }
    }
    if (ph) {
        enum stor_s3_err e = payload_mode(r, ph, strlen(ph));

        if (e != S3E_NONE)
            return e;
        if (r->payload != STOR_PAYLOAD_UNSIGNED &&
            r->payload != STOR_PAYLOAD_SHA256)
            return S3E_INVALID_ARGUMENT; /* no aws-chunked in a URL */
    }
    {
        enum stor_s3_err e =
            verify(r, &a, date, ph ? ph : CM_SIGV4_UNSIGNED, true);

        if (e != S3E_NONE)
            return e;
    }
    if (expires == 0 || (uint64_t)now > (uint64_t)t + expires)
        return S3E_EXPIRED_PRESIGN;
    return S3E_NONE;
}

/* ---- SigV2 ---- */

/* The path of the request target as sent (still percent-encoded): what a
 * SigV2 client signs. An absolute-form target loses its scheme and
 * authority, as stor_s3_decode_target does. */
static const char *raw_path(const struct stor_s3_req *r, size_t *n,
                            const char **query, size_t *qlen)
{
    const char *t = r->http.head.target, *q;
    size_t tlen = r->http.head.target_len;

    if (tlen > 7 && (strncasecmp(t, "http://", 7) == 0 ||
                     (tlen > 8 && strncasecmp(t, "https://", 8) == 0))) {
        const char *a = t + (t[4] == ':' ? 7 : 8);
        const char *p = memchr(a, '/', tlen - (size_t)(a - t));

        if (p != NULL) { /* decode_target refused it otherwise */
            tlen -= (size_t)(p - t);
            t = p;
        }
    }
    q = memchr(t, '?', tlen);
    *n = q ? (size_t)(q - t) : tlen;
    *query = q ? q + 1 : NULL;
    *qlen = q ? tlen - *n - 1 : 0;
    return t;
}

/* The x-amz-* headers of @r into @out (at most @cap); -1 past @cap. */
static int v2_amz_headers(const struct stor_s3_req *r, struct cm_kv *out,
                          size_t cap)
{
    size_t i, n = 0;

    for (i = 0; i < r->http.head.nhdrs; i++) {
        const struct stor_http_hdr *h = &r->http.hdrs[i];

        if (h->name_len < 6 || strncasecmp(h->name, "x-amz-", 6) != 0)
            continue;
        if (n == cap)
            return -1;
        out[n].name = h->name;
        out[n].name_len = h->name_len;
        out[n].value = h->value;
        out[n].value_len = h->value_len;
        n++;
    }
    return (int)n;
}

/* Verifies SigV2 signature @sig (@sig_len bytes of base64) by access key
 * @ak over @r, with @date as the string to sign's Date line (the Date
 * header, "" or Expires). Sets who signed. */
static enum stor_s3_err v2_verify(struct stor_s3_req *r, const char *ak,
                                  size_t ak_len, const char *sig,
                                  size_t sig_len, const char *date,
                                  size_t date_len)
{
    struct cm_kv amz[CM_SIGV2_MAX_AMZ];
    struct cm_sigv2_req sr = {0};
    struct cm_buf *bufs = scratch(), sts;
    char want[CM_SIGV2_SIG_LEN + 1];
    const char *secret, *q;
    size_t qn, lead_len = 0;
    int na, ret, pass;
    bool extra = false, ok = false, slash;
    enum stor_s3_err e;

    if (bufs == NULL)
        return S3E_INTERNAL;
    e = stor_auth_secret(r, ak, ak_len, &secret);
    if (e != S3E_NONE)
        return e;
    na = v2_amz_headers(r, amz, CM_SIGV2_MAX_AMZ);
    if (na < 0)
        return S3E_SIGNATURE_MISMATCH;
    sr.method = method_name(r);
    if (sr.method == NULL)
        return S3E_METHOD_NOT_ALLOWED;
    sr.content_md5 = stor_s3_hdr(r, "content-md5", &sr.content_md5_len);
    sr.content_type = stor_s3_hdr(r, "content-type", &sr.content_type_len);
    if (sr.content_type == NULL && r->presigned) {
        /* botocore's presigner moves a signed Content-Type into the URL */
        sr.content_type = stor_s3_query(r, "content-type");
        sr.content_type_len = sr.content_type ? strlen(sr.content_type) : 0;
    }
    sr.date = date;
    sr.date_len = date_len;
    sr.amz = amz;
    sr.namz = (size_t)na;
    sr.bucket = r->vhost ? r->bucket : NULL;
    sr.path = raw_path(r, &sr.path_len, &sr.query, &sr.query_len);
    for (q = sr.query, qn = sr.query_len; q && qn > 0;) {
        const char *amp = memchr(q, '&', qn);
        size_t len = amp ? (size_t)(amp - q) : qn;
        const char *eq = memchr(q, '=', len);

        if (cm_sigv2_subresource(q, eq ? (size_t)(eq - q) : len) ==
            CM_SIGV2_SUB_EXTRA)
            extra = true;
        if (amp == NULL)
            break;
        qn -= len + 1;
        q = amp + 1;
    }
    /* a path-style request to a bucket ("/b"): AWS signs "/b", botocore
     * "/b/" */
    slash = !r->vhost && !r->has_key && sr.path_len > 1 &&
            sr.path[sr.path_len - 1] != '/';
    /* botocore 1.29's literal template query (cm_sigv2_req.lead): the
     * first parameter ("select&select-type=2": the first two) */
    if (sr.query && sr.query_len > 0) {
        const char *amp = memchr(sr.query, '&', sr.query_len);

        lead_len = amp ? (size_t)(amp - sr.query) : sr.query_len;
        if (lead_len == 6 && memcmp(sr.query, "select", 6) == 0 && amp) {
            amp = memchr(amp + 1, '&', sr.query_len - lead_len - 1);
            lead_len = amp ? (size_t)(amp - sr.query) : sr.query_len;
        }
    }
    sts = bufs[1];
    /* AWS's form first, then what clients are known to sign instead: the
     * bucket's slash, the sub-resources only some clients sign
     * (CM_SIGV2_SUB_EXTRA, only when the query has one), botocore 1.29's
     * template query. Only a request that fails costs more than one HMAC. */
    for (pass = 0; pass < 8 && !ok; pass++) {
        if (((pass & 1) && !slash) || ((pass & 2) && !extra) ||
            ((pass & 4) && lead_len == 0))
            continue;
        sr.path_slash = pass & 1;
        sr.subres = CM_SIGV2_SUB_BASE | (pass & 2 ? CM_SIGV2_SUB_EXTRA : 0);
        sr.lead = pass & 4 ? sr.query : NULL;
        sr.lead_len = pass & 4 ? lead_len : 0;
        cm_buf_reset(&sts);
        ret = cm_sigv2_string_to_sign(&sr, &sts);
        if (ret == -ENOMEM) {
            e = S3E_INTERNAL;
            goto out;
        }
        if (ret < 0) {
            e = S3E_SIGNATURE_MISMATCH;
            goto out;
        }
        cm_sigv2_signature(secret, sts.data, sts.len, want);
        ok = cm_sigv2_equal(want, sig, sig_len);
    }
    if (!ok) {
        cm_log(CM_LOG_DEBUG, 0,
               "req=%016llX SigV2 signature mismatch; string to sign:\n%s",
               (unsigned long long)r->http.id, sts.data ? sts.data : "");
        e = S3E_SIGNATURE_MISMATCH;
        goto out;
    }
    if (r->iam_user && !stor_iam_user_enabled(r->iam_user))
        e = S3E_ACCESS_DENIED; /* disabled: refused once it is proven */
out:
    if (sts.cap > 64 * 1024)
        cm_buf_fini(&sts);
    bufs[1] = sts;
    return e;
}

/* The body of a SigV2 request is unsigned; a hex x-amz-content-sha256 is
 * still checked against it, and aws-chunked only without signed chunks
 * (their chain needs a SigV4 key). */
static enum stor_s3_err v2_payload(struct stor_s3_req *r)
{
    size_t n;
    const char *v = stor_s3_hdr(r, "x-amz-content-sha256", &n);
    enum stor_s3_err e;

    r->payload = STOR_PAYLOAD_UNSIGNED;
    if (v == NULL)
        return S3E_NONE;
    e = payload_mode(r, v, n);
    if (e == S3E_NONE && (r->payload == STOR_PAYLOAD_STREAMING ||
                          r->payload == STOR_PAYLOAD_STREAMING_TRAILER))
        e = S3E_INVALID_ARGUMENT;
    return e;
}

/* `Authorization: AWS AKID:base64(HMAC-SHA1)`. */
static enum stor_s3_err check_v2_header(struct stor_s3_req *r, const char *auth,
                                        size_t alen, time_t now)
{
    const char *cred = auth + 4, *colon, *d;
    size_t cl = alen - 4, dn = 0;
    time_t t;
    bool amz_date;
    enum stor_s3_err e;

    if (r->s3->no_sigv2)
        return S3E_SIGV2_UNSUPPORTED;
    colon = memchr(cred, ':', cl);
    if (colon == NULL || colon == cred || colon == cred + cl - 1)
        return S3E_SIGV2_BAD_HEADER;
    /* x-amz-date wins over Date, and the Date line is then empty */
    d = stor_s3_hdr(r, "x-amz-date", &dn);
    amz_date = d != NULL;
    if (d == NULL)
        d = stor_s3_hdr(r, "date", &dn);
    if (d == NULL || req_date(d, dn, now, &t) < 0)
        return S3E_SIGV2_BAD_DATE;
    if (t > now + CM_SIGV4_SKEW_SECONDS || t < now - CM_SIGV4_SKEW_SECONDS)
        return S3E_SKEWED;
    e = v2_payload(r);
    if (e != S3E_NONE)
        return e;
    return v2_verify(r, cred, (size_t)(colon - cred), colon + 1,
                     cl - (size_t)(colon - cred) - 1, amz_date ? "" : d,
                     amz_date ? 0 : dn);
}

/* Presigned SigV2: AWSAccessKeyId, Expires (epoch seconds), Signature. */
static enum stor_s3_err check_v2_query(struct stor_s3_req *r, time_t now)
{
    const char *ak = stor_s3_query(r, "AWSAccessKeyId");
    const char *exp = stor_s3_query(r, "Expires");
    const char *sig = stor_s3_query(r, "Signature");
    uint64_t expires;
    size_t i;
    enum stor_s3_err e;

    if (r->s3->no_sigv2)
        return S3E_SIGV2_UNSUPPORTED;
    if (ak == NULL || exp == NULL || sig == NULL || ak[0] == 0)
        return S3E_SIGV2_QUERY_INCOMPLETE;
    if (stor_http_parse_u64(exp, strlen(exp), &expires) < 0)
        return S3E_SIGV2_QUERY_INCOMPLETE;
    for (i = 0; i < r->nquery; i++) {
        /* botocore moves signed x-amz-* headers into the URL; honouring
         * them would need them as headers: refused, never ignored */
        if (strncasecmp(r->query[i].name, "x-amz-", 6) == 0)
            return S3E_NOT_IMPLEMENTED;
    }
    r->presigned = true;
    e = v2_payload(r);
    if (e != S3E_NONE)
        return e;
    e = v2_verify(r, ak, strlen(ak), sig, strlen(sig), exp, strlen(exp));
    if (e != S3E_NONE)
        return e;
    if ((uint64_t)now > expires)
        return S3E_EXPIRED_PRESIGN;
    return S3E_NONE;
}

/* See header. */
enum stor_s3_err stor_auth_check(struct stor_s3_req *r, time_t now)
{
    const char *auth;
    struct auth_query q;
    size_t n;
    enum stor_s3_err e;

    auth = stor_s3_hdr(r, "authorization", &n);
    if (auth && n >= 4 && memcmp(auth, "AWS ", 4) == 0) {
        e = check_v2_header(r, auth, n, now); /* "AWS AKID:signature" */
        goto out;
    }
    if (auth) {
        e = check_header(r, auth, n, now);
        goto out;
    }
    auth_query_scan(r, &q);
    if (q.sig || q.alg)
        e = check_presigned(r, &q, now);
    else if (q.sigv2)
        e = check_v2_query(r, now); /* SigV2 query string */
    else {
        /* no credentials: anonymous, which only a bucket policy or a
         * canned ACL can let through (stor_iam_authorize) */
        r->anonymous = true;
        e = S3E_NONE;
    }
out:
    r->authed = e == S3E_NONE && !r->anonymous;
    return e;
}

/* See header. */
enum stor_s3_err stor_auth_chunk(struct stor_s3_req *r, const char *sig,
                                 size_t sig_len, const char *sha_hex)
{
    char expect[65];

    if (sig_len != 64)
        return S3E_SIGNATURE_MISMATCH;
    cm_sigv4_chunk_signature(r->sign_key, r->amz_date, r->scope, r->prev_sig,
                             sha_hex, expect);
    if (!cm_sigv4_equal(expect, sig, 64))
        return S3E_SIGNATURE_MISMATCH;
    memcpy(r->prev_sig, expect, 65);
    return S3E_NONE;
}

/* See header. */
enum stor_s3_err stor_auth_trailer(struct stor_s3_req *r)
{
    char sha[65], expect[65];

    cm_sha256_hex(r->trailer_raw.data ? r->trailer_raw.data : "",
                  r->trailer_raw.len, sha);
    cm_sigv4_trailer_signature(r->sign_key, r->amz_date, r->scope, r->prev_sig,
                               sha, expect);
    if (strlen(r->trailer_sig) != 64 ||
        !cm_sigv4_equal(expect, r->trailer_sig, 64))
        return S3E_SIGNATURE_MISMATCH;
    return S3E_NONE;
}

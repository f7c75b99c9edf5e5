/* storaged/s3/auth.c - SigV4 verification on the server side.
 *
 * DESIGN: the request is described to common/sigv4 exactly as the client
 * described it when signing (decoded path, decoded query, the headers named
 * in SignedHeaders), and the signature recomputed; comparison is constant
 * time. The region is the one the client put in its credential scope (S3
 * clients disagree about what to send to a single-region server: "us-east-1",
 * "US", "other-v2-signature"...), the service must be "s3". The signing key
 * and scope are kept in the request so that aws-chunked chunk signatures,
 * which chain from the header signature, can be verified as they arrive. */
#include "storaged/s3/auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
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

/* The signing key for (@date8, @region) under @secret. DESIGN: it
 * changes once a day, so each loop thread keeps the last one it derived
 * (thread-local: no lock) and skips four HMACs per request. */
static void signing_key(const char *secret, const char *date8,
                        const char *region, uint8_t key[32])
{
    static __thread char c_date[9], c_region[64], c_secret[128];
    static __thread uint8_t c_key[32];

    /* compared by content: users' secrets live in snapshots that come
     * and go, so an address may be reused for another secret */
    if (strcmp(c_secret, secret) != 0 || strcmp(c_date, date8) != 0 ||
        strcmp(c_region, region) != 0) {
        cm_sigv4_signing_key(secret, date8, region, "s3", c_key);
        snprintf(c_date, sizeof(c_date), "%s", date8);
        snprintf(c_region, sizeof(c_region), "%s", region);
        snprintf(c_secret, sizeof(c_secret), "%s", secret);
    }
    memcpy(key, c_key, 32);
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
    if (a->access_key_len == strlen(r->s3->root_user) &&
        memcmp(a->access_key, r->s3->root_user, a->access_key_len) == 0) {
        secret = r->s3->root_secret;
    } else {
        /* a user kept in the store (iam.h); the snapshot reference is the
         * request's until req_fini */
        r->iam_user = stor_iam_user_lookup(r->s3->iam, a->access_key,
                                           a->access_key_len, &r->iam_snap);
        if (r->iam_user == NULL)
            return stor_iam_ready(r->s3->iam) ? S3E_INVALID_ACCESS_KEY
                                              : S3E_INDEX_REBUILDING;
        secret = stor_iam_user_secret(r->iam_user);
        if (secret[0] == 0)
            return S3E_ACCESS_DENIED; /* its secret could not be decrypted */
    }
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
    sr.method = r->http.is_get      ? "GET"
                : r->http.is_head   ? "HEAD"
                : r->http.is_put    ? "PUT"
                : r->http.is_post   ? "POST"
                : r->http.is_delete ? "DELETE"
                                    : NULL;
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
    signing_key(secret, date8, region, r->sign_key);
    cm_sigv4_signature(r->sign_key, sts.data, sts.len, sig);
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
    snprintf(r->amz_date, sizeof(r->amz_date), "%s", amz_date);
    snprintf(r->scope, sizeof(r->scope), "%s", scope.data);
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

    if (alen >= 4 && memcmp(auth, "AWS ", 4) == 0)
        return S3E_SIGV2_UNSUPPORTED; /* "AWS AKID:signature" */
    if (cm_sigv4_parse_authorization(auth, alen, &a) < 0)
        return S3E_ACCESS_DENIED;
    v = stor_s3_hdr(r, "x-amz-date", &n);
    if (v == NULL || n != CM_TIME_ISO_BASIC_LEN ||
        cm_time_parse_iso_basic(v, n, &t) < 0)
        return S3E_ACCESS_DENIED;
    memcpy(amz_date, v, n);
    amz_date[n] = 0;
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

/* See header. */
enum stor_s3_err stor_auth_check(struct stor_s3_req *r, time_t now)
{
    const char *auth;
    struct auth_query q;
    size_t n;
    enum stor_s3_err e;

    auth = stor_s3_hdr(r, "authorization", &n);
    if (auth) {
        e = check_header(r, auth, n, now);
        goto out;
    }
    auth_query_scan(r, &q);
    if (q.sig || q.alg)
        e = check_presigned(r, &q, now);
    else if (q.sigv2)
        e = S3E_SIGV2_UNSUPPORTED; /* SigV2 query string */
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

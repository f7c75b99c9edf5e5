/* fuse/s3.c - pooled, signed, retrying S3 requests over libcurl.
 *
 * DESIGN: FUSE threads block in their handlers anyway, so each request runs
 * on a borrowed easy handle with curl_easy_perform: no event loop to feed.
 * The pool is a fixed array of easy handles (max_conns) behind a mutex and
 * a condvar; a thread that finds none free waits, which bounds connections
 * and concurrent requests per mount. A curl_share holds the DNS cache and
 * TLS sessions; each handle keeps its own keep-alive connection (the idle
 * stack hands out the most recently used handle, whose connection is warm).
 * The connection cache is deliberately NOT shared: libcurl documents that
 * sharing connections between concurrent threads is unsupported (KNOWN_BUGS
 * "A shared connection cache is not thread-safe"), and two threads on one
 * connection can splice two responses - wrong bytes. Each attempt is signed
 * afresh (x-amz-date moves), and transient failures (connect/transfer
 * errors, 408/429/5xx) are retried with exponential backoff and jitter.
 * Wrong bytes are never returned: a range GET must answer 206 with the
 * asked Content-Range or a 200 for the whole object, and If-Match pins the
 * version (412 -> -ESTALE, which the read path turns into EIO). */
#include "fuse/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "common/uri.h"
#include "fuse/listxml.h"

#define S3_LIST_BODY_MAX (64u << 20) /* a 1000-key page is < 1 MiB */
#define S3_ERR_BODY_MAX  (64u << 10)

struct fc_s3 {
    char *endpoint; /* "http://host:port", no trailing '/' */
    char *host;     /* Host header value; immutable */
    char *bucket, *region, *access_key, *secret_key;
    char *session_token;    /* "" = none */
    struct fc_s3_conf conf; /* numbers only; string pointers are ours */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    pthread_mutex_t lock; /* protects free/nfree */
    pthread_cond_t cond;  /* signalled when a handle is returned */
    CURL **free;          /* stack of idle handles; protected by lock */
    unsigned nfree;
    CURL **all; /* every handle, for destroy */
    unsigned nall;
    struct fc_s3_stats stats;
    atomic_bool aborted; /* fc_s3_abort: every request fails now */
};

/* One request's in/out state for the curl callbacks. */
struct s3_xfer {
    /* sink for the body: a scatter list (GET) or a growable buffer */
    const struct iovec *iov;
    unsigned iovcnt;
    unsigned iov_i; /* iov entry being filled */
    size_t iov_off; /* bytes of it filled */
    size_t dst_cap, dst_len;
    long bufsize; /* CURLOPT_BUFFERSIZE for a large body; 0 default */
    bool overflow;
    struct cm_buf *body;
    /* parsed response headers */
    struct fc_s3_obj obj;
    bool have_range;
    uint64_t range_start, range_total;
    long status; /* of the response being received (its status line) */
};

static void s3_share_lock(CURL *h, curl_lock_data d, curl_lock_access a,
                          void *ud)
{
    struct fc_s3 *s = ud;

    (void)h;
    (void)a;
    pthread_mutex_lock(&s->share_locks[d]);
}

static void s3_share_unlock(CURL *h, curl_lock_data d, void *ud)
{
    struct fc_s3 *s = ud;

    (void)h;
    pthread_mutex_unlock(&s->share_locks[d]);
}

/* Splits the endpoint URL into the canonical base and the Host value.
 * 0 or -EINVAL/-ENOMEM. */
static int s3_parse_endpoint(struct fc_s3 *s, const char *ep)
{
    const char *p = strstr(ep, "://");
    size_t n;
    const char *hs;

    if (p == NULL)
        return -EINVAL;
    if (strncasecmp(ep, "http://", 7) != 0 && strncasecmp(ep, "https://", 8))
        return -EINVAL;
    hs = p + 3;
    n = strcspn(hs, "/");
    if (n == 0)
        return -EINVAL;
    s->host = strndup(hs, n);
    s->endpoint = strndup(ep, (size_t)(hs - ep) + n);
    if (s->host == NULL || s->endpoint == NULL)
        return -ENOMEM;
    /* curl sends no port in Host for the scheme's default: neither do we */
    n = strlen(s->host);
    if (strncasecmp(ep, "http://", 7) == 0 && n > 3 &&
        strcmp(s->host + n - 3, ":80") == 0)
        s->host[n - 3] = '\0';
    else if (n > 4 && strcmp(s->host + n - 4, ":443") == 0)
        s->host[n - 4] = '\0';
    return 0;
}

/* Creates the client (see header). */
int fc_s3_create(const struct fc_s3_conf *conf, struct fc_s3 **out)
{
    struct fc_s3 *s;
    int ret = -ENOMEM;

    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->conf = *conf;
    if (s->conf.max_conns == 0)
        s->conf.max_conns = 32;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&s->share_locks[i], NULL);
    ret = s3_parse_endpoint(s, conf->endpoint);
    if (ret < 0)
        goto out_free;
    ret = -ENOMEM;
    s->bucket = strdup(conf->bucket);
    s->region = strdup(conf->region ? conf->region : "us-east-1");
    s->access_key = strdup(conf->access_key ? conf->access_key : "");
    s->secret_key = strdup(conf->secret_key ? conf->secret_key : "");
    s->session_token = strdup(conf->session_token ? conf->session_token : "");
    if (!s->bucket || !s->region || !s->access_key || !s->secret_key ||
        !s->session_token)
        goto out_free;
    s->share = curl_share_init();
    if (s->share == NULL)
        goto out_free;
    curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, s3_share_lock);
    curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, s3_share_unlock);
    curl_share_setopt(s->share, CURLSHOPT_USERDATA, s);
    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    s->all = calloc(s->conf.max_conns, sizeof(CURL *));
    s->free = calloc(s->conf.max_conns, sizeof(CURL *));
    if (s->all == NULL || s->free == NULL)
        goto out_free;
    for (unsigned i = 0; i < s->conf.max_conns; i++) {
        CURL *h = curl_easy_init();
        if (h == NULL)
            goto out_free;
        s->all[s->nall++] = h;
        s->free[s->nfree++] = h;
    }
    *out = s;
    return 0;

out_free:
    fc_s3_destroy(s);
    return ret;
}

/* Frees the client (see header). */
void fc_s3_destroy(struct fc_s3 *s)
{
    if (s == NULL)
        return;
    for (unsigned i = 0; i < s->nall; i++)
        curl_easy_cleanup(s->all[i]);
    if (s->share)
        curl_share_cleanup(s->share);
    free(s->all);
    free(s->free);
    free(s->endpoint);
    free(s->host);
    free(s->bucket);
    free(s->region);
    free(s->access_key);
    free(s->secret_key);
    free(s->session_token);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&s->share_locks[i]);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

struct fc_s3_stats *fc_s3_stats(struct fc_s3 *s)
{
    return &s->stats;
}

/* Borrows an idle handle, waiting for one if all are busy. */
static CURL *s3_handle_get(struct fc_s3 *s)
{
    CURL *h;

    pthread_mutex_lock(&s->lock);
    while (s->nfree == 0)
        pthread_cond_wait(&s->cond, &s->lock);
    h = s->free[--s->nfree];
    pthread_mutex_unlock(&s->lock);
    return h;
}

/* Returns a handle borrowed with s3_handle_get. */
static void s3_handle_put(struct fc_s3 *s, CURL *h)
{
    pthread_mutex_lock(&s->lock);
    s->free[s->nfree++] = h;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* Progress callback: a non-zero return aborts the transfer. libcurl calls
 * it at least about once a second even while the server sends nothing, so
 * fc_s3_abort ends a hung request within about a second. */
static int s3_xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow,
                          curl_off_t ultotal, curl_off_t ulnow)
{
    struct fc_s3 *s = ud;

    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return atomic_load_explicit(&s->aborted, memory_order_relaxed) ? 1 : 0;
}

/* Aborts requests in flight and fails later ones (see header). */
void fc_s3_abort(struct fc_s3 *s)
{
    atomic_store(&s->aborted, true);
}

static size_t s3_write_cb(char *p, size_t sz, size_t nm, void *ud)
{
    struct s3_xfer *x = ud;
    size_t n = sz * nm;

    if (x->body) {
        if (cm_buf_append(x->body, p, n) < 0)
            return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
        return n;
    }
    /* an error answer's body (an XML <Error>, often larger than a small
     * object) is not object data: dropping it keeps a 503 retryable
     * instead of overflowing the buffer into a final EIO */
    if (x->status < 200 || x->status > 299)
        return n;
    if (x->dst_len + n > x->dst_cap) {
        x->overflow = true;
        return 0;
    }
    x->dst_len += n;
    while (n > 0) {
        const struct iovec *v = &x->iov[x->iov_i];
        size_t k = CM_MIN(n, v->iov_len - x->iov_off);
        memcpy((char *)v->iov_base + x->iov_off, p, k);
        p += k;
        n -= k;
        x->iov_off += k;
        if (x->iov_off == v->iov_len && x->iov_i + 1 < x->iovcnt) {
            x->iov_i++;
            x->iov_off = 0;
        }
    }
    return sz * nm;
}

/* Trims spaces and CR/LF at both ends of a header value in place. */
static void s3_trim(const char **v, size_t *n)
{
    while (*n && (**v == ' ' || **v == '\t'))
        (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == '\r' || (*v)[*n - 1] == '\n' ||
                  (*v)[*n - 1] == ' '))
        (*n)--;
}

static size_t s3_header_cb(char *p, size_t sz, size_t nm, void *ud)
{
    struct s3_xfer *x = ud;
    size_t n = sz * nm;
    const char *colon = memchr(p, ':', n);
    const char *v;
    size_t nlen, vlen;
    char tmp[160];

    if (colon == NULL) {
        /* status line of a new response (e.g. after 100-continue): reset */
        if (n > 5 && strncmp(p, "HTTP/", 5) == 0) {
            const char *sp = memchr(p, ' ', n);
            memset(&x->obj, 0, sizeof(x->obj));
            x->have_range = false;
            x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        }
        return n;
    }
    nlen = (size_t)(colon - p);
    v = colon + 1;
    vlen = n - nlen - 1;
    s3_trim(&v, &vlen);
    if (nlen == 4 && strncasecmp(p, "etag", 4) == 0) {
        if (vlen < FC_ETAG_MAX) {
            memcpy(x->obj.etag, v, vlen);
            x->obj.etag[vlen] = '\0';
        }
    } else if (nlen == 14 && strncasecmp(p, "content-length", 14) == 0) {
        if (!x->have_range && vlen < sizeof(tmp)) {
            memcpy(tmp, v, vlen);
            tmp[vlen] = '\0';
            x->obj.size = strtoull(tmp, NULL, 10);
        }
    } else if (nlen == 13 && strncasecmp(p, "content-range", 13) == 0) {
        /* "bytes START-END/TOTAL" */
        unsigned long long a, b, t;
        if (vlen < sizeof(tmp)) {
            memcpy(tmp, v, vlen);
            tmp[vlen] = '\0';
            if (sscanf(tmp, "bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
                x->have_range = true;
                x->range_start = a;
                x->range_total = t;
                x->obj.size = t;
            }
        }
    } else if (nlen == 13 && strncasecmp(p, "last-modified", 13) == 0) {
        time_t t;
        if (cm_time_parse_http(v, vlen, &t) == 0)
            x->obj.mtime = t;
    }
    return n;
}

/* Maps an HTTP status to an errno (see header). */
int fc_s3_status_errno(long status)
{
    if (status >= 200 && status < 300)
        return 0;
    switch (status) {
    case 404:
        return ENOENT;
    case 403:
    case 401:
        return EACCES;
    case 412:
        return ESTALE;
    case 400:
        return EINVAL;
    case 416:
        return EINVAL;
    default:
        return EIO;
    }
}

/* Whether a status is worth retrying (see header). */
bool fc_s3_status_is_transient(long status)
{
    return status == 408 || status == 429 || status >= 500 || status == 0;
}

/* Backoff in ms for retry @attempt (see header). */
unsigned fc_s3_backoff_ms(unsigned attempt, uint32_t rnd)
{
    unsigned cap = 2000, base = 50, d;

    d = attempt >= 6 ? cap : CM_MIN(cap, base << attempt);
    /* equal jitter: half fixed, half random, so retries spread out */
    return d / 2 + rnd % (d / 2 + 1);
}

static bool s3_curl_is_transient(CURLcode c)
{
    switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

/* Query parameter, decoded (NUL-terminated name and value). */
struct s3_qp {
    const char *name, *value;
};

/* Builds the request URL and the signed header list into @url / @hdrs.
 * 0 or -ENOMEM. */
static int s3_prepare(struct fc_s3 *s, const char *method, const char *path,
                      const struct s3_qp *q, size_t nq, struct cm_buf *url,
                      struct curl_slist **hdrs)
{
    struct cm_kv kv[8];
    struct cm_kv h[4];
    size_t nh = 3;
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1];
    struct cm_buf line;
    struct curl_slist *l = NULL, *t;
    time_t now = time(NULL);
    int ret;

    if (nq > CM_ARRAY_SIZE(kv))
        return -EINVAL;
    cm_buf_init(&line, CM_BUF_NOLIMIT);
    ret = cm_buf_appends(url, s->endpoint);
    if (ret == 0)
        ret = cm_uri_encode(url, path, strlen(path), true);
    for (size_t i = 0; ret == 0 && i < nq; i++) {
        ret = cm_buf_appendc(url, i == 0 ? '?' : '&');
        if (ret == 0)
            ret = cm_uri_encode(url, q[i].name, strlen(q[i].name), false);
        if (ret == 0)
            ret = cm_buf_appendc(url, '=');
        if (ret == 0)
            ret = cm_uri_encode(url, q[i].value, strlen(q[i].value), false);
        kv[i] = (struct cm_kv){q[i].name, strlen(q[i].name), q[i].value,
                               strlen(q[i].value)};
    }
    if (ret < 0)
        goto out;
    cm_time_iso_basic(now, amz_date);
    h[0] = (struct cm_kv){"host", 4, s->host, strlen(s->host)};
    h[1] = (struct cm_kv){"x-amz-content-sha256", 20, CM_SIGV4_EMPTY_SHA256,
                          strlen(CM_SIGV4_EMPTY_SHA256)};
    h[2] = (struct cm_kv){"x-amz-date", 10, amz_date, strlen(amz_date)};
    ret = -ENOMEM;
    if (cm_buf_appendf(&line, "Host: %s", s->host) < 0 ||
        (t = curl_slist_append(l, line.data)) == NULL)
        goto out;
    l = t;
    cm_buf_reset(&line);
    if (cm_buf_appendf(&line, "x-amz-content-sha256: %s",
                       CM_SIGV4_EMPTY_SHA256) < 0 ||
        (t = curl_slist_append(l, line.data)) == NULL)
        goto out;
    l = t;
    cm_buf_reset(&line);
    if (cm_buf_appendf(&line, "x-amz-date: %s", amz_date) < 0 ||
        (t = curl_slist_append(l, line.data)) == NULL)
        goto out;
    l = t;
    if (s->access_key[0] != '\0' && s->session_token[0] != '\0') {
        /* temporary credentials (STS): the token is a signed header */
        h[nh++] = (struct cm_kv){"x-amz-security-token", 20, s->session_token,
                                 strlen(s->session_token)};
        cm_buf_reset(&line);
        if (cm_buf_appendf(&line, "x-amz-security-token: %s",
                           s->session_token) < 0 ||
            (t = curl_slist_append(l, line.data)) == NULL)
            goto out;
        l = t;
    }
    if (s->access_key[0] != '\0') {
        struct cm_sigv4_cred cred = {s->access_key, s->secret_key, s->region,
                                     "s3"};
        struct cm_sigv4_req r = {
            .method = method,
            .path = path,
            .path_len = strlen(path),
            .query = nq ? kv : NULL,
            .nquery = nq,
            .headers = h,
            .nheaders = nh,
            .payload_hash = CM_SIGV4_EMPTY_SHA256,
        };
        cm_buf_reset(&line);
        if (cm_buf_appends(&line, "Authorization: ") < 0 ||
            cm_sigv4_sign(&cred, &r, now, &line) < 0 ||
            (t = curl_slist_append(l, line.data)) == NULL)
            goto out;
        l = t;
    }
    /* drop curl's default Accept header: one less line per request */
    if ((t = curl_slist_append(l, "Accept:")) == NULL)
        goto out;
    l = t;
    *hdrs = l;
    l = NULL;
    ret = 0;
out:
    curl_slist_free_all(l);
    cm_buf_fini(&line);
    return ret;
}

/* Runs one request with retries. @range is "a-b" or NULL; @if_match may be
 * NULL. The body goes to x (fixed buffer or cm_buf). @counter is bumped per
 * attempt. Returns the final HTTP status (> 0) or -EIO when no response
 * came after all attempts; -ENOMEM on allocation failure. */
static long s3_perform(struct fc_s3 *s, const char *method, const char *path,
                       const struct s3_qp *q, size_t nq, const char *range,
                       const char *if_match, struct s3_xfer *x,
                       atomic_ulong *counter)
{
    unsigned attempt = 0;
    long status = 0;
    uint32_t seed = (uint32_t)(uintptr_t)x ^ (uint32_t)time(NULL);

    for (;;) {
        struct cm_buf url;
        struct curl_slist *hdrs = NULL, *t;
        CURLcode cc;
        CURL *h;
        char rbuf[64], mbuf[FC_ETAG_MAX + 16];
        int ret;

        if (atomic_load_explicit(&s->aborted, memory_order_relaxed))
            return -EIO; /* unmounting: no new attempt */
        cm_buf_init(&url, CM_BUF_NOLIMIT);
        ret = s3_prepare(s, method, path, q, nq, &url, &hdrs);
        if (ret == 0 && range) {
            snprintf(rbuf, sizeof(rbuf), "Range: bytes=%s", range);
            if ((t = curl_slist_append(hdrs, rbuf)) == NULL)
                ret = -ENOMEM;
            else
                hdrs = t;
        }
        if (ret == 0 && if_match && if_match[0]) {
            snprintf(mbuf, sizeof(mbuf), "If-Match: %s", if_match);
            if ((t = curl_slist_append(hdrs, mbuf)) == NULL)
                ret = -ENOMEM;
            else
                hdrs = t;
        }
        if (ret < 0) {
            curl_slist_free_all(hdrs);
            cm_buf_fini(&url);
            return ret;
        }
        /* reset the sink for this attempt */
        x->dst_len = 0;
        x->iov_i = 0;
        x->iov_off = 0;
        x->overflow = false;
        if (x->body)
            cm_buf_reset(x->body);
        memset(&x->obj, 0, sizeof(x->obj));
        x->have_range = false;
        x->status = 0;

        h = s3_handle_get(s);
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_SHARE, s->share);
        curl_easy_setopt(h, CURLOPT_URL, url.data);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                         (long)(s->conf.connect_timeout_ms
                                    ? s->conf.connect_timeout_ms
                                    : 3000));
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(
            h, CURLOPT_LOW_SPEED_TIME,
            (long)(s->conf.stall_timeout_s ? s->conf.stall_timeout_s : 20));
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, s3_write_cb);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, s3_header_cb);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, s3_xferinfo_cb);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, s);
        if (strcmp(method, "HEAD") == 0)
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        /* a large body in fewer, larger socket reads and callbacks */
        if (x->bufsize > 0)
            curl_easy_setopt(h, CURLOPT_BUFFERSIZE, x->bufsize);
        atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
        if (attempt > 0)
            atomic_fetch_add_explicit(&s->stats.retries, 1,
                                      memory_order_relaxed);
        cm_log(CM_LOG_DEBUG, 0, "ecfs s3 %s %s%s%s", method, url.data,
               range ? " range=" : "", range ? range : "");
        cc = curl_easy_perform(h);
        status = 0;
        if (cc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        /* detach the share so reset/cleanup never races on it */
        s3_handle_put(s, h);
        curl_slist_free_all(hdrs);
        if (cc == CURLE_OK && !fc_s3_status_is_transient(status)) {
            cm_buf_fini(&url);
            return status;
        }
        if (cc == CURLE_WRITE_ERROR && x->overflow) {
            cm_buf_fini(&url);
            return 0; /* caller sees status 0 + overflow */
        }
        if ((cc != CURLE_OK && !s3_curl_is_transient(cc)) ||
            attempt >= s->conf.retries) {
            cm_log(CM_LOG_WARN, 0,
                   "ecfs s3 %s %s: %s (status %ld) after %u attempt(s)", method,
                   url.data, curl_easy_strerror(cc), status, attempt + 1);
            cm_buf_fini(&url);
            return status > 0 ? status : -EIO;
        }
        cm_log(CM_LOG_DEBUG, 0, "ecfs s3 %s %s: %s (status %ld), retrying",
               method, url.data, curl_easy_strerror(cc), status);
        cm_buf_fini(&url);
        seed = seed * 1103515245u + 12345u;
        /* back off in slices, so fc_s3_abort cuts the wait short */
        for (unsigned ms = fc_s3_backoff_ms(attempt, seed >> 8);
             ms > 0 && !atomic_load_explicit(&s->aborted, memory_order_relaxed);
             ms -= CM_MIN(ms, 50u))
            usleep(1000u * CM_MIN(ms, 50u));
        attempt++;
    }
}

/* Builds "/bucket/key" into @path. 0 or -ENOMEM. */
static int s3_path(struct fc_s3 *s, const char *key, struct cm_buf *path)
{
    if (cm_buf_appendc(path, '/') < 0 || cm_buf_appends(path, s->bucket) < 0)
        return -ENOMEM;
    if (cm_buf_appendc(path, '/') < 0 || cm_buf_appends(path, key) < 0)
        return -ENOMEM;
    return 0;
}

/* Strips a W/ prefix and surrounding quotes: *p, *n describe the core. */
static void etag_core(const char *e, const char **p, size_t *n)
{
    if (strncmp(e, "W/", 2) == 0)
        e += 2;
    *n = strlen(e);
    if (*n >= 2 && e[0] == '"' && e[*n - 1] == '"') {
        e++;
        *n -= 2;
    }
    *p = e;
}

/* ETag comparison (see header). */
bool fc_s3_etag_equal(const char *a, const char *b)
{
    const char *pa, *pb;
    size_t na, nb;

    etag_core(a, &pa, &na);
    etag_core(b, &pb, &nb);
    return na == nb && memcmp(pa, pb, na) == 0;
}

/* GET into one buffer (see header). */
ssize_t fc_s3_get(struct fc_s3 *s, const char *key, uint64_t off, size_t len,
                  size_t cap, const char *if_match, void *dst,
                  struct fc_s3_obj *obj)
{
    struct iovec v = {dst, len ? len : cap};

    return fc_s3_getv(s, key, off, len, cap, if_match, &v, 1, obj);
}

/* GET into a scatter list (see header). */
ssize_t fc_s3_getv(struct fc_s3 *s, const char *key, uint64_t off, size_t len,
                   size_t cap, const char *if_match, const struct iovec *iov,
                   unsigned iovcnt, struct fc_s3_obj *obj)
{
    struct s3_xfer x;
    struct cm_buf path;
    char range[64];
    size_t room = 0;
    long st;
    ssize_t ret;

    memset(&x, 0, sizeof(x));
    for (unsigned i = 0; i < iovcnt; i++)
        room += iov[i].iov_len;
    x.iov = iov;
    x.iovcnt = iovcnt;
    x.dst_cap = CM_MIN(room, len ? len : cap);
    if (iovcnt == 0 || x.dst_cap < (len ? len : cap))
        return -EINVAL;
    /* curl reads the socket 16 KiB at a time by default: a part of a
     * sequential readahead is better read in 256 KiB gulps */
    if (x.dst_cap >= (1u << 20))
        x.bufsize = 256 * 1024;
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    if (s3_path(s, key, &path) < 0)
        return -ENOMEM;
    if (len)
        snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, off,
                 off + len - 1);
    st = s3_perform(s, "GET", path.data, NULL, 0, len ? range : NULL, if_match,
                    &x, &s->stats.get);
    cm_buf_fini(&path);
    if (st < 0) {
        ret = st;
    } else if (st == 0) {
        cm_log(CM_LOG_WARN, 0, "ecfs GET %s: body larger than expected", key);
        ret = -EIO;
    } else if (st == 206) {
        /* a partial answer must be exactly the range we asked for */
        ret = (len && x.have_range && x.range_start == off) ? (ssize_t)x.dst_len
                                                            : -EIO;
    } else if (st == 200) {
        if (len && off != 0) {
            ret = -EIO; /* server ignored Range: would splice wrong bytes */
        } else if (len && x.dst_len > len) {
            ret = -EIO;
        } else {
            ret = (ssize_t)x.dst_len;
            x.obj.size = x.dst_len;
        }
    } else if (st == 416) {
        ret = 0; /* range starts at or past EOF */
    } else {
        ret = -fc_s3_status_errno(st);
        if (st == 412) {
            atomic_fetch_add_explicit(&s->stats.etag_mismatch, 1,
                                      memory_order_relaxed);
            cm_log(CM_LOG_WARN, 0,
                   "ecfs GET %s: object changed while open (ETag %s no "
                   "longer matches)",
                   key, if_match ? if_match : "");
        }
    }
    /* servers that ignore If-Match still send the ETag: check it too */
    if (ret >= 0 && if_match && if_match[0] && x.obj.etag[0] &&
        !fc_s3_etag_equal(x.obj.etag, if_match)) {
        atomic_fetch_add_explicit(&s->stats.etag_mismatch, 1,
                                  memory_order_relaxed);
        cm_log(CM_LOG_WARN, 0,
               "ecfs GET %s: object changed while open (ETag %s, pinned %s)",
               key, x.obj.etag, if_match);
        ret = -ESTALE;
    }
    if (ret < 0)
        atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&s->stats.bytes, (unsigned long)ret,
                                  memory_order_relaxed);
    if (obj)
        *obj = x.obj;
    return ret;
}

/* HEAD (see header). */
int fc_s3_head(struct fc_s3 *s, const char *key, struct fc_s3_obj *obj)
{
    struct s3_xfer x;
    struct cm_buf path;
    long st;

    memset(&x, 0, sizeof(x));
    x.dst_cap = 0;
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    if (s3_path(s, key, &path) < 0)
        return -ENOMEM;
    st = s3_perform(s, "HEAD", path.data, NULL, 0, NULL, NULL, &x,
                    &s->stats.head);
    cm_buf_fini(&path);
    if (st < 0)
        return (int)st;
    if (st / 100 != 2) {
        if (st != 404)
            atomic_fetch_add_explicit(&s->stats.errors, 1,
                                      memory_order_relaxed);
        return -fc_s3_status_errno(st);
    }
    if (obj)
        *obj = x.obj;
    return 0;
}

/* One ListObjectsV2 page (see header). */
int fc_s3_list(struct fc_s3 *s, const char *prefix, const char *token,
               unsigned max_keys, struct fc_listpage *page)
{
    struct s3_xfer x;
    struct cm_buf path, body;
    struct s3_qp q[6];
    size_t nq = 0;
    char mk[16];
    long st;
    int ret;

    memset(&x, 0, sizeof(x));
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    cm_buf_init(&body, S3_LIST_BODY_MAX);
    x.body = &body;
    if (cm_buf_appendc(&path, '/') < 0 ||
        cm_buf_appends(&path, s->bucket) < 0) {
        ret = -ENOMEM;
        goto out;
    }
    snprintf(mk, sizeof(mk), "%u", max_keys ? max_keys : 1000);
    /* kept in canonical (sorted) order, though SigV4 sorts anyway */
    if (token)
        q[nq++] = (struct s3_qp){"continuation-token", token};
    q[nq++] = (struct s3_qp){"delimiter", "/"};
    /* keys with control characters cannot travel raw in XML 1.0 */
    q[nq++] = (struct s3_qp){"encoding-type", "url"};
    q[nq++] = (struct s3_qp){"list-type", "2"};
    q[nq++] = (struct s3_qp){"max-keys", mk};
    q[nq++] = (struct s3_qp){"prefix", prefix};
    st = s3_perform(s, "GET", path.data, q, nq, NULL, NULL, &x, &s->stats.list);
    if (st < 0) {
        ret = (int)st;
    } else if (st != 200) {
        ret = -fc_s3_status_errno(st);
        cm_log(CM_LOG_WARN, 0, "ecfs LIST %s prefix=%s: HTTP %ld", s->bucket,
               prefix, st);
    } else {
        ret = fc_listxml_parse(body.data ? body.data : "", body.len, page);
        if (ret < 0)
            cm_log(CM_LOG_WARN, -ret, "ecfs LIST %s prefix=%s: bad XML",
                   s->bucket, prefix);
        if (ret == -EBADMSG)
            ret = -EIO;
    }
    if (ret < 0)
        atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
out:
    cm_buf_fini(&path);
    cm_buf_fini(&body);
    return ret;
}

/* Formats the counters (see header). */
int fc_s3_stats_format(struct fc_s3 *s, char *out, size_t cap)
{
    struct fc_s3_stats *t = &s->stats;

    return snprintf(out, cap,
                    "get=%lu head=%lu list=%lu retries=%lu errors=%lu "
                    "bytes=%lu etag_mismatch=%lu",
                    atomic_load(&t->get), atomic_load(&t->head),
                    atomic_load(&t->list), atomic_load(&t->retries),
                    atomic_load(&t->errors), atomic_load(&t->bytes),
                    atomic_load(&t->etag_mismatch));
}

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

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "common/uri.h"
#include "fuse/listxml.h"
#include "fuse/metrics.h"

#define S3_LIST_BODY_MAX (64u << 20) /* a 1000-key page is < 1 MiB */
#define S3_ERR_BODY_MAX  (64u << 10)

struct fc_s3 {
    char *endpoint; /* "http://host:port", no trailing '/' */
    char *host;     /* Host header value; immutable */
    char *bucket, *region, *access_key, *secret_key;
    char *session_token;    /* "" = none */
    char *ca_file;          /* NULL = the system trust store */
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
    atomic_bool resumed; /* fc_s3_resume: at most one retry */
};

/* Query parameter, decoded (NUL-terminated name and value). */
struct s3_qp {
    const char *name, *value;
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
    /* NULL, or gets the answer's x-amz-meta-* and Content-Type headers as
     * "name\0value\0" pairs, names lowercase (s3_copy_upload_create) */
    struct cm_buf *meta_raw;
    bool meta_err; /* an append to meta_raw failed */
    bool have_range;
    uint64_t range_start, range_total;
    long status; /* of the response being received (its status line) */
    /* request body (PUT/POST), re-read from the start by every attempt */
    const struct fc_s3_body *up;
    size_t up_pos; /* bytes of it sent in this attempt */
    int up_err;    /* -errno of a failed pread of the body */
};

/* What one request is: method, path, query, extra signed headers and an
 * optional body. */
struct s3_req {
    const char *method;
    const char *path; /* decoded "/bucket/key" */
    const struct s3_qp *q;
    size_t nq;
    const struct cm_kv *hdr; /* extra headers, lowercase names; signed */
    size_t nhdr;
    const char *range;             /* "a-b" or NULL */
    const char *if_match;          /* NULL or "" for none */
    const struct fc_s3_body *body; /* NULL: no body */
    bool cond; /* carries a condition of its own: 412 is -ESTALE */
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

/* Checks a ca_file (see header). */
int fc_s3_check_ca_file(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int ret = 0;

    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        ret = -errno;
    else if (!S_ISREG(st.st_mode))
        ret = -EINVAL;
    close(fd);
    return ret;
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
    if (conf->ca_file && conf->ca_file[0] &&
        (s->ca_file = strdup(conf->ca_file)) == NULL)
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
    free(s->ca_file);
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

/* Requests again after an abort, with at most one retry (see header). */
void fc_s3_resume(struct fc_s3 *s)
{
    atomic_store(&s->resumed, true);
    atomic_store(&s->aborted, false);
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
    if (x->status < 200 || x->status > 299 || x->iov == NULL)
        return n; /* nor is the (empty) answer to a PUT or DELETE */
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
    while (*n && (**v == ' ' || **v == '\t')) {
        (*v)++;
        (*n)--;
    }
    while (*n && ((*v)[*n - 1] == '\r' || (*v)[*n - 1] == '\n' ||
                  (*v)[*n - 1] == ' '))
        (*n)--;
}

/* Appends one header to @x's meta_raw as "name\0value\0", the name
 * lowercase (SigV4 signs lowercase names). */
static void s3_meta_raw_add(struct s3_xfer *x, const char *name, size_t nlen,
                            const char *v, size_t vlen)
{
    struct cm_buf *b = x->meta_raw;
    size_t at = b->len;

    if (cm_buf_append(b, name, nlen) < 0 || cm_buf_appendc(b, '\0') < 0 ||
        cm_buf_append(b, v, vlen) < 0 || cm_buf_appendc(b, '\0') < 0) {
        x->meta_err = true;
        return;
    }
    for (size_t i = at; i < at + nlen; i++)
        b->data[i] = (char)tolower((unsigned char)b->data[i]);
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
            if (x->meta_raw != NULL)
                cm_buf_reset(x->meta_raw);
            x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        }
        return n;
    }
    nlen = (size_t)(colon - p);
    v = colon + 1;
    vlen = n - nlen - 1;
    s3_trim(&v, &vlen);
    if (x->meta_raw != NULL &&
        ((nlen > 11 && strncasecmp(p, "x-amz-meta-", 11) == 0) ||
         (nlen == 12 && strncasecmp(p, "content-type", 12) == 0)))
        s3_meta_raw_add(x, p, nlen, v, vlen);
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
    } else if (nlen > 11 && strncasecmp(p, "x-amz-meta-", 11) == 0) {
        fc_s3_meta_parse(&x->obj.meta, p + 11, nlen - 11, v, vlen);
    }
    return n;
}

/* Parses an unsigned decimal of @n bytes (at most 20 digits); false when
 * malformed. */
static bool meta_num(const char *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;

    if (n == 0 || n > 19)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

/* One x-amz-meta-* header (see header). */
void fc_s3_meta_parse(struct fc_s3_meta *m, const char *name, size_t nlen,
                      const char *v, size_t vlen)
{
    uint64_t x;

    if (nlen == 4 && strncasecmp(name, "mode", 4) == 0) {
        if (meta_num(v, vlen, &x) && x <= 0xffffffffu) {
            m->mode = (uint32_t)x;
            m->has |= FC_META_MODE;
        }
    } else if (nlen == 3 && strncasecmp(name, "uid", 3) == 0) {
        if (meta_num(v, vlen, &x) && x < 0xffffffffu) {
            m->uid = (uint32_t)x;
            m->has |= FC_META_UID;
        }
    } else if (nlen == 3 && strncasecmp(name, "gid", 3) == 0) {
        if (meta_num(v, vlen, &x) && x < 0xffffffffu) {
            m->gid = (uint32_t)x;
            m->has |= FC_META_GID;
        }
    } else if (nlen == 10 && strncasecmp(name, "ecfs-attrs", 10) == 0) {
        if (vlen == 1 && (v[0] == '0' || v[0] == '1')) {
            m->dirattrs = v[0] == '1';
            m->has |= FC_META_DIRATTRS;
        }
    } else if (nlen == 5 && strncasecmp(name, "mtime", 5) == 0) {
        /* "SEC" or "SEC.FRACTION" (up to nanoseconds; more is cut) */
        const char *dot = memchr(v, '.', vlen);
        size_t il = dot ? (size_t)(dot - v) : vlen;
        uint64_t ns = 0, frac;
        size_t fl = dot ? vlen - il - 1 : 0;
        if (!meta_num(v, il, &x) || x > INT64_MAX / 2)
            return;
        if (dot != NULL) {
            /* every digit is checked; those past nanoseconds are cut */
            for (size_t i = 9; i < fl; i++)
                if (dot[1 + i] < '0' || dot[1 + i] > '9')
                    return;
            if (!meta_num(dot + 1, CM_MIN(fl, 9u), &frac))
                return;
            ns = frac;
            for (size_t i = CM_MIN(fl, 9u); i < 9; i++)
                ns *= 10;
        }
        m->mtime = (int64_t)x;
        m->mtime_ns = (uint32_t)ns;
        m->has |= FC_META_MTIME;
    }
}

/* Appends the x-amz-meta-* headers of @m to @h (room for FC_META_NHDR
 * more) from @nh on, formatting into @buf (4 x 32 bytes). Returns the new
 * count. */
static size_t meta_headers(const struct fc_s3_meta *m, struct cm_kv *h,
                           size_t nh, char (*buf)[32])
{
    int n;

    if (m == NULL)
        return nh;
    /* SigV4 wants signed headers sorted: ecfs-attrs, gid, mode, mtime,
     * uid */
    if (m->has & FC_META_DIRATTRS)
        h[nh++] = (struct cm_kv){"x-amz-meta-ecfs-attrs", 21,
                                 m->dirattrs ? "1" : "0", 1};
    if (m->has & FC_META_GID) {
        n = snprintf(buf[0], 32, "%" PRIu32, m->gid);
        h[nh++] = (struct cm_kv){"x-amz-meta-gid", 14, buf[0], (size_t)n};
    }
    if (m->has & FC_META_MODE) {
        n = snprintf(buf[1], 32, "%" PRIu32, m->mode);
        h[nh++] = (struct cm_kv){"x-amz-meta-mode", 15, buf[1], (size_t)n};
    }
    if (m->has & FC_META_MTIME) {
        if (m->mtime_ns)
            n = snprintf(buf[2], 32, "%" PRId64 ".%09" PRIu32, m->mtime,
                         m->mtime_ns);
        else
            n = snprintf(buf[2], 32, "%" PRId64, m->mtime);
        h[nh++] = (struct cm_kv){"x-amz-meta-mtime", 16, buf[2], (size_t)n};
    }
    if (m->has & FC_META_UID) {
        n = snprintf(buf[3], 32, "%" PRIu32, m->uid);
        h[nh++] = (struct cm_kv){"x-amz-meta-uid", 14, buf[3], (size_t)n};
    }
    return nh;
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

#define S3_XHDR_MAX 64 /* extra signed headers of one request */
/* user metadata headers (and Content-Type) a copy upload carries */
#define S3_COPY_META_MAX   (S3_XHDR_MAX - FC_META_NHDR)
#define S3_HASHED_BODY_MAX (256u << 10) /* bodies signed with their hash */

/* Appends "Name: value" to the header list *@l. 0 or -ENOMEM. */
static int s3_hdr_add(struct curl_slist **l, struct cm_buf *line,
                      const char *name, size_t nlen, const char *value,
                      size_t vlen)
{
    struct curl_slist *t;

    cm_buf_reset(line);
    if (cm_buf_appendf(line, "%.*s: %.*s", (int)nlen, name, (int)vlen, value) <
            0 ||
        (t = curl_slist_append(*l, line->data)) == NULL)
        return -ENOMEM;
    *l = t;
    return 0;
}

/* Builds the request URL and the signed header list of @r into @url /
 * @hdrs. 0 or -ENOMEM (-EINVAL: too many query params or headers). */
static int s3_prepare(struct fc_s3 *s, const struct s3_req *r,
                      struct cm_buf *url, struct curl_slist **hdrs)
{
    struct cm_kv kv[8];
    struct cm_kv h[4 + S3_XHDR_MAX];
    size_t nh = 3;
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1];
    char bodyhash[2 * CM_SHA256_LEN + 1];
    const char *ph = r->body ? CM_SIGV4_UNSIGNED : CM_SIGV4_EMPTY_SHA256;
    struct cm_buf line;
    struct curl_slist *l = NULL, *t;
    time_t now = time(NULL);
    int ret;

    if (r->nq > CM_ARRAY_SIZE(kv) || r->nhdr > S3_XHDR_MAX)
        return -EINVAL;
    if (r->body != NULL && r->body->data != NULL &&
        r->body->len <= S3_HASHED_BODY_MAX) {
        /* a small body is signed with its hash: servers verify it as they
         * read (UNSIGNED-PAYLOAD is kept for parts and files) */
        cm_sha256_hex(r->body->data, r->body->len, bodyhash);
        ph = bodyhash;
    }
    cm_buf_init(&line, CM_BUF_NOLIMIT);
    ret = cm_buf_appends(url, s->endpoint);
    if (ret == 0)
        ret = cm_uri_encode(url, r->path, strlen(r->path), true);
    for (size_t i = 0; ret == 0 && i < r->nq; i++) {
        const struct s3_qp *q = &r->q[i];
        ret = cm_buf_appendc(url, i == 0 ? '?' : '&');
        if (ret == 0)
            ret = cm_uri_encode(url, q->name, strlen(q->name), false);
        if (ret == 0 && q->value != NULL) {
            ret = cm_buf_appendc(url, '=');
            if (ret == 0)
                ret = cm_uri_encode(url, q->value, strlen(q->value), false);
        }
        kv[i] =
            (struct cm_kv){q->name, strlen(q->name), q->value ? q->value : "",
                           q->value ? strlen(q->value) : 0};
    }
    if (ret < 0)
        goto out;
    cm_time_iso_basic(now, amz_date);
    h[0] = (struct cm_kv){"host", 4, s->host, strlen(s->host)};
    h[1] = (struct cm_kv){"x-amz-content-sha256", 20, ph, strlen(ph)};
    h[2] = (struct cm_kv){"x-amz-date", 10, amz_date, strlen(amz_date)};
    for (size_t i = 0; i < r->nhdr; i++)
        h[nh++] = r->hdr[i];
    if (s->access_key[0] != '\0' && s->session_token[0] != '\0')
        /* temporary credentials (STS): the token is a signed header */
        h[nh++] = (struct cm_kv){"x-amz-security-token", 20, s->session_token,
                                 strlen(s->session_token)};
    ret = -ENOMEM;
    for (size_t i = 0; i < nh; i++)
        if (s3_hdr_add(&l, &line, i == 0 ? "Host" : h[i].name, h[i].name_len,
                       h[i].value, h[i].value_len) < 0)
            goto out;
    if (s->access_key[0] != '\0') {
        struct cm_sigv4_cred cred = {s->access_key, s->secret_key, s->region,
                                     "s3"};
        struct cm_sigv4_req sr = {
            .method = r->method,
            .path = r->path,
            .path_len = strlen(r->path),
            .query = r->nq ? kv : NULL,
            .nquery = r->nq,
            .headers = h,
            .nheaders = nh,
            .payload_hash = ph,
        };
        cm_buf_reset(&line);
        if (cm_buf_appends(&line, "Authorization: ") < 0 ||
            cm_sigv4_sign(&cred, &sr, now, &line) < 0 ||
            (t = curl_slist_append(l, line.data)) == NULL)
            goto out;
        l = t;
    }
    /* drop curl's default Accept header: one less line per request; and
     * for bodies, no "Expect: 100-continue" round trip nor form type */
    if ((t = curl_slist_append(l, "Accept:")) == NULL)
        goto out;
    l = t;
    if (r->body != NULL) {
        bool typed = false; /* a Content-Type of the request's own */
        for (size_t i = 0; i < r->nhdr; i++)
            typed |= r->hdr[i].name_len == 12 &&
                     memcmp(r->hdr[i].name, "content-type", 12) == 0;
        if ((t = curl_slist_append(l, "Expect:")) == NULL)
            goto out;
        l = t;
        if (!typed) {
            if ((t = curl_slist_append(l, "Content-Type:")) == NULL)
                goto out;
            l = t;
        }
    }
    *hdrs = l;
    l = NULL;
    ret = 0;
out:
    curl_slist_free_all(l);
    cm_buf_fini(&line);
    return ret;
}

/* Read callback of a request body: from memory or pread of a file. */
static size_t s3_read_cb(char *p, size_t sz, size_t nm, void *ud)
{
    struct s3_xfer *x = ud;
    const struct fc_s3_body *b = x->up;
    size_t n = CM_MIN(sz * nm, b->len - x->up_pos);
    ssize_t got;

    if (n == 0)
        return 0;
    if (b->data != NULL) {
        memcpy(p, (const char *)b->data + x->up_pos, n);
        x->up_pos += n;
        return n;
    }
    got = pread(b->fd, p, n, (off_t)(b->off + x->up_pos));
    if (got <= 0) {
        x->up_err = got < 0 ? -errno : -EIO; /* short file: it shrank */
        return CURL_READFUNC_ABORT;
    }
    x->up_pos += (size_t)got;
    return (size_t)got;
}

/* Runs one request @r with retries. The body goes to x (fixed buffer or
 * cm_buf). @counter is bumped per attempt. Returns the final HTTP status
 * (> 0) or -EIO when no response came after all attempts; -ENOMEM on
 * allocation failure; the -errno of a failed read of the request body. */
static long s3_perform(struct fc_s3 *s, const struct s3_req *r,
                       struct s3_xfer *x, atomic_ulong *counter)
{
    unsigned attempt = 0;
    long status = 0;
    uint32_t seed = (uint32_t)(uintptr_t)x ^ (uint32_t)time(NULL);
    const char *method = r->method;

    x->up = r->body;
    for (;;) {
        struct cm_buf url;
        struct curl_slist *hdrs = NULL, *t;
        CURLcode cc;
        CURL *h;
        char rbuf[64], mbuf[FC_ETAG_MAX + 16];
        char errbuf[CURL_ERROR_SIZE];
        int ret;

        if (atomic_load_explicit(&s->aborted, memory_order_relaxed))
            return -EIO; /* unmounting: no new attempt */
        cm_buf_init(&url, CM_BUF_NOLIMIT);
        ret = s3_prepare(s, r, &url, &hdrs);
        if (ret == 0 && r->range) {
            snprintf(rbuf, sizeof(rbuf), "Range: bytes=%s", r->range);
            if ((t = curl_slist_append(hdrs, rbuf)) == NULL)
                ret = -ENOMEM;
            else
                hdrs = t;
        }
        if (ret == 0 && r->if_match && r->if_match[0]) {
            snprintf(mbuf, sizeof(mbuf), "If-Match: %s", r->if_match);
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
        /* reset the sink and the body source for this attempt */
        x->dst_len = 0;
        x->iov_i = 0;
        x->iov_off = 0;
        x->overflow = false;
        x->up_pos = 0;
        x->up_err = 0;
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
        errbuf[0] = '\0';
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        if (s->ca_file)
            curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
        if (s->conf.insecure) {
            curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (strcmp(method, "HEAD") == 0) {
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        } else if (r->body != NULL && r->body->data != NULL) {
            /* a body in memory goes as it is, no read callback: curl sends
             * a small one in the same write as the headers (one segment,
             * which the server takes on its fast path), a large one
             * straight from our buffer */
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body->data);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)r->body->len);
            if (strcmp(method, "POST") != 0)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        } else if (strcmp(method, "PUT") == 0) {
            curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                             (curl_off_t)(r->body ? r->body->len : 0));
        } else if (strcmp(method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POST, 1L);
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(r->body ? r->body->len : 0));
        } else if (strcmp(method, "GET") != 0) {
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        }
        if (r->body != NULL && r->body->data == NULL) {
            curl_easy_setopt(h, CURLOPT_READFUNCTION, s3_read_cb);
            curl_easy_setopt(h, CURLOPT_READDATA, x);
            /* a part is sent in 512 KiB writes, not 64 KiB ones */
            if (r->body->len >= (1u << 20))
                curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
        }
        /* a large body in fewer, larger socket reads and callbacks */
        if (x->bufsize > 0)
            curl_easy_setopt(h, CURLOPT_BUFFERSIZE, x->bufsize);
        atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
        if (attempt > 0)
            atomic_fetch_add_explicit(&s->stats.retries, 1,
                                      memory_order_relaxed);
        cm_log(CM_LOG_DEBUG, 0, "ecfs s3 %s %s%s%s", method, url.data,
               r->range ? " range=" : "", r->range ? r->range : "");
        cc = curl_easy_perform(h);
        status = 0;
        if (cc == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        fc_metrics_s3(h, (size_t)((uintptr_t)counter - (uintptr_t)&s->stats),
                      status);
        /* errbuf is ours only for this attempt */
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
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
        if (x->up_err < 0) {
            cm_log(CM_LOG_WARN, -x->up_err, "ecfs s3 %s %s: reading the body",
                   method, url.data);
            cm_buf_fini(&url);
            return x->up_err;
        }
        if ((cc != CURLE_OK && !s3_curl_is_transient(cc)) ||
            attempt >= s->conf.retries ||
            (attempt >= 1 && atomic_load(&s->resumed))) {
            cm_log(CM_LOG_WARN, 0,
                   "ecfs s3 %s %s: %s%s%s (status %ld) after %u attempt(s)",
                   method, url.data, curl_easy_strerror(cc),
                   errbuf[0] ? ": " : "", errbuf, status, attempt + 1);
            cm_buf_fini(&url);
            return status > 0 ? status : -EIO;
        }
        cm_log(CM_LOG_DEBUG, 0, "ecfs s3 %s %s: %s%s%s (status %ld), retrying",
               method, url.data, curl_easy_strerror(cc), errbuf[0] ? ": " : "",
               errbuf, status);
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

/* See s3.h. */
int fc_s3_presign_get(struct fc_s3 *s, const char *key, time_t now,
                      unsigned expires, struct cm_buf *url)
{
    struct cm_sigv4_cred cred = {s->access_key, s->secret_key, s->region, "s3"};
    struct cm_kv h = {"host", 4, s->host, strlen(s->host)};
    struct cm_kv tok = {"X-Amz-Security-Token", 20, s->session_token,
                        strlen(s->session_token)};
    struct cm_sigv4_req sr = {.method = "GET",
                              .headers = &h,
                              .nheaders = 1,
                              .payload_hash = CM_SIGV4_UNSIGNED};
    struct cm_buf path, query;
    int ret;

    if (s->access_key[0] == '\0')
        return -EPERM;
    if (expires < 1 || expires > CM_SIGV4_MAX_PRESIGN_EXPIRES)
        return -EINVAL;
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    cm_buf_init(&query, CM_BUF_NOLIMIT);
    ret = s3_path(s, key, &path);
    if (ret < 0)
        goto out;
    sr.path = path.data;
    sr.path_len = path.len;
    if (s->session_token[0] != '\0') {
        sr.query = &tok;
        sr.nquery = 1;
    }
    ret = cm_sigv4_presign(&cred, &sr, now, expires, &query);
    if (ret == 0)
        ret = cm_buf_appends(url, s->endpoint);
    if (ret == 0)
        ret = cm_uri_encode(url, path.data, path.len, true);
    if (ret == 0)
        ret = cm_buf_appendc(url, '?');
    if (ret == 0)
        ret = cm_buf_append(url, query.data, query.len);
out:
    cm_buf_fini(&query);
    cm_buf_fini(&path);
    return ret;
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
    /* curl reads the socket 16 KiB at a time by default, with a poll
     * before each read: a medium file fetched whole or a part of a
     * sequential readahead is better read in gulps of up to 256 KiB (a
     * 320 KiB GET took 15 recvs and 17 polls) */
    if (x.dst_cap >= (64u << 10))
        x.bufsize = (long)CM_MIN(x.dst_cap, (size_t)256 * 1024);
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    if (s3_path(s, key, &path) < 0)
        return -ENOMEM;
    if (len)
        snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, off,
                 off + len - 1);
    {
        struct s3_req r = {.method = "GET",
                           .path = path.data,
                           .range = len ? range : NULL,
                           .if_match = if_match};
        st = s3_perform(s, &r, &x, &s->stats.get);
    }
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

/* HEAD @key; with @raw non-NULL, its user metadata and Content-Type go
 * there too (see s3_xfer.meta_raw). 0 or -errno. */
static int s3_head(struct fc_s3 *s, const char *key, struct fc_s3_obj *obj,
                   struct cm_buf *raw)
{
    struct s3_xfer x;
    struct cm_buf path;
    long st;

    memset(&x, 0, sizeof(x));
    x.dst_cap = 0;
    x.meta_raw = raw;
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    if (s3_path(s, key, &path) < 0)
        return -ENOMEM;
    {
        struct s3_req r = {.method = "HEAD", .path = path.data};
        st = s3_perform(s, &r, &x, &s->stats.head);
    }
    cm_buf_fini(&path);
    if (st < 0)
        return (int)st;
    if (st / 100 != 2) {
        if (st != 404)
            atomic_fetch_add_explicit(&s->stats.errors, 1,
                                      memory_order_relaxed);
        return -fc_s3_status_errno(st);
    }
    if (x.meta_err)
        return -ENOMEM;
    if (obj)
        *obj = x.obj;
    return 0;
}

/* HEAD (see header). */
int fc_s3_head(struct fc_s3 *s, const char *key, struct fc_s3_obj *obj)
{
    return s3_head(s, key, obj, NULL);
}

static int s3_list(struct fc_s3 *s, const char *prefix, const char *token,
                   unsigned max_keys, bool delim, struct fc_listpage *page);

/* One ListObjectsV2 page (see header). */
int fc_s3_list(struct fc_s3 *s, const char *prefix, const char *token,
               unsigned max_keys, struct fc_listpage *page)
{
    return s3_list(s, prefix, token, max_keys, true, page);
}

/* One page without delimiter (see header). */
int fc_s3_list_flat(struct fc_s3 *s, const char *prefix, const char *token,
                    unsigned max_keys, struct fc_listpage *page)
{
    return s3_list(s, prefix, token, max_keys, false, page);
}

/* One ListObjectsV2 page, with or without delimiter "/". */
static int s3_list(struct fc_s3 *s, const char *prefix, const char *token,
                   unsigned max_keys, bool delim, struct fc_listpage *page)
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
    if (delim)
        q[nq++] = (struct s3_qp){"delimiter", "/"};
    /* keys with control characters cannot travel raw in XML 1.0 */
    q[nq++] = (struct s3_qp){"encoding-type", "url"};
    q[nq++] = (struct s3_qp){"list-type", "2"};
    q[nq++] = (struct s3_qp){"max-keys", mk};
    q[nq++] = (struct s3_qp){"prefix", prefix};
    {
        struct s3_req r = {
            .method = "GET", .path = path.data, .q = q, .nq = nq};
        st = s3_perform(s, &r, &x, &s->stats.list);
    }
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

/* Copies the text of the first <@tag> element of @body (entities
 * decoded) into @out of @cap bytes. Returns whether it was found and fit. */
static bool s3_xml_text(const struct cm_buf *body, const char *tag, char *out,
                        size_t cap)
{
    char open[64], close[64];
    const char *b = body->data ? body->data : "", *p, *e;
    size_t n = 0;

    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    p = strstr(b, open);
    if (p == NULL)
        return false;
    p += strlen(open);
    e = strstr(p, close);
    if (e == NULL)
        return false;
    while (p < e) {
        static const struct {
            const char *ent;
            char c;
        } ents[] = {{"&quot;", '"'}, {"&amp;", '&'},   {"&lt;", '<'},
                    {"&gt;", '>'},   {"&apos;", '\''}, {"&#34;", '"'}};
        char c = *p;
        size_t adv = 1;
        for (size_t i = 0; c == '&' && i < CM_ARRAY_SIZE(ents); i++) {
            size_t el = strlen(ents[i].ent);
            if ((size_t)(e - p) >= el && memcmp(p, ents[i].ent, el) == 0) {
                c = ents[i].c;
                adv = el;
                break;
            }
        }
        if (n + 1 >= cap)
            return false;
        out[n++] = c;
        p += adv;
    }
    out[n] = '\0';
    return true;
}

/* Runs a modifying request on @key and maps its answer: 0 for @ok_status
 * (or any 2xx when 0), else -errno (logged). A 200 whose body is an
 * <Error> (CopyObject, CompleteMultipartUpload) fails with -EIO. */
static int s3_modify(struct fc_s3 *s, const char *what, const char *key,
                     struct s3_req *r, struct cm_buf *body,
                     atomic_ulong *counter, struct fc_s3_obj *obj)
{
    struct s3_xfer x;
    struct cm_buf path;
    long st;
    int ret = 0;

    memset(&x, 0, sizeof(x));
    x.body = body;
    cm_buf_init(&path, CM_BUF_NOLIMIT);
    if (s3_path(s, key, &path) < 0)
        return -ENOMEM;
    r->path = path.data;
    st = s3_perform(s, r, &x, counter);
    if (st < 0) {
        ret = (int)st;
    } else if (st == 0 || st / 100 != 2) {
        ret = st == 0 ? -EIO : -fc_s3_status_errno(st);
        if (ret == -EINVAL || (ret == -ESTALE && !r->cond))
            ret = -EIO;
        cm_log(CM_LOG_WARN, 0, "ecfs %s %s: HTTP %ld %.200s", what, key, st,
               body && body->data ? body->data : "");
    } else if (body && body->data && strstr(body->data, "<Error>")) {
        ret = -EIO;
        cm_log(CM_LOG_WARN, 0, "ecfs %s %s: error in a 200 answer: %.200s",
               what, key, body->data);
    }
    if (ret < 0)
        atomic_fetch_add_explicit(&s->stats.errors, 1, memory_order_relaxed);
    else if (r->body)
        atomic_fetch_add_explicit(&s->stats.bytes_up,
                                  (unsigned long)r->body->len,
                                  memory_order_relaxed);
    if (obj)
        *obj = x.obj;
    cm_buf_fini(&path);
    return ret;
}

/* PUT object (see header). */
int fc_s3_put(struct fc_s3 *s, const char *key, const struct fc_s3_body *b,
              char *etag)
{
    return fc_s3_put_meta(s, key, b, NULL, etag);
}

/* PUT object with attributes (see header). */
int fc_s3_put_meta(struct fc_s3 *s, const char *key, const struct fc_s3_body *b,
                   const struct fc_s3_meta *m, char *etag)
{
    struct cm_kv h[FC_META_NHDR];
    char mb[4][32];
    struct s3_req r = {.method = "PUT", .body = b, .hdr = h};
    struct fc_s3_obj obj;
    int ret;

    r.nhdr = meta_headers(m, h, 0, mb);

    ret = s3_modify(s, "PUT", key, &r, NULL, &s->stats.put, &obj);
    if (ret == 0)
        snprintf(etag, FC_ETAG_MAX, "%s", obj.etag);
    return ret;
}

/* CreateMultipartUpload (see header). */
int fc_s3_mpu_create(struct fc_s3 *s, const char *key, char **upload_id)
{
    return fc_s3_mpu_create_meta(s, key, NULL, upload_id);
}

/* CreateMultipartUpload of @key with the @nh extra headers @h. 0 and
 * *@upload_id (caller frees), or -errno. */
static int s3_mpu_create_hdr(struct fc_s3 *s, const char *key,
                             const struct cm_kv *h, size_t nh, char **upload_id)
{
    struct s3_qp q[] = {{"uploads", NULL}};
    struct fc_s3_body empty = {.data = "", .len = 0};
    struct s3_req r = {.method = "POST",
                       .q = q,
                       .nq = 1,
                       .body = &empty,
                       .hdr = h,
                       .nhdr = nh};
    struct cm_buf body;
    char id[1024];
    int ret;

    cm_buf_init(&body, S3_ERR_BODY_MAX);
    ret = s3_modify(s, "CreateMultipartUpload", key, &r, &body, &s->stats.mpu,
                    NULL);
    if (ret == 0 && !s3_xml_text(&body, "UploadId", id, sizeof(id))) {
        cm_log(CM_LOG_WARN, 0, "ecfs CreateMultipartUpload %s: no UploadId",
               key);
        ret = -EIO;
    }
    if (ret == 0 && (*upload_id = strdup(id)) == NULL)
        ret = -ENOMEM;
    cm_buf_fini(&body);
    return ret;
}

/* CreateMultipartUpload with attributes (see header). */
int fc_s3_mpu_create_meta(struct fc_s3 *s, const char *key,
                          const struct fc_s3_meta *m, char **upload_id)
{
    struct cm_kv h[FC_META_NHDR];
    char mb[4][32];

    return s3_mpu_create_hdr(s, key, h, meta_headers(m, h, 0, mb), upload_id);
}

/* The FC_META_* bit an x-amz-meta-@name header (@nlen bytes, without the
 * prefix) stores, or 0 for other user metadata. */
static unsigned meta_bit(const char *name, size_t nlen)
{
    static const struct {
        const char *n;
        unsigned bit;
    } t[] = {{"mode", FC_META_MODE},
             {"uid", FC_META_UID},
             {"gid", FC_META_GID},
             {"mtime", FC_META_MTIME},
             {"ecfs-attrs", FC_META_DIRATTRS}};

    for (size_t i = 0; i < CM_ARRAY_SIZE(t); i++)
        if (strlen(t[i].n) == nlen && strncasecmp(name, t[i].n, nlen) == 0)
            return t[i].bit;
    return 0;
}

/* CreateMultipartUpload of @dst for a copy of @src (@size bytes) by
 * UploadPartCopy, which copies bytes only: the upload carries @src's user
 * metadata (x-amz-meta-*) and Content-Type, from a HEAD of @src, with
 * @m's attributes (NULL: none) in place of the source's. 0, *@upload_id
 * and the HEADed version's ETag in @src_etag ("" if the server sent
 * none), or -errno (-EIO: more than S3_COPY_META_MAX such headers;
 * -ESTALE: @src is no longer @size bytes, it changed since the caller
 * looked). */
static int s3_copy_upload_create(struct fc_s3 *s, const char *src,
                                 uint64_t size, const char *dst,
                                 const struct fc_s3_meta *m, char **upload_id,
                                 char *src_etag)
{
    struct cm_kv h[S3_COPY_META_MAX + FC_META_NHDR];
    char mb[4][32];
    struct cm_buf raw;
    struct fc_s3_obj obj;
    size_t nh = 0, at = 0;
    unsigned mine = m != NULL ? m->has : 0;
    int ret;

    cm_buf_init(&raw, CM_BUF_NOLIMIT);
    ret = s3_head(s, src, &obj, &raw);
    if (ret == 0 && obj.size != size) {
        cm_log(CM_LOG_WARN, 0,
               "ecfs: copy of %s: it is %" PRIu64 " bytes, not %" PRIu64
               " (changed by another client)",
               src, obj.size, size);
        ret = -ESTALE;
    }
    if (ret == 0)
        snprintf(src_etag, FC_ETAG_MAX, "%s", obj.etag);
    while (ret == 0 && at < raw.len) {
        const char *n = raw.data + at, *v = n + strlen(n) + 1;
        size_t nlen = strlen(n), vlen = strlen(v);
        at = (size_t)(v - raw.data) + vlen + 1;
        if (nlen > 11 && memcmp(n, "x-amz-meta-", 11) == 0 &&
            (meta_bit(n + 11, nlen - 11) & mine))
            continue; /* @m's value instead */
        if (nh == S3_COPY_META_MAX) {
            cm_log(CM_LOG_WARN, 0,
                   "ecfs: copy of %s: more than %d metadata headers", src,
                   S3_COPY_META_MAX);
            ret = -EIO;
            break;
        }
        h[nh++] = (struct cm_kv){n, nlen, v, vlen};
    }
    if (ret == 0)
        ret =
            s3_mpu_create_hdr(s, dst, h, meta_headers(m, h, nh, mb), upload_id);
    cm_buf_fini(&raw);
    return ret;
}

/* UploadPart (see header). */
int fc_s3_mpu_part(struct fc_s3 *s, const char *key, const char *upload_id,
                   unsigned partno, const struct fc_s3_body *b, char *etag)
{
    char pn[16];
    struct s3_qp q[] = {{"partNumber", pn}, {"uploadId", upload_id}};
    struct s3_req r = {.method = "PUT", .q = q, .nq = 2, .body = b};
    struct fc_s3_obj obj;
    int ret;

    snprintf(pn, sizeof(pn), "%u", partno);
    ret = s3_modify(s, "UploadPart", key, &r, NULL, &s->stats.parts, &obj);
    if (ret == 0 && obj.etag[0] == '\0') {
        cm_log(CM_LOG_WARN, 0, "ecfs UploadPart %s #%u: no ETag", key, partno);
        ret = -EIO;
    }
    if (ret == 0)
        snprintf(etag, FC_ETAG_MAX, "%s", obj.etag);
    return ret;
}

/* The x-amz-copy-source value of @src: "/bucket/key", URI-encoded. */
static int s3_copy_source(struct fc_s3 *s, const char *src, struct cm_buf *v)
{
    if (cm_buf_appendc(v, '/') < 0 ||
        cm_uri_encode(v, s->bucket, strlen(s->bucket), false) < 0 ||
        cm_buf_appendc(v, '/') < 0 ||
        cm_uri_encode(v, src, strlen(src), true) < 0)
        return -ENOMEM;
    return 0;
}

/* UploadPartCopy (see header). */
int fc_s3_mpu_copy_part(struct fc_s3 *s, const char *key, const char *upload_id,
                        unsigned partno, const char *src, const char *if_match,
                        uint64_t first, uint64_t last, char *etag)
{
    char pn[16], range[80];
    struct s3_qp q[] = {{"partNumber", pn}, {"uploadId", upload_id}};
    struct cm_kv h[3];
    struct s3_req r = {.method = "PUT", .q = q, .nq = 2, .hdr = h, .nhdr = 2};
    struct cm_buf cs, body;
    int ret;

    cm_buf_init(&cs, CM_BUF_NOLIMIT);
    cm_buf_init(&body, S3_ERR_BODY_MAX);
    if (s3_copy_source(s, src, &cs) < 0) {
        ret = -ENOMEM;
        goto out;
    }
    snprintf(pn, sizeof(pn), "%u", partno);
    snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, first, last);
    h[0] = (struct cm_kv){"x-amz-copy-source", 17, cs.data, cs.len};
    h[1] = (struct cm_kv){"x-amz-copy-source-range", 23, range, strlen(range)};
    if (if_match != NULL && if_match[0] != '\0') {
        h[r.nhdr++] = (struct cm_kv){"x-amz-copy-source-if-match", 26, if_match,
                                     strlen(if_match)};
        r.cond = true;
    }
    ret = s3_modify(s, "UploadPartCopy", key, &r, &body, &s->stats.parts, NULL);
    if (ret == 0 && !s3_xml_text(&body, "ETag", etag, FC_ETAG_MAX))
        ret = -EIO;
out:
    cm_buf_fini(&cs);
    cm_buf_fini(&body);
    return ret;
}

/* CompleteMultipartUpload (see header). */
int fc_s3_mpu_complete(struct fc_s3 *s, const char *key, const char *upload_id,
                       const char *etags, unsigned nparts, char *etag)
{
    struct s3_qp q[] = {{"uploadId", upload_id}};
    struct fc_s3_body b;
    struct s3_req r = {.method = "POST", .q = q, .nq = 1, .body = &b};
    struct cm_buf xml, body;
    int ret = 0;

    cm_buf_init(&xml, CM_BUF_NOLIMIT);
    cm_buf_init(&body, S3_ERR_BODY_MAX);
    if (cm_buf_appends(&xml, "<CompleteMultipartUpload>") < 0)
        ret = -ENOMEM;
    for (unsigned i = 0; ret == 0 && i < nparts; i++)
        if (cm_buf_appendf(&xml,
                           "<Part><PartNumber>%u</PartNumber>"
                           "<ETag>%s</ETag></Part>",
                           i + 1, etags + (size_t)i * FC_ETAG_MAX) < 0)
            ret = -ENOMEM;
    if (ret == 0 && cm_buf_appends(&xml, "</CompleteMultipartUpload>") < 0)
        ret = -ENOMEM;
    if (ret == 0) {
        b = (struct fc_s3_body){.data = xml.data, .len = xml.len};
        ret = s3_modify(s, "CompleteMultipartUpload", key, &r, &body,
                        &s->stats.mpu, NULL);
    }
    if (ret == 0 && !s3_xml_text(&body, "ETag", etag, FC_ETAG_MAX))
        etag[0] = '\0'; /* the next LIST or HEAD tells */
    cm_buf_fini(&xml);
    cm_buf_fini(&body);
    return ret;
}

/* AbortMultipartUpload (see header). */
int fc_s3_mpu_abort(struct fc_s3 *s, const char *key, const char *upload_id)
{
    struct s3_qp q[] = {{"uploadId", upload_id}};
    struct s3_req r = {.method = "DELETE", .q = q, .nq = 1};

    return s3_modify(s, "AbortMultipartUpload", key, &r, NULL, &s->stats.mpu,
                     NULL);
}

/* DELETE object (see header). */
int fc_s3_delete(struct fc_s3 *s, const char *key)
{
    struct s3_req r = {.method = "DELETE"};
    int ret = s3_modify(s, "DELETE", key, &r, NULL, &s->stats.del, NULL);

    return ret == -ENOENT ? 0 : ret;
}

/* CopyObject (see header). */
int fc_s3_copy(struct fc_s3 *s, const char *src, const char *dst, char *etag)
{
    return fc_s3_copy_meta(s, src, dst, NULL, etag);
}

/* CopyObject of @src to @dst with attributes @m (NULL: the source's),
 * only while @src is version @if_match (NULL or "": any; a 412 is
 * -ESTALE). 0 and the new ETag in @etag, or -errno. */
static int s3_copy_object(struct fc_s3 *s, const char *src, const char *dst,
                          const struct fc_s3_meta *m, const char *if_match,
                          char *etag)
{
    struct cm_kv h[FC_META_NHDR + 3];
    char mb[4][32];
    struct s3_req r = {.method = "PUT", .hdr = h};
    struct cm_buf cs, body;
    size_t nh = 0;
    int ret;

    cm_buf_init(&cs, CM_BUF_NOLIMIT);
    cm_buf_init(&body, S3_ERR_BODY_MAX);
    if (s3_copy_source(s, src, &cs) < 0) {
        ret = -ENOMEM;
        goto out;
    }
    /* sorted for SigV4: x-amz-copy-source, x-amz-copy-source-if-match,
     * x-amz-meta-*, x-amz-metadata-directive */
    h[nh++] = (struct cm_kv){"x-amz-copy-source", 17, cs.data, cs.len};
    if (if_match != NULL && if_match[0] != '\0') {
        h[nh++] = (struct cm_kv){"x-amz-copy-source-if-match", 26, if_match,
                                 strlen(if_match)};
        r.cond = true;
    }
    if (m != NULL) { /* else the source's metadata is copied */
        nh = meta_headers(m, h, nh, mb);
        h[nh++] = (struct cm_kv){"x-amz-metadata-directive", 24, "REPLACE", 7};
    }
    r.nhdr = nh;
    ret = s3_modify(s, "CopyObject", dst, &r, &body, &s->stats.copy, NULL);
    if (ret == 0 && !s3_xml_text(&body, "ETag", etag, FC_ETAG_MAX))
        etag[0] = '\0';
out:
    cm_buf_fini(&cs);
    cm_buf_fini(&body);
    return ret;
}

/* CopyObject with new attributes (see header). */
int fc_s3_copy_meta(struct fc_s3 *s, const char *src, const char *dst,
                    const struct fc_s3_meta *m, char *etag)
{
    return s3_copy_object(s, src, dst, m, NULL, etag);
}

/* Whether @src is still the version @etag (a HEAD). 0, -ESTALE (another
 * version: logged), or -errno. */
static int s3_still_same(struct fc_s3 *s, const char *src, const char *etag)
{
    struct fc_s3_obj obj;
    int ret = s3_head(s, src, &obj, NULL);

    if (ret == 0 && obj.etag[0] != '\0' && !fc_s3_etag_equal(obj.etag, etag)) {
        cm_log(CM_LOG_WARN, 0,
               "ecfs: copy of %s: the source changed during the copy (ETag "
               "%s, copied %s)",
               src, obj.etag, etag);
        ret = -ESTALE;
    }
    return ret;
}

/* Server-side copy of any size (see header). */
int fc_s3_copy_sized(struct fc_s3 *s, const char *src, const char *dst,
                     uint64_t size, const struct fc_s3_meta *m, char *etag)
{
    return fc_s3_copy_sized_if(s, src, dst, size, m, NULL, NULL, etag);
}

/* Server-side copy tied to a version (see header). */
int fc_s3_copy_sized_if(struct fc_s3 *s, const char *src, const char *dst,
                        uint64_t size, const struct fc_s3_meta *m,
                        const char *if_match, char *copied, char *etag)
{
    uint64_t part = CM_MAX((uint64_t)1 << 30, (size + 9999) / 10000);
    char *id = NULL, *etags, src_etag[FC_ETAG_MAX];
    unsigned n = (unsigned)((size + part - 1) / part);
    int ret;

    if (copied != NULL)
        copied[0] = '\0';
    if (size <= FC_S3_COPY_MAX) {
        ret = s3_copy_object(s, src, dst, m, if_match, etag);
        if (ret == 0 && copied != NULL && if_match != NULL)
            snprintf(copied, FC_ETAG_MAX, "%s", if_match);
        return ret;
    }
    etags = calloc(n, FC_ETAG_MAX);
    if (etags == NULL)
        return -ENOMEM;
    ret = s3_copy_upload_create(s, src, size, dst, m, &id, src_etag);
    if (ret == 0 && if_match != NULL && if_match[0] != '\0' &&
        !fc_s3_etag_equal(src_etag, if_match))
        ret = -ESTALE; /* another version than the caller's */
    /* every part copies the version HEADed: one overwritten meanwhile
     * fails the part (412: -ESTALE) instead of mixing two versions */
    for (unsigned i = 0; ret == 0 && i < n; i++) {
        uint64_t first = (uint64_t)i * part;
        uint64_t last = CM_MIN(size, first + part) - 1;
        ret = fc_s3_mpu_copy_part(s, dst, id, i + 1, src, src_etag, first, last,
                                  etags + (size_t)i * FC_ETAG_MAX);
    }
    if (ret == -ESTALE && id != NULL)
        cm_log(CM_LOG_WARN, 0,
               "ecfs: copy of %s to %s: the source changed during the copy "
               "(ETag %s no longer matches)",
               src, dst, src_etag);
    /* a server that ignores the condition (RGW 16.2) copied whatever each
     * part found: the source must still be the version HEADed */
    if (ret == 0 && src_etag[0] != '\0')
        ret = s3_still_same(s, src, src_etag);
    if (ret == 0)
        ret = fc_s3_mpu_complete(s, dst, id, etags, n, etag);
    if (ret < 0 && id != NULL && fc_s3_mpu_abort(s, dst, id) < 0)
        cm_log(CM_LOG_WARN, 0, "ecfs: %s: copy upload %s left behind", dst, id);
    if (ret == 0 && copied != NULL)
        snprintf(copied, FC_ETAG_MAX, "%s", src_etag);
    free(id);
    free(etags);
    return ret;
}

/* Formats the counters (see header). */
int fc_s3_stats_format(struct fc_s3 *s, char *out, size_t cap)
{
    struct fc_s3_stats *t = &s->stats;

    return snprintf(
        out, cap,
        "get=%lu head=%lu list=%lu retries=%lu errors=%lu "
        "bytes=%lu etag_mismatch=%lu put=%lu parts=%lu mpu=%lu "
        "del=%lu copy=%lu bytes_up=%lu",
        atomic_load(&t->get), atomic_load(&t->head), atomic_load(&t->list),
        atomic_load(&t->retries), atomic_load(&t->errors),
        atomic_load(&t->bytes), atomic_load(&t->etag_mismatch),
        atomic_load(&t->put), atomic_load(&t->parts), atomic_load(&t->mpu),
        atomic_load(&t->del), atomic_load(&t->copy), atomic_load(&t->bytes_up));
}

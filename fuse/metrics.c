/* fuse/metrics.c - the client's series (see metrics.h), rendered as
 * Prometheus text for the -o metrics= server and the OTLP push.
 *
 * DESIGN: as storaged's s3/metrics.c, fixed arrays of relaxed atomics, one
 * slot per (label value, bucket): the label spaces (FUSE op, S3 API, HTTP
 * status) are small and known, so there is no registry, no lock and no
 * allocation on the hot paths. Counters are process-wide (one mount per
 * process). Reader wait is measured where a FUSE read blocks on a block
 * that is not in memory: its own GET (a miss) or a GET already in flight
 * (a prefetch or another reader's); a hit on a ready block costs nothing.
 * The side servers (common/httpd.c, common/otlp.c) run on threads of their
 * own, never on a FUSE thread. */
#include "fuse/metrics.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/httpd.h"
#include "common/log.h"
#include "common/otlp.h"
#include "fuse/cache.h"
#include "fuse/dcache.h"
#include "fuse/fs.h"
#include "fuse/inode.h"
#include "fuse/read.h"
#include "fuse/s3.h"

#define ECFS_METRICS_VERSION "0.1"

bool fc_metrics_on;

static const double bounds[] = {1e-5,   5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
                                2.5e-3, 5e-3, 0.01, 0.025,  0.05, 0.1,
                                0.25,   0.5,  1,    2.5,    10};
#define NB      (sizeof(bounds) / sizeof(bounds[0]))
#define NSTATUS 600

struct hist {
    atomic_uint_fast64_t b[NB + 1];
    atomic_uint_fast64_t sum_ns;
};

/* S3 request kinds, by the fc_s3_stats counter each bumps. */
enum s3_api {
    API_GET = 0,
    API_HEAD,
    API_LIST,
    API_PUT,
    API_PART,
    API_MPU,
    API_DEL,
    API_COPY,
    API_OTHER,
    API_COUNT
};

static const char *const api_names[API_COUNT] = {
    "GetObject",    "HeadObject", "ListObjectsV2",
    "PutObject",    "UploadPart", "MultipartUpload",
    "DeleteObject", "CopyObject", "Other",
};

static const char *const op_names[FC_MOP_COUNT] = {
    [FC_MOP_LOOKUP] = "lookup",
    [FC_MOP_FORGET] = "forget",
    [FC_MOP_GETATTR] = "getattr",
    [FC_MOP_SETATTR] = "setattr",
    [FC_MOP_MKDIR] = "mkdir",
    [FC_MOP_UNLINK] = "unlink",
    [FC_MOP_RMDIR] = "rmdir",
    [FC_MOP_RENAME] = "rename",
    [FC_MOP_OPEN] = "open",
    [FC_MOP_READ] = "read",
    [FC_MOP_WRITE] = "write",
    [FC_MOP_FLUSH] = "flush",
    [FC_MOP_RELEASE] = "release",
    [FC_MOP_FSYNC] = "fsync",
    [FC_MOP_OPENDIR] = "opendir",
    [FC_MOP_READDIR] = "readdir",
    [FC_MOP_READDIRPLUS] = "readdirplus",
    [FC_MOP_RELEASEDIR] = "releasedir",
    [FC_MOP_STATFS] = "statfs",
    [FC_MOP_CREATE] = "create",
    [FC_MOP_IOCTL] = "ioctl",
    [FC_MOP_ACCESS] = "access",
    [FC_MOP_XATTR] = "xattr",
    [FC_MOP_MKNOD] = "mknod",
    [FC_MOP_SYMLINK] = "symlink",
    [FC_MOP_LINK] = "link",
};

/* See header. */
const char *fc_metrics_op_name(enum fc_mop op)
{
    return (unsigned)op < FC_MOP_COUNT ? op_names[op] : "other";
}

static struct {
    struct hist fuse[FC_MOP_COUNT];
    atomic_uint_fast64_t s3_req[API_COUNT][NSTATUS]; /* status 0: none */
    struct hist s3_lat[API_COUNT];
    atomic_uint_fast64_t s3_down[API_COUNT], s3_up[API_COUNT];
    atomic_uint_fast64_t hits, misses, read_bytes;
    atomic_uint_fast64_t wait_ns;
    struct hist wait;
} M;
static struct cm_httpd *g_httpd;
static struct cm_otlp *g_otlp;

static void hist_add(struct hist *h, double secs)
{
    size_t b = 0;

    while (b < NB && secs > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->b[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns,
                              (uint_fast64_t)(secs > 0 ? secs * 1e9 : 0),
                              memory_order_relaxed);
}

/* See header. */
void fc_metrics_fuse(enum fc_mop op, double t0)
{
    if ((unsigned)op < FC_MOP_COUNT)
        hist_add(&M.fuse[op], fc_metrics_now() - t0);
}

/* The API of the fc_s3_stats counter at @off. */
static enum s3_api api_of(size_t off)
{
    static const size_t offs[] = {
        offsetof(struct fc_s3_stats, get),   offsetof(struct fc_s3_stats, head),
        offsetof(struct fc_s3_stats, list),  offsetof(struct fc_s3_stats, put),
        offsetof(struct fc_s3_stats, parts), offsetof(struct fc_s3_stats, mpu),
        offsetof(struct fc_s3_stats, del),   offsetof(struct fc_s3_stats, copy),
    };

    for (size_t i = 0; i < CM_ARRAY_SIZE(offs); i++)
        if (offs[i] == off)
            return (enum s3_api)i;
    return API_OTHER;
}

/* See header. */
void fc_metrics_s3(void *h, size_t stat_off, long status)
{
    enum s3_api a;
    curl_off_t us = 0, down = 0, up = 0;

    if (!fc_metrics_on)
        return;
    a = api_of(stat_off);
    if (status < 0 || status >= NSTATUS)
        status = 0;
    curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &us);
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    atomic_fetch_add_explicit(&M.s3_req[a][status], 1, memory_order_relaxed);
    hist_add(&M.s3_lat[a], (double)us / 1e6);
    atomic_fetch_add_explicit(&M.s3_down[a], (uint_fast64_t)down,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&M.s3_up[a], (uint_fast64_t)up,
                              memory_order_relaxed);
}

/* See header. */
void fc_metrics_read_block(double t0, bool owner, unsigned n)
{
    double w;

    if (!fc_metrics_on)
        return;
    if (owner) {
        atomic_fetch_add_explicit(&M.misses, n, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&M.hits, 1, memory_order_relaxed);
        if (!fc_cache_waited)
            return; /* it was ready: no wait */
    }
    w = fc_metrics_now() - t0;
    atomic_fetch_add_explicit(&M.wait_ns, (uint_fast64_t)(w > 0 ? w * 1e9 : 0),
                              memory_order_relaxed);
    hist_add(&M.wait, w);
}

/* See header. */
void fc_metrics_read_bytes(uint64_t n)
{
    if (fc_metrics_on)
        atomic_fetch_add_explicit(&M.read_bytes, n, memory_order_relaxed);
}

/* ---- rendering ---- */

static unsigned long long ld(atomic_uint_fast64_t *a)
{
    return (unsigned long long)atomic_load_explicit(a, memory_order_relaxed);
}

/* One histogram series @name{@lname="@lval"} (no label when @lname NULL). */
static int render_hist(struct cm_buf *o, const char *name, const char *lname,
                       const char *lval, struct hist *h)
{
    char lab[128] = "", lab_le[160];
    unsigned long long cum = 0;
    int ret = 0;

    if (lname)
        snprintf(lab, sizeof(lab), "%s=\"%s\"", lname, lval);
    for (size_t b = 0; b <= NB && ret == 0; b++) {
        char le[32];

        cum += ld(&h->b[b]);
        if (b < NB)
            snprintf(le, sizeof(le), "%g", bounds[b]);
        else
            snprintf(le, sizeof(le), "+Inf");
        snprintf(lab_le, sizeof(lab_le), "%s%sle=\"%s\"", lab, lname ? "," : "",
                 le);
        ret = cm_buf_appendf(o, "%s_bucket{%s} %llu\n", name, lab_le, cum);
    }
    if (ret == 0)
        ret = cm_buf_appendf(o, "%s_sum%s%s%s %.9f\n%s_count%s%s%s %llu\n",
                             name, lname ? "{" : "", lab, lname ? "}" : "",
                             (double)ld(&h->sum_ns) / 1e9, name,
                             lname ? "{" : "", lab, lname ? "}" : "", cum);
    return ret;
}

static uint64_t hist_count(struct hist *h)
{
    uint64_t n = 0;

    for (size_t b = 0; b <= NB; b++)
        n += ld(&h->b[b]);
    return n;
}

static int render_fuse(struct cm_buf *o)
{
    int ret = cm_buf_appends(
        o, "# HELP ecfs_fuse_operation_duration_seconds FUSE operations by "
           "type: time in ecfs from request to reply.\n"
           "# TYPE ecfs_fuse_operation_duration_seconds histogram\n");

    for (int op = 0; op < FC_MOP_COUNT && ret == 0; op++)
        if (hist_count(&M.fuse[op]))
            ret = render_hist(o, "ecfs_fuse_operation_duration_seconds", "op",
                              op_names[op], &M.fuse[op]);
    return ret;
}

static int render_s3(struct cm_buf *o, struct fc_s3_stats *st)
{
    int ret = cm_buf_appends(
        o, "# HELP ecfs_s3_requests_total S3 request attempts by API and "
           "HTTP status (status=\"0\": no response).\n"
           "# TYPE ecfs_s3_requests_total counter\n");

    for (int a = 0; a < API_COUNT && ret == 0; a++)
        for (int s = 0; s < NSTATUS && ret == 0; s++) {
            unsigned long long v = ld(&M.s3_req[a][s]);

            if (v)
                ret = cm_buf_appendf(
                    o,
                    "ecfs_s3_requests_total{api=\"%s\",status=\"%d\"} %llu\n",
                    api_names[a], s, v);
        }
    if (ret == 0)
        ret = cm_buf_appends(
            o, "# HELP ecfs_s3_request_duration_seconds S3 request attempt "
               "latency by API.\n"
               "# TYPE ecfs_s3_request_duration_seconds histogram\n");
    for (int a = 0; a < API_COUNT && ret == 0; a++)
        if (hist_count(&M.s3_lat[a]))
            ret = render_hist(o, "ecfs_s3_request_duration_seconds", "api",
                              api_names[a], &M.s3_lat[a]);
    if (ret == 0)
        ret = cm_buf_appends(
            o, "# HELP ecfs_s3_received_bytes_total Response body bytes by "
               "API.\n# TYPE ecfs_s3_received_bytes_total counter\n"
               "# HELP ecfs_s3_sent_bytes_total Request body bytes by API.\n"
               "# TYPE ecfs_s3_sent_bytes_total counter\n");
    for (int a = 0; a < API_COUNT && ret == 0; a++)
        if (hist_count(&M.s3_lat[a]))
            ret = cm_buf_appendf(
                o,
                "ecfs_s3_received_bytes_total{api=\"%s\"} %llu\n"
                "ecfs_s3_sent_bytes_total{api=\"%s\"} %llu\n",
                api_names[a], ld(&M.s3_down[a]), api_names[a], ld(&M.s3_up[a]));
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "# HELP ecfs_s3_retries_total S3 attempts that were retries.\n"
            "# TYPE ecfs_s3_retries_total counter\necfs_s3_retries_total %lu\n"
            "# HELP ecfs_s3_errors_total S3 requests that failed for good.\n"
            "# TYPE ecfs_s3_errors_total counter\necfs_s3_errors_total %lu\n",
            st ? atomic_load(&st->retries) : 0UL,
            st ? atomic_load(&st->errors) : 0UL);
    return ret;
}

/* The disk cache's own counters (fc_dcache_stats_format, " dcache_x=N"
 * pairs: the one source, as for .ecfs-stats) as ecfs_disk_cache_x series:
 * bytes and files are gauges, the rest counters. */
static int render_dcache(struct fc_fs *fs, struct cm_buf *o)
{
    char flat[1024], *p, *save = NULL;
    int ret = 0;

    if (fs->dcache == NULL)
        return 0;
    if (fc_dcache_stats_format(fs->dcache, flat, sizeof(flat)) < 0)
        return 0;
    for (p = strtok_r(flat, " ", &save); p && ret == 0;
         p = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(p, '=');
        bool gauge;

        if (eq == NULL || strncmp(p, "dcache_", 7) != 0)
            continue;
        *eq = 0;
        p += 7;
        gauge = strcmp(p, "bytes") == 0 || strcmp(p, "files") == 0;
        ret = cm_buf_appendf(o,
                             "# TYPE ecfs_disk_cache_%s%s %s\n"
                             "ecfs_disk_cache_%s%s %s\n",
                             p, gauge ? "" : "_total",
                             gauge ? "gauge" : "counter", p,
                             gauge ? "" : "_total", eq + 1);
    }
    return ret;
}

/* The value of " @name=N" in @flat, 0 when absent. */
static unsigned long long flat_get(const char *flat, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = strstr(flat, name); p; p = strstr(p + 1, name))
        if ((p == flat || p[-1] == ' ') && p[n] == '=')
            return strtoull(p + n + 1, NULL, 10);
    return 0;
}

/* Prefetch issued/used/wasted from the read path's own accounting, the
 * one source .ecfs-stats shows too (fc_read_stats_format): readahead_*
 * (cache.c: bytes fetched, taken by a reader, evicted before any reader
 * took them) and dir_prefetch_* (bytes queued, not read yet, evicted
 * unread). */
static int render_prefetch(struct fc_fs *fs, struct cm_buf *o)
{
    char flat[2048] = "";
    unsigned long long ri, ru, rw, dq, du, dw;

    if (fs->pf != NULL)
        (void)fc_read_stats_format(fs, flat, sizeof(flat));
    ri = flat_get(flat, "readahead_bytes");
    ru = flat_get(flat, "readahead_used_bytes");
    rw = flat_get(flat, "readahead_wasted_bytes");
    dq = flat_get(flat, "dir_prefetch_bytes");
    du = flat_get(flat, "dir_prefetch_unread_bytes");
    dw = flat_get(flat, "dir_prefetch_evicted_unread_bytes");
    return cm_buf_appendf(
        o,
        "# HELP ecfs_prefetch_issued_bytes_total Bytes fetched ahead of "
        "reads, by kind (readahead of a sequential reader, directory "
        "prefetch of small files).\n"
        "# TYPE ecfs_prefetch_issued_bytes_total counter\n"
        "ecfs_prefetch_issued_bytes_total{kind=\"readahead\"} %llu\n"
        "ecfs_prefetch_issued_bytes_total{kind=\"dir\"} %llu\n"
        "# HELP ecfs_prefetch_used_bytes_total Prefetched bytes a read then "
        "used.\n"
        "# TYPE ecfs_prefetch_used_bytes_total counter\n"
        "ecfs_prefetch_used_bytes_total{kind=\"readahead\"} %llu\n"
        "ecfs_prefetch_used_bytes_total{kind=\"dir\"} %llu\n"
        "# HELP ecfs_prefetch_wasted_bytes_total Prefetched bytes evicted "
        "before any read.\n"
        "# TYPE ecfs_prefetch_wasted_bytes_total counter\n"
        "ecfs_prefetch_wasted_bytes_total{kind=\"readahead\"} %llu\n"
        "ecfs_prefetch_wasted_bytes_total{kind=\"dir\"} %llu\n"
        "# HELP ecfs_prefetch_unread_bytes Prefetched bytes not read yet.\n"
        "# TYPE ecfs_prefetch_unread_bytes gauge\n"
        "ecfs_prefetch_unread_bytes{kind=\"dir\"} %llu\n",
        ri, dq, ru, dq - (du < dq ? du : dq), rw, dw, du);
}

static int render_cache(struct fc_fs *fs, struct cm_buf *o)
{
    size_t bytes = 0, blocks = 0;
    int ret;

    if (fs->cache)
        fc_cache_usage(fs->cache, &bytes, &blocks);
    ret = cm_buf_appendf(
        o,
        "# HELP ecfs_read_bytes_total Bytes FUSE reads returned.\n"
        "# TYPE ecfs_read_bytes_total counter\necfs_read_bytes_total %llu\n"
        "# HELP ecfs_block_cache_hits_total Block lookups of reads found in "
        "memory (ready or being fetched).\n"
        "# TYPE ecfs_block_cache_hits_total counter\n"
        "ecfs_block_cache_hits_total %llu\n"
        "# HELP ecfs_block_cache_misses_total Blocks reads had to fetch "
        "themselves (from the disk cache or S3).\n"
        "# TYPE ecfs_block_cache_misses_total counter\n"
        "ecfs_block_cache_misses_total %llu\n"
        "# TYPE ecfs_block_cache_bytes gauge\necfs_block_cache_bytes %zu\n"
        "# TYPE ecfs_block_cache_blocks gauge\necfs_block_cache_blocks %zu\n",
        ld(&M.read_bytes), ld(&M.hits), ld(&M.misses), bytes, blocks);
    if (ret == 0)
        ret = render_dcache(fs, o);
    if (ret == 0)
        ret = render_prefetch(fs, o);
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "# HELP ecfs_reader_wait_seconds_total Time FUSE reads spent "
            "waiting for S3 (their own GET or one in flight).\n"
            "# TYPE ecfs_reader_wait_seconds_total counter\n"
            "ecfs_reader_wait_seconds_total %.9f\n"
            "# HELP ecfs_reader_wait_duration_seconds Each wait of a read "
            "for a block from S3.\n"
            "# TYPE ecfs_reader_wait_duration_seconds histogram\n",
            (double)ld(&M.wait_ns) / 1e9);
    if (ret == 0)
        ret = render_hist(o, "ecfs_reader_wait_duration_seconds", NULL, NULL,
                          &M.wait);
    if (ret == 0)
        ret = cm_buf_appendf(o, "# TYPE ecfs_inodes gauge\necfs_inodes %zu\n",
                             fs->itab ? fc_itab_count(fs->itab) : (size_t)0);
    return ret;
}

/* See header. */
int fc_metrics_render(struct fc_fs *fs, struct cm_buf *out)
{
    int ret = render_fuse(out);

    if (ret == 0)
        ret = render_s3(out, fs->s3 ? fc_s3_stats(fs->s3) : NULL);
    if (ret == 0)
        ret = render_cache(fs, out);
    return ret;
}

/* ---- the servers ---- */

static void metrics_handle(void *arg, const struct cm_httpd_req *rq,
                           struct cm_httpd_resp *rs)
{
    struct fc_fs *fs = arg;

    if (strcmp(rq->path, "/metrics") != 0) {
        rs->status = 404;
        if (cm_buf_appends(&rs->body, "404: the metrics are on /metrics\n") < 0)
            rs->status = 500;
        return;
    }
    if (fc_metrics_render(fs, &rs->body) < 0) {
        cm_buf_fini(&rs->body);
        rs->status = 500;
        return;
    }
    rs->status = 200;
    rs->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

static int otlp_render(void *arg, struct cm_buf *out)
{
    return fc_metrics_render(arg, out);
}

/* See header. */
int fc_metrics_check(const struct fc_metrics_conf *c)
{
    if (c->listen) {
        struct cm_httpd *s;
        char *err = NULL;
        int ret = cm_httpd_start(c->listen, "metrics", metrics_handle, NULL, &s,
                                 &err);

        if (ret < 0) {
            if (err)
                fprintf(stderr, "ecfs: -o metrics=%s: %s\n", c->listen, err);
            else
                fprintf(stderr,
                        "ecfs: bad -o metrics=%s (want HOST:PORT, e.g. "
                        "127.0.0.1:9464)\n",
                        c->listen);
            free(err);
            return -1;
        }
        cm_httpd_stop(s);
    }
    if (c->otlp_endpoint && cm_otlp_check_endpoint(c->otlp_endpoint) < 0) {
        fprintf(stderr,
                "ecfs: bad -o otlp_endpoint=%s (want http(s)://HOST:PORT"
                "[/PATH])\n",
                c->otlp_endpoint);
        return -1;
    }
    if (c->otlp_interval_s < 0 || c->otlp_interval_s > 86400 ||
        (c->otlp_interval_s > 0 && c->otlp_interval_s < 0.1)) {
        fprintf(stderr, "ecfs: bad otlp_interval (seconds, 0.1..86400)\n");
        return -1;
    }
    return 0;
}

/* See header. */
int fc_metrics_start(struct fc_fs *fs, const struct fc_metrics_conf *c)
{
    char *err = NULL;
    int ret;

    if (c->listen == NULL && c->otlp_endpoint == NULL)
        return 0;
    fc_metrics_on = true;
    if (c->listen) {
        ret = cm_httpd_start(c->listen, "metrics", metrics_handle, fs, &g_httpd,
                             &err);
        if (ret < 0) {
            cm_log(CM_LOG_ERROR, -ret, "ecfs: metrics on %s: %s", c->listen,
                   err ? err : "cannot start");
            free(err);
            return ret;
        }
        cm_log(CM_LOG_INFO, 0, "ecfs: Prometheus metrics on http://%s/metrics",
               c->listen);
    }
    if (c->otlp_endpoint) {
        struct cm_otlp_conf oc = {
            .endpoint = c->otlp_endpoint,
            .interval_s = c->otlp_interval_s > 0 ? c->otlp_interval_s : 10,
            .res = {"ecfs", c->instance, ECFS_METRICS_VERSION},
            .render = otlp_render,
            .render_arg = fs,
        };

        ret = cm_otlp_start(&oc, &g_otlp);
        if (ret < 0) {
            cm_log(CM_LOG_ERROR, -ret, "ecfs: cannot start the OTLP push");
            fc_metrics_stop();
            return ret;
        }
    }
    return 0;
}

/* See header. */
void fc_metrics_stop(void)
{
    cm_otlp_stop(g_otlp);
    g_otlp = NULL;
    cm_httpd_stop(g_httpd);
    g_httpd = NULL;
}

/* storaged/s3/console.c - the daemon's side services: the OTLP push of the
 * /metrics series (--otlp-endpoint) and the read-only status page
 * (--console ADDR).
 *
 * DESIGN: nothing here runs on an event loop or takes a lock a request
 * takes. The push thread (common/otlp.c) renders the same Prometheus text
 * as /metrics and encodes it. The console is a common/httpd.c server on its
 * own thread and address, behind HTTP Basic with the root credentials or
 * an admin user's keys (a policy allowing admin:ListUsers; plain HTTP: bind
 * it to 127.0.0.1, or put TLS in front), and a sampler
 * thread that snapshots the request totals once a second into a ring of
 * 15 minutes; the page draws its charts from that ring as inline SVG, with
 * no script, font or other resource fetched. The page reloads itself every
 * second (meta refresh), and reads drive states at each load, so a drive
 * that goes offline shows within the drive probe's second plus one. */
#include "storaged/s3/s3_i.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/httpd.h"
#include "common/log.h"
#include "common/otlp.h"
#include "common/sigv4.h"
#include "common/xml.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/lifecycle.h"
#include "storaged/s3/metrics.h"
#include "storaged/s3/policy.h"

#define RING      901 /* 15 minutes of 1 s samples, plus one */
#define CHART_W   720
#define CHART_H   140
#define REFRESH_S 1

struct sample {
    double t; /* monotonic seconds */
    struct stor_metrics_totals tot;
    uint64_t scan_objects;
};

struct stor_s3_obs {
    struct stor_s3 *s3; /* borrowed */
    char *instance, *version;
    struct cm_otlp *otlp;
    struct cm_httpd *httpd;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct stor_http_server *srv; /* protected by lock */
    bool stop;                    /* protected by lock */
    bool sampling;                /* the sampler thread runs */
    pthread_t tid;
    struct sample *ring; /* RING of them; protected by lock */
    size_t head, n;      /* next slot, valid samples; protected by lock */
    time_t started;
};

static double mono_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The /metrics text with the transport's figures (if it runs). Takes
 * obs->lock only to read the server pointer, which stays valid while the
 * lock is held (stor_s3_obs_serving(NULL) waits for it). */
static int render_metrics(void *arg, struct cm_buf *out)
{
    struct stor_s3_obs *obs = arg;
    struct stor_http_stats st = {0};
    bool have;
    int ret;

    pthread_mutex_lock(&obs->lock);
    have = obs->srv != NULL;
    if (have)
        stor_http_stats(obs->srv, &st);
    pthread_mutex_unlock(&obs->lock);
    ret = stor_metrics_render(obs->s3->metrics, obs->s3->store,
                              have ? &st : NULL, out);
    if (ret == 0) /* what /metrics has (s3.c metrics_run) */
        ret = stor_lc_metrics(obs->s3->lc, out);
    return ret;
}

/* ---- the sampler ---- */

static void *sampler_main(void *arg)
{
    struct stor_s3_obs *obs = arg;
    struct timespec next;

    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&obs->lock);
    while (!obs->stop) {
        struct sample sm;
        struct stor_store_stats ss;

        pthread_mutex_unlock(&obs->lock);
        sm.t = mono_now();
        stor_metrics_totals(obs->s3->metrics, &sm.tot);
        stor_store_get_stats(obs->s3->store, &ss);
        sm.scan_objects = ss.scan_objects;
        pthread_mutex_lock(&obs->lock);
        obs->ring[obs->head] = sm;
        obs->head = (obs->head + 1) % RING;
        if (obs->n < RING)
            obs->n++;
        next.tv_sec += 1;
        while (!obs->stop && pthread_cond_timedwait(&obs->cond, &obs->lock,
                                                    &next) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&obs->lock);
    return NULL;
}

/* ---- the page ---- */

/* Appends @s HTML-escaped. */
static int esc(struct cm_buf *o, const char *s)
{
    return cm_xml_escape(o, s, strlen(s));
}

/* "12.3 KiB" style. */
static void human_bytes(double v, char *out, size_t cap)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t i = 0;

    while (v >= 1024 && i + 1 < CM_ARRAY_SIZE(u)) {
        v /= 1024;
        i++;
    }
    snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* One series of a chart: a value per sample interval. */
struct series {
    const char *label, *color;
    double *v; /* n of them */
};

/* A line chart of @ns series over @n points as inline SVG. */
static int chart(struct cm_buf *o, const char *title, const char *unit,
                 const struct series *s, size_t ns, size_t n, double span_s)
{
    double max = 0;
    int ret;

    for (size_t k = 0; k < ns; k++)
        for (size_t i = 0; i < n; i++)
            if (s[k].v[i] > max)
                max = s[k].v[i];
    if (max <= 0)
        max = 1;
    ret = cm_buf_appendf(
        o,
        "<figure class=\"chart\"><figcaption>%s <small>(max %.3g %s, last "
        "%.0f min)</small>",
        title, max, unit, span_s / 60);
    for (size_t k = 0; k < ns && ret == 0; k++)
        ret = cm_buf_appendf(o, " <span style=\"color:%s\">&#9632; %s</span>",
                             s[k].color, s[k].label);
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "</figcaption><svg viewBox=\"0 0 %d %d\" width=\"%d\" "
            "height=\"%d\" role=\"img\"><rect x=\"0\" y=\"0\" width=\"%d\" "
            "height=\"%d\" fill=\"#fafafa\" stroke=\"#ccc\"/>",
            CHART_W, CHART_H, CHART_W, CHART_H, CHART_W, CHART_H);
    for (size_t k = 0; k < ns && ret == 0; k++) {
        ret = cm_buf_appendf(o,
                             "<polyline fill=\"none\" stroke=\"%s\" "
                             "stroke-width=\"1.5\" points=\"",
                             s[k].color);
        for (size_t i = 0; i < n && ret == 0; i++) {
            double x = n > 1 ? (double)i * (CHART_W - 2) / (double)(n - 1) + 1
                             : CHART_W / 2.0;
            double y = CHART_H - 2 - s[k].v[i] / max * (CHART_H - 14);

            ret = cm_buf_appendf(o, "%.1f,%.1f ", x, y);
        }
        if (ret == 0)
            ret = cm_buf_appends(o, "\"/>");
    }
    if (ret == 0)
        ret = cm_buf_appendf(o,
                             "<text x=\"4\" y=\"11\" font-size=\"10\">%.3g "
                             "%s</text></svg></figure>\n",
                             max, unit);
    return ret;
}

/* Upper bound (ms) of the bucket holding the @q quantile of @lat. */
static double quantile_ms(const uint64_t *lat, double q)
{
    const double *bounds = stor_metrics_lat_bounds();
    uint64_t total = 0, cum = 0;

    for (size_t b = 0; b < STOR_METRICS_NLAT; b++)
        total += lat[b];
    if (total == 0)
        return 0;
    for (size_t b = 0; b + 1 < STOR_METRICS_NLAT; b++) {
        cum += lat[b];
        if ((double)cum >= q * (double)total)
            return bounds[b] * 1e3;
    }
    return bounds[STOR_METRICS_NLAT - 2] * 1e3; /* beyond the last bound */
}

/* The charts from the ring (copied under the lock). */
static int render_charts(struct stor_s3_obs *obs, struct cm_buf *o)
{
    struct sample *sm = malloc(RING * sizeof(*sm));
    double *v = calloc(6 * RING, sizeof(double));
    size_t n, first, m;
    int ret = 0;

    if (sm == NULL || v == NULL) {
        free(sm);
        free(v);
        return -ENOMEM;
    }
    pthread_mutex_lock(&obs->lock);
    n = obs->n;
    first = (obs->head + RING - n) % RING;
    for (size_t i = 0; i < n; i++)
        sm[i] = obs->ring[(first + i) % RING];
    pthread_mutex_unlock(&obs->lock);
    m = n > 1 ? n - 1 : 0;
    for (size_t i = 0; i < m; i++) {
        const struct sample *a = &sm[i], *b = &sm[i + 1];
        double dt = b->t - a->t > 0 ? b->t - a->t : 1;
        uint64_t dn = b->tot.requests - a->tot.requests;
        uint64_t lat[STOR_METRICS_NLAT];

        for (size_t k = 0; k < STOR_METRICS_NLAT; k++)
            lat[k] = b->tot.lat[k] - a->tot.lat[k];
        v[0 * RING + i] = (double)dn / dt;
        v[1 * RING + i] = (double)(b->tot.errors - a->tot.errors) / dt;
        v[2 * RING + i] =
            dn ? (double)(b->tot.lat_us - a->tot.lat_us) / (double)dn / 1e3 : 0;
        v[3 * RING + i] = quantile_ms(lat, 0.99);
        v[4 * RING + i] =
            (double)(b->tot.bytes_out - a->tot.bytes_out) / dt / 1048576;
        v[5 * RING + i] =
            (double)(b->tot.bytes_in - a->tot.bytes_in) / dt / 1048576;
    }
    {
        double span = m ? sm[n - 1].t - sm[0].t : 0;
        struct series rate[2] = {{"requests/s", "#1565c0", v},
                                 {"5xx/s", "#c62828", v + RING}};
        struct series lat[2] = {
            {"mean", "#2e7d32", v + 2 * RING},
            {"p99 (bucket bound)", "#ef6c00", v + 3 * RING}};
        struct series bytes[2] = {{"out", "#6a1b9a", v + 4 * RING},
                                  {"in", "#00838f", v + 5 * RING}};

        ret = cm_buf_appends(o, "<section id=\"requests\"><h2>Requests, last "
                                "15 minutes</h2>\n");
        if (ret == 0 && m == 0)
            ret = cm_buf_appends(o, "<p>Collecting samples (one a second)"
                                    "&hellip;</p>");
        if (ret == 0)
            ret = chart(o, "Request rate", "req/s", rate, 2, m, span);
        if (ret == 0)
            ret = chart(o, "Latency", "ms", lat, 2, m, span);
        if (ret == 0)
            ret = chart(o, "Bytes", "MiB/s", bytes, 2, m, span);
    }
    free(sm);
    free(v);
    return ret;
}

/* Scanner objects per second over the last (up to) 10 samples. */
static double scan_rate(struct stor_s3_obs *obs)
{
    double r = 0;

    pthread_mutex_lock(&obs->lock);
    if (obs->n >= 2) {
        size_t k = obs->n < 11 ? obs->n : 11;
        const struct sample *b = &obs->ring[(obs->head + RING - 1) % RING];
        const struct sample *a = &obs->ring[(obs->head + RING - k) % RING];

        if (b->t > a->t)
            r = (double)(b->scan_objects - a->scan_objects) / (b->t - a->t);
    }
    pthread_mutex_unlock(&obs->lock);
    return r;
}

/* A table cell holding /metrics series @series (a printf format over the
 * drive path) with value @v: data-m names the series, so a test can
 * compare the page with /metrics. */
static int cell_u64(struct cm_buf *o, const char *series, const char *drive,
                    uint64_t v)
{
    int ret = cm_buf_appendf(o, "<td class=\"n\" data-m=\"%s", series);

    if (ret == 0 && drive) {
        ret = cm_buf_appends(o, "{drive=&quot;");
        if (ret == 0)
            ret = esc(o, drive);
        if (ret == 0)
            ret = cm_buf_appends(o, "&quot;}");
    }
    if (ret == 0)
        ret = cm_buf_appendf(o, "\">%llu</td>", (unsigned long long)v);
    return ret;
}

/* Drives and sets. */
static int render_drives(struct stor_s3_obs *obs, struct cm_buf *o,
                         const struct stor_store_stats *ss)
{
    int ret = cm_buf_appendf(
        o,
        "<section id=\"drives\"><h2>Drives <small><span "
        "data-m=\"storaged_drives_online\">%zu</span> of <span "
        "data-m=\"storaged_drives\">%zu</span> online</small></h2>\n"
        "<table><tr><th>drive</th><th>set</th><th>pos</th><th>state</th>"
        "<th>errors</th><th>reads</th><th>writes</th><th>read bytes</th>"
        "<th>written bytes</th></tr>\n",
        ss->drives_online, ss->ndrives);

    for (size_t i = 0; i < ss->ndrives && ret == 0; i++) {
        struct stor_drive_stats d;
        char rb[32], wb[32];

        stor_store_get_drive_stats(obs->s3->store, i, &d);
        human_bytes((double)d.read_bytes, rb, sizeof(rb));
        human_bytes((double)d.write_bytes, wb, sizeof(wb));
        ret = cm_buf_appends(o, "<tr class=\"drive\"><td class=\"path\">");
        if (ret == 0)
            ret = esc(o, d.path);
        if (ret == 0)
            ret = cm_buf_appendf(
                o, "</td><td>%d</td><td>%d</td><td class=\"state %s\">%s</td>",
                d.set, d.pos, d.online ? "online" : "offline",
                d.online ? "online" : "OFFLINE");
        if (ret == 0)
            ret = cell_u64(o, "storaged_drive_errors_total", d.path, d.errors);
        if (ret == 0)
            ret = cell_u64(o, "storaged_drive_reads_total", d.path, d.reads);
        if (ret == 0)
            ret = cell_u64(o, "storaged_drive_writes_total", d.path, d.writes);
        if (ret == 0)
            ret = cell_u64(o, "storaged_drive_read_bytes_total", d.path,
                           d.read_bytes);
        if (ret == 0)
            ret = cell_u64(o, "storaged_drive_write_bytes_total", d.path,
                           d.write_bytes);
        if (ret == 0)
            ret =
                cm_buf_appendf(o,
                               "</tr>\n<tr class=\"sub\"><td></td><td "
                               "colspan=\"8\">%s read, %s written</td></tr>\n",
                               rb, wb);
    }
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "</table></section>\n<section id=\"sets\"><h2>Sets and "
            "geometry</h2>\n<p><span data-m=\"storaged_sets\">%d</span> "
            "erasure set(s) of <span data-m=\"storaged_set_drives\">%d</span> "
            "drives; a full-size object is <span "
            "data-m=\"storaged_ec_data_shards\">%d</span>+<span "
            "data-m=\"storaged_ec_parity_shards\">%d</span> (data+parity); "
            "smaller objects use fewer data shards with the same parity.</p>\n"
            "<table><tr><th>set</th><th>drives online</th></tr>\n",
            ss->nsets, ss->set_size, ss->ec_data, ss->ec_parity);
    for (int set = 0; set < ss->nsets && ret == 0; set++) {
        int on = 0, all = 0;

        for (size_t i = 0; i < ss->ndrives; i++) {
            struct stor_drive_stats d;

            stor_store_get_drive_stats(obs->s3->store, i, &d);
            if (d.set == set) {
                all++;
                on += d.online;
            }
        }
        ret = cm_buf_appendf(
            o,
            "<tr class=\"set\"><td>%d</td><td class=\"%s\">%d / %d</td></tr>\n",
            set, on == all ? "online" : "offline", on, all);
    }
    return ret ? ret : cm_buf_appends(o, "</table></section>\n");
}

/* Scanner progress. */
static int render_scanner(struct stor_s3_obs *obs, struct cm_buf *o,
                          const struct stor_store_stats *ss)
{
    return cm_buf_appendf(
        o,
        "<section id=\"scanner\"><h2>Scanner</h2>\n<table>"
        "<tr><th>cycle</th><td class=\"n\"><span "
        "data-m=\"storaged_scan_cycle_percent\">%.2f</span> %%</td></tr>"
        "<tr><th>objects/s (last 10 s)</th><td class=\"n\">%.1f</td></tr>"
        "<tr><th>heal queue</th><td class=\"n\" "
        "data-m=\"storaged_heal_queue\">%zu</td></tr>"
        "<tr><th>last cycle</th><td class=\"n\"><span "
        "data-m=\"storaged_scan_last_cycle_seconds\">%.3f</span> s</td></tr>"
        "<tr><th>cycles done</th><td class=\"n\" "
        "data-m=\"storaged_scan_cycles_total\">%llu</td></tr>"
        "<tr><th>objects scanned</th><td class=\"n\" "
        "data-m=\"storaged_scan_objects_total\">%llu</td></tr>"
        "<tr><th>corruption found</th><td class=\"n\" "
        "data-m=\"storaged_corrupt_found_total\">%llu</td></tr>"
        "<tr><th>shards healed</th><td class=\"n\" "
        "data-m=\"storaged_shards_healed_total\">%llu</td></tr>"
        "<tr><th>degraded reads</th><td class=\"n\" "
        "data-m=\"storaged_degraded_reads_total\">%llu</td></tr>"
        "</table></section>\n",
        ss->scan_percent, scan_rate(obs), ss->heal_queue, ss->scan_last_cycle_s,
        (unsigned long long)ss->scan_cycles,
        (unsigned long long)ss->scan_objects,
        (unsigned long long)ss->corrupt_found,
        (unsigned long long)ss->shards_healed,
        (unsigned long long)ss->degraded_reads);
}

/* Request totals since start. */
static int render_totals(struct stor_s3_obs *obs, struct cm_buf *o)
{
    struct stor_metrics_totals t;
    char in[32], out[32];

    stor_metrics_totals(obs->s3->metrics, &t);
    human_bytes((double)t.bytes_in, in, sizeof(in));
    human_bytes((double)t.bytes_out, out, sizeof(out));
    return cm_buf_appendf(
        o,
        "<p class=\"totals\">Since start: <span id=\"req-total\">%llu</span> "
        "S3 requests, <span id=\"req-5xx\">%llu</span> with a 5xx, mean "
        "%.3f ms; %s in, %s out.</p>\n</section>\n",
        (unsigned long long)t.requests, (unsigned long long)t.errors,
        t.requests ? (double)t.lat_us / (double)t.requests / 1e3 : 0.0, in,
        out);
}

static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<meta http-equiv=\"refresh\" content=\"1\">"
    "<title>storaged %s</title><style>"
    "body{font-family:system-ui,sans-serif;margin:1em 2em;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.4em}"
    "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;"
    "border-bottom:1px solid #eee}td.n{text-align:right;"
    "font-variant-numeric:tabular-nums}.offline{color:#fff;background:#c62828;"
    "font-weight:bold}.online{color:#2e7d32}tr.sub td{color:#777;"
    "font-size:.85em;border:none}figure{margin:.6em 0}"
    "figcaption{font-size:.9em}</style></head><body>\n";

/* Builds the whole page into @o. */
static int render_page(struct stor_s3_obs *obs, struct cm_buf *o)
{
    struct stor_store_stats ss;
    int ret;

    stor_store_get_stats(obs->s3->store, &ss);
    ret = cm_buf_appendf(o, page_head, obs->instance);
    if (ret == 0)
        ret = cm_buf_appends(o, "<h1>storaged ");
    if (ret == 0)
        ret = esc(o, obs->instance);
    if (ret == 0)
        ret = cm_buf_appendf(o,
                             " <small>version %s, up %lld s, read-only "
                             "view, refreshed every %d s</small></h1>\n",
                             obs->version,
                             (long long)(time(NULL) - obs->started), REFRESH_S);
    if (ret == 0)
        ret = render_drives(obs, o, &ss);
    if (ret == 0)
        ret = render_scanner(obs, o, &ss);
    if (ret == 0)
        ret = render_charts(obs, o);
    if (ret == 0)
        ret = render_totals(obs, o);
    return ret ? ret : cm_buf_appends(o, "</body></html>\n");
}

/* Whether the Basic credentials are root's, or an enabled user's (access
 * key : secret key) whose policy allows admin:ListUsers (the canned
 * "admin" policy does; an explicit Deny wins). */
static bool console_auth(struct stor_s3_obs *obs, const char *authorization)
{
    char user[256], pass[256];
    const struct stor_iam_user *u;
    struct stor_iam_snap *snap = NULL;
    bool ok = false;

    if (cm_httpd_basic_ok(authorization, obs->s3->root_user,
                          obs->s3->root_secret))
        return true;
    if (obs->s3->iam == NULL || !stor_iam_ready(obs->s3->iam) ||
        cm_httpd_basic_decode(authorization, user, pass, sizeof(user)) < 0)
        return false;
    u = stor_iam_user_lookup(obs->s3->iam, user, strlen(user), &snap);
    if (u != NULL && stor_iam_user_enabled(u)) {
        const char *sk = stor_iam_user_secret(u);
        struct stor_pol_ctx c = {.act = STOR_ACT_ADMIN_LIST_USERS,
                                 .bucket = "",
                                 .user = stor_iam_user_name(u)};

        ok = strlen(sk) == strlen(pass) &&
             cm_sigv4_equal(sk, pass, strlen(pass)) &&
             stor_policy_eval(u->pol, &c) == STOR_POL_ALLOW;
    }
    stor_iam_snap_unref(snap);
    return ok;
}

/* The console's request handler (on its own thread). */
static void console_handle(void *arg, const struct cm_httpd_req *rq,
                           struct cm_httpd_resp *rs)
{
    struct stor_s3_obs *obs = arg;

    if (!console_auth(obs, rq->authorization)) {
        rs->status = 401;
        rs->extra_headers =
            "WWW-Authenticate: Basic realm=\"storaged console\", "
            "charset=\"UTF-8\"\r\n";
        return;
    }
    if (strcmp(rq->path, "/") != 0) {
        rs->status = 404;
        return;
    }
    if (render_page(obs, &rs->body) < 0) {
        cm_buf_fini(&rs->body);
        rs->status = 500;
        return;
    }
    rs->status = 200;
    rs->content_type = "text/html; charset=utf-8";
}

/* ---- life cycle ---- */

/* See s3.h. */
void stor_s3_obs_serving(void *arg, struct stor_http_server *srv, bool up)
{
    struct stor_s3_obs *obs = arg;

    pthread_mutex_lock(&obs->lock);
    obs->srv = up ? srv : NULL;
    pthread_mutex_unlock(&obs->lock);
}

/* See s3.h. */
void stor_s3_obs_stop(struct stor_s3_obs *obs)
{
    if (obs == NULL)
        return;
    cm_otlp_stop(obs->otlp);
    cm_httpd_stop(obs->httpd);
    if (obs->sampling) {
        pthread_mutex_lock(&obs->lock);
        obs->stop = true;
        pthread_cond_signal(&obs->cond);
        pthread_mutex_unlock(&obs->lock);
        pthread_join(obs->tid, NULL);
    }
    pthread_cond_destroy(&obs->cond);
    pthread_mutex_destroy(&obs->lock);
    free(obs->ring);
    free(obs->instance);
    free(obs->version);
    free(obs);
}

/* Starts the console: its server and its sampler. */
static int console_start(struct stor_s3_obs *obs, const char *addr, char **err)
{
    pthread_condattr_t ca;
    int ret;

    obs->ring = calloc(RING, sizeof(*obs->ring));
    if (obs->ring == NULL)
        return -ENOMEM;
    ret =
        cm_httpd_start(addr, "console", console_handle, obs, &obs->httpd, err);
    if (ret == -EINVAL && *err == NULL)
        *err = strdup("--console wants HOST:PORT");
    if (ret < 0)
        return ret;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&obs->cond);
    pthread_cond_init(&obs->cond, &ca);
    pthread_condattr_destroy(&ca);
    ret = -pthread_create(&obs->tid, NULL, sampler_main, obs);
    if (ret < 0)
        return ret;
    obs->sampling = true;
    cm_log(CM_LOG_INFO, 0,
           "console: http://%s/ (HTTP Basic: root or admin users; plain HTTP)",
           addr);
    return 0;
}

/* See s3.h. */
int stor_s3_obs_start(struct stor_s3 *s3, const struct stor_s3_obs_opts *o,
                      struct stor_s3_obs **out, char **err)
{
    struct stor_s3_obs *obs = calloc(1, sizeof(*obs));
    int ret = 0;

    *out = NULL;
    *err = NULL;
    if (obs == NULL)
        return -ENOMEM;
    pthread_mutex_init(&obs->lock, NULL);
    pthread_cond_init(&obs->cond, NULL);
    obs->s3 = s3;
    obs->started = time(NULL);
    obs->instance = strdup(o->instance ? o->instance : "storaged");
    obs->version = strdup(o->version ? o->version : "");
    if (obs->instance == NULL || obs->version == NULL)
        ret = -ENOMEM;
    if (ret == 0 && o->console_addr)
        ret = console_start(obs, o->console_addr, err);
    if (ret == 0 && o->otlp_endpoint) {
        struct cm_otlp_conf oc = {
            .endpoint = o->otlp_endpoint,
            .interval_s = o->otlp_interval_s > 0 ? o->otlp_interval_s : 10,
            .res = {"storaged", obs->instance, obs->version},
            .render = render_metrics,
            .render_arg = obs,
        };

        ret = cm_otlp_start(&oc, &obs->otlp);
        if (ret == -EINVAL)
            *err = strdup("--otlp-endpoint wants http://HOST:PORT[/PATH] "
                          "and --otlp-interval a positive number of seconds");
    }
    if (ret < 0) {
        if (*err == NULL) {
            char msg[128];

            snprintf(msg, sizeof(msg), "%s", strerror(-ret));
            *err = strdup(msg);
        }
        stor_s3_obs_stop(obs);
        return ret;
    }
    *out = obs;
    return 0;
}

/* common/otlp.h - OpenTelemetry metrics push over OTLP/HTTP with the JSON
 * encoding (opentelemetry-proto ExportMetricsServiceRequest, POSTed as
 * application/json to .../v1/metrics), shared by storaged and ecfs.
 *
 * Both programs already render their metrics as Prometheus text, so the
 * encoder takes that text: every series of /metrics is pushed under the
 * same name and labels (counters as cumulative monotonic sums, gauges as
 * gauges, histograms as cumulative explicit-bucket histograms). The pusher
 * is its own thread with its own curl handle and hard timeouts: it never
 * runs on a loop or FUSE thread, and a collector that is down costs one
 * log line a minute. */
#ifndef COMMON_OTLP_H
#define COMMON_OTLP_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stddef.h>
#include <stdint.h>

/* Who is pushing: the OTLP resource and instrumentation scope. Borrowed. */
struct cm_otlp_resource {
    const char *service_name;        /* resource attribute service.name */
    const char *service_instance_id; /* service.instance.id */
    const char *service_version;     /* service.version; NULL: none */
};

/* Appends the OTLP JSON ExportMetricsServiceRequest for the Prometheus
 * text exposition @text (@len bytes) to @out. @start_ns is the series'
 * start (process start, Unix ns), @now_ns the sample time. Samples without
 * a # TYPE line are gauges. Returns 0, -EBADMSG for a malformed sample
 * line (nothing useful appended), or -ENOMEM / -E2BIG from @out. */
CM_MUST_CHECK int cm_otlp_encode(const char *text, size_t len,
                                 const struct cm_otlp_resource *res,
                                 uint64_t start_ns, uint64_t now_ns,
                                 struct cm_buf *out);

/* Fills @out with the current Prometheus text; 0 or -errno. Called on the
 * pusher thread. */
typedef int cm_otlp_render_fn(void *arg, struct cm_buf *out);

struct cm_otlp_conf {
    /* http(s)://host:port[/path]; with no path (or "/") the signal path
     * /v1/metrics is appended, as the OTLP spec says for a base endpoint.
     * Copied. */
    const char *endpoint;
    double interval_s;           /* between pushes; > 0 */
    struct cm_otlp_resource res; /* copied */
    cm_otlp_render_fn *render;
    void *render_arg; /* borrowed until cm_otlp_stop */
};

struct cm_otlp;

/* Checks @url as an endpoint: 0, or -EINVAL (not http:// or https://). */
CM_MUST_CHECK int cm_otlp_check_endpoint(const char *url);
/* Starts the pusher thread (first push one interval from now). 0 and *out,
 * or -EINVAL (bad endpoint or interval), -ENOMEM, -errno of
 * pthread_create. */
CM_MUST_CHECK int cm_otlp_start(const struct cm_otlp_conf *c,
                                struct cm_otlp **out);
/* Stops and joins the thread (an export in progress is aborted within
 * about 100 ms) and frees @p. NULL is a no-op. */
void cm_otlp_stop(struct cm_otlp *p);

/* The current time as Unix nanoseconds. */
uint64_t cm_otlp_now_ns(void);

#endif /* COMMON_OTLP_H */

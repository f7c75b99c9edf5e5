/* storaged/s3/metrics.h - the daemon's Prometheus metrics: request counts by
 * S3 API and status, latency histograms, bytes in/out, connections, plus
 * the store's and drives' figures read at scrape time. Updates are lock-free
 * atomics, safe from any thread. */
#ifndef STORAGED_S3_METRICS_H
#define STORAGED_S3_METRICS_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stdint.h>

struct stor_metrics;
struct stor_store;
struct stor_http_stats;

/* NULL on ENOMEM. */
struct stor_metrics *stor_metrics_create(void);
void stor_metrics_destroy(struct stor_metrics *m);
/* One finished request of operation @op (enum stor_s3_op) with HTTP
 * @status, taking @secs, with @in request-body and @out response bytes. */
void stor_metrics_request(struct stor_metrics *m, int op, int status,
                          double secs, uint64_t in, uint64_t out);
/* How a GET the event loop tried to serve itself (small inline object)
 * went: handed to a worker because what it read did not verify (missing,
 * stale or corrupt shard), served from metas read on the loop's io_uring,
 * served from the loop's body cache (--cache-mem), handed to a worker
 * unread because the loop's ring had no room for its reads (busy), or
 * served from the copy of the body the index keeps (--index-body-max).
 * ZERO_COPY counts, of the served ones, those whose bytes were spliced
 * from the extent files to the socket (FORMAT.md "Zero-copy GETs").
 * WORKER_INDEX: a GET a worker served from the index's copy (the loop
 * handed it over, e.g. the index was not resident); HEAD_LOOP: a HEAD the
 * loop answered from the index. */
enum stor_get_loop {
    STOR_GET_LOOP_FALLBACK = 0,
    STOR_GET_LOOP_READ,
    STOR_GET_LOOP_CACHED,
    STOR_GET_LOOP_BUSY,
    STOR_GET_LOOP_INDEX,
    STOR_GET_LOOP_ZERO_COPY,
    STOR_GET_WORKER_INDEX,
    STOR_HEAD_LOOP,
    STOR_GET_LOOP_NHOW
};
void stor_metrics_get_loop(struct stor_metrics *m, enum stor_get_loop how);
struct stor_zcache;
/* The zero-copy body cache whose counters /metrics shows (borrowed; it
 * outlives @m's renders). Set once, before serving. */
void stor_metrics_set_zcache(struct stor_metrics *m, struct stor_zcache *zc);
/* Appends the Prometheus text exposition to @out, with the transport's
 * connection and worker figures @hs; @store and @hs may be NULL. */
CM_MUST_CHECK int stor_metrics_render(struct stor_metrics *m,
                                      struct stor_store *store,
                                      const struct stor_http_stats *hs,
                                      struct cm_buf *out);
/* Sums over every S3 API (health and /metrics requests left out), for the
 * console's samples. lat[b] counts requests in latency bucket b (upper
 * bounds from stor_metrics_lat_bounds; the last bucket is +Inf). */
#define STOR_METRICS_NLAT 15
struct stor_metrics_totals {
    uint64_t requests, errors; /* errors: HTTP status >= 500 */
    uint64_t lat_us;           /* latency sum, microseconds */
    uint64_t bytes_in, bytes_out;
    uint64_t lat[STOR_METRICS_NLAT];
};
void stor_metrics_totals(struct stor_metrics *m, struct stor_metrics_totals *t);
/* The finite latency bucket bounds (seconds), STOR_METRICS_NLAT - 1. */
const double *stor_metrics_lat_bounds(void);
/* The API name of @op ("GetObject", ...). */
const char *stor_metrics_op_name(int op);

#endif /* STORAGED_S3_METRICS_H */

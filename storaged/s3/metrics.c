/* storaged/s3/metrics.c - counters and histograms in fixed atomic arrays,
 * rendered as Prometheus text on /metrics.
 *
 * DESIGN: no registry, no locks: the label space is small and known (S3
 * API x HTTP status), so each series is a slot in a static array indexed
 * by (op, status); a scrape walks the arrays and prints the non-zero ones.
 * Store and drive figures are read from the object layer at scrape time,
 * connection and worker figures from the transport (struct
 * stor_http_stats). */
#include "storaged/s3/metrics.h"

#include "storaged/http/http.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/zcache.h"
#include "storaged/store/object.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NSTATUS 600
static const double lat_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                    0.025,  0.05,  0.1,    0.25,  0.5,
                                    1,      2.5,   5,      10};
#define NLAT (sizeof(lat_bounds) / sizeof(lat_bounds[0]))
_Static_assert(NLAT + 1 == STOR_METRICS_NLAT, "bucket count in metrics.h");

struct stor_metrics {
    atomic_uint_fast64_t req[S3_OP_COUNT][NSTATUS];
    atomic_uint_fast64_t lat[S3_OP_COUNT][NLAT + 1];
    atomic_uint_fast64_t lat_sum_us[S3_OP_COUNT];
    atomic_uint_fast64_t lat_count[S3_OP_COUNT];
    atomic_uint_fast64_t bytes_in[S3_OP_COUNT];
    atomic_uint_fast64_t bytes_out[S3_OP_COUNT];
    atomic_uint_fast64_t get_loop[STOR_GET_LOOP_NHOW]; /* enum stor_get_loop */
    struct stor_zcache *zc; /* borrowed; immutable after start */
};

static const char *const op_names[S3_OP_COUNT] = {
    [S3_OP_UNKNOWN] = "Unknown",
    [S3_OP_HEALTH] = "Health",
    [S3_OP_METRICS] = "Metrics",
    [S3_OP_LIST_BUCKETS] = "ListBuckets",
    [S3_OP_CREATE_BUCKET] = "CreateBucket",
    [S3_OP_HEAD_BUCKET] = "HeadBucket",
    [S3_OP_DELETE_BUCKET] = "DeleteBucket",
    [S3_OP_GET_BUCKET_LOCATION] = "GetBucketLocation",
    [S3_OP_LIST_OBJECTS] = "ListObjects",
    [S3_OP_LIST_OBJECTS_V2] = "ListObjectsV2",
    [S3_OP_LIST_VERSIONS] = "ListObjectVersions",
    [S3_OP_LIST_UPLOADS] = "ListMultipartUploads",
    [S3_OP_DELETE_OBJECTS] = "DeleteObjects",
    [S3_OP_PUT_OBJECT] = "PutObject",
    [S3_OP_COPY_OBJECT] = "CopyObject",
    [S3_OP_GET_OBJECT] = "GetObject",
    [S3_OP_HEAD_OBJECT] = "HeadObject",
    [S3_OP_DELETE_OBJECT] = "DeleteObject",
    [S3_OP_CREATE_MPU] = "CreateMultipartUpload",
    [S3_OP_UPLOAD_PART] = "UploadPart",
    [S3_OP_UPLOAD_PART_COPY] = "UploadPartCopy",
    [S3_OP_COMPLETE_MPU] = "CompleteMultipartUpload",
    [S3_OP_ABORT_MPU] = "AbortMultipartUpload",
    [S3_OP_LIST_PARTS] = "ListParts",
    [S3_OP_BUCKET_SUBRESOURCE] = "BucketSubresource",
    [S3_OP_OBJECT_SUBRESOURCE] = "ObjectSubresource",
    [S3_OP_PREFLIGHT] = "PreflightRequest",
    [S3_OP_ADMIN] = "Admin",
    [S3_OP_BUCKET_POLICY] = "BucketPolicy",
    [S3_OP_BUCKET_POLICY_STATUS] = "GetBucketPolicyStatus",
    [S3_OP_BUCKET_ENCRYPTION] = "BucketEncryption",
    [S3_OP_TAGGING] = "Tagging",
    [S3_OP_BUCKET_CORS] = "BucketCors",
    [S3_OP_OBJECT_ATTRIBUTES] = "GetObjectAttributes",
    [S3_OP_POST_OBJECT] = "PostObject",
    [S3_OP_BUCKET_ACL] = "BucketAcl",
    [S3_OP_OBJECT_ACL] = "ObjectAcl",
    [S3_OP_BUCKET_PAB] = "PublicAccessBlock",
    [S3_OP_BUCKET_OWNERSHIP] = "BucketOwnershipControls",
    [S3_OP_BUCKET_VERSIONING] = "BucketVersioning",
    [S3_OP_BUCKET_LIFECYCLE] = "BucketLifecycle",
};

/* See header. */
const char *stor_metrics_op_name(int op)
{
    if (op < 0 || op >= S3_OP_COUNT || op_names[op] == NULL)
        return "Unknown";
    return op_names[op];
}

/* See header. */
struct stor_metrics *stor_metrics_create(void)
{
    return calloc(1, sizeof(struct stor_metrics));
}

/* See header. */
void stor_metrics_destroy(struct stor_metrics *m)
{
    free(m);
}

/* See header. */
void stor_metrics_request(struct stor_metrics *m, int op, int status,
                          double secs, uint64_t in, uint64_t out)
{
    size_t b;

    if (m == NULL)
        return;
    if (op < 0 || op >= S3_OP_COUNT)
        op = S3_OP_UNKNOWN;
    if (status < 0 || status >= NSTATUS)
        status = 0;
    atomic_fetch_add(&m->req[op][status], 1);
    for (b = 0; b < NLAT && secs > lat_bounds[b]; b++)
        ;
    atomic_fetch_add(&m->lat[op][b], 1);
    atomic_fetch_add(&m->lat_sum_us[op], (uint64_t)(secs * 1e6));
    atomic_fetch_add(&m->lat_count[op], 1);
    atomic_fetch_add(&m->bytes_in[op], in);
    atomic_fetch_add(&m->bytes_out[op], out);
}

/* See header. */
void stor_metrics_get_loop(struct stor_metrics *m, enum stor_get_loop how)
{
    if (m != NULL && (unsigned)how < CM_ARRAY_SIZE(m->get_loop))
        atomic_fetch_add_explicit(&m->get_loop[how], 1, memory_order_relaxed);
}

/* See header. */
const double *stor_metrics_lat_bounds(void)
{
    return lat_bounds;
}

/* See header. */
void stor_metrics_totals(struct stor_metrics *m, struct stor_metrics_totals *t)
{
    memset(t, 0, sizeof(*t));
    for (int op = 0; op < S3_OP_COUNT; op++) {
        if (op == S3_OP_HEALTH || op == S3_OP_METRICS)
            continue;
        t->requests += atomic_load(&m->lat_count[op]);
        t->lat_us += atomic_load(&m->lat_sum_us[op]);
        t->bytes_in += atomic_load(&m->bytes_in[op]);
        t->bytes_out += atomic_load(&m->bytes_out[op]);
        for (size_t b = 0; b <= NLAT; b++)
            t->lat[b] += atomic_load(&m->lat[op][b]);
        for (int st = 500; st < NSTATUS; st++)
            t->errors += atomic_load(&m->req[op][st]);
    }
}

/* Appends the per-op request families. */
static int render_requests(struct stor_metrics *m, struct cm_buf *o)
{
    int op, st, ret = 0;
    size_t b;

    ret = cm_buf_appends(
        o,
        "# HELP storaged_requests_total S3 requests by API and HTTP status.\n"
        "# TYPE storaged_requests_total counter\n");
    for (op = 0; op < S3_OP_COUNT && ret == 0; op++)
        for (st = 0; st < NSTATUS && ret == 0; st++) {
            uint64_t v = atomic_load(&m->req[op][st]);

            if (v)
                ret = cm_buf_appendf(
                    o,
                    "storaged_requests_total{api=\"%s\",status=\"%d\"} %llu\n",
                    op_names[op], st, (unsigned long long)v);
        }
    if (ret == 0)
        ret = cm_buf_appends(
            o,
            "# HELP storaged_request_duration_seconds Request latency by API.\n"
            "# TYPE storaged_request_duration_seconds histogram\n");
    for (op = 0; op < S3_OP_COUNT && ret == 0; op++) {
        uint64_t cum = 0, cnt = atomic_load(&m->lat_count[op]);

        if (cnt == 0)
            continue;
        for (b = 0; b < NLAT && ret == 0; b++) {
            cum += atomic_load(&m->lat[op][b]);
            ret = cm_buf_appendf(
                o,
                "storaged_request_duration_seconds_bucket{api=\"%s\",le=\"%g\"} %llu\n",
                op_names[op], lat_bounds[b], (unsigned long long)cum);
        }
        cum += atomic_load(&m->lat[op][NLAT]);
        if (ret == 0)
            ret = cm_buf_appendf(
                o,
                "storaged_request_duration_seconds_bucket{api=\"%s\",le=\"+Inf\"} %llu\n"
                "storaged_request_duration_seconds_sum{api=\"%s\"} %.6f\n"
                "storaged_request_duration_seconds_count{api=\"%s\"} %llu\n",
                op_names[op], (unsigned long long)cum, op_names[op],
                (double)atomic_load(&m->lat_sum_us[op]) / 1e6, op_names[op],
                (unsigned long long)cnt);
    }
    if (ret == 0)
        ret = cm_buf_appends(
            o,
            "# HELP storaged_request_bytes_total Request body bytes received by API.\n"
            "# TYPE storaged_request_bytes_total counter\n"
            "# HELP storaged_response_bytes_total Response bytes sent by API.\n"
            "# TYPE storaged_response_bytes_total counter\n");
    for (op = 0; op < S3_OP_COUNT && ret == 0; op++) {
        uint64_t in = atomic_load(&m->bytes_in[op]);
        uint64_t out = atomic_load(&m->bytes_out[op]);

        if (in == 0 && out == 0)
            continue;
        ret = cm_buf_appendf(o,
                             "storaged_request_bytes_total{api=\"%s\"} %llu\n"
                             "storaged_response_bytes_total{api=\"%s\"} %llu\n",
                             op_names[op], (unsigned long long)in, op_names[op],
                             (unsigned long long)out);
    }
    return ret;
}

/* Appends the store and per-drive families. */
static int render_store(struct stor_store *s, struct cm_buf *o)
{
    struct stor_store_stats st = {0};
    size_t i;
    int ret;

    stor_store_get_stats(s, &st);
    ret = cm_buf_appendf(
        o,
        "# TYPE storaged_degraded_reads_total counter\nstoraged_degraded_reads_total %llu\n"
        "# TYPE storaged_heal_queued_total counter\nstoraged_heal_queued_total %llu\n"
        "# TYPE storaged_shards_healed_total counter\nstoraged_shards_healed_total %llu\n"
        "# TYPE storaged_corrupt_found_total counter\nstoraged_corrupt_found_total %llu\n"
        "# TYPE storaged_scan_objects_total counter\nstoraged_scan_objects_total %llu\n"
        "# TYPE storaged_scan_bytes_total counter\nstoraged_scan_bytes_total %llu\n"
        "# TYPE storaged_scan_cycles_total counter\nstoraged_scan_cycles_total %llu\n"
        "# TYPE storaged_scan_cycle_percent gauge\nstoraged_scan_cycle_percent %.2f\n"
        "# TYPE storaged_scan_last_cycle_seconds gauge\nstoraged_scan_last_cycle_seconds %.3f\n"
        "# TYPE storaged_drives gauge\nstoraged_drives %zu\n"
        "# TYPE storaged_drives_online gauge\nstoraged_drives_online %zu\n",
        (unsigned long long)st.degraded_reads,
        (unsigned long long)st.heal_queued,
        (unsigned long long)st.shards_healed,
        (unsigned long long)st.corrupt_found,
        (unsigned long long)st.scan_objects, (unsigned long long)st.scan_bytes,
        (unsigned long long)st.scan_cycles, st.scan_percent,
        st.scan_last_cycle_s, st.ndrives, st.drives_online);
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "# HELP storaged_sync_barriers_total Commit steps that waited "
            "for durability (group commit).\n"
            "# TYPE storaged_sync_barriers_total counter\n"
            "storaged_sync_barriers_total %llu\n"
            "# HELP storaged_sync_rounds_total syncfs calls run for them "
            "(fs mode: one round serves every barrier waiting).\n"
            "# TYPE storaged_sync_rounds_total counter\n"
            "storaged_sync_rounds_total %llu\n"
            "# HELP storaged_sync_fsyncs_total Files fsynced for them (file "
            "mode: drives that share a filesystem).\n"
            "# TYPE storaged_sync_fsyncs_total counter\n"
            "storaged_sync_fsyncs_total %llu\n"
            "# HELP storaged_sync_shared_total Extent-file syncs a commit "
            "left to another's fsync of that file (file mode).\n"
            "# TYPE storaged_sync_shared_total counter\n"
            "storaged_sync_shared_total %llu\n"
            "# TYPE storaged_sync_failures_total counter\n"
            "storaged_sync_failures_total %llu\n"
            "# HELP storaged_extent_freed_total Extent records freed "
            "(deletes, overwrites).\n"
            "# TYPE storaged_extent_freed_total counter\n"
            "storaged_extent_freed_total %llu\n"
            "# HELP storaged_extent_punches_total Hole punches that freed "
            "them (adjacent records merged).\n"
            "# TYPE storaged_extent_punches_total counter\n"
            "storaged_extent_punches_total %llu\n"
            "# HELP storaged_meta_journal_records_total Meta records "
            "appended to the drives' journals.\n"
            "# TYPE storaged_meta_journal_records_total counter\n"
            "storaged_meta_journal_records_total %llu\n"
            "# HELP storaged_meta_journal_checkpoints_total Checkpoints "
            "that emptied the journals.\n"
            "# TYPE storaged_meta_journal_checkpoints_total counter\n"
            "storaged_meta_journal_checkpoints_total %llu\n"
            "# HELP storaged_meta_journal_replayed Metas a replay put "
            "back at this start (after a reboot).\n"
            "# TYPE storaged_meta_journal_replayed gauge\n"
            "storaged_meta_journal_replayed %llu\n"
            "# HELP storaged_meta_spares_total Meta inodes kept as spares "
            "(kept), reused by a commit instead of a new file (reused), "
            "emptied unused after 2 s (emptied), made ahead empty by the "
            "pool thread (made), made ahead and taken by a commit "
            "(taken).\n"
            "# TYPE storaged_meta_spares_total counter\n"
            "storaged_meta_spares_total{event=\"kept\"} %llu\n"
            "storaged_meta_spares_total{event=\"reused\"} %llu\n"
            "storaged_meta_spares_total{event=\"emptied\"} %llu\n"
            "storaged_meta_spares_total{event=\"made\"} %llu\n"
            "storaged_meta_spares_total{event=\"taken\"} %llu\n",
            (unsigned long long)st.sync_barriers,
            (unsigned long long)st.sync_rounds,
            (unsigned long long)st.sync_fsyncs,
            (unsigned long long)st.sync_shared,
            (unsigned long long)st.sync_failures,
            (unsigned long long)st.ext_freed,
            (unsigned long long)st.ext_punches,
            (unsigned long long)st.jnl_records,
            (unsigned long long)st.jnl_checkpoints,
            (unsigned long long)st.jnl_replayed,
            (unsigned long long)st.spare_kept,
            (unsigned long long)st.spare_reused,
            (unsigned long long)st.spare_emptied,
            (unsigned long long)st.spare_made,
            (unsigned long long)st.spare_taken);
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "# TYPE storaged_index_objects gauge\nstoraged_index_objects %llu\n"
            "# TYPE storaged_index_rebuilds_total counter\nstoraged_index_rebuilds_total %llu\n"
            "# TYPE storaged_index_rebuild_objects gauge\nstoraged_index_rebuild_objects %llu\n"
            "# TYPE storaged_index_reconciled_keys gauge\nstoraged_index_reconciled_keys %llu\n"
            "# TYPE storaged_index_rebuild_seconds gauge\nstoraged_index_rebuild_seconds %.3f\n"
            "# TYPE storaged_index_open_seconds gauge\nstoraged_index_open_seconds %.3f\n"
            "# TYPE storaged_index_broken gauge\nstoraged_index_broken %d\n"
            "# TYPE storaged_index_ready gauge\nstoraged_index_ready %d\n"
            "# TYPE storaged_index_phase gauge\n"
            "storaged_index_phase{phase=\"opening\"} %d\n"
            "storaged_index_phase{phase=\"rebuilding\"} %d\n"
            "storaged_index_phase{phase=\"serving\"} %d\n"
            "storaged_index_phase{phase=\"failed\"} %d\n"
            "# TYPE storaged_index_rebuild_dirs_done gauge\nstoraged_index_rebuild_dirs_done %llu\n"
            "# TYPE storaged_index_rebuild_dirs_total gauge\nstoraged_index_rebuild_dirs_total %llu\n"
            "# TYPE storaged_index_rebuild_estimated_objects gauge\nstoraged_index_rebuild_estimated_objects %llu\n"
            "# TYPE storaged_index_verified_objects gauge\nstoraged_index_verified_objects %llu\n"
            "# TYPE storaged_index_verify_done gauge\nstoraged_index_verify_done %d\n"
            "# TYPE storaged_index_verify_seconds gauge\nstoraged_index_verify_seconds %.3f\n"
            "# TYPE storaged_index_verify_damaged_buckets gauge\nstoraged_index_verify_damaged_buckets %llu\n"
            "# HELP storaged_index_bodies Small objects whose body the index keeps (a GET of them reads no file).\n"
            "# TYPE storaged_index_bodies gauge\nstoraged_index_bodies %llu\n"
            "# HELP storaged_index_bodies_damaged_total Bodies in the index that failed their CRC on a GET (read from the drives instead).\n"
            "# TYPE storaged_index_bodies_damaged_total counter\nstoraged_index_bodies_damaged_total %llu\n"
            "# HELP storaged_index_resident 1 when the whole index file was in the page cache at the last check (at the start, after its read-ahead walk, and by the periodic residency check): GETs and HEADs then look it up on the event loop.\n"
            "# TYPE storaged_index_resident gauge\nstoraged_index_resident %d\n"
            "# HELP storaged_index_cold_lookups_total Loop-side GET/HEAD lookups handed to a worker because the index was not all in the page cache (a page fault there would block the loop on the disk).\n"
            "# TYPE storaged_index_cold_lookups_total counter\nstoraged_index_cold_lookups_total %llu\n"
            "# HELP storaged_index_residency_passes_total Passes of the periodic check of the index file's page-cache residency (cachestat, or mmap + mincore before Linux 6.5, one 64 MiB window per step; paced by its own CPU time: at most ~0.1 %% of a core, a pass at least every second).\n"
            "# TYPE storaged_index_residency_passes_total counter\nstoraged_index_residency_passes_total %llu\n"
            "# HELP storaged_index_residency_lost_total Times a pass found the index no longer resident (evicted pages): the loop's lookups then go to the workers until a pass finds it back.\n"
            "# TYPE storaged_index_residency_lost_total counter\nstoraged_index_residency_lost_total %llu\n"
            "# HELP storaged_index_rewarm_windows_total 64 MiB windows of an evicted index file that the residency check asked back into the page cache (POSIX_FADV_WILLNEED; only for a file of at most 1/8 of memory, and not with STORAGED_NO_BACKGROUND).\n"
            "# TYPE storaged_index_rewarm_windows_total counter\nstoraged_index_rewarm_windows_total %llu\n",
            (unsigned long long)st.index_objects,
            (unsigned long long)st.index_rebuilds,
            (unsigned long long)st.index_rebuild_objects,
            (unsigned long long)st.index_reconciled, st.index_rebuild_s,
            st.index_open_s, st.index_broken ? 1 : 0,
            st.index_phase == STOR_INDEX_SERVING,
            st.index_phase == STOR_INDEX_OPENING,
            st.index_phase == STOR_INDEX_REBUILDING,
            st.index_phase == STOR_INDEX_SERVING,
            st.index_phase == STOR_INDEX_FAILED,
            (unsigned long long)st.index_dirs_done,
            (unsigned long long)st.index_dirs_total,
            (unsigned long long)st.index_rebuild_estimate,
            (unsigned long long)st.index_verified, st.index_verify_done ? 1 : 0,
            st.index_verify_s, (unsigned long long)st.index_verify_bad,
            (unsigned long long)st.index_bodies,
            (unsigned long long)st.index_bodies_damaged,
            st.index_resident ? 1 : 0, (unsigned long long)st.index_cold_nb,
            (unsigned long long)st.index_res_passes,
            (unsigned long long)st.index_res_lost,
            (unsigned long long)st.index_rewarmed);
    if (ret == 0)
        ret = cm_buf_appendf(
            o,
            "# HELP storaged_heal_queue Heal requests waiting.\n"
            "# TYPE storaged_heal_queue gauge\nstoraged_heal_queue %zu\n"
            "# TYPE storaged_sets gauge\nstoraged_sets %d\n"
            "# TYPE storaged_set_drives gauge\nstoraged_set_drives %d\n"
            "# HELP storaged_ec_data_shards Data shards (K) of a full-size "
            "object.\n"
            "# TYPE storaged_ec_data_shards gauge\nstoraged_ec_data_shards %d\n"
            "# TYPE storaged_ec_parity_shards gauge\n"
            "storaged_ec_parity_shards %d\n"
            "# HELP storaged_drive_info A drive's erasure set and position.\n"
            "# TYPE storaged_drive_info gauge\n",
            st.heal_queue, st.nsets, st.set_size, st.ec_data, st.ec_parity);
    for (i = 0; i < st.ndrives && ret == 0; i++) {
        struct stor_drive_stats d = {0};

        stor_store_get_drive_stats(s, i, &d);
        ret = cm_buf_appendf(
            o,
            "storaged_drive_info{drive=\"%s\",set=\"%d\",position=\"%d\"} 1\n",
            d.path, d.set, d.pos);
    }
    if (ret == 0)
        ret = cm_buf_appends(o,
                             "# TYPE storaged_drive_online gauge\n"
                             "# TYPE storaged_drive_reads_total counter\n"
                             "# TYPE storaged_drive_writes_total counter\n"
                             "# TYPE storaged_drive_read_bytes_total counter\n"
                             "# TYPE storaged_drive_write_bytes_total counter\n"
                             "# TYPE storaged_drive_errors_total counter\n");
    for (i = 0; i < st.ndrives && ret == 0; i++) {
        struct stor_drive_stats d = {0};

        stor_store_get_drive_stats(s, i, &d);
        ret = cm_buf_appendf(
            o,
            "storaged_drive_online{drive=\"%s\"} %d\n"
            "storaged_drive_reads_total{drive=\"%s\"} %llu\n"
            "storaged_drive_writes_total{drive=\"%s\"} %llu\n"
            "storaged_drive_read_bytes_total{drive=\"%s\"} %llu\n"
            "storaged_drive_write_bytes_total{drive=\"%s\"} %llu\n"
            "storaged_drive_errors_total{drive=\"%s\"} %llu\n",
            d.path, d.online ? 1 : 0, d.path, (unsigned long long)d.reads,
            d.path, (unsigned long long)d.writes, d.path,
            (unsigned long long)d.read_bytes, d.path,
            (unsigned long long)d.write_bytes, d.path,
            (unsigned long long)d.errors);
    }
    return ret;
}

/* See header. */
void stor_metrics_set_zcache(struct stor_metrics *m, struct stor_zcache *zc)
{
    m->zc = zc;
}

/* The zero-copy body cache's counters (zeros without one). */
static int render_zcache(struct stor_zcache *zc, struct cm_buf *o)
{
    struct stor_zcache_stats st;

    stor_zcache_stats(zc, &st);
    return cm_buf_appendf(
        o,
        "# HELP storaged_zcache_hits_total GETs answered from the zero-copy "
        "body cache (--zc-cache-mem: checked bodies held as pipe pages).\n"
        "# TYPE storaged_zcache_hits_total counter\n"
        "storaged_zcache_hits_total %llu\n"
        "# HELP storaged_zcache_puts_total Bodies copied into it.\n"
        "# TYPE storaged_zcache_puts_total counter\n"
        "storaged_zcache_puts_total %llu\n"
        "# HELP storaged_zcache_evictions_total Bodies dropped for room.\n"
        "# TYPE storaged_zcache_evictions_total counter\n"
        "storaged_zcache_evictions_total %llu\n"
        "# HELP storaged_zcache_failed_total Puts or tees that failed (no "
        "pipe of that size: F_SETPIPE_SZ's limits).\n"
        "# TYPE storaged_zcache_failed_total counter\n"
        "storaged_zcache_failed_total %llu\n"
        "# HELP storaged_zcache_bytes Bytes it holds (pages), of "
        "storaged_zcache_max_bytes.\n"
        "# TYPE storaged_zcache_bytes gauge\n"
        "storaged_zcache_bytes %zu\n"
        "# TYPE storaged_zcache_max_bytes gauge\n"
        "storaged_zcache_max_bytes %zu\n",
        (unsigned long long)st.hits, (unsigned long long)st.puts,
        (unsigned long long)st.evictions, (unsigned long long)st.failed,
        st.bytes, st.max_bytes);
}

/* See header. */
int stor_metrics_render(struct stor_metrics *m, struct stor_store *store,
                        const struct stor_http_stats *hs, struct cm_buf *out)
{
    int ret = render_requests(m, out);

    if (ret == 0)
        ret = cm_buf_appendf(
            out,
            "# HELP storaged_connections Open client connections.\n"
            "# TYPE storaged_connections gauge\nstoraged_connections %ld\n"
            "# TYPE storaged_connections_total counter\nstoraged_connections_total %llu\n"
            "# TYPE storaged_workers_busy gauge\nstoraged_workers_busy %zu\n"
            "# HELP storaged_get_loop_total Small GETs the event loop "
            "served itself: read on its io_uring or from the index's copy "
            "of the body (served), from a body cache (cached: --cache-mem, "
            "--zc-cache-mem), or handed "
            "to a worker (fallback: a shard did not verify; busy: no room "
            "on the loop's io_uring).\n"
            "# TYPE storaged_get_loop_total counter\n"
            "storaged_get_loop_total{result=\"served\"} %llu\n"
            "storaged_get_loop_total{result=\"cached\"} %llu\n"
            "storaged_get_loop_total{result=\"fallback\"} %llu\n"
            "storaged_get_loop_total{result=\"busy\"} %llu\n"
            "# HELP storaged_get_index_body_total Small GETs answered from "
            "the body the index keeps (no meta file read; --index-body-max), "
            "on the event loop or on a worker.\n"
            "# TYPE storaged_get_index_body_total counter\n"
            "storaged_get_index_body_total %llu\n"
            "# HELP storaged_get_zero_copy_total Of the served GETs, those "
            "whose bytes went from the extent files to the socket by splice, "
            "checked in the page cache, or from the zero-copy body cache "
            "(--zc-cache-mem), with no copy.\n"
            "# TYPE storaged_get_zero_copy_total counter\n"
            "storaged_get_zero_copy_total %llu\n"
            "# HELP storaged_head_loop_total HEADs the event loop answered "
            "from the index itself (no worker round trip).\n"
            "# TYPE storaged_head_loop_total counter\n"
            "storaged_head_loop_total %llu\n",
            hs ? hs->conns : 0L, (unsigned long long)(hs ? hs->conns_total : 0),
            hs ? hs->workers_busy : 0,
            (unsigned long long)(atomic_load(&m->get_loop[STOR_GET_LOOP_READ]) +
                                 atomic_load(
                                     &m->get_loop[STOR_GET_LOOP_INDEX])),
            (unsigned long long)atomic_load(&m->get_loop[STOR_GET_LOOP_CACHED]),
            (unsigned long long)atomic_load(
                &m->get_loop[STOR_GET_LOOP_FALLBACK]),
            (unsigned long long)atomic_load(&m->get_loop[STOR_GET_LOOP_BUSY]),
            (unsigned long long)(atomic_load(
                                     &m->get_loop[STOR_GET_LOOP_INDEX]) +
                                 atomic_load(
                                     &m->get_loop[STOR_GET_WORKER_INDEX])),
            (unsigned long long)atomic_load(
                &m->get_loop[STOR_GET_LOOP_ZERO_COPY]),
            (unsigned long long)atomic_load(&m->get_loop[STOR_HEAD_LOOP]));
    if (ret == 0)
        ret = render_zcache(m->zc, out);
    if (ret == 0 && store)
        ret = render_store(store, out);
    return ret;
}

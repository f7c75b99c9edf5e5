/* fuse/metrics.h - the client's monitoring series: Prometheus text on
 * -o metrics=HOST:PORT (GET /metrics) and the same series pushed over
 * OTLP/HTTP with -o otlp_endpoint=URL (common/otlp.c). Names and meanings
 * are listed in README.md "Monitoring" and man/ecfs.1.
 *
 * Every hook is a relaxed atomic add on a fixed array slot (no lock, no
 * allocation); when neither option is given, fc_metrics_on is false and
 * each hook is one predictable branch. The FUSE operations are counted by
 * wrapping the operations table (metrics_ops.c), so no handler changes. */
#ifndef FUSE_METRICS_H
#define FUSE_METRICS_H
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/buf.h"
#include "common/compiler.h"

struct fc_fs;

/* Set once by fc_metrics_start before any FUSE or worker thread runs. */
extern bool fc_metrics_on;

/* Monotonic seconds (for the hooks' start times). */
static inline double fc_metrics_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* FUSE operations (metrics_ops.c wraps these). */
enum fc_mop {
    FC_MOP_LOOKUP = 0,
    FC_MOP_FORGET,
    FC_MOP_GETATTR,
    FC_MOP_SETATTR,
    FC_MOP_MKDIR,
    FC_MOP_UNLINK,
    FC_MOP_RMDIR,
    FC_MOP_RENAME,
    FC_MOP_OPEN,
    FC_MOP_READ,
    FC_MOP_WRITE,
    FC_MOP_FLUSH,
    FC_MOP_RELEASE,
    FC_MOP_FSYNC,
    FC_MOP_OPENDIR,
    FC_MOP_READDIR,
    FC_MOP_READDIRPLUS,
    FC_MOP_RELEASEDIR,
    FC_MOP_STATFS,
    FC_MOP_CREATE,
    FC_MOP_IOCTL,
    FC_MOP_ACCESS,
    FC_MOP_XATTR, /* getxattr, listxattr, setxattr, removexattr */
    FC_MOP_MKNOD,
    FC_MOP_SYMLINK,
    FC_MOP_LINK,
    FC_MOP_COUNT,
};

/* The name of @op in metrics labels and .ecfs-stats ("lookup", ...). */
const char *fc_metrics_op_name(enum fc_mop op);

/* One FUSE operation @op that started at @t0 (fc_metrics_now) is done. */
void fc_metrics_fuse(enum fc_mop op, double t0);

/* Fills @out with @in's handlers wrapped so each counts its request
 * (fc_metrics_ops_format) and, when @timed, is timed by fc_metrics_fuse
 * (handlers @in lacks stay NULL: libfuse answers those ENOSYS, uncounted).
 * @in must outlive the session; one table per process. */
void fc_metrics_wrap_ops(const struct fuse_lowlevel_ops *in,
                         struct fuse_lowlevel_ops *out, bool timed);

/* Appends " fuse_requests=N fuse_op_lookup=N ..." to @out: the FUSE
 * requests the wrapped handlers received, all and by operation, leaving
 * out those on .ecfs-stats itself (its lookup, getattr, open, read,
 * release, ioctl, forget), so reading the counters moves none of them.
 * snprintf's return. */
int fc_metrics_ops_format(char *out, size_t cap);

/* One attempt of an S3 request on curl handle @h (CURLINFO_* give its
 * time and bytes): @stat_off is the offset in struct fc_s3_stats of the
 * counter the request kind bumps (it names the API), @status its HTTP
 * status, 0 when no response came. */
void fc_metrics_s3(void *h, size_t stat_off, long status);

/* A reader's block lookup started at @t0: @owner (a miss: the reader
 * fetched the @n blocks itself), or a hit, which may have been loading
 * (then the reader waited: fc_cache_waited). Time spent waiting for S3 is
 * reader wait. */
void fc_metrics_read_block(double t0, bool owner, unsigned n);
/* Bytes a FUSE read returned. */
void fc_metrics_read_bytes(uint64_t n);

/* Appends the Prometheus text of every series to @out. 0 or -errno. */
CM_MUST_CHECK int fc_metrics_render(struct fc_fs *fs, struct cm_buf *out);

/* What -o metrics= / otlp_endpoint= / otlp_interval= asked for. */
struct fc_metrics_conf {
    const char *listen;        /* HOST:PORT or NULL */
    const char *otlp_endpoint; /* URL or NULL */
    double otlp_interval_s;    /* 0: 10 s */
    const char *instance;      /* service.instance.id */
};

/* Checks @c before daemonizing: a bad address or endpoint, or a port that
 * cannot be bound, is reported on stderr. 0 or -1. */
CM_MUST_CHECK int fc_metrics_check(const struct fc_metrics_conf *c);
/* Turns the counting on and starts the server and the pusher (after the
 * fork, before the session loop). 0 or -errno (logged). */
CM_MUST_CHECK int fc_metrics_start(struct fc_fs *fs,
                                   const struct fc_metrics_conf *c);
/* Stops them (no-op when not started). */
void fc_metrics_stop(void);

#endif /* FUSE_METRICS_H */

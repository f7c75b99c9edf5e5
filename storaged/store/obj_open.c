/* storaged/store/obj_open.c - opening and closing the store: drive checks,
 * format records and set geometry, then the index (obj_load.c) and the
 * background threads (obj_heal.c); the offline `storaged index` entry.
 *
 * DESIGN: the top of the object layer's chain (core obj_store.c, then
 * obj_io.c, then obj_mpu.c, obj_list.c, obj_heal.c and obj_load.c, then
 * this file): nothing below calls up into it. A formatted deployment is
 * never reformatted: a drive of another deployment, at another position,
 * a different drive count or --ec is refused with a message naming it. */
#include "storaged/store/obj_i.h"

#include "common/log.h"
#include "storaged/store/gsync.h"
#include "storaged/store/obj_idx.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- open / close ---- */

static void set_err(char **err, const char *fmt, ...) CM_PRINTF(2, 3);
/* Replaces *err with a formatted message (when err is non-NULL). */
static void set_err(char **err, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return;
    free(*err);
    *err = NULL;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0)
        *err = NULL;
    va_end(ap);
}

/* Value of a lower-case hex digit, -1 otherwise. */
static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Chooses the geometry for a fresh deployment from the options. */
static int pick_geometry(const struct stor_store_opts *o, int *set_size, int *K,
                         int *M, char **err)
{
    int n = (int)o->ndrives, ss = o->set_size;

    if (o->ec_data > 0) {
        int m = o->ec_parity < 0 ? 0 : o->ec_parity;

        if (ss == 0)
            ss = o->ec_data + m;
        if (o->ec_data + m != ss || ss > 16 || n % ss != 0) {
            set_err(err,
                    "--ec %d+%d does not fit %d drives (sets of 1..16 "
                    "drives that divide the drive count)",
                    o->ec_data, m, n);
            return -EINVAL;
        }
        *K = o->ec_data;
        *M = m;
    } else {
        if (ss == 0)
            ss = stor_choose_set_size(n);
        if (ss < 1 || ss > 16 || n % ss != 0) {
            set_err(err,
                    "%d drives cannot be split into erasure sets of "
                    "2..16 drives",
                    n);
            return -EINVAL;
        }
        *M = o->ec_parity >= 0 ? o->ec_parity : stor_default_parity(ss);
        *K = ss - *M;
        if (*K < 1 || *M >= ss || (ss > 1 && *M > ss / 2)) {
            set_err(err, "parity %d is invalid for sets of %d drives", *M, ss);
            return -EINVAL;
        }
    }
    if (*M > *K) {
        set_err(err, "parity (%d) may not exceed data (%d)", *M, *K);
        return -EINVAL;
    }
    *set_size = ss;
    return 0;
}

/* Checks paths and format records, formats fresh drives. */
static int open_drives(struct stor_store *s, const struct stor_store_opts *o,
                       char **err)
{
    size_t n = o->ndrives;
    struct stor_format *fm = calloc(n, sizeof(*fm));
    int *state = calloc(n, sizeof(int)); /* 0 missing, 1 blank, 2 formatted */
    struct stat *st = calloc(n, sizeof(*st));
    int ret = 0, nformatted = 0, ref = -1;

    if (fm == NULL || state == NULL || st == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (stat(o->drives[i], &st[i]) < 0) {
            state[i] = 0;
            continue;
        }
        if (!S_ISDIR(st[i].st_mode)) {
            set_err(err, "drive %s is not a directory", o->drives[i]);
            ret = -ENOTDIR;
            goto out;
        }
        for (size_t j = 0; j < i; j++) {
            if (state[j] && st[j].st_dev == st[i].st_dev &&
                st[j].st_ino == st[i].st_ino) {
                set_err(err,
                        "drive %s is the same directory as %s "
                        "(duplicated drive)",
                        o->drives[i], o->drives[j]);
                ret = -EINVAL;
                goto out;
            }
        }
        ret = stor_format_read(o->drives[i], &fm[i]);
        if (ret == -ENOENT) {
            state[i] = 1;
        } else if (ret < 0) {
            set_err(err, "drive %s: unreadable format record %s/%s",
                    o->drives[i], o->drives[i], STOR_FORMAT);
            goto out;
        } else {
            state[i] = 2;
            nformatted++;
            if (ref < 0)
                ref = (int)i;
            if (strcmp(fm[i].deployment, fm[ref].deployment) != 0) {
                set_err(err,
                        "drive %s belongs to another deployment (%s, "
                        "not %s)",
                        o->drives[i], fm[i].deployment, fm[ref].deployment);
                ret = -EINVAL;
                goto out;
            }
        }
        ret = 0;
    }
    if (nformatted == 0 && s->offline) {
        set_err(err, "no formatted drive among the %zu given", n);
        ret = -ENOENT;
        goto out;
    }
    if (nformatted == 0) {
        uint8_t rnd[16];
        int ss, K, M;

        for (size_t i = 0; i < n; i++) {
            if (state[i] == 0) {
                set_err(err,
                        "drive %s does not exist (create the directory "
                        "or mount the disk)",
                        o->drives[i]);
                ret = -ENOENT;
                goto out;
            }
        }
        ret = pick_geometry(o, &ss, &K, &M, err);
        if (ret < 0)
            goto out;
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
            ret = -EIO;
            goto out;
        }
        obj_hex(rnd, 16, s->deployment);
        s->set_size = ss;
        s->nsets = (int)n / ss;
        s->K = K;
        s->M = M;
    } else {
        const struct stor_format *f = &fm[ref];

        memcpy(s->deployment, f->deployment, 33);
        s->set_size = f->set_size;
        s->nsets = f->nsets;
        s->K = f->k;
        s->M = f->m;
        if ((size_t)(f->nsets * f->set_size) != n) {
            set_err(err,
                    "the deployment has %d drives (%d sets of %d) but "
                    "%zu were given",
                    f->nsets * f->set_size, f->nsets, f->set_size, n);
            ret = -EINVAL;
            goto out;
        }
        if (o->ec_data > 0 && (o->ec_data != f->k ||
                               (o->ec_parity >= 0 && o->ec_parity != f->m))) {
            set_err(err, "--ec %d+%d differs from the drives' format %d+%d",
                    o->ec_data, o->ec_parity, f->k, f->m);
            ret = -EINVAL;
            goto out;
        }
    }
    for (int i = 0; i < 16; i++)
        s->dkey[i] = (uint8_t)(hexval(s->deployment[2 * i]) << 4 |
                               hexval(s->deployment[2 * i + 1]));
    s->wq = s->M == 0 ? s->K : stor_write_quorum(s->K, s->M);
    s->drives = calloc(n, sizeof(*s->drives));
    if (s->drives == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    s->ndrives = n;
    for (size_t i = 0; i < n; i++) {
        struct stor_drive *d = &s->drives[i];
        struct stor_format f = {0};

        d->path = strdup(o->drives[i]);
        if (d->path == NULL) {
            ret = -ENOMEM;
            goto out;
        }
        d->set = (int)i / s->set_size;
        d->pos = (int)i % s->set_size;
        if (state[i] == 2 && (fm[i].set != d->set || fm[i].pos != d->pos)) {
            set_err(err,
                    "drive %s was formatted as set %d position %d but "
                    "is given as set %d position %d (keep the drive order)",
                    d->path, fm[i].set, fm[i].pos, d->set, d->pos);
            ret = -EINVAL;
            goto out;
        }
        if (state[i] == 0 || (state[i] == 1 && s->offline)) {
            cm_log(CM_LOG_WARN, ENOENT,
                   "drive %s: missing, serving without "
                   "it",
                   d->path);
            continue;
        }
        if (state[i] == 1) {
            memcpy(f.deployment, s->deployment, 33);
            f.set = d->set;
            f.pos = d->pos;
            f.nsets = s->nsets;
            f.set_size = s->set_size;
            f.k = s->K;
            f.m = s->M;
            ret = stor_format_write(d->path, &f);
            if (ret < 0) {
                set_err(err, "drive %s: cannot write format record: %s",
                        d->path, strerror(-ret));
                goto out;
            }
            if (nformatted > 0) {
                d->stale = true; /* a replacement drive: heal everything */
                cm_log(CM_LOG_INFO, 0,
                       "drive %s: new drive formatted into "
                       "set %d position %d",
                       d->path, d->set, d->pos);
            }
        }
        ret = s->offline ? 0 : obj_drive_prepare(d);
        if (ret < 0) {
            cm_log(CM_LOG_WARN, -ret, "drive %s: unusable, offline", d->path);
            ret = 0;
            continue;
        }
        d->online = true;
    }
out:
    free(fm);
    free(state);
    free(st);
    return ret;
}

/* Takes flock(@how) on DRIVE/.ecfs.sys/lock of every online drive, without
 * waiting: a server holds it shared, `storaged index` exclusive, so the
 * tool never rebuilds an index under a running server. The fds stay open
 * until close. 0, or -EBUSY when one is held the other way. */
static int drive_locks(struct stor_store *s, int how)
{
    s->lock_fds = calloc(s->ndrives, sizeof(int));
    if (s->lock_fds == NULL)
        return -ENOMEM;
    for (size_t d = 0; d < s->ndrives; d++) {
        char path[PATH_MAX];

        s->lock_fds[d] = -1;
        if (!obj_drive_online(s, d) ||
            snprintf(path, sizeof(path), "%s/" STOR_SYS_DIR "/lock",
                     s->drives[d].path) >= (int)sizeof(path))
            continue;
        s->lock_fds[d] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (s->lock_fds[d] >= 0 && flock(s->lock_fds[d], how | LOCK_NB) < 0 &&
            errno == EWOULDBLOCK)
            return -EBUSY;
    }
    return 0;
}

/* Thread: the index rebuild of a store already answering /metrics; then
 * the background threads. A failure leaves the store not ready (every S3
 * request keeps its 503) with the reason in the log and /metrics. */
static void *rebuild_main(void *arg)
{
    struct stor_store *s = arg;
    int ret = obj_load_rebuild(s);

    if (ret == 0)
        ret = obj_threads_start(s);
    if (ret == -ECANCELED) {
        cm_log(CM_LOG_INFO, 0, "index: rebuild stopped by the close");
    } else if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret,
               "index: rebuild failed; not serving objects (restart after "
               "fixing the drives)");
        __atomic_store_n(&s->idx_ready, false, __ATOMIC_RELEASE);
        __atomic_store_n(&s->idx_phase, STOR_INDEX_FAILED, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Thread: the content check of the index a start trusted (obj_load.c). */
static void *verify_main(void *arg)
{
    struct stor_store *s = arg;
    int ret = obj_load_verify(s);

    if (ret < 0 && ret != -ECANCELED && ret != -EBADMSG)
        cm_log(CM_LOG_WARN, -ret, "index: the content check did not finish");
    return NULL;
}

/* The residency thread's lock and condition (timed on CLOCK_MONOTONIC). */
static void res_init(struct stor_store *s)
{
    pthread_condattr_t a;

    pthread_mutex_init(&s->res_lock, NULL);
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&s->res_cond, &a);
    pthread_condattr_destroy(&a);
}

/* DESIGN: the residency thread is paced by its own cost, so an idle
 * server with any size of index stays idle. Each step (one window) is
 * followed by a sleep of RES_STEP_X times the CPU time it took (at least
 * RES_STEP_MS), so a pass uses at most 1 % of a core while it runs; each
 * pass (clean or not) by a pause of RES_PASS_X times the whole pass's CPU
 * time (at least RES_PASS_MS), so the thread uses at most ~0.1 % of a core
 * in all. With cachestat(2) a 64 MiB window costs tens of microseconds: a
 * 2 GiB index (10^6 objects) is seen whole every ~1.5 s; with mmap +
 * mincore (kernels before 6.5) about a millisecond per window, so such an
 * index takes ~7 s a pass and an eviction is noticed within one. Until
 * then a loop-side lookup may fault the evicted page in (FORMAT.md). */
#define RES_STEP_MS 10   /* the least sleep between two windows */
#define RES_STEP_X  100  /* sleep >= 100 x a step's CPU time */
#define RES_PASS_MS 1000 /* the least pause between two passes */
#define RES_PASS_X  1000 /* pause >= 1000 x a pass's CPU time */
#define RES_IDLE_MS 100  /* while no index is served (a rebuild) */

/* Waits @ms or until close asks the residency thread to stop. true: stop. */
static bool res_wait(struct stor_store *s, long ms)
{
    struct timespec ts;
    bool stop;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->res_lock);
    while (!s->res_stop &&
           pthread_cond_timedwait(&s->res_cond, &s->res_lock, &ts) == 0)
        ;
    stop = s->res_stop;
    pthread_mutex_unlock(&s->res_lock);
    return stop;
}

/* CPU time of the calling thread, ns. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The sleep after a step or a pass that took @cpu_ns: @x times it, at
 * least @least_ms, in ms (capped at a minute). */
static long res_pace_ms(int64_t cpu_ns, long x, long least_ms)
{
    int64_t ms = cpu_ns / 1000000 * x + (cpu_ns % 1000000) * x / 1000000;

    return (long)CM_MIN(CM_MAX(ms, (int64_t)least_ms), (int64_t)60000);
}

/* Thread: keeps the index's residency hint up to date, one bounded window
 * per step (obj_idx_resident_step), so a page the kernel evicts after the
 * start sends GETs and HEADs to the workers instead of faulting on the
 * event loop, and a file read in again brings them back. Paced by its own
 * cost (DESIGN above). Not a background thread in STORAGED_NO_BACKGROUND's
 * sense either: it reads no drive. */
static void *res_main(void *arg)
{
    struct stor_store *s = arg;
    struct obj_idx_res_pass p;
    int64_t pass_ns = 0;
    long wait_ms = RES_IDLE_MS;
    /* reading the evicted index back in reads a drive: a background read */
    bool rewarm = getenv("STORAGED_NO_BACKGROUND") == NULL;

    memset(&p, 0, sizeof(p));
    while (!res_wait(s, wait_ms)) {
        int64_t t0;
        bool ended;

        if (!stor_store_ready(s) || s->idx == NULL) {
            wait_ms = RES_IDLE_MS; /* a rebuild at start: nothing yet */
            continue;
        }
        t0 = thread_cpu_ns();
        ended = obj_idx_resident_step(s->idx, &p, rewarm);
        t0 = thread_cpu_ns() - t0;
        pass_ns += t0;
        if (!ended) {
            wait_ms = res_pace_ms(t0, RES_STEP_X, RES_STEP_MS);
            continue;
        }
        __atomic_add_fetch(&s->res_passes, 1, __ATOMIC_RELAXED);
        wait_ms = res_pace_ms(pass_ns, RES_PASS_X, RES_PASS_MS);
        pass_ns = 0;
    }
    return NULL;
}

/* Contract in object.h: the core's figures (obj_stats_get) and those of
 * the layers above it that it must not call up into. */
void stor_store_get_stats(struct stor_store *s, struct stor_store_stats *out)
{
    obj_stats_get(s, out);
    obj_ext_reclaim_stats(s, &out->ext_freed, &out->ext_punches);
    out->jnl_records = __atomic_load_n(&s->jnl_records, __ATOMIC_RELAXED);
    out->jnl_checkpoints =
        __atomic_load_n(&s->jnl_checkpoints, __ATOMIC_RELAXED);
    out->jnl_replayed = __atomic_load_n(&s->jnl_replayed, __ATOMIC_RELAXED);
    {
        uint64_t v[5];

        obj_spare_stats(s, v);
        out->spare_reused = v[0];
        out->spare_kept = v[1];
        out->spare_emptied = v[2];
        out->spare_made = v[3];
        out->spare_taken = v[4];
    }
}

/* Contract in object.h. */
bool stor_store_ready(struct stor_store *s)
{
    return __atomic_load_n(&s->idx_phase, __ATOMIC_ACQUIRE) ==
           STOR_INDEX_SERVING;
}

/* The meta journal is on unless STORAGED_META_JOURNAL=0 (benchmarks of
 * the commit without it; FORMAT.md "The meta journal"). */
static bool jnl_wanted(void)
{
    const char *v = getenv("STORAGED_META_JOURNAL");

    return v == NULL || strcmp(v, "0") != 0;
}

/* Contract in object.h: drives, index load, background threads. */
int stor_store_open(const struct stor_store_opts *o, struct stor_store **out,
                    char **err)
{
    struct stor_store *s;
    bool trusted, background;
    int ret;

    if (err)
        *err = NULL;
    if (o == NULL || o->ndrives == 0 || o->drives == NULL) {
        set_err(err, "no drives given");
        return -EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->fsync = o->fsync;
    s->body_max = CM_MIN(o->index_body_max, (size_t)STOR_INDEX_BODY_LIMIT);
    s->merge_fn = obj_load_merge; /* the scanner's way up the chain */
    pthread_rwlock_init(&s->lock, NULL);
    for (int i = 0; i < OBJ_KLOCKS; i++)
        pthread_rwlock_init(&s->klock[i], NULL);
    pthread_mutex_init(&s->heal_lock, NULL);
    pthread_mutex_init(&s->lease_lock, NULL);
    pthread_cond_init(&s->heal_cond, NULL);
    res_init(s);
    ret = open_drives(s, o, err);
    if (ret == 0)
        ret = obj_gsync_open(s);
    s->extents = o->extents;
    if (ret == 0 && !s->offline)
        ret = obj_ext_open(s); /* also with extents off: read what is there */
    if (ret < 0)
        goto fail;
    if (obj_set_online(s, 0) == 0 && s->ndrives == 1) {
        set_err(err, "drive %s is not usable", s->drives[0].path);
        ret = -EIO;
        goto fail;
    }
    (void)drive_locks(s, LOCK_SH); /* shared: `storaged index` waits for us */
    /* before the index: a replay after a reboot puts metas back */
    ret = obj_jnl_open(s, jnl_wanted());
    if (ret < 0) {
        if (ret == -EPROTO)
            set_err(err, "a drive's meta journal is not of this format (see "
                         "the log); not starting");
        else
            set_err(err, "cannot open the meta journals: %s", strerror(-ret));
        goto fail;
    }
    ret = obj_load(s);
    trusted = ret == 0;
    background = ret == 1 && o->rebuild_in_background;
    if (background) {
        ret = pthread_create(&s->load_thread, NULL, rebuild_main, s);
        if (ret != 0) {
            ret = -ret;
            set_err(err, "cannot start the index rebuild: %s", strerror(-ret));
            goto fail;
        }
        s->load_thread_started = true;
    } else {
        if (ret == 1)
            ret = obj_load_rebuild(s);
        if (ret < 0) {
            set_err(err, "loading the object index failed: %s", strerror(-ret));
            goto fail;
        }
        ret = obj_threads_start(s);
        if (ret < 0) {
            set_err(err, "cannot start background threads: %s", strerror(-ret));
            goto fail;
        }
        /* a trusted index was checked only by its file's identity: its
         * content is checked while serving (FORMAT.md); the walk also
         * brings its pages into the page cache and the map, so first
         * lookups do not fault them in one by one. Not a background thread
         * in STORAGED_NO_BACKGROUND's sense: it only reads the index, and
         * ends. */
        if (trusted &&
            pthread_create(&s->load_thread, NULL, verify_main, s) == 0)
            s->load_thread_started = true;
    }
    if (pthread_create(&s->res_thread, NULL, res_main, s) == 0) {
        s->res_started = true; /* else the hint stays as the last check set */
        (void)pthread_setname_np(s->res_thread, "stor-resident");
    }
    cm_log(CM_LOG_INFO, 0,
           "store: deployment %s, %zu drives, %d set(s) of "
           "%d, EC %d+%d%s",
           s->deployment, s->ndrives, s->nsets, s->set_size, s->K, s->M,
           background ? "; serving /metrics and 503s until the index is "
                        "rebuilt"
                      : "");
    *out = s;
    return 0;
fail:
    if (err && *err == NULL)
        set_err(err, "cannot open the store: %s", strerror(-ret));
    stor_store_close(s);
    return ret;
}

/* Contract in object.h. */
long stor_index_check(const char *const *drives, size_t ndrives, bool rebuild,
                      FILE *out, char **err)
{
    struct stor_store_opts o = {
        .drives = drives, .ndrives = ndrives, .ec_parity = -1, .fsync = true};
    struct stor_store *s;
    long ret;

    if (err)
        *err = NULL;
    if (ndrives == 0 || drives == NULL) {
        set_err(err, "no drives given");
        return -EINVAL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->fsync = true;
    s->offline = true;
    pthread_rwlock_init(&s->lock, NULL);
    for (int i = 0; i < OBJ_KLOCKS; i++)
        pthread_rwlock_init(&s->klock[i], NULL);
    pthread_mutex_init(&s->heal_lock, NULL);
    pthread_mutex_init(&s->lease_lock, NULL);
    pthread_cond_init(&s->heal_cond, NULL);
    res_init(s);
    ret = open_drives(s, &o, err);
    if (ret == 0)
        ret = obj_gsync_open(s);
    if (ret == 0 && drive_locks(s, LOCK_EX) < 0) {
        set_err(err, "a storaged serves these drives: stop it first");
        ret = -EBUSY;
    }
    if (ret == 0) {
        ret = obj_jnl_open(s, false); /* replayed first, as at a start */
        if (ret < 0)
            set_err(err, "cannot recover the meta journals: %s",
                    strerror(-ret));
    }
    if (ret == 0) {
        ret = obj_index_check(s, rebuild, out);
        if (ret < 0)
            set_err(err, "%s the index failed: %s",
                    rebuild ? "rebuilding" : "checking", strerror((int)-ret));
    }
    stor_store_close(s);
    return ret;
}

/* Contract in object.h: stops the threads, frees everything. */
void stor_store_close(struct stor_store *s)
{
    if (s == NULL)
        return;
    if (s->res_started) {
        pthread_mutex_lock(&s->res_lock);
        s->res_stop = true;
        pthread_cond_broadcast(&s->res_cond);
        pthread_mutex_unlock(&s->res_lock);
        pthread_join(s->res_thread, NULL);
        s->res_started = false;
    }
    if (s->load_thread_started) {
        __atomic_store_n(&s->load_stop, true, __ATOMIC_RELAXED);
        pthread_join(s->load_thread, NULL);
        s->load_thread_started = false;
    }
    obj_vdel_stop(s); /* the DELETEs queued settle while all is open */
    obj_threads_stop(s);
    obj_jnl_close(s); /* a clean stop leaves the journals empty */
    obj_index_close(s);
    stor_gsync_destroy(s->gs);
    obj_ext_close(s);
    obj_buckets_free(s);
    for (size_t i = 0; s->lock_fds && i < s->ndrives; i++)
        if (s->lock_fds[i] >= 0)
            close(s->lock_fds[i]);
    free(s->lock_fds);
    free(s->idx_away);
    for (size_t i = 0; i < s->ndrives; i++)
        free(s->drives[i].path);
    free(s->drives);
    for (size_t i = 0; i < s->nhealq; i++)
        free(s->healq[i].key);
    free(s->healq);
    for (int i = 0; i < OBJ_KLOCKS; i++)
        pthread_rwlock_destroy(&s->klock[i]);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->heal_lock);
    pthread_mutex_destroy(&s->lease_lock);
    pthread_cond_destroy(&s->heal_cond);
    pthread_mutex_destroy(&s->res_lock);
    pthread_cond_destroy(&s->res_cond);
    free(s);
}

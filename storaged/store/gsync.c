/* storaged/store/gsync.c - group commit (contract in gsync.h).
 *
 * One group per filesystem (st_dev of a drive directory), made the first
 * time a drive on it is marked. A group in fs mode has one thread and an fd
 * on the filesystem; the thread runs syncfs rounds while barriers want them:
 *   started  rounds begun, done  rounds finished, want  the round asked for.
 * A barrier asks for round started+1 (the next one to *begin*: one already
 * running may have begun before the caller's writes) and waits for done to
 * reach it. Rounds never overlap within a group, so they finish in order.
 * Locks: g->mu (the groups and which drive is in which) is taken before a
 * group's mu, never the other way round. */
#include "storaged/store/gsync.h"
#include "common/log.h"
#include "storaged/store/drive.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gs_group {
    struct stor_gsync *gs;
    dev_t dev;
    bool fs; /* fs mode: syncfs rounds (else file mode: no thread, no fd) */
    int fd;  /* a directory on the filesystem */
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t work, done_cv;
    uint64_t started, done, want; /* protected by mu */
    bool stop;                    /* protected by mu */
    uint64_t fail_mark;           /* atomic: gs->clock after the last failure */
    int fail_err;                 /* atomic: its -errno */
};

struct stor_gsync {
    char **paths; /* owned */
    size_t n;
    pthread_mutex_t mu;
    struct gs_group **groups; /* protected by mu */
    size_t ngroups;
    struct gs_group **dgroup; /* per drive; atomic loads, written under mu */
    uint64_t clock;           /* atomic: bumped by every failed round */
    int force;                /* STORAGED_SYNC_MODE: 1 fs, 0 file, -1 auto */
    uint64_t rounds, barriers, fsyncs, failures, shared; /* atomics */
};

/* A shared file's fsyncs (gsync.h), numbered like a group's rounds:
 * started  fsyncs begun, done  fsyncs finished, failed  the last that
 * failed (its error in err); running while one is in flight. */
struct stor_gsync_file {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t started, done, failed; /* protected by mu */
    int err;                        /* protected by mu */
    bool running;                   /* protected by mu */
};

/* See gsync.h. */
struct stor_gsync_file *stor_gsync_file_create(void)
{
    struct stor_gsync_file *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    return f;
}

/* See gsync.h. */
void stor_gsync_file_destroy(struct stor_gsync_file *f)
{
    if (f == NULL)
        return;
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* Asks for an fsync of @f that starts after now. Returns the number it
 * needs (*lead: the caller runs that fsync itself, then calls
 * gsf_finish). Caller holds f->mu. */
static uint64_t gsf_ask(struct stor_gsync_file *f, bool *lead)
{
    *lead = !f->running;
    if (*lead) {
        f->running = true;
        return ++f->started;
    }
    return f->started + 1;
}

/* The fsync numbered @gen ended with @res. Caller holds f->mu. */
static void gsf_finish(struct stor_gsync_file *f, uint64_t gen, int res)
{
    f->done = gen;
    if (res < 0) {
        f->failed = gen;
        f->err = res;
    }
    f->running = false;
    pthread_cond_broadcast(&f->cv);
}

/* Waits until fsync @want (or a later one) of @f, with @fd, has finished,
 * running it on this thread when none is in flight. 0 or -errno (the
 * error of a failed fsync at or after @want). */
static int gsf_wait(struct stor_gsync *g, struct stor_gsync_file *f, int fd,
                    uint64_t want, bool datasync)
{
    bool ran = false;
    int ret;

    pthread_mutex_lock(&f->mu);
    while (f->done < want) {
        bool lead;
        uint64_t gen;
        int r;

        if (f->running) {
            pthread_cond_wait(&f->cv, &f->mu);
            continue;
        }
        gen = gsf_ask(f, &lead);
        pthread_mutex_unlock(&f->mu);
        r = (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
        ran = true;
        __atomic_add_fetch(&g->fsyncs, 1, __ATOMIC_RELAXED);
        if (r < 0)
            __atomic_add_fetch(&g->failures, 1, __ATOMIC_RELAXED);
        pthread_mutex_lock(&f->mu);
        gsf_finish(f, gen, r);
    }
    ret = f->failed >= want ? f->err : 0;
    pthread_mutex_unlock(&f->mu);
    if (!ran)
        __atomic_add_fetch(&g->shared, 1, __ATOMIC_RELAXED);
    return ret;
}

/* Is @path the mount point of its filesystem (its parent is on another)?
 * Then the filesystem is a disk given to storaged: fs mode. */
static bool gs_is_mount_root(const char *path, dev_t dev)
{
    char up[4096];
    struct stat st;
    int n = snprintf(up, sizeof(up), "%s/..", path);

    if (n < 0 || (size_t)n >= sizeof(up) || stat(up, &st) < 0)
        return false;
    return st.st_dev != dev;
}

/* Drops from @gr every drive whose path is no longer on its filesystem
 * (they get regrouped by their next mark). Round thread, before a syncfs. */
static void gs_check_members(struct gs_group *gr)
{
    struct stor_gsync *g = gr->gs;

    pthread_mutex_lock(&g->mu);
    for (size_t d = 0; d < g->n; d++) {
        struct stat st;

        if (g->dgroup[d] != gr)
            continue;
        if (stat(g->paths[d], &st) == 0 && st.st_dev == gr->dev)
            continue;
        cm_log(CM_LOG_WARN, 0, "drive %s left its filesystem; regrouping",
               g->paths[d]);
        __atomic_store_n(&g->dgroup[d], NULL, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g->mu);
}

static void *gs_thread(void *arg)
{
    struct gs_group *gr = arg;
    struct stor_gsync *g = gr->gs;

    pthread_mutex_lock(&gr->mu);
    for (;;) {
        uint64_t gen;
        int r;

        while (!gr->stop && gr->want <= gr->started)
            pthread_cond_wait(&gr->work, &gr->mu);
        if (gr->stop)
            break;
        gen = ++gr->started;
        pthread_mutex_unlock(&gr->mu);
        gs_check_members(gr);
        r = syncfs(gr->fd) < 0 ? -errno : 0;
        __atomic_add_fetch(&g->rounds, 1, __ATOMIC_RELAXED);
        if (r < 0) {
            uint64_t f = __atomic_add_fetch(&g->clock, 1, __ATOMIC_ACQ_REL);

            __atomic_store_n(&gr->fail_err, r, __ATOMIC_RELAXED);
            __atomic_store_n(&gr->fail_mark, f, __ATOMIC_RELEASE);
            __atomic_add_fetch(&g->failures, 1, __ATOMIC_RELAXED);
            cm_log(CM_LOG_ERROR, -r, "syncfs failed (group commit)");
        }
        pthread_mutex_lock(&gr->mu);
        gr->done = gen;
        pthread_cond_broadcast(&gr->done_cv);
    }
    pthread_mutex_unlock(&gr->mu);
    return NULL;
}

/* Puts drive @d in the group of its filesystem, making the group when it
 * is the first. Caller holds g->mu. 0 or -errno. */
static int gs_join(struct stor_gsync *g, size_t d)
{
    struct gs_group *gr = NULL, **ng;
    struct stat st;

    if (stat(g->paths[d], &st) < 0)
        return -errno;
    for (size_t i = 0; i < g->ngroups; i++)
        if (g->groups[i]->dev == st.st_dev)
            gr = g->groups[i];
    if (gr == NULL) {
        ng = realloc(g->groups, (g->ngroups + 1) * sizeof(*ng));
        if (ng == NULL)
            return -ENOMEM;
        g->groups = ng;
        gr = calloc(1, sizeof(*gr));
        if (gr == NULL)
            return -ENOMEM;
        gr->gs = g;
        gr->dev = st.st_dev;
        gr->fs = g->force >= 0 ? g->force == 1
                               : gs_is_mount_root(g->paths[d], st.st_dev);
        gr->fd = -1;
        if (!gr->fs) {
            g->groups[g->ngroups++] = gr;
            cm_log(CM_LOG_INFO, 0,
                   "drive %s: group commit fsyncs each file (the drive is "
                   "not the mount point of its own filesystem)",
                   g->paths[d]);
            __atomic_store_n(&g->dgroup[d], gr, __ATOMIC_RELEASE);
            return 0;
        }
        gr->fd = open(g->paths[d], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gr->fd < 0) {
            int e = -errno;

            free(gr);
            return e;
        }
        pthread_mutex_init(&gr->mu, NULL);
        pthread_cond_init(&gr->work, NULL);
        pthread_cond_init(&gr->done_cv, NULL);
        if (pthread_create(&gr->thr, NULL, gs_thread, gr) != 0) {
            close(gr->fd);
            pthread_mutex_destroy(&gr->mu);
            pthread_cond_destroy(&gr->work);
            pthread_cond_destroy(&gr->done_cv);
            free(gr);
            return -EAGAIN;
        }
        g->groups[g->ngroups++] = gr;
        cm_log(CM_LOG_INFO, 0,
               "drive %s: group commit by syncfs of its filesystem",
               g->paths[d]);
    }
    __atomic_store_n(&g->dgroup[d], gr, __ATOMIC_RELEASE);
    return 0;
}

/* See gsync.h. */
struct stor_gsync *stor_gsync_create(const char *const *paths, size_t n)
{
    struct stor_gsync *g = calloc(1, sizeof(*g));

    if (g == NULL)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    g->dgroup = calloc(n ? n : 1, sizeof(*g->dgroup));
    g->paths = calloc(n ? n : 1, sizeof(*g->paths));
    if (g->dgroup == NULL || g->paths == NULL) {
        stor_gsync_destroy(g);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        g->paths[i] = strdup(paths[i]);
        if (g->paths[i] == NULL) {
            g->n = i;
            stor_gsync_destroy(g);
            return NULL;
        }
    }
    g->n = n;
    {
        const char *m = getenv("STORAGED_SYNC_MODE");

        g->force = m == NULL || *m == 0     ? -1
                   : strcmp(m, "fs") == 0   ? 1
                   : strcmp(m, "file") == 0 ? 0
                                            : -1;
        if (m && *m && g->force < 0)
            cm_log(CM_LOG_WARN, 0,
                   "STORAGED_SYNC_MODE=%s: not fs or file; ignored", m);
    }
    return g;
}

/* See gsync.h. */
void stor_gsync_destroy(struct stor_gsync *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->ngroups; i++) {
        struct gs_group *gr = g->groups[i];

        if (gr->fs) {
            pthread_mutex_lock(&gr->mu);
            gr->stop = true;
            pthread_cond_signal(&gr->work);
            pthread_mutex_unlock(&gr->mu);
            pthread_join(gr->thr, NULL);
            close(gr->fd);
            pthread_mutex_destroy(&gr->mu);
            pthread_cond_destroy(&gr->work);
            pthread_cond_destroy(&gr->done_cv);
        }
        free(gr);
    }
    free(g->groups);
    free(g->dgroup);
    for (size_t i = 0; g->paths && i < g->n; i++)
        free(g->paths[i]);
    free(g->paths);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* See gsync.h. */
uint64_t stor_gsync_mark(struct stor_gsync *g, const size_t *drv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (drv[i] >= g->n ||
            __atomic_load_n(&g->dgroup[drv[i]], __ATOMIC_ACQUIRE) != NULL)
            continue;
        pthread_mutex_lock(&g->mu);
        if (g->dgroup[drv[i]] == NULL)
            (void)gs_join(g, drv[i]); /* failing: its barrier says so */
        pthread_mutex_unlock(&g->mu);
    }
    return __atomic_load_n(&g->clock, __ATOMIC_ACQUIRE);
}

/* See gsync.h. */
bool stor_gsync_is_fs(struct stor_gsync *g, size_t d)
{
    struct gs_group *gr;

    (void)stor_gsync_mark(g, &d, 1);
    gr = d < g->n ? __atomic_load_n(&g->dgroup[d], __ATOMIC_ACQUIRE) : NULL;
    return gr && gr->fs;
}

/* See gsync.h. DESIGN: the fs-mode rounds are asked for first, the
 * file-mode fsyncs then run on this thread while they go, then it waits. */
void stor_gsync_barrier(struct stor_gsync *g, uint64_t mark,
                        struct stor_sync_item *it, size_t n)
{
    stor_gsync_barrier_during(g, mark, it, n, NULL, NULL);
}

/* See gsync.h. */
void stor_gsync_barrier_during(struct stor_gsync *g, uint64_t mark,
                               struct stor_sync_item *it, size_t n,
                               void (*fn)(void *), void *arg)
{
    struct gs_group *grp[64], *uniq[64];
    uint64_t ticket[64], want[64];
    struct stor_io io[64];
    size_t map[64], alias[64], nu = 0, nio = 0;
    bool lead[64] = {0}, follow[64] = {0};

    __atomic_add_fetch(&g->barriers, 1, __ATOMIC_RELAXED);
    if (n > 64) { /* never: a call covers one object's shards (<= 32) */
        for (size_t i = 0; i < n; i++)
            it[i].res = -E2BIG;
        if (fn)
            fn(arg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t u;

        grp[i] = it[i].drive < g->n ? __atomic_load_n(&g->dgroup[it[i].drive],
                                                      __ATOMIC_ACQUIRE)
                                    : NULL;
        it[i].res = 0;
        alias[i] = i;
        if (grp[i] == NULL || !grp[i]->fs) {
            grp[i] = NULL;
            if (it[i].fd < 0) {
                it[i].res = -EBADF; /* nothing to sync it with */
                continue;
            }
            for (size_t e = 0; it[i].shared && e < i; e++)
                if (alias[e] == e && grp[e] == NULL &&
                    it[e].shared == it[i].shared && it[e].fd >= 0)
                    alias[i] = e; /* one journal for several drives */
            if (alias[i] != i)
                continue;       /* takes that item's result, below */
            if (it[i].shared) { /* share one fsync of it (gsync.h) */
                pthread_mutex_lock(&it[i].shared->mu);
                want[i] = gsf_ask(it[i].shared, &lead[i]);
                pthread_mutex_unlock(&it[i].shared->mu);
                follow[i] = !lead[i];
                if (follow[i])
                    continue; /* waits below, after this thread's fsyncs */
            }
            map[nio] = i;
            io[nio++] = (struct stor_io){.fd = it[i].fd,
                                         .op = it[i].datasync ? 'd' : 's'};
            continue;
        }
        for (u = 0; u < nu && uniq[u] != grp[i]; u++)
            ;
        if (u == nu)
            uniq[nu++] = grp[i];
    }
    for (size_t u = 0; u < nu; u++) {
        struct gs_group *gr = uniq[u];

        pthread_mutex_lock(&gr->mu);
        ticket[u] = gr->started + 1;
        if (gr->want < ticket[u]) {
            gr->want = ticket[u];
            pthread_cond_signal(&gr->work);
        }
        pthread_mutex_unlock(&gr->mu);
    }
    if (nio && fn) /* the fsyncs this thread leads run during @fn */
        stor_io_run_during(io, nio, fn, arg);
    else if (fn)
        fn(arg);
    if (nio) {
        if (!fn)
            stor_io_run(io, nio);
        __atomic_add_fetch(&g->fsyncs, nio, __ATOMIC_RELAXED);
        for (size_t k = 0; k < nio; k++) {
            size_t i = map[k];

            if (io[k].res < 0) {
                it[i].res = (int)io[k].res;
                __atomic_add_fetch(&g->failures, 1, __ATOMIC_RELAXED);
            }
            if (lead[i]) {
                pthread_mutex_lock(&it[i].shared->mu);
                gsf_finish(it[i].shared, want[i], it[i].res);
                pthread_mutex_unlock(&it[i].shared->mu);
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (follow[i])
            it[i].res =
                gsf_wait(g, it[i].shared, it[i].fd, want[i], it[i].datasync);
    for (size_t i = 0; i < n; i++)
        if (alias[i] != i)
            it[i].res = it[alias[i]].res;
    for (size_t u = 0; u < nu; u++) {
        struct gs_group *gr = uniq[u];

        pthread_mutex_lock(&gr->mu);
        while (gr->done < ticket[u])
            pthread_cond_wait(&gr->done_cv, &gr->mu);
        pthread_mutex_unlock(&gr->mu);
    }
    for (size_t i = 0; i < n; i++) {
        if (grp[i] == NULL)
            continue;
        if (__atomic_load_n(&grp[i]->fail_mark, __ATOMIC_ACQUIRE) > mark)
            it[i].res = __atomic_load_n(&grp[i]->fail_err, __ATOMIC_RELAXED);
        else if (__atomic_load_n(&g->dgroup[it[i].drive], __ATOMIC_ACQUIRE) !=
                 grp[i])
            it[i].res = -ENODEV; /* its path moved to another filesystem */
    }
}

/* See gsync.h. */
void stor_gsync_get_stats(struct stor_gsync *g, struct stor_gsync_stats *out)
{
    out->rounds = __atomic_load_n(&g->rounds, __ATOMIC_RELAXED);
    out->barriers = __atomic_load_n(&g->barriers, __ATOMIC_RELAXED);
    out->fsyncs = __atomic_load_n(&g->fsyncs, __ATOMIC_RELAXED);
    out->shared = __atomic_load_n(&g->shared, __ATOMIC_RELAXED);
    out->failures = __atomic_load_n(&g->failures, __ATOMIC_RELAXED);
}

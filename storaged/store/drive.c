/* storaged/store/drive.c - drive arguments, format records, batched I/O.
 *
 * DESIGN: each thread that does shard I/O lazily creates one small
 * io_uring (thread-local, torn down at thread exit) and submits the
 * reads/writes/fsyncs of one request as a single batch, so reading k shards
 * costs one io_uring_enter, not k round trips. When io_uring cannot be set
 * up (old kernel, seccomp), the same batch runs as plain syscalls. */
#include "storaged/store/drive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- ellipsis expansion ---- */

/* Frees what stor_drives_expand returned (NULL-safe). */
void stor_drives_free(char **v, size_t n)
{
    for (size_t i = 0; i < n && v; i++)
        free(v[i]);
    free(v);
}

/* Appends @s to the growable array; takes ownership of @s (also on failure). */
static int push(char ***v, size_t *n, size_t *cap, char *s)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **nv = realloc(*v, nc * sizeof(**v));

        if (nv == NULL) {
            free(s);
            return -ENOMEM;
        }
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = s;
    return 0;
}

/* Expands the first {A...B} group of @arg and recurses on each result. */
static int expand(const char *arg, char ***v, size_t *n, size_t *cap)
{
    const char *open = strchr(arg, '{'), *dots, *close;
    char *end;
    long a, b;
    int width = 0;

    if (open == NULL) {
        char *s = strdup(arg);

        if (s == NULL)
            return -ENOMEM;
        return push(v, n, cap, s);
    }
    dots = strstr(open, "...");
    close = dots ? strchr(dots, '}') : NULL;
    if (dots == NULL || close == NULL)
        return -EINVAL;
    errno = 0;
    a = strtol(open + 1, &end, 10);
    if (end != dots || open + 1 == dots || errno)
        return -EINVAL;
    b = strtol(dots + 3, &end, 10);
    if (end != close || dots + 3 == close || errno || a > b || a < 0 ||
        b - a >= 4096)
        return -EINVAL;
    if (open[1] == '0' && dots - open - 1 > 1)
        width = (int)(dots - open - 1);
    for (long i = a; i <= b; i++) {
        size_t len = strlen(arg) + 32;
        char *s = malloc(len);
        int ret;

        if (s == NULL)
            return -ENOMEM;
        snprintf(s, len, "%.*s%0*ld%s", (int)(open - arg), arg, width, i,
                 close + 1);
        ret = expand(s, v, n, cap);
        free(s);
        if (ret < 0)
            return ret;
        if (*n > 4096)
            return -EINVAL;
    }
    return 0;
}

/* Contract in drive.h: expands every {A...B} group, up to 4096 drives. */
int stor_drives_expand(const char *arg, char ***out, size_t *n)
{
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    int ret;

    if (arg == NULL || *arg == 0)
        return -EINVAL;
    ret = expand(arg, &v, &cnt, &cap);
    if (ret < 0) {
        stor_drives_free(v, cnt);
        return ret;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* ---- format record ---- */

/* Parses @s as a whole decimal int into *@out. Returns true on success;
 * false (leaving *@out alone) on garbage, trailing text or overflow, so a
 * damaged format record reads as -EBADMSG instead of a silent 0. */
static bool format_int(const char *s, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != 0 || v < INT_MIN || v > INT_MAX)
        return false;
    *out = (int)v;
    return true;
}

/* Contract in drive.h: parses the key=value format record. */
int stor_format_read(const char *drive, struct stor_format *f)
{
    char path[PATH_MAX], line[256];
    FILE *fp;
    int got = 0;

    memset(f, 0, sizeof(*f));
    snprintf(path, sizeof(path), "%s/%s", drive, STOR_FORMAT);
    fp = fopen(path, "re");
    if (fp == NULL)
        return -errno;
    while (fgets(line, sizeof(line), fp)) {
        char key[32], val[64];

        if (sscanf(line, "%31[a-z_]=%63s", key, val) != 2)
            continue;
        if (strcmp(key, "deployment") == 0 && strlen(val) == 32) {
            memcpy(f->deployment, val, 33);
            got |= 1;
        } else if (strcmp(key, "set") == 0) {
            if (format_int(val, &f->set))
                got |= 2;
        } else if (strcmp(key, "position") == 0) {
            if (format_int(val, &f->pos))
                got |= 4;
        } else if (strcmp(key, "sets") == 0) {
            if (format_int(val, &f->nsets))
                got |= 8;
        } else if (strcmp(key, "set_size") == 0) {
            if (format_int(val, &f->set_size))
                got |= 16;
        } else if (strcmp(key, "data") == 0) {
            if (format_int(val, &f->k))
                got |= 32;
        } else if (strcmp(key, "parity") == 0) {
            if (format_int(val, &f->m))
                got |= 64;
        }
    }
    fclose(fp);
    if (got != 127 || f->set_size < 1 || f->nsets < 1 || f->k < 1 || f->m < 0 ||
        f->k + f->m != f->set_size)
        return -EBADMSG;
    return 0;
}

/* Contract in drive.h: the format record through stor_sys_file_replace. */
int stor_format_write(const char *drive, const struct stor_format *f)
{
    char path[PATH_MAX], body[512];
    int len;

    /* The drive root must exist already: never create it (a missing mount
     * point would otherwise be formatted on the parent filesystem). */
    snprintf(path, sizeof(path), "%s/%s", drive, STOR_SYS_DIR);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -errno;
    len = snprintf(body, sizeof(body),
                   "# ecfs storaged drive format; do not edit\n"
                   "version=1\ndeployment=%s\nset=%d\nposition=%d\nsets=%d\n"
                   "set_size=%d\ndata=%d\nparity=%d\n",
                   f->deployment, f->set, f->pos, f->nsets, f->set_size, f->k,
                   f->m);
    return stor_sys_file_replace(drive, STOR_FORMAT, body, (size_t)len);
}

/* Contract in drive.h: temp file, fsync, rename, fsync of the directory. */
int stor_sys_file_replace(const char *drive, const char *name, const void *body,
                          size_t len)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    int fd, ret;

    if (snprintf(path, sizeof(path), "%s/%s", drive, name) >=
            (int)sizeof(path) ||
        snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    ret = stor_pwrite_all(fd, body, len, 0);
    if (ret == 0 && fsync(fd) < 0)
        ret = -errno;
    close(fd);
    if (ret == 0 && rename(tmp, path) < 0)
        ret = -errno;
    if (ret == 0) {
        snprintf(path, sizeof(path), "%s/%s", drive, STOR_SYS_DIR);
        ret = stor_fsync_dir(path);
    }
    if (ret < 0)
        unlink(tmp);
    return ret;
}

/* ---- small file helpers ---- */

/* Contract in drive.h: loops over short writes and EINTR. */
int stor_pwrite_all(int fd, const void *p, size_t len, uint64_t off)
{
    const char *c = p;

    while (len > 0) {
        ssize_t w = pwrite(fd, c, len, (off_t)off);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        c += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* Contract in drive.h: opens the directory read-only and fsyncs it. */
int stor_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ret = 0;

    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        ret = -errno;
    close(fd);
    return ret;
}

/* True when @dir (an existing directory) is a formatted drive root or lies
 * under one: some ancestor-or-self holds STOR_SYS_DIR. */
static bool in_formatted_drive(char *dir)
{
    char probe[PATH_MAX];
    struct stat st;
    char *slash;

    for (;;) {
        if (snprintf(probe, sizeof(probe), "%s/%s", *dir ? dir : "",
                     STOR_SYS_DIR) < (int)sizeof(probe) &&
            stat(probe, &st) == 0 && S_ISDIR(st.st_mode))
            return true;
        slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            return false;
        *slash = 0;
    }
}

/* Contract in drive.h: creates missing parents below an existing ancestor
 * inside a formatted drive; an existing path is fine. */
int stor_mkdirs(const char *path)
{
    char buf[PATH_MAX], anc[PATH_MAX];
    size_t len = strlen(path), alen;
    char *p;

    if (len == 0 || len >= sizeof(buf))
        return -EINVAL;
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -errno;
    memcpy(buf, path, len + 1);
    /* The deepest existing ancestor: strip components until one exists. */
    alen = len;
    for (;;) {
        struct stat st;

        while (alen > 0 && buf[alen - 1] != '/')
            alen--;
        while (alen > 1 && buf[alen - 1] == '/')
            alen--;
        if (alen <= 1)
            return -ENODEV;
        memcpy(anc, buf, alen);
        anc[alen] = 0;
        if (stat(anc, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
            break;
        }
    }
    if (!in_formatted_drive(anc))
        return -ENODEV;
    for (p = buf + alen + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Contract in drive.h: depth first; keeps going past errors, returns the
 * last. */
int stor_rmtree(const char *path)
{
    DIR *d;
    struct dirent *de;
    int ret = 0;

    if (unlink(path) == 0)
        return 0;
    if (errno == ENOENT)
        return 0;
    d = opendir(path);
    if (d == NULL)
        return errno == ENOENT ? 0 : -errno;
    while ((de = readdir(d)) != NULL) {
        char sub[PATH_MAX];

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
        if (stor_rmtree(sub) < 0)
            ret = -EIO;
    }
    closedir(d);
    if (rmdir(path) < 0 && errno != ENOENT)
        ret = -errno;
    return ret;
}

/* ---- batched I/O ---- */

#define RING_DEPTH 64

struct ring_state {
    struct io_uring ring;
    int ok; /* 1 ready, -1 unavailable */
};

static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

/* Thread-exit destructor of the per-thread ring. */
static void ring_destroy(void *p)
{
    struct ring_state *rs = p;

    if (rs->ok == 1)
        io_uring_queue_exit(&rs->ring);
    free(rs);
}

/* Creates the thread-local key once per process. */
static void ring_key_init(void)
{
    (void)pthread_key_create(&ring_key, ring_destroy);
}

/* Returns this thread's ring, or NULL when io_uring is unavailable. */
static struct io_uring *ring_get(void)
{
    struct ring_state *rs;

    pthread_once(&ring_once, ring_key_init);
    rs = pthread_getspecific(ring_key);
    if (rs == NULL) {
        rs = calloc(1, sizeof(*rs));
        if (rs == NULL)
            return NULL;
        rs->ok = io_uring_queue_init(RING_DEPTH, &rs->ring, 0) == 0 ? 1 : -1;
        if (pthread_setspecific(ring_key, rs) != 0) {
            ring_destroy(rs);
            return NULL;
        }
    }
    return rs->ok == 1 ? &rs->ring : NULL;
}

/* Finishes one I/O synchronously from @done bytes on. */
static void io_sync(struct stor_io *io, size_t done)
{
    if (io->op == 's' || io->op == 'd') {
        io->res = (io->op == 's' ? fsync(io->fd) : fdatasync(io->fd)) < 0
                      ? -errno
                      : 0;
        return;
    }
    while (done < io->len) {
        ssize_t r;

        if (io->op == 'r')
            r = pread(io->fd, (char *)io->buf + done, io->len - done,
                      (off_t)(io->off + done));
        else
            r = pwrite(io->fd, (char *)io->buf + done, io->len - done,
                       (off_t)(io->off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            io->res = -errno;
            return;
        }
        if (r == 0)
            break; /* EOF */
        done += (size_t)r;
    }
    io->res = (ssize_t)done;
}

/* Puts ios[0..n) (n <= RING_DEPTH) on @ring and submits them, waiting
 * for @wait completions. The number of SQEs submitted (n), or < 0 when
 * none could be (the caller runs them synchronously). */
static int io_submit_batch(struct io_uring *ring, struct stor_io *ios, size_t n,
                           unsigned wait)
{
    for (size_t j = 0; j < n; j++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        struct stor_io *io = &ios[j];

        if (io->fd < 0) {
            io_uring_prep_nop(sqe);
            io->res = -EBADF;
        } else if (io->op == 'r') {
            io_uring_prep_read(sqe, io->fd, io->buf, (unsigned)io->len,
                               io->off);
        } else if (io->op == 'w') {
            io_uring_prep_write(sqe, io->fd, io->buf, (unsigned)io->len,
                                io->off);
        } else {
            io_uring_prep_fsync(sqe, io->fd,
                                io->op == 'd' ? IORING_FSYNC_DATASYNC : 0);
        }
        io_uring_sqe_set_data(sqe, io);
    }
    return wait ? io_uring_submit_and_wait(ring, wait) : io_uring_submit(ring);
}

/* Reaps the @n completions of a batch io_submit_batch() submitted,
 * finishing short transfers synchronously. */
static void io_reap_batch(struct io_uring *ring, size_t n)
{
    size_t got = 0;

    while (got < n) {
        struct io_uring_cqe *cqe;
        struct stor_io *io;
        int wr;

        /* a signal (EINTR) must not end the wait: the kernel still owns
         * this batch's buffers until every completion is seen */
        do
            wr = io_uring_wait_cqe(ring, &cqe);
        while (wr == -EINTR || wr == -EAGAIN);
        if (wr < 0)
            break;
        io = io_uring_cqe_get_data(cqe);
        if (io->fd >= 0) {
            if (cqe->res < 0)
                io->res = cqe->res;
            else if (io->op != 's' && io->op != 'd' &&
                     (size_t)cqe->res < io->len)
                io_sync(io, (size_t)cqe->res); /* short: finish it */
            else
                io->res = io->op == 's' || io->op == 'd' ? 0 : cqe->res;
        }
        io_uring_cqe_seen(ring, cqe);
        got++;
    }
}

/* Contract in drive.h: batches of up to RING_DEPTH I/Os per io_uring_enter. */
void stor_io_run(struct stor_io *ios, size_t n)
{
    struct io_uring *ring = ring_get();
    size_t i = 0;

    if (ring == NULL) {
        stor_io_run_sync(ios, n);
        return;
    }
    while (i < n) {
        size_t batch = CM_MIN(n - i, (size_t)RING_DEPTH);

        if (io_submit_batch(ring, ios + i, batch, (unsigned)batch) < 0)
            /* nothing usable was submitted: finish synchronously */
            stor_io_run_sync(ios + i, batch);
        else
            io_reap_batch(ring, batch);
        i += batch;
    }
}

/* Contract in drive.h. */
void stor_io_run_sync(struct stor_io *ios, size_t n)
{
    for (size_t i = 0; i < n; i++)
        io_sync(&ios[i], 0);
}

/* Contract in drive.h. */
void stor_io_run_during(struct stor_io *ios, size_t n, void (*fn)(void *),
                        void *arg)
{
    struct io_uring *ring = n ? ring_get() : NULL;

    if (ring == NULL || n > (size_t)RING_DEPTH ||
        io_submit_batch(ring, ios, n, 0) < 0) {
        stor_io_run(ios, n); /* the old order: the I/Os, then @fn */
        fn(arg);
        return;
    }
    fn(arg);
    io_reap_batch(ring, n);
}

/* storaged/http/conn.c - connections: accept, read, parse, frame bodies, hand
 * requests to the application through its hooks (struct stor_http_app), send
 * responses, keep-alive, timeouts, drain. Nothing here knows S3.
 *
 * DESIGN: one epoll loop per thread, each with its own SO_REUSEPORT
 * listener, so the kernel spreads connections and no connection ever
 * crosses threads. A connection is a small state machine:
 *
 *   HEAD -> (PRE) -> BODY -> WORK -> SEND -> HEAD ...
 *
 * HEAD parses the request head from the input buffer (stateless parser,
 * re-run as bytes arrive); PRE waits for a job that must run before the
 * body is read (the application's on_head submitted it: S3's PutObject
 * checks the bucket before a 100 Continue); BODY frames the body
 * (Content-Length or chunked) and feeds the application's on_body, which
 * may pause us (body_paused: S3 streams pieces into the store and pauses
 * while both are busy; backpressure: we stop polling for
 * input, TCP flow control does the rest); WORK waits for the operation's
 * job; SEND writes the head and body, then streams a GET's remaining bytes
 * from two alternating buffers filled by workers (the stream_fill hook).
 * Pipelined requests simply stay in the input buffer until the current
 * response is sent, so they are answered in order. Nothing on a loop thread
 * blocks: the application's blocking work, including releasing a finished
 * request's handles (req_release), happens on workers.
 *
 * No global server: each loop thread points at its server, each connection
 * at its thread. The one process-wide variable is the shutdown flag, set
 * from a signal handler. */
#include "storaged/http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timefmt.h"
#include "storaged/http/pool.h"
#include "storaged/http/tls.h"

#define READ_HEAD      (16 * 1024)  /* read size while waiting for a head */
#define READ_CHUNK     (256 * 1024) /* read size while a body streams in */
#define IN_BUFFER_MAX  (64 * 1024)  /* buffered pipelined input while busy */
#define LINGER_S       2            /* lingering close: wait for the peer */
#define SEND_LOW_WATER (256 * 1024)

/* Server-wide state; immutable after start except the atomics. */
struct stor_http_server {
    const struct stor_http_app *app;
    void *app_ctx;
    struct stor_pool *pool;  /* the application's write jobs */
    struct stor_pool *rpool; /* read jobs (r->read_jobs), GET stream fills */
    int idle_timeout_s;
    int header_timeout_s;
    int body_timeout_s;
    size_t id_hdr_len;     /* strlen(app->id_header), 0 without one */
    size_t fixed_hdrs_len; /* strlen(app->fixed_headers), 0 without */
    atomic_bool draining;  /* SIGTERM: finish in-flight, accept nothing */
    atomic_uint_fast64_t next_req_id;
    atomic_long nconns;
    atomic_uint_fast64_t conns_total;
    atomic_bool ready;
    struct http_thread *threads; /* owned; nthreads of them */
    size_t nthreads;
    struct stor_tls *tls;    /* borrowed; NULL: plain HTTP */
    struct stor_job reload;  /* the TLS reload job (SIGHUP) */
    atomic_bool reload_busy; /* it is queued or running */
};

enum conn_state {
    C_HEAD = 0,
    C_PRE,
    C_BODY,
    C_WORK,
    C_SEND,
    C_LINGER, /* response sent, write side shut: discard input until EOF */
};

struct http_thread;

struct stor_conn {
    struct stor_ev io;
    struct http_thread *t;
    struct cm_buf in;
    struct cm_buf out; /* response head (+ small body) */
    size_t out_sent;
    enum conn_state state;
    struct stor_req *req;
    time_t last_progress; /* monotonic seconds */
    int64_t peer_took;    /* SEND: bytes the peer had taken at the last tick */
    time_t head_start;    /* when the first byte of this head arrived */
    bool close_after;     /* close once the response is sent */
    bool dead;            /* socket closed; waiting for jobs to return */
    bool in_eof;
    bool buried; /* on the graveyard list */
    int pending; /* cleanup jobs of finished requests still running */
    struct sockaddr_storage peer;  /* the client's address, from accept */
    struct stor_conn *prev, *next; /* thread's list */
    /* TLS (NULL on a plain-HTTP server): the session, owned */
    struct ssl_st *ssl;
    bool tls_ready;    /* handshake done */
    bool tls_failed;   /* a TLS error: no close_notify */
    bool tls_rd_out;   /* the last read wants the socket writable */
    bool tls_wr_in;    /* the last write wants it readable */
    uint32_t tls_want; /* handshake: what it waits for */
    /* zero-copy bodies (stor_req_zc_pipes): up to two pipes kept for the
     * life of the connection; closed only when no splice into them can be
     * in flight */
    int zc_pipe[2][2]; /* [pipe][read end, write end]; -1: none yet */
    size_t zc_cap[2];
    bool zc_dirty; /* handed out and not yet drained by a response */
};

/* The loop thread's io_uring for small reads done without a worker
 * (stor_req_read_files): each file is an openat into a direct descriptor
 * slot, a read and a close, hard-linked and submitted together.
 * DESIGN: sized for a medium (12-shard) GET on every connection of a busy
 * loop: such a GET takes 36 SQEs, so 480 let only 13 run at once and, under
 * 64 connections over 2 loops, about one GET in five went to a worker (a
 * blocking open/read/close per shard there, measured in perf). 1920 take 53
 * per loop; the ring costs about 100 KiB. */
#define RING_ENTRIES  1024
#define RING_SLOTS    1024 /* direct descriptors: files open at once */
#define RING_MAX_CQES 1920 /* SQEs in flight: stays below the CQ size */
#define RING_SQ_BATCH 256  /* read+close pairs prepped per submission */

#define INBUF_POOL     64          /* input buffers kept per loop thread */
#define INBUF_POOL_MAX (64 * 1024) /* larger ones are freed */

struct file_batch;

/* One SQE of a batch (its user_data). */
struct file_op {
    struct file_batch *b;
    uint32_t i;   /* file index */
    uint8_t kind; /* 0 open, 1 read, 2 close, 3 readv of an open fd,
                     4 splice of an open fd into a pipe */
};

/* The reads of one request in flight on the ring. */
struct file_batch {
    struct stor_req *r;
    struct stor_http_file_read *rd;
    size_t n;
    unsigned left; /* CQEs still to come */
    void (*done)(struct stor_req *r);
    struct file_batch *next; /* finished list while reaping */
    unsigned *slot;          /* n direct-descriptor slots */
    bool *failed;            /* n: the open failed (keep its errno) */
    struct file_op ops[];    /* 3 per path read, 1 per fd read */
};

struct http_thread {
    struct stor_http_server *srv;
    struct stor_loop *loop;
    struct io_uring ring;
    bool ring_ok;
    struct stor_ev ring_ev;
    unsigned ring_inflight; /* SQEs whose CQE is not reaped yet */
    unsigned slot_free[RING_SLOTS];
    unsigned nslot_free;
    /* Recycled allocations: a keep-alive connection gives its input
     * buffer back after each response (so idle ones hold none) and every
     * request frees its struct, and malloc showed in GET profiles. Used
     * only on this thread. */
    char *inbuf[INBUF_POOL];
    size_t inbuf_cap[INBUF_POOL];
    size_t ninbuf;
    struct stor_req *spare_req; /* one freed request, reused by the next */
    void *app_loop;             /* the application's loop_init data */
    pthread_t tid;
    struct stor_ev lio; /* listener */
    bool listening;
    struct stor_conn *conns;
    struct stor_conn *graveyard; /* freed after the current event batch */
    size_t nconns;
    time_t now;
    char date[CM_TIME_HTTP_LEN + 1];
    time_t date_t;
    time_t drain_start; /* 0 until the drain begins */
    int devnull;        /* /dev/null for zero-copy padding, or -1 */
};

#define DRAIN_MAX_S 25 /* SIGTERM: in-flight requests get this long */

/* set from a signal handler, read by every loop thread: a lock-free atomic
 * is both async-signal-safe and race-free across threads (sig_atomic_t is
 * only the former) */
static atomic_int g_shutdown;
static atomic_int g_reload_tls; /* SIGHUP: the same reasoning */

static void conn_run(struct stor_conn *c);
static void conn_update_events(struct stor_conn *c);
static void conn_close(struct stor_conn *c);
static void req_finish(struct stor_conn *c);
static void conn_maybe_bury(struct stor_conn *c);
static void linger(struct stor_conn *c);

/* Seconds on the monotonic clock (timeouts are immune to clock steps). */
static time_t mono_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* Gives @b's storage to @t's pool (or frees it); @b is left empty. */
static void inbuf_put(struct http_thread *t, struct cm_buf *b)
{
    if (b->data != NULL && b->cap <= INBUF_POOL_MAX && t->ninbuf < INBUF_POOL) {
        t->inbuf[t->ninbuf] = b->data;
        t->inbuf_cap[t->ninbuf] = b->cap;
        t->ninbuf++;
        b->data = NULL;
        b->len = b->cap = 0;
        return;
    }
    cm_buf_fini(b);
}

/* Gives empty, storage-less @b a buffer from @t's pool when it has one. */
static void inbuf_get(struct http_thread *t, struct cm_buf *b)
{
    if (b->data != NULL || t->ninbuf == 0)
        return;
    t->ninbuf--;
    b->data = t->inbuf[t->ninbuf];
    b->cap = t->inbuf_cap[t->ninbuf];
    b->len = 0;
    b->data[0] = 0;
}

/* A buffer of at least @need bytes for a request's own use (its head
 * copy): the pool's newest input buffer when it is that big, else
 * malloc's; its size in *@cap. NULL on ENOMEM. */
static char *req_buf_take(struct http_thread *t, size_t need, size_t *cap)
{
    char *p;

    if (t->ninbuf > 0 && t->inbuf_cap[t->ninbuf - 1] >= need) {
        t->ninbuf--;
        *cap = t->inbuf_cap[t->ninbuf];
        return t->inbuf[t->ninbuf];
    }
    p = malloc(need);
    *cap = need;
    return p;
}

/* Gives a request's buffer (req_buf_take's, or its response headers')
 * back: to the input pool when it is as big as an input buffer (a
 * smaller one would make the next connection's read grow it), else to
 * free. DESIGN: a 4 KiB GET allocated its head copy and its response
 * headers (twice: 512 bytes, then more) each time; malloc and free were
 * ~0.5 us of its ~12 us of server CPU. */
static void req_buf_give(struct http_thread *t, struct cm_buf *b)
{
    if (b->data != NULL && b->cap > READ_HEAD)
        inbuf_put(t, b);
    else
        cm_buf_fini(b);
}

/* Frees @t's recycled allocations (at exit). */
static void thread_pools_free(struct http_thread *t)
{
    while (t->ninbuf > 0)
        free(t->inbuf[--t->ninbuf]);
    free(t->spare_req);
    t->spare_req = NULL;
}

/* The application of @r's server. */
static const struct stor_http_app *app_of(const struct stor_req *r)
{
    return r->conn->t->srv->app;
}

/* ---- services for the application ---- */

/* See http.h. DESIGN: most values are one string ("%s", or a quoted
 * ETag), copied directly: printf per header showed in GET profiles. */
int stor_resp_hdr(struct stor_resp *rs, const char *name, const char *fmt, ...)
{
    size_t nlen = strlen(name), vlen;
    const char *v;
    va_list ap;
    bool quoted = strcmp(fmt, "\"%s\"") == 0;
    char *p;
    int ret;

    if (quoted || strcmp(fmt, "%s") == 0) {
        va_start(ap, fmt);
        v = va_arg(ap, const char *);
        va_end(ap);
        vlen = strlen(v);
        /* room for a GET's usual headers at once, not a realloc each */
        ret = cm_buf_reserve(&rs->hdrs,
                             CM_MAX(nlen + vlen + 6, rs->hdrs.cap ? 0 : 400));
        if (ret < 0)
            return ret;
        p = rs->hdrs.data + rs->hdrs.len;
        memcpy(p, name, nlen);
        p += nlen;
        *p++ = ':';
        *p++ = ' ';
        if (quoted)
            *p++ = '"';
        memcpy(p, v, vlen);
        p += vlen;
        if (quoted)
            *p++ = '"';
        *p++ = '\r';
        *p++ = '\n';
        *p = 0;
        rs->hdrs.len = (size_t)(p - rs->hdrs.data);
        return 0;
    }
    ret = cm_buf_append(&rs->hdrs, name, nlen);
    if (ret == 0)
        ret = cm_buf_append(&rs->hdrs, ": ", 2);
    if (ret < 0)
        return ret;
    va_start(ap, fmt);
    ret = cm_buf_vappendf(&rs->hdrs, fmt, ap);
    va_end(ap);
    if (ret == 0)
        ret = cm_buf_append(&rs->hdrs, "\r\n", 2);
    return ret;
}

/* See http.h. */
const char *stor_req_hdr(const struct stor_req *r, const char *name, size_t *n)
{
    const struct stor_http_hdr *h = stor_http_find(&r->head, name);

    if (h == NULL)
        return NULL;
    *n = h->value_len;
    return h->value;
}

/* Runs on a worker: the application's job function. */
static void req_job_run(struct stor_job *j)
{
    struct stor_req *r =
        (struct stor_req *)((char *)j - offsetof(struct stor_req, job));

    r->job_run(r);
}

/* Runs on the loop: the job came back. */
static void req_job_done(struct stor_job *j)
{
    struct stor_req *r =
        (struct stor_req *)((char *)j - offsetof(struct stor_req, job));
    struct stor_conn *c = r->conn;

    r->job_busy = false;
    if (c->dead) {
        req_finish(c);
        conn_maybe_bury(c);
        return;
    }
    r->job_done(r);
    if (!c->dead)
        conn_run(c);
}

/* The pool for @r's jobs: the application says which (r->read_jobs). Two
 * pools, a queue per job class as Redis bio and nginx thread pools have, so
 * slow jobs (fsync) cannot starve quick ones. */
static struct stor_pool *pool_for(const struct stor_req *r)
{
    struct stor_http_server *s = r->conn->t->srv;

    return r->read_jobs ? s->rpool : s->pool;
}

/* See http.h. */
void stor_req_submit(struct stor_req *r, void (*run)(struct stor_req *),
                     void (*done)(struct stor_req *))
{
    assert(!r->job_busy);
    r->job_run = run;
    r->job_done = done;
    r->job.run = req_job_run;
    r->job.done = req_job_done;
    r->job.loop = r->conn->t->loop;
    r->job_busy = true;
    stor_pool_submit(pool_for(r), &r->job);
}

/* See http.h. */
void *stor_req_loop_data(const struct stor_req *r)
{
    return r->conn->t->app_loop;
}

/* See http.h. */
struct stor_http_server *stor_req_server(const struct stor_req *r)
{
    return r->conn ? r->conn->t->srv : NULL;
}

/* See http.h. */
bool stor_http_is_ready(const struct stor_http_server *s)
{
    return atomic_load(&s->ready) && !atomic_load(&s->draining);
}

/* See http.h. */
void stor_http_stats(const struct stor_http_server *s,
                     struct stor_http_stats *st)
{
    st->conns = atomic_load(&s->nconns);
    st->conns_total = atomic_load(&s->conns_total);
    st->workers_busy =
        s->pool ? stor_pool_busy(s->pool) + stor_pool_busy(s->rpool) : 0;
}

/* ---- small reads on the loop thread's io_uring ---- */

static void req_job_done(struct stor_job *j);

/* io_uring_get_sqe() on a ring whose free SQ space the caller checked: it
 * cannot fail then, and a NULL would be a bug, not a load condition. */
static struct io_uring_sqe *ring_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

    if (sqe == NULL)
        abort(); /* the caller checked io_uring_sq_space_left() */
    return sqe;
}

/* See http.h. */
int stor_req_read_files(struct stor_req *r, struct stor_http_file_read *rd,
                        size_t n, void (*done)(struct stor_req *r))
{
    struct http_thread *t = r->conn->t;
    struct file_batch *b;
    size_t i, nsqe = 0, nslot = 0, o = 0, last, nsub = 0;
    int ret;

    assert(!r->job_busy);
    for (i = 0; i < n; i++) {
        nsqe += rd[i].path ? 3 : rd[i].splice ? 2 : 1;
        nslot += rd[i].path ? 1 : 0;
    }
    if (!t->ring_ok || n == 0 || nslot > t->nslot_free ||
        t->ring_inflight + nsqe > RING_MAX_CQES ||
        io_uring_sq_space_left(&t->ring) < nsqe)
        return -EAGAIN;
    b = malloc(sizeof(*b) + nsqe * sizeof(b->ops[0]) +
               n * (sizeof(unsigned) + sizeof(bool)));
    if (b == NULL)
        return -EAGAIN;
    b->r = r;
    b->rd = rd;
    b->n = n;
    b->left = (unsigned)nsqe;
    b->done = done;
    b->next = NULL;
    b->slot = (unsigned *)(void *)&b->ops[nsqe];
    b->failed = (bool *)(b->slot + n);
    for (i = 0; i < n; i++) {
        struct io_uring_sqe *sqe;
        unsigned slot;

        b->failed[i] = false;
        rd[i].res = -EIO;
        rd[i].hres = -EIO;
        if (rd[i].splice) { /* header readvs first, the splices below */
            b->slot[i] = UINT_MAX;
            rd[i].iov[0] =
                (struct iovec){.iov_base = rd[i].hdr, .iov_len = rd[i].hdr_len};
            sqe = ring_sqe(&t->ring);
            io_uring_prep_readv(sqe, rd[i].fd, rd[i].iov, 1, rd[i].off);
            b->ops[o] = (struct file_op){.b = b, .i = (uint32_t)i, .kind = 3};
            io_uring_sqe_set_data(sqe, &b->ops[o++]);
            continue;
        }
        if (rd[i].path == NULL) { /* an open file: one readv, no slot */
            int nv = 0;

            b->slot[i] = UINT_MAX;
            if (rd[i].hdr_len)
                rd[i].iov[nv++] = (struct iovec){.iov_base = rd[i].hdr,
                                                 .iov_len = rd[i].hdr_len};
            if (rd[i].len)
                rd[i].iov[nv++] =
                    (struct iovec){.iov_base = rd[i].buf, .iov_len = rd[i].len};
            sqe = ring_sqe(&t->ring);
            io_uring_prep_readv(sqe, rd[i].fd, rd[i].iov, (unsigned)nv,
                                rd[i].off);
            b->ops[o] = (struct file_op){.b = b, .i = (uint32_t)i, .kind = 3};
            io_uring_sqe_set_data(sqe, &b->ops[o++]);
            continue;
        }
        slot = t->slot_free[--t->nslot_free];
        b->slot[i] = slot;
        /* the open alone: its read and close follow from ring_cb once it
         * succeeded (file_read_close); ops[o + 1], ops[o + 2] are theirs */
        sqe = ring_sqe(&t->ring);
        io_uring_prep_openat_direct(sqe, AT_FDCWD, rd[i].path, O_RDONLY, 0,
                                    slot);
        b->ops[o] = (struct file_op){.b = b, .i = (uint32_t)i, .kind = 0};
        io_uring_sqe_set_data(sqe, &b->ops[o]);
        b->ops[o + 1] = (struct file_op){.b = b, .i = (uint32_t)i, .kind = 1};
        b->ops[o + 2] = (struct file_op){.b = b, .i = (uint32_t)i, .kind = 2};
        o += 3;
    }
    /* the splices, linked so that they fill the pipe in order: a short or
     * failed one cancels the rest (each then answers -ECANCELED) */
    for (i = 0, last = SIZE_MAX; i < n; i++)
        if (rd[i].splice)
            last = i;
    for (i = 0; last != SIZE_MAX && i <= last; i++) {
        struct io_uring_sqe *sqe;

        if (!rd[i].splice)
            continue;
        sqe = ring_sqe(&t->ring);
        io_uring_prep_splice(sqe, rd[i].fd,
                             (int64_t)(rd[i].off + rd[i].hdr_len), rd[i].pipe,
                             -1, (unsigned)rd[i].len, 0);
        if (i != last)
            sqe->flags |= IOSQE_IO_LINK;
        b->ops[o] = (struct file_op){.b = b, .i = (uint32_t)i, .kind = 4};
        io_uring_sqe_set_data(sqe, &b->ops[o++]);
    }
    /* this submission's SQEs: all but each path's read and close */
    for (i = 0; i < n; i++)
        nsub += rd[i].splice ? 2 : 1;
    ret = io_uring_submit(&t->ring);
    if (ret < (int)nsub) {
        /* The kernel could not take them all (-EAGAIN when it cannot
         * allocate). The ring is never entered again, so SQEs it did not
         * take never run. When it took some, they may be running (they
         * write into @rd's buffers): @b and the buffers are left to it
         * (leaked), never reused. The ring fd stays in epoll: reads
         * submitted before still complete, and their requests must be
         * answered. */
        cm_log(CM_LOG_ERROR, ret < 0 ? -ret : 0,
               "io_uring submit on a loop failed; small reads go to workers");
        t->ring_ok = false;
        if (ret > 0)
            return -EIO;
        for (i = 0; i < n; i++)
            if (b->slot[i] != UINT_MAX)
                t->slot_free[t->nslot_free++] = b->slot[i];
        free(b);
        return -EAGAIN;
    }
    t->ring_inflight += (unsigned)nsqe;
    r->job.run = NULL;
    r->job.done = req_job_done;
    r->job.loop = t->loop;
    r->job_run = NULL;
    r->job_done = done;
    r->job_busy = true;
    return 0;
}

/* See http.h. */
size_t stor_http_zc_pipe_max(void)
{
    static size_t max; /* racy but idempotent */
    FILE *f;
    unsigned long v = 0;

    if (max)
        return max;
    f = fopen("/proc/sys/fs/pipe-max-size", "r");
    if (f) {
        if (fscanf(f, "%lu", &v) != 1)
            v = 0;
        fclose(f);
    }
    max = v >= 65536 ? (size_t)v : 65536;
    return max;
}

/* Closes pipe @i of @c. */
static void zc_pipe_close(struct stor_conn *c, int i)
{
    if (c->zc_pipe[i][0] < 0)
        return;
    close(c->zc_pipe[i][0]);
    close(c->zc_pipe[i][1]);
    c->zc_pipe[i][0] = c->zc_pipe[i][1] = -1;
    c->zc_cap[i] = 0;
}

/* See http.h. */
int stor_req_zc_pipes(struct stor_req *r, const size_t bytes[2], int fds[2])
{
    struct stor_conn *c = r->conn;
    int ret;

    if (c == NULL)
        return -ENOTCONN;
    if (c->ssl)
        return -EOPNOTSUPP;
    if (c->zc_dirty) /* bytes of an earlier response left in them */
        stor_req_zc_discard(r);
    for (int i = 0; i < 2; i++) {
        fds[i] = -1;
        if (bytes[i] == 0)
            continue;
        if (c->zc_pipe[i][0] < 0 &&
            pipe2(c->zc_pipe[i], O_CLOEXEC | O_NONBLOCK) < 0) {
            ret = -errno;
            c->zc_pipe[i][0] = c->zc_pipe[i][1] = -1;
            return ret;
        }
        if (c->zc_cap[i] < bytes[i]) {
            ret = fcntl(c->zc_pipe[i][1], F_SETPIPE_SZ,
                        (int)CM_MIN(bytes[i], INT_MAX));
            if (ret < 0)
                return -errno;
            c->zc_cap[i] = (size_t)ret;
            if (c->zc_cap[i] < bytes[i])
                return -ENOSPC;
        }
        fds[i] = c->zc_pipe[i][1];
    }
    c->zc_dirty = true;
    return 0;
}

/* See http.h. */
void stor_req_zc_abandon(struct stor_req *r)
{
    struct stor_conn *c = r->conn;

    if (c == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        c->zc_pipe[i][0] = c->zc_pipe[i][1] = -1; /* leaked on purpose */
        c->zc_cap[i] = 0;
    }
    c->zc_dirty = false;
}

/* See http.h. */
void stor_req_zc_discard(struct stor_req *r)
{
    struct stor_conn *c = r->conn;

    if (c == NULL)
        return;
    zc_pipe_close(c, 0);
    zc_pipe_close(c, 1);
    c->zc_dirty = false;
}

/* Preps the read of file op->i of its batch (whose open just succeeded
 * into its slot) and the close of the slot after it, hard-linked so that
 * the close runs even when the read failed: the slot is free again once
 * the close's CQE is in. false (nothing prepped) when the ring is broken.
 *
 * DESIGN: the open goes alone and the read follows from the loop, rather
 * than open, read and close linked in one submission. A cold open (a path
 * walk into a directory not cached) runs on io_uring's workers, and a
 * read linked after it ran there too, blocking: one worker slept on the
 * disk per meta and each submitted its own I/O, a virtio notification
 * (a VM exit) per meta read. Submitted from the loop, the reads of all
 * the opens that finished meanwhile go in one io_uring_enter under one
 * block plug, and each cold read waits without a thread (the kernel's
 * async buffered read: page-lock wake-up, then task work). A warm GET
 * pays one more trip through the loop (the opens' CQEs, then the reads). */
static bool file_read_close(struct http_thread *t, struct file_op *op)
{
    struct file_batch *b = op->b;
    struct stor_http_file_read *rd = &b->rd[op->i];
    unsigned slot = b->slot[op->i];
    struct io_uring_sqe *sqe;

    if (!t->ring_ok)
        return false;
    sqe = ring_sqe(&t->ring);
    io_uring_prep_read(sqe, (int)slot, rd->buf, (unsigned)rd->len, 0);
    sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
    io_uring_sqe_set_data(sqe, op);
    sqe = ring_sqe(&t->ring);
    io_uring_prep_close_direct(sqe, slot);
    io_uring_sqe_set_data(sqe, op + 1);
    return true;
}

/* Fails the read op (and its close, op + 1) of a file whose open
 * succeeded but whose read cannot be submitted: the slot is emptied here
 * (a synchronous update of the registered files; a request still using
 * the file keeps its own reference) and freed. Returns the CQEs this
 * accounts for that will never come (the caller's batch count); adds
 * them to *gone (ring_inflight's count). */
static unsigned files_fail(struct http_thread *t, struct file_op *op,
                           unsigned *gone)
{
    struct file_batch *b = op->b;
    unsigned slot = b->slot[op->i];
    int none = -1;

    b->rd[op->i].res = -EIO;
    b->failed[op->i] = true;
    if (io_uring_register_files_update(&t->ring, slot, &none, 1) == 1)
        t->slot_free[t->nslot_free++] = slot;
    /* else the slot is leaked: a later open into it would fail */
    *gone += 2;
    return 2;
}

/* Submits the @n read+close pairs prepped by file_read_close (@prep: their
 * read ops, in order). When the kernel does not take them all, the ring is
 * broken as in stor_req_read_files (never entered again: untaken SQEs
 * never run) and each pair it did not take wholly fails here; a read it
 * took whose close it did not is answered by its CQE, its slot emptied
 * here. Batches that finish so go on the caller's list. */
static void files_submit(struct http_thread *t, struct file_op **prep,
                         unsigned n, struct file_batch ***tail, unsigned *gone)
{
    unsigned taken, k;
    int ret;

    if (n == 0)
        return;
    ret = io_uring_submit(&t->ring);
    if (ret >= (int)(2 * n))
        return;
    cm_log(CM_LOG_ERROR, ret < 0 ? -ret : 0,
           "io_uring submit on a loop failed; small reads go to workers");
    t->ring_ok = false;
    taken = ret > 0 ? (unsigned)ret : 0;
    for (k = taken / 2; k < n; k++) {
        struct file_op *op = prep[k];
        struct file_batch *b = op->b;
        unsigned left;

        if (k * 2 + 1 == taken) { /* the read runs; its close does not */
            int none = -1;

            if (io_uring_register_files_update(&t->ring, b->slot[op->i], &none,
                                               1) == 1)
                t->slot_free[t->nslot_free++] = b->slot[op->i];
            left = 1;
            *gone += 1;
        } else {
            left = files_fail(t, op, gone);
        }
        b->left -= left;
        if (b->left == 0) {
            **tail = b;
            *tail = &b->next;
        }
    }
}

/* The ring has completions: account them, then finish every batch whose
 * last CQE came in (after the CQ is released, since finishing a request
 * may start the next one on the ring). */
static void ring_cb(struct stor_loop *l, struct stor_ev *io, uint32_t ev)
{
    struct http_thread *t = io->arg;
    struct file_batch *fin = NULL, **tail = &fin;
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0, gone = 0, nprep = 0;
    struct file_op *prep[RING_SQ_BATCH];

    (void)l;
    (void)ev;
    io_uring_for_each_cqe(&t->ring, head, cqe)
    {
        struct file_op *op = io_uring_cqe_get_data(cqe);
        struct file_batch *b = op->b;
        struct stor_http_file_read *rd = &b->rd[op->i];
        unsigned done = 1;

        seen++;
        if (op->kind == 0 && cqe->res >= 0) {
            /* open: its read and close next, submitted together below */
            if (nprep == RING_SQ_BATCH ||
                io_uring_sq_space_left(&t->ring) < 2) {
                files_submit(t, prep, nprep, &tail, &gone);
                nprep = 0;
            }
            if (file_read_close(t, op + 1))
                prep[nprep++] = op + 1;
            else
                done += files_fail(t, op + 1, &gone);
        } else if (op->kind == 0) {
            rd->res = cqe->res;
            b->failed[op->i] = true;
            /* its read and close never run; the slot stayed empty */
            t->slot_free[t->nslot_free++] = b->slot[op->i];
            done += 2;
            gone += 2;
        } else if (op->kind == 3 && rd->splice) {
            rd->hres = cqe->res;
        } else if ((op->kind == 1 && !b->failed[op->i]) || op->kind == 3 ||
                   op->kind == 4) {
            rd->res = cqe->res;
        } else if (op->kind == 2) {
            t->slot_free[t->nslot_free++] = b->slot[op->i];
        }
        b->left -= done;
        if (b->left == 0) {
            *tail = b;
            tail = &b->next;
        }
    }
    io_uring_cq_advance(&t->ring, seen);
    files_submit(t, prep, nprep, &tail, &gone);
    t->ring_inflight -= seen + gone;
    while (fin) {
        struct file_batch *b = fin;
        struct stor_req *r = b->r;

        fin = b->next;
        free(b);
        req_job_done(&r->job);
    }
}

/* Sets up @t's ring; without one (old kernel, locked memory limits) small
 * reads simply go to the workers. */
static void ring_init(struct http_thread *t)
{
    /* DESIGN: no IORING_SETUP_DEFER_TASKRUN: with it, a read the kernel
     * had to punt to its workers (cold page cache) completed without
     * making the ring fd readable, and the request stalled (measured:
     * tests/integration/test_s3_fast_get.py); it saved about 2% CPU.
     * IORING_SETUP_COOP_TASKRUN instead: a completion from a worker (a
     * cold meta's openat and read, 12 per medium GET) still wakes a loop
     * asleep in epoll_wait, but no longer interrupts a running one with
     * an IPI; the loop posts it at its next system call, which a busy
     * loop makes within microseconds. Kernels before 5.19 refuse the flag:
     * then without it. */
    struct io_uring_params p = {.flags = IORING_SETUP_COOP_TASKRUN};
    int ret = io_uring_queue_init_params(RING_ENTRIES, &t->ring, &p);

    if (ret == -EINVAL)
        ret = io_uring_queue_init(RING_ENTRIES, &t->ring, 0);

    if (ret < 0) {
        cm_log(CM_LOG_INFO, -ret, "no io_uring on the loops");
        return;
    }
    ret = io_uring_register_files_sparse(&t->ring, RING_SLOTS);
    if (ret < 0) {
        cm_log(CM_LOG_INFO, -ret, "no direct descriptors on the loops");
        io_uring_queue_exit(&t->ring);
        return;
    }
    t->ring_ev.fd = t->ring.ring_fd;
    t->ring_ev.cb = ring_cb;
    t->ring_ev.arg = t;
    if (stor_loop_add(t->loop, &t->ring_ev, EPOLLIN) < 0) {
        io_uring_queue_exit(&t->ring);
        return;
    }
    for (unsigned i = 0; i < RING_SLOTS; i++)
        t->slot_free[i] = RING_SLOTS - 1 - i;
    t->nslot_free = RING_SLOTS;
    t->ring_ok = true;
}

/* ---- GET streaming ---- */

/* Worker: fills resp.sbuf[!cur] with the next bytes of the object. */
static void fill_run(struct stor_job *j)
{
    struct stor_resp *rs =
        (struct stor_resp *)((char *)j - offsetof(struct stor_resp, fill_job));
    struct stor_req *r =
        (struct stor_req *)((char *)rs - offsetof(struct stor_req, resp));
    const struct stor_http_app *app = app_of(r);
    int idx = rs->fill_idx;
    size_t want = (size_t)CM_MIN((uint64_t)rs->schunk, rs->rd_end - rs->rd_off);
    size_t got = 0;

    while (got < want) {
        ssize_t n = app->stream_fill(r, rs->rd_off + got, rs->sbuf[idx] + got,
                                     want - got);

        if (n < 0) {
            rs->fill_err = (int)n;
            return;
        }
        if (n == 0) {
            rs->fill_err = -EIO; /* object shorter than its size */
            return;
        }
        got += (size_t)n;
    }
    rs->slen[idx] = got;
    rs->rd_off += got;
}

/* Loop: a fill finished. */
static void fill_done(struct stor_job *j)
{
    struct stor_resp *rs =
        (struct stor_resp *)((char *)j - offsetof(struct stor_resp, fill_job));
    struct stor_req *r =
        (struct stor_req *)((char *)rs - offsetof(struct stor_req, resp));
    struct stor_conn *c = r->conn;

    rs->fill_busy = false;
    if (rs->fill_err == 0)
        rs->filled[rs->fill_idx] = true;
    if (c->dead) {
        req_finish(c);
        conn_maybe_bury(c);
        return;
    }
    if (rs->fill_err < 0) {
        cm_log(CM_LOG_ERROR, -rs->fill_err,
               "req=%016llX read for %.*s failed mid-stream",
               (unsigned long long)r->id, (int)CM_MIN(r->head.target_len, 200),
               r->head.target);
        conn_close(c);
        return;
    }
    conn_run(c);
}

/* Loop: starts filling the idle buffer when there is more to read. */
static void maybe_fill(struct stor_req *r)
{
    struct stor_resp *rs = &r->resp;

    if (!rs->stream || rs->fill_busy || rs->filled[!rs->cur] ||
        rs->rd_off >= rs->rd_end)
        return;
    if (rs->sbuf[!rs->cur] == NULL) {
        rs->sbuf[!rs->cur] = malloc(rs->schunk);
        if (rs->sbuf[!rs->cur] == NULL) {
            rs->fill_err = -ENOMEM;
            conn_close(r->conn);
            return;
        }
    }
    rs->fill_busy = true;
    rs->fill_idx = !rs->cur;
    rs->fill_job.run = fill_run;
    rs->fill_job.done = fill_done;
    rs->fill_job.loop = r->conn->t->loop;
    stor_pool_submit(r->conn->t->srv->rpool, &rs->fill_job);
}

/* ---- request lifecycle ---- */

/* Worker: the application releases the handles of a finished request. */
static void cleanup_run(struct stor_job *j)
{
    struct stor_req *r =
        (struct stor_req *)((char *)j - offsetof(struct stor_req, job));

    app_of(r)->req_release(r);
}

static void req_free(struct stor_req *r);

/* Loop: handles are released; free the request (and a dead conn). */
static void cleanup_done(struct stor_job *j)
{
    struct stor_req *r =
        (struct stor_req *)((char *)j - offsetof(struct stor_req, job));
    struct stor_conn *c = r->conn;

    r->job_busy = false;
    c->pending--;
    req_free(r);
    conn_maybe_bury(c);
}

/* Frees the transport's allocations of @r (the application's went in its
 * req_fini / req_release). */
static void req_free(struct stor_req *r)
{
    struct stor_conn *c = r->conn;
    struct cm_buf hb = {r->headbuf, 0, r->headcap, CM_BUF_NOLIMIT};

    req_buf_give(c->t, &hb);
    free(r->te);
    req_buf_give(c->t, &r->resp.hdrs);
    cm_buf_fini(&r->resp.body);
    free(r->resp.sbuf[0]);
    free(r->resp.sbuf[1]);
    if (c->req == r)
        c->req = NULL;
    if (c->t->spare_req == NULL)
        c->t->spare_req = r;
    else
        free(r);
}

/* Ends the current request once no job of it is in flight: the
 * application records it and frees its state (req_fini), handles it still
 * holds are released on a worker, then the request is freed. Safe to call
 * again from job completions while jobs remain. */
static void req_finish(struct stor_conn *c)
{
    struct stor_req *r = c->req;
    struct stor_http_server *s = c->t->srv;

    if (r == NULL || r->job_busy || r->resp.fill_busy)
        return;
    assert(!r->fini_done);
    r->fini_done = true;
    if (s->app->req_fini(r)) {
        r->job.run = cleanup_run;
        r->job.done = cleanup_done;
        r->job.loop = c->t->loop;
        r->job_busy = true;
        c->pending++;
        c->req = NULL; /* the job owns @r now */
        stor_pool_submit(pool_for(r), &r->job);
        return;
    }
    req_free(r);
}

/* Works out body framing and keep-alive from the headers. 0, or -1 with
 * the error in *e. */
static int req_parse_framing(struct stor_req *r, enum stor_http_err *e)
{
    const char *v;
    size_t n;
    bool has_cl;

    v = stor_req_hdr(r, "transfer-encoding", &n);
    if (v) {
        if (!stor_http_ieq(v, n, "chunked")) {
            *e = STOR_HTTP_E_NOT_IMPLEMENTED;
            return -1;
        }
        r->te_chunked = true;
        r->has_body = true;
        r->te = malloc(sizeof(*r->te));
        if (r->te == NULL) {
            *e = STOR_HTTP_E_INTERNAL;
            return -1;
        }
        stor_chunk_init(r->te, UINT64_MAX);
    }
    v = stor_req_hdr(r, "content-length", &n);
    has_cl = v != NULL;
    if (has_cl) {
        size_t i, count = 0;

        *e = STOR_HTTP_E_BAD_REQUEST;
        if (r->te_chunked)
            return -1; /* both: smuggling risk */
        /* exactly one Content-Length */
        for (i = 0; i < r->head.nhdrs; i++)
            if (stor_http_ieq(r->hdrs[i].name, r->hdrs[i].name_len,
                              "content-length"))
                count++;
        if (count != 1 || stor_http_parse_u64(v, n, &r->clen) < 0)
            return -1;
        r->raw_left = r->clen;
        r->has_body = r->clen > 0;
    }
    v = stor_req_hdr(r, "expect", &n);
    if (v && stor_http_ieq(v, n, "100-continue"))
        r->expect_100 = true;
    r->keep_alive = r->head.minor_version >= 1;
    v = stor_req_hdr(r, "connection", &n);
    if (v && stor_http_ieq(v, n, "close"))
        r->keep_alive = false;
    else if (v && stor_http_ieq(v, n, "keep-alive"))
        r->keep_alive = true;
    return 0;
}

/* Sets the method flags (none for other methods: the application answers
 * them). */
static void req_parse_method(struct stor_req *r)
{
    const char *m = r->head.method;
    size_t n = r->head.method_len;

    if (n == 3 && memcmp(m, "GET", 3) == 0)
        r->is_get = true;
    else if (n == 4 && memcmp(m, "HEAD", 4) == 0)
        r->is_head = true;
    else if (n == 3 && memcmp(m, "PUT", 3) == 0)
        r->is_put = true;
    else if (n == 4 && memcmp(m, "POST", 4) == 0)
        r->is_post = true;
    else if (n == 6 && memcmp(m, "DELETE", 6) == 0)
        r->is_delete = true;
}

/* @p (inside @from) moved to the same offset inside @to. */
static const char *rebase(const char *p, const char *from, char *to)
{
    return p ? to + (p - from) : NULL;
}

/* Creates the request for head @h of @headlen bytes, already parsed at the
 * start of c->in (consumed here): the head is copied and @h's pointers
 * moved onto the copy, not parsed again. NULL on ENOMEM. */
static struct stor_req *req_create(struct stor_conn *c, size_t headlen,
                                   const struct stor_http_head *h)
{
    struct stor_http_server *s = c->t->srv;
    struct stor_req *r = c->t->spare_req;
    const char *in = c->in.data;
    size_t i;

    if (r != NULL) {
        c->t->spare_req = NULL;
        memset(r, 0, offsetof(struct stor_req, hdrs));
        memset((char *)r + sizeof(*r), 0, s->app->req_zero - sizeof(*r));
    } else {
        r = calloc(1, s->app->req_size);
        if (r == NULL)
            return NULL;
    }
    r->conn = c;
    r->app = s->app_ctx;
    r->id = atomic_fetch_add(&s->next_req_id, 1);
    clock_gettime(CLOCK_MONOTONIC, &r->start);
    r->headbuf = req_buf_take(c->t, headlen + 1, &r->headcap);
    if (r->headbuf == NULL) {
        free(r);
        return NULL;
    }
    memcpy(r->headbuf, in, headlen);
    r->headbuf[headlen] = 0;
    r->headlen = headlen;
    r->head = *h;
    r->head.method = rebase(h->method, in, r->headbuf);
    r->head.target = rebase(h->target, in, r->headbuf);
    r->head.hdrs = r->hdrs;
    for (i = 0; i < h->nhdrs; i++) {
        r->hdrs[i] = h->hdrs[i];
        r->hdrs[i].name = rebase(h->hdrs[i].name, in, r->headbuf);
        r->hdrs[i].value = rebase(h->hdrs[i].value, in, r->headbuf);
    }
    cm_buf_init(&r->resp.hdrs, CM_BUF_NOLIMIT);
    inbuf_get(c->t, &r->resp.hdrs); /* given back by req_free */
    cm_buf_init(&r->resp.body, CM_BUF_NOLIMIT);
    cm_buf_consume(&c->in, headlen);
    c->req = r;
    return r;
}

/* ---- response ---- */

/* Reason phrase for status @st (cosmetic: clients read the code). */
static const char *status_text(int st)
{
    switch (st) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 416:
        return "Range Not Satisfiable";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

/* Writes @v in decimal at @p; returns the digits written (at most 20). */
static size_t put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0, i;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Writes @v as 16 upper-case hex digits at @p. */
static void put_hex16(char *p, uint64_t v)
{
    static const char hx[] = "0123456789ABCDEF";

    for (int i = 15; i >= 0; i--) {
        p[i] = hx[v & 0xf];
        v >>= 4;
    }
}

/* Formats the status line, standard headers, the application's headers and a
 * small body into c->out. DESIGN: runs once per request, so it copies
 * pieces instead of going through printf (which showed in profiles). */
static int resp_serialize(struct stor_conn *c, struct stor_req *r)
{
    struct stor_resp *rs = &r->resp;
    struct http_thread *t = c->t;
    const struct stor_http_server *srv = t->srv;
    time_t wall = time(NULL);
    const char *st = status_text(rs->status);
    size_t stlen = strlen(st), dlen, cap;
    uint64_t len;
    char *p;
    int ret;

    if (t->date_t != wall) {
        cm_time_http(wall, t->date);
        t->date_t = wall;
    }
    dlen = strlen(t->date);
    len = rs->has_length ? rs->content_length : rs->body.len;
    cap = 256 + stlen + dlen + srv->id_hdr_len + srv->fixed_hdrs_len +
          rs->hdrs.len;
    if (!rs->no_body && !r->is_head)
        cap += rs->body.len;
    ret = cm_buf_reserve(&c->out, cap);
    if (ret < 0)
        return ret;
    p = c->out.data + c->out.len;
#define PUT_LIT(s)                                                             \
    do {                                                                       \
        memcpy(p, s, sizeof(s) - 1);                                           \
        p += sizeof(s) - 1;                                                    \
    } while (0)
    PUT_LIT("HTTP/1.1 ");
    p += put_u64(
        p,
        (uint64_t)(rs->status >= 100 && rs->status <= 999 ? rs->status : 500));
    *p++ = ' ';
    memcpy(p, st, stlen);
    p += stlen;
    PUT_LIT("\r\nServer: storaged\r\nDate: ");
    memcpy(p, t->date, dlen);
    p += dlen;
    PUT_LIT("\r\n");
    if (srv->id_hdr_len) {
        memcpy(p, srv->app->id_header, srv->id_hdr_len);
        p += srv->id_hdr_len;
        PUT_LIT(": ");
        put_hex16(p, r->id);
        p += 16;
        PUT_LIT("\r\n");
    }
    if (srv->fixed_hdrs_len) {
        memcpy(p, srv->app->fixed_headers, srv->fixed_hdrs_len);
        p += srv->fixed_hdrs_len;
    }
    if (rs->status != 304 && rs->status != 204) {
        PUT_LIT("Content-Length: ");
        p += put_u64(p, len);
        PUT_LIT("\r\n");
    }
    if (c->close_after)
        PUT_LIT("Connection: close\r\n");
    else if (r->head.minor_version == 0)
        PUT_LIT("Connection: keep-alive\r\n");
    if (rs->hdrs.len) {
        memcpy(p, rs->hdrs.data, rs->hdrs.len);
        p += rs->hdrs.len;
    }
    PUT_LIT("\r\n");
#undef PUT_LIT
    if (!rs->no_body && rs->body.len && !r->is_head) {
        memcpy(p, rs->body.data, rs->body.len);
        p += rs->body.len;
    }
    c->out.len = (size_t)(p - c->out.data);
    c->out.data[c->out.len] = 0;
    return 0;
}

/* See http.h. */
void stor_http_respond(struct stor_req *r)
{
    struct stor_conn *c = r->conn;

    if (r->resp.status == 0)
        c->t->srv->app->on_error(r, STOR_HTTP_E_INTERNAL);
    if (r->resp.close || !r->keep_alive || atomic_load(&c->t->srv->draining))
        c->close_after = true;
    /* A body we did not read would be taken for the next request. */
    if (r->has_body && !r->body_done)
        c->close_after = true;
    /* A final answer to "Expect: 100-continue" sent while the client still
     * waits for the 100 (an error found in the head): botocore keeps that
     * status line for its next response on the connection and misreads it
     * (stalls until its read timeout), so the connection is not reused. */
    if (r->expect_100 && !r->sent_100 && !r->body_started)
        c->close_after = true;
    if (resp_serialize(c, r) < 0) {
        conn_close(c);
        return;
    }
    r->resp_started = true;
    c->state = C_SEND;
    c->peer_took = INT64_MAX; /* the first tick records, counts nothing */
}

/* See http.h. */
void stor_http_pre_done(struct stor_req *r)
{
    struct stor_conn *c = r->conn;

    if (r->resp.status) {
        stor_http_respond(r);
        return;
    }
    c->state = C_BODY;
    /* Send the 100 even for an empty body (as S3 does): botocore waits for
     * it, and when it gets the final response instead its next request on
     * the connection misreads the reply and stalls until its read timeout. */
    if (r->expect_100 && c->in.len == 0) {
        if (cm_buf_appends(&c->out, "HTTP/1.1 100 Continue\r\n\r\n") < 0)
            conn_close(c);
        else
            r->sent_100 = true;
    } else if (r->expect_100) {
        r->body_started = true; /* the client did not wait for the 100 */
    }
}

/* ---- connection I/O ---- */

/* Writes from @iov to the socket (through TLS when the server speaks it):
 * the bytes written (> 0), -EAGAIN, or -errno when the peer is gone. */
static ssize_t conn_send(struct stor_conn *c, const struct iovec *iov, int niov)
{
    uint32_t want = 0;
    ssize_t n;

    if (c->ssl == NULL) {
        do {
            n = writev(c->io.fd, iov, niov);
        } while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
    }
    n = stor_tls_writev(c->ssl, iov, niov, &want);
    c->tls_wr_in = n == -EAGAIN && want == EPOLLIN;
    if (n < 0 && n != -EAGAIN)
        c->tls_failed = true;
    return n;
}

/* Reads up to @len bytes: > 0, 0 at EOF, -EAGAIN, or -errno. */
static ssize_t conn_recv(struct stor_conn *c, char *buf, size_t len)
{
    uint32_t want = 0;
    ssize_t n;

    if (c->ssl == NULL) {
        do {
            n = read(c->io.fd, buf, len);
        } while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
    }
    n = stor_tls_read(c->ssl, buf, len, &want);
    c->tls_rd_out = n == -EAGAIN && want == EPOLLOUT;
    if (n < 0 && n != -EAGAIN)
        c->tls_failed = true;
    return n;
}

/* Splices the rest of a zero-copy body from the connection's pipe to the
 * socket: as conn_flush(). */
static int conn_splice_out(struct stor_conn *c, struct stor_req *r)
{
    struct stor_resp *rs = &r->resp;

    while (rs->zc_left) {
        /* zc_first bytes from the first pipe, then the rest from the second */
        int i = rs->zc_first ? 0 : 1;
        size_t want = rs->zc_first ? rs->zc_first : rs->zc_left;
        ssize_t n = c->zc_pipe[i][0] < 0
                        ? 0
                        : splice(c->zc_pipe[i][0], NULL, c->io.fd, NULL, want,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        if (n == 0) /* the pipe holds less than the response said */
            return -EIO;
        c->last_progress = c->t->now;
        r->sent_bytes += (uint64_t)n;
        rs->zc_left -= (size_t)n;
        if (rs->zc_first)
            rs->zc_first -= (size_t)n;
    }
    if (rs->zc_pad) { /* the last shard's padding: dropped */
        struct http_thread *t = c->t;
        size_t pad = rs->zc_pad;
        ssize_t n = -1;

        if (t->devnull < 0)
            t->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (t->devnull >= 0)
            n = splice(c->zc_pipe[rs->zc_pad_pipe][0], NULL, t->devnull, NULL,
                       pad, SPLICE_F_NONBLOCK);
        rs->zc_pad = 0;
        if (n < 0 || (size_t)n != pad) {
            stor_req_zc_discard(r); /* a new pipe for the next one */
            return 1;
        }
    }
    c->zc_dirty = false; /* drained: empty for the next response */
    return 1;
}

/* Writes what is pending; returns 1 when everything queued is sent, 0 when
 * the socket is full, -errno when the peer is gone. */
static int conn_flush(struct stor_conn *c)
{
    struct stor_req *r = c->req;

    for (;;) {
        struct iovec iov[2];
        int niov = 0;
        ssize_t n;
        struct stor_resp *rs = r ? &r->resp : NULL;
        bool streaming =
            rs && r->resp_started && rs->stream && rs->filled[rs->cur];

        if (c->out_sent < c->out.len) {
            iov[niov].iov_base = c->out.data + c->out_sent;
            iov[niov].iov_len = c->out.len - c->out_sent;
            niov++;
        }
        if (streaming) {
            iov[niov].iov_base = rs->sbuf[rs->cur] + rs->ssent;
            iov[niov].iov_len = rs->slen[rs->cur] - rs->ssent;
            niov++;
        }
        if (niov == 0 && rs && r->resp_started && rs->zc && rs->zc_left)
            return conn_splice_out(c, r);
        if (niov == 0)
            return 1;
        if (rs && r->resp_started && rs->zc && rs->zc_left && c->ssl == NULL) {
            /* the head: held back to go out with the body's first bytes */
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};

            do {
                n = sendmsg(c->io.fd, &mh, MSG_MORE | MSG_NOSIGNAL);
            } while (n < 0 && errno == EINTR);
            n = n < 0 ? -errno : n;
        } else {
            n = conn_send(c, iov, niov);
        }
        if (n < 0)
            return n == -EAGAIN ? 0 : (int)n;
        c->last_progress = c->t->now;
        if (r)
            r->sent_bytes += (uint64_t)n;
        if (c->out_sent < c->out.len) {
            size_t take = CM_MIN((size_t)n, c->out.len - c->out_sent);

            c->out_sent += take;
            n -= (ssize_t)take;
            if (c->out_sent == c->out.len) {
                cm_buf_reset(&c->out);
                c->out_sent = 0;
            }
        }
        if (streaming && n > 0) {
            rs->ssent += (size_t)n;
            if (rs->ssent == rs->slen[rs->cur]) {
                rs->filled[rs->cur] = false;
                rs->ssent = 0;
                rs->cur = !rs->cur;
                maybe_fill(r);
            }
        }
    }
}

/* Returns true when the response of the current request is fully sent. */
static bool resp_complete(struct stor_conn *c)
{
    struct stor_req *r = c->req;
    struct stor_resp *rs = &r->resp;

    if (c->out.len > c->out_sent)
        return false;
    if (rs->zc && rs->zc_left)
        return false;
    if (!rs->stream)
        return true;
    /* fill_busy first: while a fill runs, its worker owns rd_off */
    return !rs->fill_busy && rs->rd_off >= rs->rd_end && !rs->filled[0] &&
           !rs->filled[1];
}

/* Reads what the socket has into c->in. 1 when bytes arrived, 0 on
 * EAGAIN, -ECONNRESET on EOF or error. */
static int conn_read(struct stor_conn *c)
{
    size_t want = c->state == C_BODY ? READ_CHUNK : READ_HEAD;
    ssize_t n;
    int ret;

    inbuf_get(c->t, &c->in);
    ret = cm_buf_reserve(&c->in, want);
    if (ret < 0)
        return ret;
    n = conn_recv(c, c->in.data + c->in.len, want);
    if (n < 0)
        return n == -EAGAIN ? 0 : -ECONNRESET;
    if (n == 0) {
        c->in_eof = true;
        return -ECONNRESET;
    }
    if (c->in.len == 0 && c->state == C_HEAD)
        c->head_start = c->t->now;
    c->in.len += (size_t)n;
    /* The rest of a TLS record is decrypted inside OpenSSL where epoll
     * cannot see it: take it now (at most one record, 16 KiB). */
    while (c->ssl && stor_tls_pending(c->ssl) > 0) {
        size_t more = stor_tls_pending(c->ssl);

        ret = cm_buf_reserve(&c->in, more);
        if (ret < 0)
            return ret;
        n = conn_recv(c, c->in.data + c->in.len, more);
        if (n <= 0)
            break;
        c->in.len += (size_t)n;
    }
    c->in.data[c->in.len] = 0;
    c->last_progress = c->t->now;
    return 1;
}

/* Replies to a request that could not even be parsed, and closes after. */
static void early_error(struct stor_conn *c, enum stor_http_err e)
{
    struct stor_http_server *s = c->t->srv;
    struct stor_req *r = c->req;

    if (r == NULL) {
        /* Fabricate a minimal request to carry the response. */
        r = calloc(1, s->app->req_size);
        if (r == NULL) {
            conn_close(c);
            return;
        }
        r->conn = c;
        r->app = s->app_ctx;
        r->id = atomic_fetch_add(&s->next_req_id, 1);
        clock_gettime(CLOCK_MONOTONIC, &r->start);
        cm_buf_init(&r->resp.hdrs, CM_BUF_NOLIMIT);
        cm_buf_init(&r->resp.body, CM_BUF_NOLIMIT);
        r->head.minor_version = 1;
        c->req = r;
    }
    c->close_after = true;
    cm_buf_reset(&c->in);
    s->app->on_error(r, e);
    stor_http_respond(r);
}

/* Handles head @h (@headlen bytes at the start of c->in): framing and
 * method, then the application (which decodes the target). */
static void conn_on_head(struct stor_conn *c, size_t headlen,
                         const struct stor_http_head *h)
{
    struct stor_req *r = req_create(c, headlen, h);
    enum stor_http_err e;
    int ret;

    if (r == NULL) {
        conn_close(c);
        return;
    }
    if (req_parse_framing(r, &e) < 0) {
        if (e == STOR_HTTP_E_BAD_REQUEST)
            c->close_after = true;
        c->t->srv->app->on_error(r, e);
        stor_http_respond(r);
        return;
    }
    req_parse_method(r);
    ret = c->t->srv->app->on_head(r);
    /* job_busy first: while a job runs, its worker owns resp */
    if (!r->job_busy && r->resp.status) {
        stor_http_respond(r);
        return;
    }
    if (ret == 1) {
        c->state = C_PRE;
        return;
    }
    stor_http_pre_done(r);
}

/* Data callback of the transport chunk decoder. */
static int te_data(void *arg, const char *p, size_t n)
{
    return app_of(arg)->on_body(arg, p, n);
}

/* Feeds buffered input to the body; moves to WORK when it is complete. */
static void conn_body(struct stor_conn *c)
{
    struct stor_req *r = c->req;
    const struct stor_http_app *app = c->t->srv->app;
    struct stor_chunk_cb cb = {.data = te_data, .arg = r};
    size_t take;
    ssize_t n;
    int ret;

    if (!r->has_body) {
        r->body_done = true;
    } else if (r->te_chunked) {
        n = stor_chunk_decode(r->te, c->in.data, c->in.len, &cb);
        if (n < 0)
            goto fail;
        cm_buf_consume(&c->in, (size_t)n);
        if (r->te->done)
            r->body_done = true;
    } else {
        take = (size_t)CM_MIN((uint64_t)c->in.len, r->raw_left);
        if (take) {
            ret = app->on_body(r, c->in.data, take);
            if (ret < 0) {
                n = ret;
                goto fail;
            }
            cm_buf_consume(&c->in, take);
            r->raw_left -= take;
        }
        if (r->raw_left == 0)
            r->body_done = true;
    }
    if (!r->body_done) {
        if (c->in_eof) {
            n = -EPIPE;
            goto fail;
        }
        return;
    }
    c->state = C_WORK;
    app->on_body_end(r);
    return;

fail:
    if (r->resp.status == 0)
        app->on_error(r, n == -E2BIG ? STOR_HTTP_E_BODY_TOO_LARGE
                                     : STOR_HTTP_E_BODY_INCOMPLETE);
    c->close_after = true;
    c->state = C_WORK;
    r->failed = true;
    if (!r->job_busy)
        stor_http_respond(r);
}

/* Closes after a response the peer may not have finished sending to (an
 * error before its body, a head over the limits): closing with unread
 * input makes the kernel send RST, which can destroy the response before
 * the client reads it. So we shut our write side and discard input until
 * the peer's EOF or LINGER_S seconds (nginx's lingering close). */
static void linger(struct stor_conn *c)
{
    if (c->in_eof) {
        conn_close(c);
        return;
    }
    req_finish(c);
    if (c->ssl) {
        stor_tls_conn_free(c->ssl, c->tls_failed); /* close_notify */
        c->ssl = NULL; /* lingering reads the raw socket */
    }
    shutdown(c->io.fd, SHUT_WR);
    cm_buf_reset(&c->in);
    c->state = C_LINGER;
    c->last_progress = c->t->now;
    conn_update_events(c);
}

/* Drives the state machine as far as the buffered input and the jobs
 * allow, then sets the epoll interest. */
static void conn_run(struct stor_conn *c)
{
    for (;;) {
        struct stor_req *r = c->req;
        int ret;

        if (c->dead)
            return;
        switch (c->state) {
        case C_HEAD: {
            struct stor_http_hdr hdrs[STOR_HTTP_MAX_HEADERS];
            struct stor_http_head h = {.hdrs = hdrs,
                                       .nhdrs = STOR_HTTP_MAX_HEADERS};

            if (c->in.len == 0) {
                if (c->in_eof || atomic_load(&c->t->srv->draining)) {
                    conn_close(c);
                    return;
                }
                goto out;
            }
            ret = stor_http_parse_head(c->in.data, c->in.len, &h);
            if (ret == -EAGAIN) {
                if (c->in_eof) {
                    conn_close(c);
                    return;
                }
                goto out;
            }
            if (ret < 0) {
                early_error(c, ret == -E2BIG ? STOR_HTTP_E_HEADER_TOO_LARGE
                                             : STOR_HTTP_E_BAD_REQUEST);
                break;
            }
            conn_on_head(c, (size_t)ret, &h);
            break;
        }
        case C_BODY:
            if (c->t->srv->app->body_paused(r))
                goto out;
            if (c->out.len > c->out_sent) { /* 100 Continue */
                ret = conn_flush(c);
                if (ret < 0) {
                    conn_close(c);
                    return;
                }
            }
            if (c->in.len == 0 && r->has_body && !c->in_eof)
                goto out;
            conn_body(c);
            if (c->state == C_BODY)
                goto out;
            break;
        case C_PRE:
        case C_WORK:
        case C_LINGER:
            goto out;
        case C_SEND:
            maybe_fill(r);
            if (c->dead)
                return;
            ret = conn_flush(c);
            if (ret < 0) {
                conn_close(c);
                return;
            }
            if (!resp_complete(c))
                goto out;
            if (c->close_after) {
                linger(c);
                return;
            }
            req_finish(c);
            assert(c->req == NULL);
            c->state = C_HEAD;
            c->head_start = c->t->now;
            /* An idle keep-alive connection holds no buffers: thousands
             * of them cost a few hundred bytes each. */
            if (c->in.len == 0)
                inbuf_put(c->t, &c->in);
            if (c->out.cap > 64 * 1024)
                cm_buf_fini(&c->out);
            break;
        }
    }
out:
    conn_update_events(c);
}

/* Sets epoll interest from the state. */
static void conn_update_events(struct stor_conn *c)
{
    struct stor_req *r = c->req;
    uint32_t ev = 0;

    if (c->dead)
        return;
    if (c->ssl && !c->tls_ready) {
        ev = c->tls_want ? c->tls_want : EPOLLIN;
        goto set;
    }
    /* While a request is in the works, input stays enabled (a client that
     * does not pipeline sends nothing, so this costs no wakeups, and it
     * saves two epoll_ctl calls per request); pipelined bytes are buffered
     * up to IN_BUFFER_MAX, then reading stops until the response is out. */
    switch (c->state) {
    case C_HEAD:
        ev = EPOLLIN;
        break;
    case C_BODY:
        if (!c->t->srv->app->body_paused(r))
            ev = EPOLLIN;
        if (c->out.len > c->out_sent)
            ev |= EPOLLOUT;
        break;
    case C_SEND:
        if (c->out.len > c->out_sent ||
            (r && r->resp.stream && r->resp.filled[r->resp.cur]) ||
            (r && r->resp.zc && r->resp.zc_left))
            ev = EPOLLOUT;
        __attribute__((fallthrough));
    case C_PRE:
    case C_WORK:
        if (c->in.len < IN_BUFFER_MAX)
            ev |= EPOLLIN;
        break;
    case C_LINGER:
        ev = EPOLLIN;
        break;
    }
    if (c->in_eof)
        ev &= ~(uint32_t)EPOLLIN;
    if (c->tls_rd_out && !c->in_eof)
        ev |= EPOLLOUT; /* TLS read wants to write first */
    if (c->tls_wr_in)
        ev |= EPOLLIN; /* TLS write wants to read first */
set:
    if (stor_loop_mod(c->t->loop, &c->io, ev) < 0)
        conn_close(c);
}

/* The answer to a plain-HTTP request on the TLS port: nginx's habit (a
 * client that mistyped the scheme learns why). */
static const char tls_plain_reply[] =
    "HTTP/1.1 400 Bad Request\r\nServer: storaged\r\n"
    "Content-Type: text/plain\r\nContent-Length: 44\r\n"
    "Connection: close\r\n\r\n"
    "This port speaks HTTPS: use an https:// URL\n";

/* Advances @c's TLS handshake. true once it is done; false while it waits
 * (epoll interest set) or when it failed (@c closed). */
static bool tls_handshake(struct stor_conn *c)
{
    uint32_t want = 0;
    int ret = stor_tls_handshake(c->ssl, &want);

    if (ret == 0) {
        c->tls_ready = true;
        c->tls_want = 0;
        c->last_progress = c->head_start = c->t->now;
        return true;
    }
    if (ret == -EAGAIN) {
        c->tls_want = want;
        c->last_progress = c->t->now;
        conn_update_events(c);
        return false;
    }
    c->tls_failed = true;
    if (ret == -EBADMSG) {
        /* best effort, one write: the socket is fresh, so it has room */
        if (write(c->io.fd, tls_plain_reply, sizeof(tls_plain_reply) - 1) < 0) {
            conn_close(c);
            return false;
        }
        c->tls_ready = true; /* no more TLS: linger on the raw socket */
        linger(c);
        return false;
    }
    conn_close(c);
    return false;
}

/* epoll callback of a connection. */
static void conn_io_cb(struct stor_loop *l, struct stor_ev *io, uint32_t ev)
{
    struct stor_conn *c = io->arg;
    int ret;

    (void)l;
    if (c->dead)
        return;
    if (c->state == C_LINGER) {
        char sink[16384];
        ssize_t n = read(c->io.fd, sink, sizeof(sink));

        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            conn_close(c);
        return;
    }
    if (c->ssl && !c->tls_ready) {
        if (!tls_handshake(c))
            return;
        ev |= EPOLLIN; /* the request may have come with the Finished */
    }
    if ((ev & EPOLLIN) || (c->tls_rd_out && (ev & EPOLLOUT))) {
        ret = conn_read(c);
        if (ret < 0 && !c->in_eof) {
            conn_close(c);
            return;
        }
        if (ret < 0 && c->state == C_HEAD && c->in.len == 0) {
            conn_close(c);
            return;
        }
    } else if (ev & (EPOLLERR | EPOLLHUP)) {
        if (!(ev & EPOLLOUT)) {
            conn_close(c);
            return;
        }
    }
    conn_run(c);
}

/* Closes the socket now; the memory goes when no job holds it. */
static void conn_close(struct stor_conn *c)
{
    struct http_thread *t = c->t;

    if (c->dead)
        return;
    c->dead = true;
    stor_loop_del(t->loop, &c->io);
    stor_tls_conn_free(c->ssl, c->tls_failed);
    c->ssl = NULL;
    close(c->io.fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    t->nconns--;
    atomic_fetch_sub(&t->srv->nconns, 1);
    if (c->req)
        req_finish(c);
    conn_maybe_bury(c);
}

/* Queues a dead connection for freeing once nothing refers to it. */
static void conn_maybe_bury(struct stor_conn *c)
{
    if (!c->dead || c->buried || c->req != NULL || c->pending > 0)
        return;
    c->buried = true;
    c->next = c->t->graveyard;
    c->t->graveyard = c;
}

/* Frees a buried connection's memory; its socket is already closed. */
static void conn_free(struct stor_conn *c)
{
    zc_pipe_close(c, 0); /* no request, so no splice, is left */
    zc_pipe_close(c, 1);
    inbuf_put(c->t, &c->in);
    cm_buf_fini(&c->out);
    free(c);
}

/* Accepts every pending connection on the listener. */
static void accept_cb(struct stor_loop *l, struct stor_ev *io, uint32_t ev)
{
    struct http_thread *t = io->arg;

    (void)l;
    (void)ev;
    for (;;) {
        struct stor_conn *c;
        struct sockaddr_storage peer;
        socklen_t plen = sizeof(peer);
        int fd = accept4(io->fd, (struct sockaddr *)&peer, &plen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        int one = 1;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                cm_log(CM_LOG_WARN, errno, "accept");
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->t = t;
        c->io.fd = fd;
        c->zc_pipe[0][0] = c->zc_pipe[0][1] = -1;
        c->zc_pipe[1][0] = c->zc_pipe[1][1] = -1;
        c->peer = peer;
        c->io.cb = conn_io_cb;
        c->io.arg = c;
        cm_buf_init(&c->in, CM_BUF_NOLIMIT);
        cm_buf_init(&c->out, CM_BUF_NOLIMIT);
        c->last_progress = c->head_start = t->now;
        if (t->srv->tls) {
            c->ssl = stor_tls_conn_new(t->srv->tls, fd);
            if (c->ssl == NULL) {
                close(fd);
                conn_free(c);
                continue;
            }
        }
        if (stor_loop_add(t->loop, &c->io, EPOLLIN) < 0) {
            stor_tls_conn_free(c->ssl, 1);
            close(fd);
            conn_free(c);
            continue;
        }
        c->next = t->conns;
        if (t->conns)
            t->conns->prev = c;
        t->conns = c;
        t->nconns++;
        atomic_fetch_add(&t->srv->nconns, 1);
        atomic_fetch_add(&t->srv->conns_total, 1);
    }
}

/* After each event batch: frees closed connections. */
static void after_cb(struct stor_loop *l, void *arg)
{
    struct http_thread *t = arg;

    (void)l;
    while (t->graveyard) {
        struct stor_conn *c = t->graveyard;

        t->graveyard = c->next;
        conn_free(c);
    }
    t->now = mono_now();
}

/* On a worker: reads the certificate and key again. */
static void tls_reload_run(struct stor_job *j)
{
    struct stor_http_server *s =
        (struct stor_http_server *)((char *)j -
                                    offsetof(struct stor_http_server, reload));
    char *err = NULL;
    int ret = stor_tls_reload(s->tls, &err);

    if (ret < 0)
        cm_log(CM_LOG_ERROR, -ret,
               "SIGHUP: TLS reload failed, keeping the old certificate: %s",
               err ? err : "no memory");
    else
        cm_log(CM_LOG_INFO, 0, "SIGHUP: TLS certificate and key reloaded");
    free(err);
}

/* Back on the loop: another SIGHUP may reload again. */
static void tls_reload_done(struct stor_job *j)
{
    struct stor_http_server *s =
        (struct stor_http_server *)((char *)j -
                                    offsetof(struct stor_http_server, reload));

    atomic_store(&s->reload_busy, false);
}

/* A SIGHUP came: one loop (the first to see it) queues the reload. */
static void tls_reload_start(struct http_thread *t)
{
    struct stor_http_server *s = t->srv;
    bool busy = false;

    if (!atomic_compare_exchange_strong(&s->reload_busy, &busy, true))
        return; /* one runs: the flag stays for the next tick */
    atomic_store(&g_reload_tls, 0);
    s->reload.run = tls_reload_run;
    s->reload.done = tls_reload_done;
    s->reload.loop = t->loop;
    stor_pool_submit(s->pool, &s->reload);
}

/* Whether the peer took bytes of @c's response since the last look (a
 * sending connection, looked at once a second): what we wrote less what
 * the kernel still holds unacknowledged. A slow but steady reader with
 * large socket buffers lets a write of ours through only when a third of
 * the send buffer is free, which can take longer than the timeout although
 * the reader never stalls (s3-tests' *_get_part compared 1 KiB chunks and
 * were cut off at 3.9 of 5 MiB): so the send timeout counts the time in
 * which the peer takes nothing, not the time without a write of ours. */
static bool peer_took_bytes(struct stor_conn *c)
{
    int64_t took;
    int q;

    if (c->req == NULL || ioctl(c->io.fd, SIOCOUTQ, &q) < 0)
        return false;
    took = (int64_t)c->req->sent_bytes - q;
    if (took > c->peer_took) {
        c->peer_took = took;
        return true;
    }
    c->peer_took = took;
    return false;
}

/* Once a second: timeouts, and the drain on shutdown. */
static void tick_cb(struct stor_loop *l, void *arg)
{
    struct http_thread *t = arg;
    struct stor_http_server *s = t->srv;
    struct stor_conn *c, *next;
    bool draining = atomic_load(&s->draining) ||
                    atomic_load_explicit(&g_shutdown, memory_order_relaxed);

    t->now = mono_now();
    if (s->tls && atomic_load_explicit(&g_reload_tls, memory_order_relaxed))
        tls_reload_start(t);
    if (draining && !atomic_load(&s->draining))
        atomic_store(&s->draining, true);
    if (draining && t->listening) {
        stor_loop_del(l, &t->lio);
        close(t->lio.fd);
        t->listening = false;
        t->drain_start = t->now;
    }
    if (draining && t->now - t->drain_start > DRAIN_MAX_S) {
        for (c = t->conns; c; c = next) {
            next = c->next;
            cm_log(CM_LOG_WARN, 0,
                   "drain: closing a connection still busy "
                   "after %ds",
                   DRAIN_MAX_S);
            conn_close(c);
        }
    }
    for (c = t->conns; c; c = next) {
        time_t idle = t->now - c->last_progress;

        next = c->next;
        switch (c->state) {
        case C_HEAD:
            if (c->ssl && !c->tls_ready) {
                /* a handshake gets the head's time, a drain none */
                if (draining || t->now - c->head_start >= s->header_timeout_s)
                    conn_close(c);
            } else if (c->in.len == 0 &&
                       (draining || idle >= s->idle_timeout_s))
                conn_close(c);
            else if (c->in.len > 0 &&
                     t->now - c->head_start >= s->header_timeout_s) {
                early_error(c, STOR_HTTP_E_TIMEOUT);
                conn_run(c);
            }
            break;
        case C_BODY:
            if (idle >= s->body_timeout_s && c->req && !c->req->job_busy) {
                s->app->on_error(c->req, STOR_HTTP_E_TIMEOUT);
                c->close_after = true;
                c->req->failed = true;
                stor_http_respond(c->req);
                conn_run(c);
            }
            break;
        case C_SEND:
            if (peer_took_bytes(c))
                c->last_progress = t->now;
            else if (idle >= s->body_timeout_s)
                conn_close(c);
            break;
        case C_LINGER:
            if (idle >= LINGER_S || draining)
                conn_close(c);
            break;
        default:
            break;
        }
    }
    if (draining && t->nconns == 0)
        stor_loop_stop(l);
}

/* Opens a listening socket on @host:@port with SO_REUSEPORT, or (with
 * @probe) binds a plain socket there and closes it again: SO_REUSEPORT
 * would let a second storaged (same user) bind the same address and
 * silently take half the connections, so the first bind is an exclusive
 * one that fails with -EADDRINUSE if anything listens there. */
static int listen_on(const char *host, int port, bool probe)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char ports[16];
    int fd = -1, one = 1, ret;

    snprintf(ports, sizeof(ports), "%d", port);
    ret = getaddrinfo(host && *host ? host : NULL, ports, &hints, &ai);
    if (ret != 0)
        return -EADDRNOTAVAIL;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ret = -errno;
        goto out;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (!probe)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
        (!probe && listen(fd, 4096) < 0)) {
        ret = -errno;
        close(fd);
        goto out;
    }
    if (probe) {
        close(fd);
        fd = 0;
    }
    ret = fd;
out:
    freeaddrinfo(ai);
    return ret;
}

/* Event-loop thread body: runs its loop until the drain stops it. */
static void *thread_main(void *arg)
{
    struct http_thread *t = arg;

    ring_init(t);
    stor_loop_run(t->loop);
    return NULL;
}

/* See header. */
void stor_http_shutdown(void)
{
    atomic_store_explicit(&g_shutdown, 1, memory_order_relaxed);
}

/* See header. */
void stor_http_reload_tls(void)
{
    atomic_store_explicit(&g_reload_tls, 1, memory_order_relaxed);
}

/* Frees @s and what its loops hold (the loops have stopped). */
static void server_free(struct stor_http_server *s)
{
    size_t i;

    stor_pool_destroy(s->pool);
    stor_pool_destroy(s->rpool);
    s->pool = s->rpool = NULL;
    for (i = 0; i < s->nthreads; i++) {
        struct http_thread *t = &s->threads[i];

        if (t->loop == NULL)
            continue;
        after_cb(t->loop, t);
        if (t->ring_ok)
            io_uring_queue_exit(&t->ring);
        thread_pools_free(t);
        if (s->app->loop_fini)
            s->app->loop_fini(s->app_ctx, t->app_loop);
        if (t->listening)
            close(t->lio.fd);
        if (t->devnull >= 0)
            close(t->devnull);
        stor_loop_destroy(t->loop);
    }
    free(s->threads);
    free(s);
}

/* Sets up loop thread @t of @s (listener, application data, timers). */
static int thread_setup(struct stor_http_server *s, struct http_thread *t,
                        const struct stor_http_opts *o)
{
    int ret;

    t->srv = s;
    t->devnull = -1;
    t->loop = stor_loop_create();
    if (t->loop == NULL)
        return -ENOMEM;
    ret = listen_on(o->host, o->port, false);
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret, "cannot listen on %s:%d", o->host, o->port);
        return ret;
    }
    t->lio.fd = ret;
    t->lio.cb = accept_cb;
    t->lio.arg = t;
    ret = stor_loop_add(t->loop, &t->lio, EPOLLIN);
    if (ret < 0) {
        close(t->lio.fd);
        return ret;
    }
    t->listening = true;
    if (s->app->loop_init) {
        ret = s->app->loop_init(s->app_ctx, s->nthreads, &t->app_loop);
        if (ret < 0)
            return ret;
    }
    t->now = mono_now();
    stor_loop_set_tick(t->loop, tick_cb, t);
    stor_loop_set_after(t->loop, after_cb, t);
    return 0;
}

/* See header. */
int stor_http_serve(const struct stor_http_opts *o)
{
    size_t n = o->nthreads, i, nw = o->nworkers, nr = o->nrworkers;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    struct stor_http_server *s;
    int ret = 0;

    if (n == 0)
        n = ncpu > 0 ? (size_t)ncpu : 1;
    if (nw == 0)
        nw = CM_MAX((size_t)16, 4 * n);
    if (nr == 0)
        nr = CM_MAX((size_t)4, 2 * n);
    assert(o->app->req_size >= sizeof(struct stor_req));
    assert(o->app->req_zero >= sizeof(struct stor_req) &&
           o->app->req_zero <= o->app->req_size);
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->app = o->app;
    s->app_ctx = o->app_ctx;
    s->tls = o->tls;
    s->idle_timeout_s = o->idle_timeout_s;
    s->header_timeout_s = o->header_timeout_s;
    s->body_timeout_s = o->body_timeout_s;
    s->id_hdr_len = o->app->id_header ? strlen(o->app->id_header) : 0;
    s->fixed_hdrs_len =
        o->app->fixed_headers ? strlen(o->app->fixed_headers) : 0;
    atomic_store(&s->next_req_id, ((uint64_t)time(NULL) << 24));
    s->threads = calloc(n, sizeof(*s->threads));
    if (s->threads == NULL) {
        free(s);
        return -ENOMEM;
    }
    s->nthreads = n;
    ret = stor_pool_create(nw, &s->pool);
    if (ret == 0)
        ret = stor_pool_create(nr, &s->rpool);
    if (ret < 0)
        goto out_free;
    ret = listen_on(o->host, o->port, true);
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret, "cannot listen on %s:%d%s", o->host, o->port,
               ret == -EADDRINUSE ? " (address in use: another server?)" : "");
        goto out_free;
    }
    for (i = 0; i < n; i++) {
        ret = thread_setup(s, &s->threads[i], o);
        if (ret < 0)
            goto out_free;
    }
    for (i = 0; i < n; i++) {
        ret = pthread_create(&s->threads[i].tid, NULL, thread_main,
                             &s->threads[i]);
        if (ret != 0)
            return -ret; /* loops already running: nothing safe to free */
    }
    atomic_store(&s->ready, true);
    cm_log(CM_LOG_INFO, 0,
           "serving %s on %s:%d (%zu loops, %zu read + %zu write workers)",
           s->tls ? "HTTPS (TLS 1.2, 1.3)" : "HTTP", o->host, o->port, n, nr,
           nw);
    if (o->on_serving)
        o->on_serving(o->serving_ctx, s, true);
    for (i = 0; i < n; i++)
        pthread_join(s->threads[i].tid, NULL);
    atomic_store(&s->ready, false);
    if (o->on_serving)
        o->on_serving(o->serving_ctx, s, false);
    /* Workers finish what is queued; completions then run on no loop, so
     * connections still waiting for a job are released with the process. */
    stor_pool_destroy(s->pool);
    stor_pool_destroy(s->rpool);
    s->pool = s->rpool = NULL;
    server_free(s);
    cm_log(CM_LOG_INFO, 0, "drained; stopped serving");
    return 0;

out_free:
    server_free(s);
    return ret;
}

/* See http.h. */
int stor_req_peer(const struct stor_req *r, struct sockaddr_storage *ss)
{
    if (r->conn == NULL)
        return -ENOTCONN;
    *ss = r->conn->peer; /* kept at accept: no syscall per request */
    return 0;
}

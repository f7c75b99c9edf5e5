/* storaged/http/http.h - the HTTP/1.1 transport's public interface: event-loop
 * threads that accept, parse and frame requests and write responses, with
 * blocking work on two worker pools. It knows nothing of S3: it calls its
 * application only through the table of hooks given at start (struct
 * stor_http_app, as nginx passes module handlers), and the application calls
 * back through the services below.
 *
 * Ownership: a connection belongs to one loop thread. While a job of its
 * request runs on a worker (req->job_busy), the worker may touch the request
 * and its response; the loop touches neither until the job comes back,
 * except the GET stream's other buffer (see struct stor_resp). */
#ifndef STORAGED_HTTP_HTTP_H
#define STORAGED_HTTP_HTTP_H
#include "common/buf.h"
#include "common/compiler.h"
#include "storaged/http/loop.h"
#include "storaged/http/parse.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

struct stor_conn;
struct stor_http_server;
struct stor_tls;

/* Errors the transport finds itself; the application turns each into its
 * own error response (on_error). */
enum stor_http_err {
    STOR_HTTP_E_INTERNAL = 0,     /* no memory; a response never decided */
    STOR_HTTP_E_BAD_REQUEST,      /* malformed head or framing */
    STOR_HTTP_E_HEADER_TOO_LARGE, /* head over the parser's limits */
    STOR_HTTP_E_TIMEOUT,          /* head or body too slow */
    STOR_HTTP_E_BODY_TOO_LARGE,   /* a chunk size over the limits */
    STOR_HTTP_E_BODY_INCOMPLETE,  /* body cut short or malformed chunks */
    STOR_HTTP_E_NOT_IMPLEMENTED,  /* a Transfer-Encoding other than chunked */
};

/* The response being built (on a worker or the loop) and sent (on the loop).
 */
struct stor_resp {
    int status;         /* 0 = not decided yet */
    struct cm_buf hdrs; /* extra header lines "Name: value\r\n" */
    struct cm_buf body; /* a small body, sent after the head */
    bool no_body;       /* HEAD or 304: Content-Length but no bytes */
    bool has_length;    /* content_length below is the body's length */
    uint64_t content_length;
    bool close; /* Connection: close after this response */

    /* GET streaming (stream set): bytes [rd_off, rd_end) still to be read
     * through the application's stream_fill hook. Two buffers: the loop
     * sends sbuf[cur] while a worker fills the other one (fill_busy). The
     * application sets stream, schunk, sbuf[0] (malloc'd, owned by the
     * response from then on), slen[0], filled[0], rd_off and rd_end. */
    bool stream;
    uint64_t rd_off, rd_end;
    char *sbuf[2];
    size_t slen[2], ssent;
    size_t schunk; /* bytes per read */
    int cur;
    bool filled[2];
    bool fill_busy;
    int fill_idx; /* buffer the running fill writes */
    int fill_err;
    struct stor_job fill_job;

    /* Zero-copy body (zc set): after the head, zc_left bytes are spliced
     * to the socket from the connection's pipes (stor_req_zc_pipes):
     * zc_first from the first, the rest from the second. */
    bool zc;
    size_t zc_left;
    size_t zc_first;
    size_t zc_pad;   /* then this many bytes of pipe zc_pad_pipe are dropped */
    int zc_pad_pipe; /* 0 or 1 */
};

/* One request (the connection's current one; pipelined requests wait in the
 * input buffer until this one is answered). The transport allocates
 * stor_http_app.req_size bytes for it: the application's own request struct
 * starts with this one and extends it. A new request is zeroed except hdrs[]
 * (only head.nhdrs entries are valid) and the application's bytes past
 * stor_http_app.req_zero. */
struct stor_req {
    struct stor_conn *conn; /* NULL for a request made up by a test */
    void *app;              /* the application (stor_http_opts.app_ctx) */
    uint64_t id;
    struct timespec start; /* monotonic */
    char *headbuf; /* owned copy of the head; every string below borrows it */
    size_t headlen;
    size_t headcap; /* headbuf's size (it may be a recycled input buffer) */
    struct stor_http_head head;
    /* the method, when it is one of these (the application decides what
     * to answer to others) */
    bool is_head, is_get, is_put, is_post, is_delete;

    /* framing */
    bool has_body; /* Content-Length > 0 or chunked */
    bool te_chunked;
    uint64_t clen;             /* Content-Length (raw bytes on the wire) */
    uint64_t raw_left;         /* Content-Length bytes not yet read */
    struct stor_chunk_dec *te; /* owned; only for chunked bodies */
    bool body_done;            /* the whole body has been read */
    bool expect_100;
    bool sent_100;     /* the interim 100 Continue was queued */
    bool body_started; /* body bytes came before any 100 Continue */
    bool keep_alive;

    /* jobs */
    bool read_jobs; /* set by the application: jobs go to the read pool */
    struct stor_job job;
    bool job_busy;
    void (*job_run)(struct stor_req *r);  /* what job.run calls */
    void (*job_done)(struct stor_req *r); /* what job.done calls */

    struct stor_resp resp;
    bool resp_started; /* serialized into the connection's output */
    bool failed;       /* body error: respond once jobs are back */
    bool fini_done;    /* the application's req_fini ran */
    uint64_t sent_bytes;

    /* last: not zeroed for a new request (head.nhdrs of them are set) */
    struct stor_http_hdr hdrs[STOR_HTTP_MAX_HEADERS];
};

/* What the transport calls. Every hook runs on the request's loop thread
 * unless it says otherwise. */
struct stor_http_app {
    size_t req_size; /* >= sizeof(struct stor_req) */
    /* The transport zeroes a new request's bytes up to here (>=
     * sizeof(struct stor_req), <= req_size; hdrs[] excepted): what lies
     * beyond, the application sets before it reads it. DESIGN: a request
     * is ~8 KiB, mostly arrays with a count (headers, query, reads), and
     * zeroing them all showed up as the largest memset per GET. */
    size_t req_zero;
    /* Every response carries "@id_header: <request id, 16 hex digits>"
     * when set, then the lines of @fixed_headers ("Name: value\r\n"...)
     * when set. */
    const char *id_header;
    const char *fixed_headers;
    /* Once per loop before the loops start (main thread): *loop_data is
     * handed back by stor_req_loop_data(). 0 or -errno (start fails). */
    int (*loop_init)(void *app, size_t nloops, void **loop_data);
    void (*loop_fini)(void *app, void *loop_data);
    /* The head is parsed and framing known: authenticate and route. Either
     * sets r->resp.status (an error or a complete answer), or returns 1
     * after submitting a pre-body job (the transport then waits for
     * stor_http_pre_done()), or returns 0: read the body. */
    int (*on_head)(struct stor_req *r);
    /* Decoded transport bytes of the body (after Transfer-Encoding). 0, or
     * a negative errno: the request fails with r->resp set by the hook
     * (or by on_error when it left none). */
    int (*on_body)(struct stor_req *r, const char *p, size_t n);
    /* Whether the application cannot take more body bytes now. */
    bool (*body_paused)(const struct stor_req *r);
    /* The whole body has arrived: run the operation (a job, or an answer
     * now); stor_http_respond() sends the response. */
    void (*on_body_end)(struct stor_req *r);
    /* Replaces the response with the application's answer to transport
     * error @e. */
    void (*on_error)(struct stor_req *r, enum stor_http_err e);
    /* The request is over (answered, or its connection gone) and no job of
     * it runs: record it, free what the application holds. Returns true
     * when handles remain that only req_release() may free (it then runs
     * once, on a worker of the request's pool). */
    bool (*req_fini)(struct stor_req *r);
    void (*req_release)(struct stor_req *r); /* on a worker */
    /* On a worker: reads @len bytes of the GET stream at offset @off into
     * @buf. The bytes read (> 0), or -errno. */
    ssize_t (*stream_fill)(struct stor_req *r, uint64_t off, char *buf,
                           size_t len);
};

struct stor_http_opts {
    const char *host; /* "127.0.0.1", "0.0.0.0", "::" */
    int port;
    size_t nthreads;      /* event loops; 0 = one per online CPU */
    size_t nworkers;      /* write workers; 0 = default (4 per loop, >= 16) */
    size_t nrworkers;     /* read workers; 0 = default (2 per loop, >= 4) */
    int idle_timeout_s;   /* keep-alive idle */
    int header_timeout_s; /* slow client: the head must arrive within */
    int body_timeout_s;   /* no body progress for this long */
    /* When set, every connection speaks TLS (storaged/http/tls.h);
     * borrowed until serve returns. */
    struct stor_tls *tls;
    const struct stor_http_app *app; /* borrowed until serve returns */
    void *app_ctx;                   /* handed to the hooks (r->app) */
    /* When set, called on the serving thread with @up true once the loops
     * run, and with @up false once they stopped, before @srv is freed:
     * side services (metrics push, console) may read stor_http_stats(srv)
     * in between. */
    void (*on_serving)(void *ctx, struct stor_http_server *srv, bool up);
    void *serving_ctx;
};

/* Binds, starts the loops and the workers, and serves until
 * stor_http_shutdown() is called; then stops accepting, finishes in-flight
 * requests (at most 25 seconds) and returns 0, or -errno when it could not
 * start (bind failure: message logged). Borrows @o. */
CM_MUST_CHECK int stor_http_serve(const struct stor_http_opts *o);
/* Async-signal-safe: asks the running server to drain and return. */
void stor_http_shutdown(void);
/* Async-signal-safe (SIGHUP): asks the running server to read its TLS
 * certificate and key again, within a second, on a worker; the result is
 * logged, and a failed reload keeps the old certificate. */
void stor_http_reload_tls(void);

/* ---- services for the application ---- */

/* Appends a response header line. 0 or -ENOMEM. */
CM_MUST_CHECK int stor_resp_hdr(struct stor_resp *rs, const char *name,
                                const char *fmt, ...) CM_PRINTF(3, 4);
/* Returns the value of request header @name (NUL-free, not terminated) and
 * its length in *n, or NULL. */
const char *stor_req_hdr(const struct stor_req *r, const char *name, size_t *n);
/* Submits @run on a worker (the read pool when r->read_jobs), then @done on
 * the loop. */
void stor_req_submit(struct stor_req *r, void (*run)(struct stor_req *),
                     void (*done)(struct stor_req *));
/* What the application's loop_init gave this request's loop. */
void *stor_req_loop_data(const struct stor_req *r);
/* The server of @r (NULL for a request made up by a test). */
struct stor_http_server *stor_req_server(const struct stor_req *r);

/* The client's address of @r (as accept gave it); 0 or -ENOTCONN for a
 * request made up by a test. Loop thread or a job of @r. */
CM_MUST_CHECK int stor_req_peer(const struct stor_req *r,
                                struct sockaddr_storage *ss);

/* One read for stor_req_read_files(): a whole file by @path, or (@path
 * NULL) @hdr_len bytes into @hdr then @len into @buf at offset @off of the
 * open file @fd (the caller keeps it open until @done). */
struct stor_http_file_read {
    const char *path; /* borrowed; NULL: read from @fd */
    void *buf;        /* borrowed */
    size_t len;       /* read at most this many bytes from offset 0 */
    ssize_t res;      /* set by the transport: bytes read or -errno */
    int fd;           /* without @path */
    uint64_t off;
    void *hdr; /* borrowed; may be NULL (hdr_len 0) */
    size_t hdr_len;
    /* splice (with @fd): @hdr_len bytes are read into @hdr (their count in
     * @hres), and the @len bytes after them are spliced into the pipe
     * @pipe (their count in @res) instead of read into @buf; the splices
     * of one call run in order, each after the one before succeeded */
    bool splice;
    int pipe;
    ssize_t hres;
    struct iovec iov[2]; /* the transport's */
};
/* Performs @n whole-file reads (open, read at offset 0, close) or reads at
 * an offset of an open file (one readv each, no open or close) on the loop
 * thread's io_uring without blocking it (the kernel does them inline when
 * the data is cached; an open through directories not cached runs on its
 * workers, and the file's read and close follow from the loop once it is
 * open, so a cold read waits without a thread); @done runs on the
 * loop once all finished, each rd[i].res set to the bytes read or the first
 * -errno. Borrows @rd until then; the request counts as busy (job_busy)
 * meanwhile. 0, or -EAGAIN when the ring cannot take them now (none, or
 * full, or broken before it took any): do the work on a worker instead; or
 * -EIO when the ring broke while submitting after the kernel took some of
 * them: the same, but @rd's buffers may still be written by the kernel, so
 * the caller must leak them, never free them. */
CM_MUST_CHECK int stor_req_read_files(struct stor_req *r,
                                      struct stor_http_file_read *rd, size_t n,
                                      void (*done)(struct stor_req *r));

/* Zero-copy responses on plain HTTP: in fds[i] the write ends of @r's
 * connection's two pipes, empty and able to hold bytes[i] (0: that pipe is
 * not needed, fds[i] -1), made or grown here and kept for the connection's
 * life, for stor_req_read_files() splices; then a response with resp.zc
 * sends what they hold. 0, -EOPNOTSUPP on TLS (the bytes must be
 * encrypted: the copy path), -ENOTCONN, or -errno (no pipe of that size:
 * F_SETPIPE_SZ's limits; stor_http_zc_pipe_max()). Loop thread. */
CM_MUST_CHECK int stor_req_zc_pipes(struct stor_req *r, const size_t bytes[2],
                                    int fds[2]);
/* The largest pipe an unprivileged process may make (pipe-max-size). */
size_t stor_http_zc_pipe_max(void);
/* As stor_req_zc_discard() when a splice into the pipes may still be in
 * flight (stor_req_read_files() answered -EIO): they are left open, never
 * used again (closing them could let the kernel splice into a reused fd). */
void stor_req_zc_abandon(struct stor_req *r);
/* The pipe's bytes are not to be sent (a failed check, an error answer):
 * it is dropped and a new one made next time. Loop thread, no splice of it
 * in flight. */
void stor_req_zc_discard(struct stor_req *r);

/* The response in r->resp is complete: send it. */
void stor_http_respond(struct stor_req *r);
/* The pre-body job ended: respond when it set a status, else read the
 * body now. */
void stor_http_pre_done(struct stor_req *r);

/* The server accepts requests and is not draining. */
bool stor_http_is_ready(const struct stor_http_server *s);
struct stor_http_stats {
    long conns;           /* open client connections */
    uint64_t conns_total; /* accepted since start */
    size_t workers_busy;  /* jobs running on either pool */
};
/* Fills @st (safe from any thread). */
void stor_http_stats(const struct stor_http_server *s,
                     struct stor_http_stats *st);

#endif /* STORAGED_HTTP_HTTP_H */

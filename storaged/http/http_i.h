/* storaged/http/http_i.h - internals shared by the HTTP server (http.c), the S3
 * front end (s3*.c), auth (auth.c) and metrics (metrics.c): the server, a
 * connection's current request and its response.
 *
 * Ownership: a connection belongs to one loop thread. While a job of its
 * request runs on a worker (req->job_busy), the worker may touch the
 * request and its response; the loop touches neither until the job comes
 * back, except the GET stream's other buffer (see struct stor_resp). */
#ifndef STORAGED_HTTP_HTTP_I_H
#define STORAGED_HTTP_HTTP_I_H
#include "common/buf.h"
#include "common/hash.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "storaged/http/loop.h"
#include "storaged/http/parse.h"
#include "storaged/s3/err.h"
#include "storaged/store/obj_nb.h"
#include "storaged/store/object.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct stor_pool;
struct stor_metrics;
struct stor_conn;

#define STOR_PIECE_SIZE (1024 * 1024) /* PUT body piece fed to the store */
#define STOR_XML_BODY_MAX                                                      \
    (2 * 1024 * 1024)     /* buffered (XML) request bodies                     \
                           */
#define STOR_MAX_QUERY 64 /* query parameters */

/* The S3 operations (for routing, metrics and logs). */
enum stor_s3_op {
    S3_OP_UNKNOWN = 0,
    S3_OP_HEALTH,
    S3_OP_METRICS,
    S3_OP_LIST_BUCKETS,
    S3_OP_CREATE_BUCKET,
    S3_OP_HEAD_BUCKET,
    S3_OP_DELETE_BUCKET,
    S3_OP_GET_BUCKET_LOCATION,
    S3_OP_LIST_OBJECTS,
    S3_OP_LIST_OBJECTS_V2,
    S3_OP_LIST_UPLOADS,
    S3_OP_DELETE_OBJECTS,
    S3_OP_PUT_OBJECT,
    S3_OP_COPY_OBJECT,
    S3_OP_GET_OBJECT,
    S3_OP_HEAD_OBJECT,
    S3_OP_DELETE_OBJECT,
    S3_OP_CREATE_MPU,
    S3_OP_UPLOAD_PART,
    S3_OP_UPLOAD_PART_COPY,
    S3_OP_COMPLETE_MPU,
    S3_OP_ABORT_MPU,
    S3_OP_LIST_PARTS,
    S3_OP_BUCKET_SUBRESOURCE, /* versioning, policy, ...: minimal answers */
    S3_OP_OBJECT_SUBRESOURCE, /* GET ?acl / ?tagging of an object */
    S3_OP_COUNT
};

/* How the request body is consumed. */
enum stor_body_mode {
    STOR_BODY_NONE = 0, /* discarded (GET with a body: ignored) */
    STOR_BODY_BUFFER,   /* whole body into req->body (<= STOR_XML_BODY_MAX) */
    STOR_BODY_STREAM,   /* pieces into the store (PutObject, UploadPart) */
};

/* Where the payload's integrity comes from (x-amz-content-sha256). */
enum stor_payload {
    STOR_PAYLOAD_UNSIGNED = 0,      /* UNSIGNED-PAYLOAD or presigned */
    STOR_PAYLOAD_SHA256,            /* hex SHA-256 of the body, verified */
    STOR_PAYLOAD_STREAMING,         /* aws-chunked, signed chunks */
    STOR_PAYLOAD_STREAMING_TRAILER, /* signed chunks + signed trailer */
    STOR_PAYLOAD_UNSIGNED_TRAILER,  /* aws-chunked, unsigned + trailer */
};

enum stor_cksum {
    STOR_CKSUM_NONE = 0,
    STOR_CKSUM_CRC32,
    STOR_CKSUM_CRC32C,
    STOR_CKSUM_CRC64NVME,
    STOR_CKSUM_SHA1,
    STOR_CKSUM_SHA256,
};

/* The response being built (on a worker) and sent (on the loop). */
struct stor_resp {
    int status;         /* 0 = not decided yet */
    struct cm_buf hdrs; /* extra header lines "Name: value\r\n" */
    struct cm_buf body; /* a small body, sent after the head */
    bool no_body;       /* HEAD or 304: Content-Length but no bytes */
    bool has_length;    /* content_length below is the body's length */
    uint64_t content_length;
    bool close;           /* Connection: close after this response */
    enum stor_s3_err err; /* for logs and metrics; S3E_NONE on success */

    /* GET streaming: bytes [rd_off, rd_end) of @get still to be read.
     * Two buffers: the loop sends buf[cur] while a worker fills the other
     * one (pending_fill). */
    struct stor_get *get; /* owned; closed on a worker when the request ends */
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
};

/* One request (the connection's current one; pipelined requests wait in
 * the input buffer until this one is answered). */
struct stor_req {
    struct stor_conn *conn;
    uint64_t id;
    struct timespec start;
    char *headbuf; /* owned copy of the head; every string below borrows it */
    size_t headlen;
    struct stor_http_head head;
    struct stor_http_hdr hdrs[STOR_HTTP_MAX_HEADERS];
    bool is_head, is_get, is_put, is_post, is_delete;

    /* target, decoded */
    char *path; /* owned, decoded path (starts with '/') */
    size_t path_len;
    char bucket[64];
    char *key; /* owned NUL-terminated decoded key (may be "") */
    size_t key_len;
    bool has_key;
    struct cm_kv query[STOR_MAX_QUERY]; /* decoded; point into qbuf */
    size_t nquery;
    char *qbuf; /* owned */

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
    uint64_t body_bytes; /* decoded payload bytes */

    /* S3 */
    enum stor_s3_op op;
    enum stor_body_mode body_mode;
    enum stor_payload payload;
    char payload_sha256[65];
    bool authed;
    bool presigned;
    /* signing state for aws-chunked */
    uint8_t sign_key[32];
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1];
    char scope[80];
    char prev_sig[65];
    struct stor_chunk_dec *aws; /* owned; aws-chunked decoder */
    bool aws_chunked;
    uint64_t decoded_len; /* x-amz-decoded-content-length, or UINT64_MAX */
    struct cm_digest *sha_chunk; /* per-chunk SHA-256 (signed chunks) */
    struct cm_digest *sha_body;  /* whole-body SHA-256 (hex payload) */
    struct cm_digest *ck_digest; /* SHA1/SHA256 checksums */
    enum stor_cksum ck_kind;
    uint64_t ck_crc;    /* running CRC */
    char ck_expect[96]; /* header value, base64 */
    bool ck_from_trailer;
    bool ck_seen; /* trailer carried the value */
    char trailer_sig[65];
    struct cm_buf trailer_raw; /* signed trailer bytes as canonicalised */

    /* body sinks */
    struct cm_buf body; /* STOR_BODY_BUFFER */
    char *piece[2];     /* STOR_BODY_STREAM: fill one, write the other */
    size_t piece_len[2];
    int pfill;            /* index being filled */
    bool piece_busy;      /* a write job holds piece[!pfill] */
    struct stor_put *put; /* owned */
    int put_err;          /* first error of a write job */
    bool pre_done;        /* pre-body job finished */
    bool end_pending;     /* body ended while a piece write was busy */
    char ck_value[96];    /* verified checksum (base64), stored */
    uint8_t content_md5[16];
    bool has_md5;

    struct stor_get_nb *get_nb; /* owned; a GET read on the loop's ring */
    uint8_t cache_id[16];       /* that object's id and version (bcache) */
    uint64_t cache_version;

    /* jobs */
    struct stor_job job;
    bool job_busy;
    void (*job_run)(struct stor_req *r);  /* what job.run calls */
    void (*job_done)(struct stor_req *r); /* what job.done calls */

    struct stor_resp resp;
    bool resp_started; /* serialized into the connection's output */
    bool failed;       /* body error: respond once jobs are back */
    bool finished_metrics;
    bool fg_entered; /* stor_store_fg_enter() was called */
    uint64_t sent_bytes;
};

/* Server-wide state; immutable after start except the atomics. */
struct stor_server {
    struct stor_store *store;
    struct stor_pool *pool;  /* writes: PUT, commit, delete, copy (fsync) */
    struct stor_pool *rpool; /* reads: GET/HEAD/LIST, GET stream fills */
    struct stor_metrics *metrics;
    const char *root_user;
    const char *root_secret;
    const char *region;
    int idle_timeout_s;   /* keep-alive idle */
    int header_timeout_s; /* slow client: head must arrive within */
    int body_timeout_s;   /* no body progress for this long */
    atomic_bool draining; /* SIGTERM: finish in-flight, accept nothing */
    atomic_uint_fast64_t next_req_id;
    atomic_long nconns;
    atomic_bool ready;
};

extern struct stor_server *stor_srv; /* the one server of this process */

/* ---- http.c services for the S3 layer ---- */
/* Appends a response header line. 0 or -ENOMEM. */
CM_MUST_CHECK int stor_resp_hdr(struct stor_resp *rs, const char *name,
                                const char *fmt, ...) CM_PRINTF(3, 4);
/* Replaces the response with S3 error @e (status, XML body unless HEAD). */
void stor_resp_error(struct stor_req *r, enum stor_s3_err e);
/* Returns the value of request header @name (NUL-free, not terminated)
 * and its length in *n, or NULL. */
const char *stor_req_hdr(const struct stor_req *r, const char *name, size_t *n);
/* Returns the decoded query parameter @name (NUL-terminated) or NULL;
 * *present is set when the name appears even without a value. */
const char *stor_req_query(const struct stor_req *r, const char *name);
bool stor_req_has_query(const struct stor_req *r, const char *name);
/* Submits r->job_run on a worker, then r->job_done on the loop. */
void stor_req_submit(struct stor_req *r, void (*run)(struct stor_req *),
                     void (*done)(struct stor_req *));

/* This loop thread's cache of small object bodies (storaged/s3/bcache.h), or
 * NULL when caching is off. */
struct stor_bcache *stor_req_bcache(const struct stor_req *r);
/* Performs @n whole-file reads (open, read at offset 0, close) on the
 * loop thread's io_uring without blocking it (the kernel does them inline
 * when the data is cached and on its own workers otherwise); @done runs
 * on the loop once all finished, each rd[i].res set to the bytes read or
 * the first -errno. Borrows @rd until then; the request counts as busy
 * (job_busy) meanwhile. 0, or -EAGAIN when the ring cannot take them now
 * (none, or full, or broken before it took any): do the work on a worker
 * instead; or -EIO when the ring broke while submitting after the kernel
 * took some of them: the same, but @rd's buffers may still be written by
 * the kernel, so the caller must leak them, never free them. */
CM_MUST_CHECK int stor_req_read_files(struct stor_req *r,
                                      struct stor_nb_read *rd, size_t n,
                                      void (*done)(struct stor_req *r));

/* Decodes r->head.target (origin- or absolute-form) into r->path,
 * r->bucket, r->key and r->query (allocations owned by @r). S3E_NONE or
 * the error to answer with. Exposed for the fuzz target. */
enum stor_s3_err stor_http_req_decode_target(struct stor_req *r);

/* ---- s3.c hooks called by http.c on the loop thread ---- */
/* The head is parsed and framing known: authenticate and route. Either sets
 * r->resp.status (an error or a complete answer), or sets r->op and
 * r->body_mode and, for STREAM bodies, may submit the pre-body job itself
 * (returns 1 then: http.c waits for stor_http_pre_done()). 0 / 1. */
int stor_s3_on_head(struct stor_req *r);
/* Decoded transport bytes of the body (after Transfer-Encoding). 0, or a
 * negative errno: the request fails with r->resp set by the hook. */
int stor_s3_on_body(struct stor_req *r, const char *p, size_t n);
/* Whether the S3 layer can take more body bytes now (stream pieces). */
bool stor_s3_body_paused(const struct stor_req *r);
/* The whole body has arrived: run the operation (submits a job; the
 * response is ready when it is done). */
void stor_s3_on_body_end(struct stor_req *r);
/* Frees S3 state of a finished request (on the loop; may submit nothing). */
void stor_s3_req_fini(struct stor_req *r);

/* ---- http.c entry points for the S3 layer ---- */
/* The response in r->resp is complete: send it. */
void stor_http_respond(struct stor_req *r);
/* The pre-body job ended without a response: read the body now. */
void stor_http_pre_done(struct stor_req *r);
/* A piece write finished: resume reading the body if it was paused. */
void stor_http_body_resume(struct stor_req *r);

#endif /* STORAGED_HTTP_HTTP_I_H */

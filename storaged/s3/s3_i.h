/* storaged/s3/s3_i.h - declarations shared by the S3 application's files:
 * s3.c (the transport's hooks, routing, body pipeline), req.c (the target,
 * the query, error responses), ops.c (operations, run on workers), auth.c
 * (SigV4), xml.c (request XML), metrics.c.
 *
 * Ownership: a struct stor_s3_req is the transport's request (first member,
 * allocated and zeroed by the transport) extended with the S3 state; it
 * lives exactly as long as the transport's request, and the same rules
 * apply: while a job of it runs on a worker, only that worker touches it. */
#ifndef STORAGED_S3_S3_I_H
#define STORAGED_S3_S3_I_H
#include "common/buf.h"
#include "common/hash.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "storaged/http/http.h"
#include "storaged/s3/cksum.h"
#include "storaged/s3/err.h"
#include "storaged/s3/s3.h"
#include "storaged/store/obj_nb.h"
#include "storaged/store/object.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stor_metrics;
struct stor_iam;
struct stor_iam_snap;
struct stor_iam_user;
struct stor_ver;
struct stor_sse;
struct stor_sse_keys;
struct stor_lc;
struct stor_s3_post;

#define S3_XMLNS    "http://s3.amazonaws.com/doc/2006-03-01/"
#define S3_XML_DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
/* The canonical id of the root account, which owns every bucket no other
 * account created (Owner, ACLs, x-amz-expected-bucket-owner; accounts:
 * iam.h stor_iam_owner). */
#define S3_OWNER_ID                                                            \
    "02d6176db174dc93cb1b899f7c6078f08654445fe8cf1b6ce98d8855f66bdbf4"
#define S3_MIN_PART (5 * 1024 * 1024)
/* The largest PutObject / UploadPart body and CopyObject / UploadPartCopy
 * source (range) S3 accepts: 5 GiB. */
#define S3_MAX_PUT ((uint64_t)5 * 1024 * 1024 * 1024)

#define STOR_PIECE_SIZE (1024 * 1024) /* PUT body piece fed to the store */
#define STOR_XML_BODY_MAX                                                      \
    (2 * 1024 * 1024)      /* buffered (XML) request bodies                    \
                            */
#define STOR_MAX_QUERY  64 /* query parameters */
#define S3_NB_READS_MAX 32 /* meta reads of one loop GET (k data shards) */

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
    S3_OP_LIST_VERSIONS, /* ListObjectVersions: one "null" version a key */
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
    S3_OP_BUCKET_SUBRESOURCE,   /* versioning, policy, ...: minimal answers */
    S3_OP_OBJECT_SUBRESOURCE,   /* GET ?acl / ?tagging of an object */
    S3_OP_PREFLIGHT,            /* OPTIONS: a CORS preflight */
    S3_OP_ADMIN,                /* /_storaged/admin/...: users (iam_api.c) */
    S3_OP_BUCKET_POLICY,        /* Get/Put/DeleteBucketPolicy */
    S3_OP_BUCKET_POLICY_STATUS, /* GetBucketPolicyStatus */
    S3_OP_BUCKET_ACL,           /* Get/PutBucketAcl */
    S3_OP_OBJECT_ACL,           /* Get/PutObjectAcl */
    S3_OP_BUCKET_PAB,           /* Get/Put/DeletePublicAccessBlock */
    S3_OP_BUCKET_OWNERSHIP,     /* Get/Put/DeleteBucketOwnershipControls */
    S3_OP_BUCKET_VERSIONING,    /* Get/PutBucketVersioning (versioning.c) */
    S3_OP_BUCKET_LIFECYCLE,  /* Get/Put/DeleteBucketLifecycle (lifecycle.c) */
    S3_OP_BUCKET_ENCRYPTION, /* Get/Put/DeleteBucketEncryption (sse.c) */
    S3_OP_TAGGING, /* Get/Put/Delete Object- and BucketTagging (tagging.c) */
    S3_OP_BUCKET_CORS,       /* Get/Put/DeleteBucketCors (cors.c) */
    S3_OP_OBJECT_ATTRIBUTES, /* GetObjectAttributes (attrs.c) */
    S3_OP_POST_OBJECT,       /* POST Object: a form upload (post.c) */
    S3_OP_COUNT
};

/* How the request body is consumed. */
enum stor_body_mode {
    STOR_BODY_NONE = 0, /* discarded (GET with a body: ignored) */
    STOR_BODY_BUFFER,   /* whole body into r->body (<= STOR_XML_BODY_MAX) */
    STOR_BODY_STREAM,   /* pieces into the store (PutObject, UploadPart) */
    STOR_BODY_POST,     /* a form (post.c); its file as STOR_BODY_STREAM */
};

/* Where the payload's integrity comes from (x-amz-content-sha256). */
enum stor_payload {
    STOR_PAYLOAD_UNSIGNED = 0,      /* UNSIGNED-PAYLOAD or presigned */
    STOR_PAYLOAD_SHA256,            /* hex SHA-256 of the body, verified */
    STOR_PAYLOAD_STREAMING,         /* aws-chunked, signed chunks */
    STOR_PAYLOAD_STREAMING_TRAILER, /* signed chunks + signed trailer */
    STOR_PAYLOAD_UNSIGNED_TRAILER,  /* aws-chunked, unsigned + trailer */
};

/* The application: server-wide S3 state, immutable after start. */
struct stor_s3 {
    struct stor_store *store;     /* borrowed */
    struct stor_metrics *metrics; /* owned */
    struct stor_iam *iam;         /* owned; users and policies (iam.h) */
    struct stor_ver *ver;         /* owned; versioning state (versioning.h) */
    struct stor_lc *lc;           /* owned; lifecycle scanner (lifecycle.h) */
    const char *root_user;        /* borrowed */
    const char *root_secret;      /* borrowed */
    const char *region;
    size_t cache_bytes; /* --cache-mem, split over the loops */
    bool zero_copy;     /* not --no-zero-copy (FORMAT.md "Zero-copy GETs") */
    struct stor_zcache *zcache; /* owned; --zc-cache-mem (zcache.h), or NULL */
    const char *domain;         /* --domain (lowercase), or NULL */
    size_t domain_len;
    struct stor_sse_keys *sse_keys; /* owned; SSE-S3 master key (sse.c) */
    bool tls;                       /* HTTPS is served */
    bool no_sigv2; /* --no-sigv2: SigV2 requests refused (auth.c) */
};

/* One S3 request: the transport's, then the S3 state. */
struct stor_s3_req {
    struct stor_req http; /* first: the transport allocates the whole */
    struct stor_s3 *s3;   /* the application (== http.app) */

    /* target, decoded (stor_s3_decode_target) */
    /* owned: the decoded path (starts with '/'), then in the same block
     * the query's strings */
    char *path;
    size_t path_len;
    char bucket[64];
    char *key; /* owned NUL-terminated decoded key (may be "") */
    size_t key_len;
    bool has_key;
    bool vhost; /* the bucket came from Host (BUCKET.DOMAIN) */
    /* CompleteMultipartUpload's If-None-Match / If-Match, for the commit
     * (versioning.c passes it to stor_mpu_complete_cond); NULL: none */
    const struct stor_write_cond *wcond;
    size_t nquery; /* query[0..nquery) below */
    /* bit (c & 63) set for the first byte c of each query name, so that
     * stor_s3_query answers "absent" for most names without a scan (the
     * router asks for a dozen sub-resources on every request) */
    uint64_t qfirst;

    enum stor_s3_op op;
    enum stor_body_mode body_mode;
    enum stor_s3_err err; /* the last error response set */
    uint64_t body_bytes;  /* decoded payload bytes */

    /* SigV4 (auth.c); signing state kept for aws-chunked */
    enum stor_payload payload;
    char payload_sha256[65];
    bool authed;
    bool presigned;
    uint8_t sign_key[32];
    char amz_date[CM_TIME_ISO_BASIC_LEN + 1];
    char scope[80];
    char prev_sig[65];
    char trailer_sig[65];
    struct cm_buf trailer_raw; /* signed trailer bytes as canonicalised */

    /* access control (iam.h): who signed; root when authed and no user */
    bool anonymous;                       /* no credentials at all */
    struct stor_iam_snap *iam_snap;       /* owned reference, or NULL */
    const struct stor_iam_user *iam_user; /* in iam_snap */
    int8_t acl_hdr;            /* x-amz-acl: 0 none, else enum iam_acl + 1 */
    struct json_t *acl_grants; /* x-amz-grant-*: a list (acl.h); owned */
    /* the object this write makes is the bucket owner's, not its writer's
     * (BucketOwnerEnforced, or BucketOwnerPreferred with the canned
     * bucket-owner-full-control: ownership.c) */
    bool owner_takes;
    /* s3:ExistingObjectTag (authz.c): the loop's decision asked for the
     * stored object's tags; a worker loaded them into extag (owned, the
     * stored "k=v&..." form; NULL: the object has none) */
    bool extag_wanted, extag_loaded;
    char *extag;

    /* aws-chunked and payload hashes */
    struct stor_chunk_dec *aws; /* owned; aws-chunked decoder */
    bool aws_chunked;
    uint64_t decoded_len; /* x-amz-decoded-content-length, or UINT64_MAX */
    struct cm_digest *sha_chunk; /* owned; per-chunk SHA-256 (signed) */
    struct cm_digest *sha_body;  /* owned; whole-body SHA-256 (hex payload) */
    uint8_t content_md5[16];
    bool has_md5;

    /* x-amz-checksum-* (cksum.c) */
    enum stor_cksum ck_kind;
    struct cm_digest *ck_digest; /* owned; SHA1/SHA256 checksums */
    uint64_t ck_crc;             /* running CRC */
    char ck_expect[96];          /* header value, base64 */
    bool ck_from_trailer;
    bool ck_seen;      /* trailer carried the value */
    char ck_value[96]; /* verified checksum (base64), stored */

    /* body sinks */
    struct cm_buf body; /* STOR_BODY_BUFFER */
    char *piece[2];     /* STOR_BODY_STREAM: fill one, write the other */
    size_t piece_len[2];
    int pfill;            /* index being filled */
    bool piece_busy;      /* a write job holds piece[!pfill] */
    struct stor_put *put; /* owned; aborted on a worker unless committed */
    int put_err;          /* first error of a write job */
    bool end_pending;     /* body ended while a piece write was busy */
    bool begin_late; /* a small PUT's stor_put_begin runs with its commit */
    struct stor_s3_post *post; /* owned; POST Object's form (post.c) */

    /* GET: the reader the response streams from (stream_fill) */
    struct stor_get *get; /* owned; closed on a worker when it ends */
    /* encryption of the object read or written (sse.h), or NULL */
    struct stor_sse *sse; /* owned; freed in req_fini */
    /* GET of a small object on the loop (obj_nb.h) */
    struct stor_get_nb *get_nb;  /* owned; a GET read on the loop's ring */
    struct stor_nb_read *nb_src; /* where their results go back */
    struct stor_get_zc *zc_pins; /* owned: a zero-copy GET's records */
    size_t nb_n;                 /* nb_rd[0..nb_n) below */
    uint8_t cache_id[16];        /* that object's id and version (bcache) */
    uint64_t cache_version;
    bool zc_opened;  /* zero-copy bytes from the body cache: an SSE-S3
                        object's plaintext (s3.c get_zcached) */
    bool fg_entered; /* stor_store_fg_enter() was called */

    /* jobs (s3_submit): what the transport's job runs and then calls */
    void (*run)(struct stor_s3_req *r);
    void (*done)(struct stor_s3_req *r);

    /* From here on not zeroed for a new request (stor_s3_app.req_zero):
     * arrays whose count above says what is set. */
    struct cm_kv query[STOR_MAX_QUERY]; /* decoded; point into path's block */
    struct stor_http_file_read nb_rd[S3_NB_READS_MAX]; /* the loop GET's */
};

/* The S3 request of transport request @h. */
static inline struct stor_s3_req *stor_s3_req(struct stor_req *h)
{
    return (struct stor_s3_req *)(void *)h;
}

/* ---- requests (req.c) ---- */
/* Decodes r->http.head.target (origin- or absolute-form) into r->path,
 * r->bucket, r->key and r->query (allocations owned by @r). S3E_NONE or the
 * error to answer with. */
enum stor_s3_err stor_s3_decode_target(struct stor_s3_req *r);
/* Percent-decodes @n bytes of a query component into @dst ('+' is a
 * space, as in form encoding) and NUL-terminates it. Returns the decoded
 * length or -1 on a malformed escape. @dst has room for n + 1 bytes. */
long stor_s3_pct_decode(char *dst, const char *src, size_t n);
/* Returns the decoded query parameter @name (NUL-terminated) or NULL. */
const char *stor_s3_query(const struct stor_s3_req *r, const char *name);
bool stor_s3_has_query(const struct stor_s3_req *r, const char *name);
/* Request header @name (see stor_req_hdr). */
static inline const char *stor_s3_hdr(const struct stor_s3_req *r,
                                      const char *name, size_t *n)
{
    return stor_req_hdr(&r->http, name, n);
}
/* Replaces the response with S3 error @e (status, XML body unless HEAD). */
void stor_s3_error(struct stor_s3_req *r, enum stor_s3_err e);
/* The request-header audit (audit.c), run once the operation is known and
 * before any body byte is read: a header that would change what the
 * request means and that storaged does not implement (server-side
 * encryption, a storage class other than STANDARD, object lock, append) is
 * refused with the S3 error for it rather than ignored; a wrong
 * x-amz-expected-bucket-owner is refused as S3 does. S3E_NONE when the
 * request may go on. storaged/README.md lists every header. */
enum stor_s3_err stor_s3_hdr_audit(const struct stor_s3_req *r);
/* The same with message @msg (escaped; NULL: the table's) in place of the
 * table's: MalformedPolicy's reason. */
void stor_s3_error_msg(struct stor_s3_req *r, enum stor_s3_err e,
                       const char *msg);
/* Frees what stor_s3_decode_target() allocated. */
void stor_s3_target_fini(struct stor_s3_req *r);
/* Submits @run on a worker, then @done on the loop (stor_req_submit). */
void stor_s3_submit(struct stor_s3_req *r, void (*run)(struct stor_s3_req *),
                    void (*done)(struct stor_s3_req *));

/* ---- routing (s3.c) ---- */
/* Sets r->op and r->body_mode from the method, target and headers;
 * S3E_NONE or the routing error. */
enum stor_s3_err stor_s3_route(struct stor_s3_req *r);

/* ---- the body pipeline (s3.c), for POST Object's file (post.c) ---- */
/* Loop: payload bytes into PUT's pieces (as a PutObject body's). 0, or a
 * negative errno with the error response set. */
int stor_s3_body_sink(struct stor_s3_req *r, const char *p, size_t n);
/* Loop, after a job that held r->piece_busy: writes the next full piece,
 * or finishes the request when the body has ended meanwhile. */
void stor_s3_body_resume(struct stor_s3_req *r);
/* Loop: checksum verification from the x-amz-checksum-* headers (as
 * PutObject's). S3E_NONE or the error. */
enum stor_s3_err stor_s3_cksum_setup(struct stor_s3_req *r);

/* ---- operations (ops.c); each runs on a worker and fills the response ---- */
void stor_s3_op_run(struct stor_s3_req *r);        /* dispatch on r->op */
void stor_s3_put_begin_run(struct stor_s3_req *r); /* PutObject/UploadPart */
void stor_s3_put_commit_run(struct stor_s3_req *r);
/* The rest of GetObject/HeadObject once the object is open: conditionals,
 * range, headers, body (whole, or the stream for big ones). Takes
 * ownership of @g (NULL for HEAD) and of @info's contents (left empty). */
void stor_s3_get_object_reply(struct stor_s3_req *r, struct stor_obj_info *info,
                              struct stor_get *g);
/* Builds the stored headers of a new object from the request (content-*,
 * cache-control, expires, x-amz-meta-*, a verified checksum). *out is
 * malloc'd (free with stor_s3_hdrs_free). 0 or -ENOMEM. */
int stor_s3_req_obj_hdrs(const struct stor_s3_req *r, struct stor_hdr **out,
                         size_t *n);
void stor_s3_hdrs_free(struct stor_hdr *h, size_t n);
/* Decodes x-amz-copy-source into @bucket (64) and a malloc'd key. */
enum stor_s3_err stor_s3_copy_source(const struct stor_s3_req *r, char *bucket,
                                     char **key, size_t *key_len);
/* true when @b is a valid bucket name (S3 naming rules). */
bool stor_s3_bucket_name_ok(const char *b);

/* ---- request XML (xml.c) ---- */
#define STOR_S3_VID_MAX 40 /* a <VersionId> we keep (ours are 16 chars) */
struct stor_s3_del_key {
    char *key; /* owned */
    size_t key_len;
    bool bad_version;              /* its <VersionId> was too long */
    char version[STOR_S3_VID_MAX]; /* its <VersionId>, "" when none */
    struct stor_del_cond cond;     /* its <ETag>, <LastModifiedTime>, <Size> */
    bool bad_cond;                 /* one of those was malformed */
};
/* <Delete><Quiet/><Object><Key/></Object>...</Delete>; 0 or -EBADMSG
 * (malformed or more than 1000 keys) or -ENOMEM. Free with
 * stor_s3_del_keys_free. */
int stor_s3_parse_delete(const char *xml, size_t len,
                         struct stor_s3_del_key **keys, size_t *n, bool *quiet);
void stor_s3_del_keys_free(struct stor_s3_del_key *k, size_t n);
/* An expat pass over a small request body (sse.c, tagging.c, cors.c keep
 * their own state in @ud): the element and text callbacks. */
struct stor_s3_xml_cbs {
    void (*start)(void *ud, const char *name, const char **attrs);
    void (*end)(void *ud, const char *name);
    void (*text)(void *ud, const char *s, int len);
};
/* 0, -EBADMSG (not well-formed XML) or -ENOMEM. */
int stor_s3_xml_parse(const char *xml, size_t len, void *ud,
                      const struct stor_s3_xml_cbs *cb);
/* A configuration body (ownership.c, pab.c, sse.c): stor_s3_xml_parse
 * of @xml with @cb over @ud, whose text buffer @text (a member of @ud)
 * lives for the parse only: initialised with limit @text_max before,
 * freed after. S3E_NONE, S3E_MALFORMED_XML (not well-formed, or @bad: the
 * callbacks' own verdict, read once the parse ended) or S3E_INTERNAL
 * (no memory). The caller then checks what the document must hold. */
enum stor_s3_err stor_s3_xml_parse_conf(const char *xml, size_t len, void *ud,
                                        const struct stor_s3_xml_cbs *cb,
                                        struct cm_buf *text, size_t text_max,
                                        const bool *bad);
/* An element name without its namespace prefix: "ns:Name" -> "Name". */
const char *stor_s3_xml_local(const char *name);
/* <CompleteMultipartUpload><Part><PartNumber/><ETag/></Part>...; ETags
 * are stored without quotes. *parts malloc'd (free()). 0 / -EBADMSG /
 * -ENOMEM. */
int stor_s3_parse_complete(const char *xml, size_t len,
                           struct stor_part **parts, size_t *n);
/* A CreateBucket body: <CreateBucketConfiguration><LocationConstraint/>;
 * its LocationConstraint (NUL-terminated, "" when absent or the body is
 * empty) into @loc (@cap bytes, longer is MalformedXML). S3E_NONE,
 * S3E_MALFORMED_XML, S3E_NOT_IMPLEMENTED (Location, Bucket: directory
 * buckets; Tags) or S3E_INTERNAL (no memory). */
enum stor_s3_err stor_s3_parse_create_bucket(const char *xml, size_t len,
                                             char *loc, size_t cap);

#endif /* STORAGED_S3_S3_I_H */

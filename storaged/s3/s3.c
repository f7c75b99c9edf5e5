/* storaged/s3/s3.c - the S3 application's loop-side half: the hooks the
 * transport calls (stor_s3_app), health and metrics endpoints,
 * authentication, routing of a request to its operation, the request-body
 * pipeline, and the GET of a small object on the loop.
 *
 * DESIGN: the body pipeline is a chain of push callbacks, so no layer
 * buffers more than it must: transport bytes (already de-chunked by
 * http/conn.c) -> aws-chunked decoder (when x-amz-content-sha256 is
 * STREAMING-*: chunk signatures chained from the request signature, trailers)
 * -> sink (SHA-256 of the payload when the client sent one, the
 * x-amz-checksum-* algorithm, then either a capped buffer for XML bodies or one
 * of two 1 MiB pieces handed to a worker for stor_put_write). While a piece is
 * being written the other fills; when both are busy body_paused() stops
 * the transport from reading the socket. All integrity checks finish before the
 * commit job runs, so a bad body never becomes visible. */
#include "storaged/s3/s3_i.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/log.h"
#include "storaged/s3/auth.h"
#include "storaged/s3/bcache.h"
#include "storaged/s3/cors.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/lifecycle.h"
#include "storaged/s3/metrics.h"
#include "storaged/s3/post.h"
#include "storaged/s3/sse.h"
#include "storaged/s3/versioning.h"
#include "storaged/s3/zcache.h"

#define PIECE_CAP (STOR_PIECE_SIZE + 1024 * 1024)

/* ---- health and metrics (no auth) ---- */

/* Worker: renders /metrics (reads store and drive figures). */
static void metrics_run(struct stor_s3_req *r)
{
    struct stor_http_server *srv = stor_req_server(&r->http);
    struct stor_http_stats st = {0};

    if (srv)
        stor_http_stats(srv, &st);
    if (stor_metrics_render(r->s3->metrics, r->s3->store, &st,
                            &r->http.resp.body) < 0 ||
        stor_lc_metrics(r->s3->lc, &r->http.resp.body) < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = 200;
    if (stor_resp_hdr(&r->http.resp, "Content-Type",
                      "text/plain; version=0.0.4") < 0)
        stor_s3_error(r, S3E_INTERNAL);
}

/* Loop: generic job completion - the response is ready, send it. */
static void respond_done(struct stor_s3_req *r)
{
    stor_http_respond(&r->http);
}

/* The store's index is loaded (or rebuilt) and so are the users and
 * policies: S3 requests may be served. A front end without a store (unit
 * tests) has nothing to wait for. */
static bool s3_ready(struct stor_s3 *s3)
{
    return s3->store == NULL ||
           (stor_store_ready(s3->store) && stor_iam_ready(s3->iam));
}

/* Answers /health/live, /health/ready and /metrics; true when it did. */
static bool special_path(struct stor_s3_req *r)
{
    bool ready;

    if (!(r->http.is_get || r->http.is_head) || r->nquery > 0)
        return false;
    if (strcmp(r->path, "/health/live") == 0) {
        r->op = S3_OP_HEALTH;
        r->http.resp.status = 200;
        return true;
    }
    if (strcmp(r->path, "/health/ready") == 0) {
        struct stor_http_server *srv = stor_req_server(&r->http);

        r->op = S3_OP_HEALTH;
        ready = srv && stor_http_is_ready(srv) && s3_ready(r->s3);
        r->http.resp.status = ready ? 200 : 503;
        return true;
    }
    if (strcmp(r->path, "/metrics") == 0) {
        r->op = S3_OP_METRICS;
        r->http.read_jobs = true;
        stor_s3_submit(r, metrics_run, respond_done);
        return true;
    }
    return false;
}

/* ---- routing ---- */

/* Bucket subresources we answer minimally or refuse. */
static const char *const bucket_subres[] = {
    "versioning",        "acl",          "policy",
    "lifecycle",         "cors",         "tagging",
    "encryption",        "object-lock",  "replication",
    "website",           "logging",      "notification",
    "requestPayment",    "accelerate",   "ownershipControls",
    "publicAccessBlock", "policyStatus", "intelligent-tiering",
    "inventory",         "metrics",      "analytics",
    "versions",
};
static const char *const object_subres[] = {
    "acl",     "tagging", "retention", "legal-hold",
    "torrent", "restore", "select",    "attributes",
};

/* true when a query parameter is one of @names. DESIGN: one pass over the
 * query, skipping presigned auth parameters (X-Amz-*, never a
 * subresource), instead of a lookup per name. */
static bool has_any(const struct stor_s3_req *r, const char *const *names,
                    size_t n)
{
    size_t i, j;

    for (i = 0; i < r->nquery; i++) {
        const char *q = r->query[i].name;

        if (strncmp(q, "X-Amz-", 6) == 0)
            continue;
        for (j = 0; j < n; j++)
            if (strcmp(q, names[j]) == 0)
                return true;
    }
    return false;
}

/* ?policy, GET ?policyStatus and ?publicAccessBlock on a bucket, ?acl on
 * a bucket or an object: the operations
 * iam_api.c answers. true when @r is one (r->op and body mode set). */
static bool iam_route(struct stor_s3_req *r)
{
    bool get = r->http.is_get || r->http.is_head;

    if (!r->has_key && stor_s3_has_query(r, "policy") &&
        (get || r->http.is_put || r->http.is_delete))
        r->op = S3_OP_BUCKET_POLICY;
    else if (!r->has_key && stor_s3_has_query(r, "policyStatus") && get)
        r->op = S3_OP_BUCKET_POLICY_STATUS;
    else if (stor_s3_has_query(r, "acl") && (get || r->http.is_put))
        r->op = r->has_key ? S3_OP_OBJECT_ACL : S3_OP_BUCKET_ACL;
    else if (!r->has_key && stor_s3_has_query(r, "publicAccessBlock") &&
             (get || r->http.is_put || r->http.is_delete))
        r->op = S3_OP_BUCKET_PAB;
    else if (!r->has_key && stor_s3_has_query(r, "ownershipControls") &&
             (get || r->http.is_put || r->http.is_delete))
        r->op = S3_OP_BUCKET_OWNERSHIP;
    else
        return false;
    if (r->http.is_put)
        r->body_mode = STOR_BODY_BUFFER;
    return true;
}

/* ?versioning (GET, PUT) and ?lifecycle (GET, PUT, DELETE) on a bucket:
 * versioning.c and lifecycle.c. true when @r is one (op, body mode set). */
static bool bucket_config_route(struct stor_s3_req *r)
{
    bool get = r->http.is_get || r->http.is_head;

    if (stor_s3_has_query(r, "versioning") && (get || r->http.is_put))
        r->op = S3_OP_BUCKET_VERSIONING;
    else if (stor_s3_has_query(r, "lifecycle") &&
             (get || r->http.is_put || r->http.is_delete))
        r->op = S3_OP_BUCKET_LIFECYCLE;
    else
        return false;
    if (r->http.is_put)
        r->body_mode = STOR_BODY_BUFFER;
    return true;
}

/* ?tagging of a bucket or an object (tagging.c); true when routed. */
static bool tagging_route(struct stor_s3_req *r)
{
    if (!stor_s3_has_query(r, "tagging") ||
        !(r->http.is_get || r->http.is_head || r->http.is_put ||
          r->http.is_delete))
        return false;
    r->op = S3_OP_TAGGING;
    if (r->http.is_put)
        r->body_mode = STOR_BODY_BUFFER;
    return true;
}

/* See s3_i.h. */
enum stor_s3_err stor_s3_route(struct stor_s3_req *r)
{
    bool has_upload = stor_s3_has_query(r, "uploadId");
    bool has_copy = stor_s3_hdr(r, "x-amz-copy-source", &(size_t){0}) != NULL;

    r->body_mode = STOR_BODY_NONE;
    if (strcmp(r->bucket, "_storaged") == 0) { /* the admin API (iam_api.c) */
        r->op = S3_OP_ADMIN;
        if (r->http.is_put || r->http.is_post)
            r->body_mode = STOR_BODY_BUFFER;
        return S3E_NONE;
    }
    if (r->bucket[0] && !r->has_key && iam_route(r))
        return S3E_NONE;
    if (r->bucket[0] && tagging_route(r))
        return S3E_NONE;
    if (r->bucket[0] && !r->has_key &&
        (stor_s3_has_query(r, "encryption") || stor_s3_has_query(r, "cors")) &&
        (r->http.is_get || r->http.is_head || r->http.is_put ||
         r->http.is_delete)) {
        r->op = stor_s3_has_query(r, "cors") ? S3_OP_BUCKET_CORS
                                             : S3_OP_BUCKET_ENCRYPTION;
        if (r->http.is_put)
            r->body_mode = STOR_BODY_BUFFER;
        return S3E_NONE;
    }
    if (r->bucket[0] == 0) {
        if (r->http.is_get || r->http.is_head) {
            r->op = S3_OP_LIST_BUCKETS;
            return S3E_NONE;
        }
        return S3E_METHOD_NOT_ALLOWED;
    }
    if (!r->has_key && bucket_config_route(r))
        return S3E_NONE;
    if (!r->has_key) {
        if (r->http.is_put) {
            r->op = S3_OP_CREATE_BUCKET;
            r->body_mode = STOR_BODY_BUFFER;
            if (has_any(r, bucket_subres, CM_ARRAY_SIZE(bucket_subres))) {
                r->op = S3_OP_BUCKET_SUBRESOURCE;
                return S3E_NOT_IMPLEMENTED;
            }
        } else if (r->http.is_head) {
            r->op = S3_OP_HEAD_BUCKET;
        } else if (r->http.is_delete) {
            r->op = S3_OP_DELETE_BUCKET;
            if (has_any(r, bucket_subres, CM_ARRAY_SIZE(bucket_subres))) {
                r->op = S3_OP_BUCKET_SUBRESOURCE;
                return S3E_NOT_IMPLEMENTED;
            }
        } else if (r->http.is_get) {
            if (stor_s3_has_query(r, "location"))
                r->op = S3_OP_GET_BUCKET_LOCATION;
            else if (stor_s3_has_query(r, "uploads"))
                r->op = S3_OP_LIST_UPLOADS;
            else if (stor_s3_has_query(r, "versions"))
                r->op = S3_OP_LIST_VERSIONS;
            else if (has_any(r, bucket_subres, CM_ARRAY_SIZE(bucket_subres)))
                r->op = S3_OP_BUCKET_SUBRESOURCE;
            else if (stor_s3_query(r, "list-type") &&
                     strcmp(stor_s3_query(r, "list-type"), "2") == 0)
                r->op = S3_OP_LIST_OBJECTS_V2;
            else
                r->op = S3_OP_LIST_OBJECTS;
        } else if (r->http.is_post) {
            if (!stor_s3_has_query(r, "delete")) {
                if (r->nquery > 0)
                    return S3E_NOT_IMPLEMENTED;
                /* POST Object: a browser's form (post.c) */
                r->op = S3_OP_POST_OBJECT;
                r->body_mode = STOR_BODY_POST;
                return S3E_NONE;
            }
            r->op = S3_OP_DELETE_OBJECTS;
            r->body_mode = STOR_BODY_BUFFER;
        }
        return S3E_NONE;
    }
    {
        /* an id we cannot have made is refused before anything is read */
        const char *vid = stor_s3_query(r, "versionId");

        if (vid && !stor_ver_id_ok(vid))
            return S3E_INVALID_VERSION_ID;
    }
    if (iam_route(r))
        return S3E_NONE;
    if (stor_s3_has_query(r, "attributes") &&
        (r->http.is_get || r->http.is_head)) {
        r->op = S3_OP_OBJECT_ATTRIBUTES;
        return S3E_NONE;
    }
    if (has_any(r, object_subres, CM_ARRAY_SIZE(object_subres))) {
        /* read-only answers for the two that tools ask for (s3cmd info) */
        if ((r->http.is_get || r->http.is_head) &&
            (stor_s3_has_query(r, "acl") || stor_s3_has_query(r, "tagging"))) {
            r->op = S3_OP_OBJECT_SUBRESOURCE;
            return S3E_NONE;
        }
        return S3E_NOT_IMPLEMENTED;
    }
    if (r->http.is_put) {
        if (has_upload || stor_s3_has_query(r, "partNumber")) {
            if (!has_upload || !stor_s3_has_query(r, "partNumber"))
                return S3E_INVALID_ARGUMENT;
            r->op = has_copy ? S3_OP_UPLOAD_PART_COPY : S3_OP_UPLOAD_PART;
        } else {
            r->op = has_copy ? S3_OP_COPY_OBJECT : S3_OP_PUT_OBJECT;
        }
        r->body_mode = has_copy ? STOR_BODY_NONE : STOR_BODY_STREAM;
    } else if (r->http.is_get) {
        r->op = has_upload ? S3_OP_LIST_PARTS : S3_OP_GET_OBJECT;
    } else if (r->http.is_head) {
        r->op = S3_OP_HEAD_OBJECT;
    } else if (r->http.is_delete) {
        r->op = has_upload ? S3_OP_ABORT_MPU : S3_OP_DELETE_OBJECT;
    } else if (r->http.is_post) {
        if (stor_s3_has_query(r, "uploads")) {
            r->op = S3_OP_CREATE_MPU;
        } else if (has_upload) {
            r->op = S3_OP_COMPLETE_MPU;
            r->body_mode = STOR_BODY_BUFFER;
        } else {
            return S3E_NOT_IMPLEMENTED;
        }
    }
    return S3E_NONE;
}

/* ---- checksums ---- */

/* Sets up checksum verification from x-amz-checksum-* headers or an
 * announced x-amz-trailer. */
static enum stor_s3_err cksum_setup(struct stor_s3_req *r)
{
    const char *v;
    size_t n, i;

    /* CompleteMultipartUpload's x-amz-checksum-* is the object's (a
     * composite "...-N"), not its XML body's: ops.c checks it against
     * the parts' (stor_s3_cksum_expect) */
    for (i = 1; r->op != S3_OP_COMPLETE_MPU && i < STOR_CKSUM_COUNT; i++) {
        enum stor_cksum k = (enum stor_cksum)i;
        uint8_t raw[48];

        v = stor_s3_hdr(r, stor_s3_cksum_hdr(k), &n);
        if (v == NULL)
            continue;
        /* as S3: one algorithm per request, and a value of the right
         * size, refused before any body byte is read */
        if (r->ck_kind != STOR_CKSUM_NONE)
            return S3E_MULTIPLE_CHECKSUMS;
        if (n >= sizeof(r->ck_expect) || n > 64 ||
            cm_base64_decode(v, n, raw) != (long)stor_s3_cksum_size(k))
            return S3E_INVALID_CHECKSUM;
        r->ck_kind = k;
        memcpy(r->ck_expect, v, n);
        r->ck_expect[n] = 0;
    }
    v = stor_s3_hdr(r, "x-amz-trailer", &n);
    if (v && r->aws_chunked) {
        enum stor_cksum k = stor_s3_cksum_kind(v, n);

        if (k == STOR_CKSUM_NONE)
            return S3E_NOT_IMPLEMENTED;
        if (r->ck_kind != STOR_CKSUM_NONE)
            return S3E_MULTIPLE_CHECKSUMS; /* a header's would go unchecked */
        r->ck_kind = k;
        r->ck_from_trailer = true;
    }
    if (stor_s3_cksum_begin(r->ck_kind, &r->ck_digest) < 0)
        return S3E_INTERNAL;
    return S3E_NONE;
}

/* Answers S3E_INVALID_CHECKSUM naming the header, as AWS does ("Value
 * for x-amz-checksum-sha256 header is invalid."): the request's one
 * x-amz-checksum-* (two are S3E_MULTIPLE_CHECKSUMS, found first). */
static void invalid_checksum_error(struct stor_s3_req *r)
{
    char msg[96];
    size_t n, i;

    for (i = 1; i < STOR_CKSUM_COUNT; i++) {
        const char *h = stor_s3_cksum_hdr((enum stor_cksum)i);

        if (stor_s3_hdr(r, h, &n)) {
            snprintf(msg, sizeof(msg), "Value for %s header is invalid.", h);
            stor_s3_error_msg(r, S3E_INVALID_CHECKSUM, msg);
            return;
        }
    }
    stor_s3_error(r, S3E_INVALID_CHECKSUM);
}

/* ---- body sink ---- */

/* Hands the full fill piece to a worker (stor_put_write). */
static void piece_write_run(struct stor_s3_req *r)
{
    int idx = !r->pfill;

    if (r->put == NULL) {
        r->put_err = -EINVAL;
        return;
    }
    if (r->put_err == 0)
        r->put_err = stor_sse_put_write(r->sse, r->put, r->piece[idx],
                                        r->piece_len[idx]);
    r->piece_len[idx] = 0;
}

static void submit_commit(struct stor_s3_req *r);
static void maybe_flush(struct stor_s3_req *r);
static void post_finish(struct stor_s3_req *r);

/* Loop: a piece write came back; fail, flush the next full piece, or
 * commit once the body has ended. */
static void piece_write_done(struct stor_s3_req *r)
{
    r->piece_busy = false;
    if (r->http.failed) {
        stor_http_respond(&r->http);
        return;
    }
    if (r->put_err < 0) {
        stor_s3_error(r, stor_s3_err_from_errno(r->put_err));
        r->http.failed = true;
        stor_http_respond(&r->http);
        return;
    }
    stor_s3_body_resume(r);
}

/* See s3_i.h. */
void stor_s3_body_resume(struct stor_s3_req *r)
{
    maybe_flush(r);
    if (!r->piece_busy && r->end_pending) {
        r->end_pending = false;
        if (r->body_mode == STOR_BODY_POST)
            post_finish(r);
        else
            submit_commit(r);
    }
}

/* Starts a write of the fill piece when it is full and the other is free. */
static void maybe_flush(struct stor_s3_req *r)
{
    if (r->piece_busy || r->http.job_busy ||
        r->piece_len[r->pfill] < STOR_PIECE_SIZE)
        return;
    r->pfill = !r->pfill;
    r->piece_busy = true;
    stor_s3_submit(r, piece_write_run, piece_write_done);
}

/* Final decoded payload bytes. */
static int sink(struct stor_s3_req *r, const char *p, size_t n)
{
    size_t i;

    r->body_bytes += n;
    if (r->sha_body)
        cm_digest_update(r->sha_body, p, n);
    if (r->sha_chunk)
        cm_digest_update(r->sha_chunk, p, n);
    if (r->ck_kind != STOR_CKSUM_NONE)
        stor_s3_cksum_update(r->ck_kind, &r->ck_crc, r->ck_digest, p, n);
    switch (r->body_mode) {
    case STOR_BODY_BUFFER:
        if (cm_buf_append(&r->body, p, n) < 0) {
            stor_s3_error(r, S3E_MALFORMED_XML);
            return -E2BIG;
        }
        break;
    case STOR_BODY_STREAM:
    case STOR_BODY_POST: /* the form's file */
        for (i = 0; i < 2; i++)
            if (r->piece[i] == NULL) {
                r->piece[i] = malloc(PIECE_CAP);
                if (r->piece[i] == NULL) {
                    stor_s3_error(r, S3E_INTERNAL);
                    return -ENOMEM;
                }
            }
        if (r->piece_len[r->pfill] + n > PIECE_CAP) {
            stor_s3_error(r, S3E_INTERNAL);
            return -EOVERFLOW;
        }
        memcpy(r->piece[r->pfill] + r->piece_len[r->pfill], p, n);
        r->piece_len[r->pfill] += n;
        if (r->decoded_len != UINT64_MAX && r->body_bytes > r->decoded_len) {
            stor_s3_error(r, S3E_INCOMPLETE_BODY);
            return -EBADMSG;
        }
        if (r->body_bytes > S3_MAX_PUT) {
            stor_s3_error(r, S3E_ENTITY_TOO_LARGE);
            return -E2BIG;
        }
        maybe_flush(r);
        break;
    default:
        break;
    }
    return 0;
}

/* See s3_i.h. */
int stor_s3_body_sink(struct stor_s3_req *r, const char *p, size_t n)
{
    return sink(r, p, n);
}

/* See s3_i.h. */
enum stor_s3_err stor_s3_cksum_setup(struct stor_s3_req *r)
{
    return cksum_setup(r);
}

/* ---- aws-chunked ---- */

/* aws-chunked decoder callbacks: decoded data goes to the sink; chunk
 * ends verify signatures; trailers carry the checksum and its signature. */
static int aws_data(void *arg, const char *p, size_t n)
{
    return sink(arg, p, n);
}

static int aws_chunk_end(void *arg, const char *ext, size_t ext_len,
                         uint64_t size)
{
    struct stor_s3_req *r = arg;
    static const char pfx[] = "chunk-signature=";
    uint8_t sha[32];
    char hex[65];

    (void)size;
    if (r->payload != STOR_PAYLOAD_STREAMING &&
        r->payload != STOR_PAYLOAD_STREAMING_TRAILER)
        return 0;
    if (ext_len < sizeof(pfx) - 1 || memcmp(ext, pfx, sizeof(pfx) - 1) != 0) {
        stor_s3_error(r, S3E_SIGNATURE_MISMATCH);
        return -EACCES;
    }
    cm_digest_final(r->sha_chunk, sha);
    cm_hex_encode(sha, 32, hex);
    if (stor_auth_chunk(r, ext + sizeof(pfx) - 1, ext_len - sizeof(pfx) + 1,
                        hex) != S3E_NONE) {
        stor_s3_error(r, S3E_SIGNATURE_MISMATCH);
        return -EACCES;
    }
    return 0;
}

static int aws_trailer(void *arg, const char *name, size_t nlen,
                       const char *value, size_t vlen)
{
    struct stor_s3_req *r = arg;
    enum stor_cksum k;

    if (stor_http_ieq(name, nlen, "x-amz-trailer-signature")) {
        if (vlen != 64)
            goto bad;
        memcpy(r->trailer_sig, value, 64);
        r->trailer_sig[64] = 0;
        return 0;
    }
    k = stor_s3_cksum_kind(name, nlen);
    if (k == STOR_CKSUM_NONE || k != r->ck_kind || vlen >= sizeof(r->ck_expect))
        goto bad;
    memcpy(r->ck_expect, value, vlen);
    r->ck_expect[vlen] = 0;
    r->ck_seen = true;
    /* canonical trailer bytes for the trailer signature: "name:value\n" */
    if (cm_buf_append(&r->trailer_raw, name, nlen) < 0 ||
        cm_buf_appendc(&r->trailer_raw, ':') < 0 ||
        cm_buf_append(&r->trailer_raw, value, vlen) < 0 ||
        cm_buf_appendc(&r->trailer_raw, '\n') < 0)
        goto bad;
    return 0;
bad:
    stor_s3_error(r, S3E_INVALID_CHUNK);
    return -EBADMSG;
}

/* ---- hooks ---- */

/* Validates Content-MD5 and reads the body-related headers. */
static enum stor_s3_err body_setup(struct stor_s3_req *r)
{
    const char *v;
    size_t n;
    enum stor_s3_err e;

    if (r->body_mode == STOR_BODY_POST) /* the form's fields say (post.c) */
        return stor_s3_post_setup(r);
    v = stor_s3_hdr(r, "content-md5", &n);
    if (v) {
        uint8_t md5[20];

        if (n != 24 || cm_base64_decode(v, n, md5) != 16)
            return S3E_INVALID_DIGEST;
        memcpy(r->content_md5, md5, 16);
        r->has_md5 = true;
    }
    if (r->payload == STOR_PAYLOAD_STREAMING ||
        r->payload == STOR_PAYLOAD_STREAMING_TRAILER ||
        r->payload == STOR_PAYLOAD_UNSIGNED_TRAILER) {
        r->aws_chunked = true;
        r->aws = malloc(sizeof(*r->aws));
        if (r->aws == NULL)
            return S3E_INTERNAL;
        stor_chunk_init(r->aws, UINT64_MAX);
        v = stor_s3_hdr(r, "x-amz-decoded-content-length", &n);
        if (v) {
            if (stor_http_parse_u64(v, n, &r->decoded_len) < 0)
                return S3E_INVALID_ARGUMENT;
        } else if (r->body_mode == STOR_BODY_STREAM) {
            return S3E_MISSING_CONTENT_LENGTH;
        }
        if (r->payload != STOR_PAYLOAD_UNSIGNED_TRAILER) {
            r->sha_chunk = cm_digest_create(CM_DIGEST_SHA256);
            if (r->sha_chunk == NULL)
                return S3E_INTERNAL;
        }
    } else if (r->payload == STOR_PAYLOAD_SHA256) {
        r->sha_body = cm_digest_create(CM_DIGEST_SHA256);
        if (r->sha_body == NULL)
            return S3E_INTERNAL;
    }
    e = cksum_setup(r);
    if (e != S3E_NONE)
        return e;
    if (r->body_mode == STOR_BODY_STREAM) {
        if (!r->http.te_chunked && stor_s3_hdr(r, "content-length", &n) == NULL)
            return S3E_MISSING_CONTENT_LENGTH;
        if (!r->aws_chunked && !r->http.te_chunked)
            r->decoded_len = r->http.clen;
        /* decided before any body byte is read (one PUT or part is at
         * most 5 GiB); an unannounced length is checked as it streams */
        if (r->decoded_len != UINT64_MAX && r->decoded_len > S3_MAX_PUT)
            return S3E_ENTITY_TOO_LARGE;
    }
    return S3E_NONE;
}

/* Whether jobs of operation @op go to the read pool. DESIGN: reads are
 * short and CPU-bound when the data is cached, so a small pool (about one
 * worker per core) avoids the context switches a big one costs; writes wait
 * on fsync, so they get a bigger pool of their own and cannot starve reads
 * (a queue per job class, as Redis bio and nginx thread pools do). */
static bool op_reads(enum stor_s3_op op)
{
    switch (op) {
    case S3_OP_GET_OBJECT:
    case S3_OP_HEAD_OBJECT:
    case S3_OP_LIST_OBJECTS:
    case S3_OP_LIST_OBJECTS_V2:
    case S3_OP_LIST_VERSIONS:
    case S3_OP_LIST_BUCKETS:
    case S3_OP_HEAD_BUCKET:
    case S3_OP_METRICS:
    case S3_OP_LIST_PARTS:
    case S3_OP_LIST_UPLOADS:
        return true;
    default:
        return false;
    }
}

/* Whether a PutObject's stor_put_begin can wait for its commit's job
 * (commit_run): a body of known length that fits in one piece (no piece
 * is written before the commit) from a client that does not wait for a
 * 100 Continue (it would wait for the begin's verdict before sending the
 * body). Saves a small PUT one worker round trip; what the begin refuses
 * (no bucket, a failed condition) is then answered after the body. */
static bool begin_late(struct stor_s3_req *r)
{
    r->begin_late = r->op == S3_OP_PUT_OBJECT && !r->http.expect_100 &&
                    r->decoded_len != UINT64_MAX &&
                    r->decoded_len < STOR_PIECE_SIZE;
    return r->begin_late;
}

/* Loop: the pre-body job (PutObject's stor_put_begin) is back. */
static void pre_done(struct stor_s3_req *r)
{
    stor_http_pre_done(&r->http);
}

/* OPTIONS on a bucket or object: a CORS preflight, answered from the
 * bucket's CORS rules (cors.c): 200 with the Access-Control-* headers of
 * the first rule that allows it, 400 without Origin or
 * Access-Control-Request-Method, 403 when no rule allows it or there is
 * no configuration. Unsigned, as browsers send it. */
static enum stor_s3_err preflight(struct stor_s3_req *r)
{
    r->op = S3_OP_PREFLIGHT;
    return stor_cors_preflight(r);
}

/* The target, then the method: what S3 answers before looking further. */
static enum stor_s3_err head_setup(struct stor_s3_req *r)
{
    enum stor_s3_err e;

    cm_buf_init(&r->body, STOR_XML_BODY_MAX);
    cm_buf_init(&r->trailer_raw, 8192);
    r->decoded_len = UINT64_MAX;
    e = stor_s3_decode_target(r);
    if (e == S3E_BAD_REQUEST)
        r->http.resp.close = true; /* malformed HTTP: do not reuse */
    if (e == S3E_NONE && r->bucket[0] && r->http.head.method_len == 7 &&
        memcmp(r->http.head.method, "OPTIONS", 7) == 0)
        return preflight(r);
    if (e == S3E_NONE &&
        !(r->http.is_get || r->http.is_head || r->http.is_put ||
          r->http.is_post || r->http.is_delete))
        e = S3E_METHOD_NOT_ALLOWED;
    return e;
}

/* Hook on_head (see http.h). */
static int s3_on_head(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);
    enum stor_s3_err e;
    bool tags_authz = false;

    r->s3 = h->app;
    e = head_setup(r);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        return 0;
    }
    if (r->op == S3_OP_PREFLIGHT)
        return 0;         /* answered from the bucket's CORS rules */
    stor_cors_on_head(r); /* the Access-Control-* headers, with Origin */
    if (!r->vhost && special_path(r))
        return r->http.job_busy ? 1 : 0;
    e = stor_auth_check(r, time(NULL));
    if ((e == S3E_NONE || e == S3E_INDEX_REBUILDING) && !s3_ready(r->s3)) {
        /* an index rebuild at start: nothing of the store may be asked */
        stor_s3_error(r, S3E_INDEX_REBUILDING);
        if (stor_resp_hdr(&r->http.resp, "Retry-After", "5") < 0)
            stor_s3_error(r, S3E_INTERNAL);
        return 0;
    }
    if (e == S3E_NONE)
        e = stor_s3_route(r);
    if (e == S3E_NONE)
        e = stor_s3_hdr_audit(r);
    if (e == S3E_NONE && r->op == S3_OP_POST_OBJECT) {
        /* authorised once the form's fields are read (post.c) */
    } else if (e == S3E_NONE) {
        e = stor_iam_authorize(r);
        if ((e == S3E_NONE || e == S3E_ACCESS_DENIED) &&
            stor_iam_needs_tags(r)) {
            e = S3E_NONE; /* decided on a worker, below */
            tags_authz = true;
        }
        if (e == S3E_ACCESS_DENIED && stor_iam_denial_checks_store(r)) {
            /* NoSuchBucket / NoSuchKey where AWS tells them (authz.c) */
            r->http.read_jobs = true;
            stor_store_fg_enter(r->s3->store);
            r->fg_entered = true;
            stor_s3_submit(r, stor_iam_denied_run, pre_done);
            return 1;
        }
    } else if (r->anonymous && e != S3E_NOT_IMPLEMENTED) {
        e = S3E_ACCESS_DENIED; /* tell an anonymous caller nothing more */
    }
    r->http.read_jobs = op_reads(r->op);
    if (e == S3E_NONE && (r->op == S3_OP_CREATE_BUCKET) &&
        !stor_s3_bucket_name_ok(r->bucket))
        e = S3E_INVALID_BUCKET_NAME;
    if (e == S3E_NONE)
        e = body_setup(r);
    if (e == S3E_INVALID_CHECKSUM) {
        invalid_checksum_error(r);
        return 0;
    }
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        return 0;
    }
    stor_store_fg_enter(r->s3->store);
    r->fg_entered = true;
    if (tags_authz) { /* s3:ExistingObjectTag: the object's tags first */
        stor_s3_submit(r, stor_iam_tags_run, pre_done);
        return 1;
    }
    if (r->body_mode == STOR_BODY_STREAM && begin_late(r))
        return 0; /* the body first: one job for begin, write and commit */
    if (r->body_mode == STOR_BODY_STREAM) {
        stor_s3_submit(r, stor_s3_put_begin_run, pre_done);
        return 1;
    }
    return 0;
}

/* Hook on_body (see http.h). */
static int s3_on_body(struct stor_req *h, const char *p, size_t n)
{
    struct stor_s3_req *r = stor_s3_req(h);
    struct stor_chunk_cb cb = {.data = aws_data,
                               .chunk_end = aws_chunk_end,
                               .trailer = aws_trailer,
                               .arg = r};
    ssize_t used;

    if (r->body_mode == STOR_BODY_POST)
        return stor_s3_post_body(r, p, n);
    if (!r->aws_chunked)
        return sink(r, p, n);
    if (r->aws->done) {
        stor_s3_error(r, S3E_INVALID_CHUNK);
        return -EBADMSG;
    }
    used = stor_chunk_decode(r->aws, p, n, &cb);
    if (used < 0) {
        if (h->resp.status == 0)
            stor_s3_error(r, S3E_INVALID_CHUNK);
        return (int)used;
    }
    if ((size_t)used != n) {
        stor_s3_error(r, S3E_INVALID_CHUNK);
        return -EBADMSG;
    }
    return 0;
}

/* Hook body_paused (see http.h). */
static bool s3_body_paused(const struct stor_req *h)
{
    const struct stor_s3_req *r = (const struct stor_s3_req *)(const void *)h;

    if (stor_s3_post_paused(r))
        return true;
    return (r->body_mode == STOR_BODY_STREAM ||
            r->body_mode == STOR_BODY_POST) &&
           r->piece_busy && r->piece_len[r->pfill] >= STOR_PIECE_SIZE;
}

/* Verifies what can only be checked once the body is complete. */
static enum stor_s3_err body_verify(struct stor_s3_req *r)
{
    char got[96];

    if (r->aws_chunked) {
        if (!r->aws->done)
            return S3E_INCOMPLETE_BODY;
        if (r->decoded_len != UINT64_MAX && r->body_bytes != r->decoded_len)
            return S3E_INCOMPLETE_BODY;
        if (r->ck_from_trailer && !r->ck_seen)
            return S3E_INVALID_CHUNK;
        if (r->payload == STOR_PAYLOAD_STREAMING_TRAILER &&
            stor_auth_trailer(r) != S3E_NONE)
            return S3E_SIGNATURE_MISMATCH;
    }
    if (r->sha_body) {
        uint8_t sha[32];
        char hex[65];

        cm_digest_final(r->sha_body, sha);
        cm_hex_encode(sha, 32, hex);
        if (strcmp(hex, r->payload_sha256) != 0)
            return S3E_SHA256_MISMATCH;
    } else if (r->payload == STOR_PAYLOAD_SHA256 &&
               strcmp(r->payload_sha256, CM_SIGV4_EMPTY_SHA256) != 0 &&
               r->body_bytes == 0) {
        return S3E_SHA256_MISMATCH;
    }
    if (r->ck_kind != STOR_CKSUM_NONE) {
        stor_s3_cksum_final(r->ck_kind, r->ck_crc, r->ck_digest, got);
        if (strcmp(got, r->ck_expect) != 0)
            return S3E_CHECKSUM_MISMATCH;
        snprintf(r->ck_value, sizeof(r->ck_value), "%s", got);
    }
    if (r->body_mode == STOR_BODY_BUFFER && r->has_md5) {
        uint8_t md5[16];

        cm_md5(r->body.data ? r->body.data : "", r->body.len, md5);
        if (memcmp(md5, r->content_md5, 16) != 0)
            return S3E_BAD_DIGEST;
    }
    return S3E_NONE;
}

/* Writes the last piece and commits (on a worker). */
static void commit_run(struct stor_s3_req *r)
{
    int idx = r->pfill;

    if (r->begin_late) { /* begin_late(): the begin first */
        r->begin_late = false;
        stor_s3_put_begin_run(r);
        if (r->http.resp.status) /* refused: its error is the answer */
            return;
    }

    if (r->put_err == 0 && r->piece_len[idx] > 0)
        r->put_err = stor_sse_put_write(r->sse, r->put, r->piece[idx],
                                        r->piece_len[idx]);
    r->piece_len[idx] = 0;
    stor_s3_put_commit_run(r);
}

/* Loop: a POST Object's commit is back: POST's answer. */
static void post_commit_done(struct stor_s3_req *r)
{
    if (r->http.resp.status == 200)
        stor_s3_post_reply(r);
    stor_http_respond(&r->http);
}

/* Loop: queues the final write + commit; the response follows. */
static void submit_commit(struct stor_s3_req *r)
{
    stor_s3_submit(r, commit_run,
                   r->body_mode == STOR_BODY_POST ? post_commit_done
                                                  : respond_done);
}

/* Loop: a POST Object's body has ended and no job is busy: the form must
 * be complete and the file within the policy's range, then it commits. */
static void post_finish(struct stor_s3_req *r)
{
    enum stor_s3_err e = stor_s3_post_end(r);

    if (e == S3E_NONE)
        e = body_verify(r);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        stor_http_respond(&r->http);
        return;
    }
    submit_commit(r);
}

/* Loop: the metas of a GET started by get_fast() were read. The body is
 * served from here when they verified; anything else (a missing, stale
 * or corrupt shard, an error) takes the regular path on a worker, which
 * rebuilds, heals and answers errors. */
static void get_fast_finish(struct stor_s3_req *r);

static void get_fast_done(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);

    for (size_t i = 0; i < r->nb_n; i++) {
        r->nb_src[i].res = r->nb_rd[i].res;
        r->nb_src[i].hres = r->nb_rd[i].hres;
    }
    get_fast_finish(r);
}

/* Whether a body this GET just read and checked may be kept in the
 * zero-copy body cache (zcache.h) and served from it to later GETs: a
 * plain whole-object GET (so a later one of the same version is the same
 * answer) of an object stored as plain bytes, or with @opened of an
 * SSE-S3 object, whose plaintext this GET is about to open and
 * authenticate (zcache_offer_opened). The cache never holds an encrypted
 * object's stored bytes (never sent as stored) nor an SSE-C object's
 * plaintext (sse.h stor_sse_info_is_s3). */
static bool zcache_may_keep(struct stor_s3_req *r,
                            const struct stor_obj_info *info, bool opened)
{
    bool enc = false;
    size_t rn;

    if (r->s3->zcache == NULL || stor_s3_hdr(r, "range", &rn) ||
        stor_s3_has_query(r, "partNumber") || info->size == 0 ||
        info->size > STOR_ZCACHE_MAX_BODY)
        return false;
    for (size_t i = 0; i < info->nhdrs; i++)
        if (strcasecmp(info->hdrs[i].name, "x-ecfs-sse") == 0)
            enc = true;
    if (opened ? !(enc && stor_sse_info_is_s3(info)) : enc)
        return false;
    return stor_zcache_want(r->s3->zcache, r->bucket, r->cache_id,
                            r->cache_version, (size_t)info->size);
}

/* After stor_s3_get_object_reply opened an SSE-S3 object admitted by
 * zcache_may_keep(@opened): puts its @size bytes of plaintext, which
 * passed every package's tag and are about to be sent whole from the
 * inline reader's buffer, in the body cache (memory only: pipe pages,
 * never the drives nor swap). Nothing when the answer is anything else
 * (an error, 304, a tag failure). */
static void zcache_offer_opened(struct stor_s3_req *r, uint64_t size)
{
    struct stor_resp *rs = &r->http.resp;
    void *p;

    if (!stor_sse_is_s3(r->sse) || rs->status != 200 || !rs->stream ||
        rs->sbuf[0] == NULL || rs->ssent != 0 || rs->slen[0] != size)
        return;
    p = stor_zcache_region((size_t)size);
    if (p == NULL)
        return;
    memcpy(p, rs->sbuf[0], (size_t)size);
    stor_zcache_put(r->s3->zcache, r->bucket, r->cache_id, r->cache_version, p,
                    (size_t)size);
}

/* Offers the checked body of @g (a loop GET's: zero-copy, its pages still
 * in the connection's pipe, or copied, in @body) to the zero-copy body
 * cache, which copies it once when admitted. */
static void zcache_offer(struct stor_s3_req *r,
                         const struct stor_obj_info *info,
                         const struct stor_get *g, const void *body)
{
    size_t len = (size_t)info->size;
    void *p;

    if (!zcache_may_keep(r, info, false))
        return;
    p = stor_zcache_region(len);
    if (p == NULL)
        return;
    if (body)
        memcpy(p, body, len);
    else if (stor_get_zc_copy(g, p, len) < 0) {
        stor_zcache_region_free(p, len);
        return;
    }
    stor_zcache_put(r->s3->zcache, r->bucket, r->cache_id, r->cache_version, p,
                    len);
}

/* get_fast_done() once the reads' results are in the store's reads. */
static void get_fast_finish(struct stor_s3_req *r)
{
    struct stor_req *h = &r->http;
    struct stor_bcache *bc = stor_req_loop_data(h);
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    uint64_t size;
    bool opened;
    int ret;

    memset(&info, 0, sizeof(info));
    ret = stor_get_nb_end(r->get_nb, &info, &g);
    r->get_nb = NULL;
    stor_metrics_get_loop(r->s3->metrics, ret == 0 ? STOR_GET_LOOP_READ
                                                   : STOR_GET_LOOP_FALLBACK);
    if (ret < 0) {
        if (r->zc_pins) { /* unchecked bytes in the pipe: never sent */
            stor_req_zc_discard(h);
            stor_get_zc_release(r->zc_pins);
            r->zc_pins = NULL;
        }
        stor_s3_submit(r, stor_s3_op_run, respond_done);
        return;
    }
    if (r->zc_pins) {
        stor_metrics_get_loop(r->s3->metrics, STOR_GET_LOOP_ZERO_COPY);
        zcache_offer(r, &info, g, NULL);
        stor_s3_get_object_reply(r, &info, g);
        if (!h->resp.zc) /* an error or 304 answer: the bytes stay unsent */
            stor_req_zc_discard(h);
        stor_http_respond(h);
        return;
    }
    size = info.size;
    if (bc)
        stor_bcache_put(bc, r->bucket, r->cache_id, r->cache_version,
                        stor_get_inline_body(g), (size_t)size);
    if (stor_get_inline_body(g))
        zcache_offer(r, &info, g, stor_get_inline_body(g));
    opened = stor_get_inline_body(g) && zcache_may_keep(r, &info, true);
    stor_s3_get_object_reply(r, &info, g);
    if (opened)
        zcache_offer_opened(r, size);
    stor_http_respond(h);
}

/* Answers from this loop's body cache when it holds the version the index
 * says is current (the cache checks the bytes' CRC). true when it did. */
static bool get_cached(struct stor_s3_req *r)
{
    struct stor_bcache *bc = stor_req_loop_data(&r->http);
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    const void *body;
    uint64_t size;

    if (bc == NULL)
        return false;
    stor_get_nb_ident(r->get_nb, r->cache_id, &r->cache_version, &size);
    body = stor_bcache_get(bc, r->bucket, r->cache_id, r->cache_version,
                           (size_t)size);
    if (body == NULL)
        return false;
    memset(&info, 0, sizeof(info));
    if (stor_get_nb_end_with(r->get_nb, body, (size_t)size, &info, &g) < 0) {
        r->get_nb = NULL;
        return false;
    }
    r->get_nb = NULL;
    stor_metrics_get_loop(r->s3->metrics, STOR_GET_LOOP_CACHED);
    stor_s3_get_object_reply(r, &info, g);
    stor_http_respond(&r->http);
    return true;
}

/* Answers a plain whole-object GET from the zero-copy body cache (the
 * version the index says is current, held as pipe pages: zcache.h): the
 * body is tee'd into the connection's pipe and spliced from there to the
 * socket. No read, no copy, no checksum (the pages were checked when they
 * were filled and nothing maps them since). true when it did. */
static bool get_zcached(struct stor_s3_req *r)
{
    struct stor_zcache *zc = r->s3->zcache;
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    size_t rn, bytes[2];
    uint64_t size;
    int pfd[2];

    if (zc == NULL || stor_s3_hdr(r, "range", &rn) ||
        stor_s3_has_query(r, "partNumber"))
        return false;
    stor_get_nb_ident(r->get_nb, r->cache_id, &r->cache_version, &size);
    if (!stor_zcache_has(zc, r->bucket, r->cache_id, r->cache_version,
                         (size_t)size))
        return false;
    bytes[0] = stor_zcache_pipe_bytes((size_t)size);
    bytes[1] = 0;
    if (stor_req_zc_pipes(&r->http, bytes, pfd) < 0) /* TLS: copy */
        return false;
    if (stor_zcache_tee(zc, r->bucket, r->cache_id, r->cache_version,
                        (size_t)size, pfd[0]) < 0) {
        stor_req_zc_discard(&r->http);
        return false;
    }
    memset(&info, 0, sizeof(info));
    if (stor_get_nb_end_zc_held(r->get_nb, (size_t)size, &info, &g) < 0) {
        r->get_nb = NULL;
        stor_req_zc_discard(&r->http);
        return false;
    }
    r->get_nb = NULL;
    stor_metrics_get_loop(r->s3->metrics, STOR_GET_LOOP_CACHED);
    stor_metrics_get_loop(r->s3->metrics, STOR_GET_LOOP_ZERO_COPY);
    r->zc_opened = true; /* plaintext, whatever the object's encryption */
    stor_s3_get_object_reply(r, &info, g);
    if (!r->http.resp.zc) /* an error or 304 answer: the bytes stay unsent */
        stor_req_zc_discard(&r->http);
    stor_http_respond(&r->http);
    return true;
}

/* Answers from the body the index keeps (stor_get_nb_begin asked for no
 * reads). true when it did. */
static bool get_indexed(struct stor_s3_req *r)
{
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    int ret;

    memset(&info, 0, sizeof(info));
    ret = stor_get_nb_end(r->get_nb, &info, &g);
    r->get_nb = NULL;
    if (ret < 0)
        return false;
    stor_metrics_get_loop(r->s3->metrics, STOR_GET_LOOP_INDEX);
    stor_s3_get_object_reply(r, &info, g);
    stor_http_respond(&r->http);
    return true;
}

/* Makes the reads of a loop GET zero-copy when it may be (FORMAT.md
 * "Zero-copy GETs"): a plain whole-object GET of an unencrypted extent
 * object on a plain-HTTP connection. Otherwise, or when the connection has
 * no pipe of that size, the reads stay copies. */
static void get_fast_zc(struct stor_s3_req *r)
{
    size_t rn, bytes[2];
    int pfd[2];

    if (!r->s3->zero_copy || stor_s3_hdr(r, "range", &rn) ||
        stor_s3_has_query(r, "partNumber") ||
        stor_get_nb_zc(r->get_nb, "x-ecfs-sse", stor_http_zc_pipe_max(),
                       bytes) < 0)
        return;
    if (stor_req_zc_pipes(&r->http, bytes, pfd) < 0)
        return;
    if (stor_get_nb_zc_start(r->get_nb, pfd, &r->zc_pins) < 0)
        r->zc_pins = NULL;
}

/* GetObject of a small (inline) object without a worker round trip: the
 * lookup is in memory (try-locks), the body comes from the index or the
 * meta reads go to the loop's io_uring. true when it started or answered
 * (get_fast_done follows a read). */
static bool get_fast(struct stor_s3_req *r)
{
    struct stor_nb_read *rd;
    uint64_t n_size;
    size_t n, i;
    int ret;

    if (r->op != S3_OP_GET_OBJECT || r->http.is_head || !r->has_key ||
        stor_s3_has_query(r, "versionId") ||   /* by version: versioning.c */
        !stor_lc_cached(r->s3->lc, r->bucket)) /* x-amz-expiration */
        return false;
    if (stor_get_nb_begin(r->s3->store, r->bucket, r->key, r->key_len,
                          &r->get_nb, &rd, &n) < 0)
        return false;
    if (n == 0)
        return get_indexed(r);
    if (get_zcached(r))
        return true;
    if (r->get_nb == NULL) /* the zero-copy cache's end failed */
        return false;
    stor_get_nb_ident(r->get_nb, r->cache_id, &r->cache_version, &n_size);
    if (get_cached(r))
        return true;
    if (r->get_nb == NULL) /* the cache's end_with() failed */
        return false;
    if (n > S3_NB_READS_MAX) {
        stor_get_nb_free(r->get_nb);
        r->get_nb = NULL;
        return false;
    }
    get_fast_zc(r);
    if (r->zc_pins && stor_get_nb_zc_now(r->get_nb) == 0) {
        get_fast_finish(r); /* every page cached: spliced at once */
        return true;
    }
    for (i = 0; i < n; i++)
        r->nb_rd[i] = (struct stor_http_file_read){.path = rd[i].path,
                                                   .buf = rd[i].buf,
                                                   .len = rd[i].len,
                                                   .fd = rd[i].fd,
                                                   .off = rd[i].off,
                                                   .hdr = rd[i].hdr,
                                                   .hdr_len = rd[i].hdr_len,
                                                   .splice = rd[i].pipe >= 0,
                                                   .pipe = rd[i].pipe};
    r->nb_src = rd;
    r->nb_n = n;
    ret = stor_req_read_files(&r->http, r->nb_rd, n, get_fast_done);
    if (ret < 0) {
        if (ret == -EAGAIN)
            stor_metrics_get_loop(r->s3->metrics, STOR_GET_LOOP_BUSY);
        if (ret != -EIO) /* -EIO: the kernel may still write its buffers */
            stor_get_nb_free(r->get_nb);
        r->get_nb = NULL;
        if (r->zc_pins) {
            if (ret != -EIO)
                stor_req_zc_discard(&r->http);
            else /* a splice may still fill the pipes: never reused */
                stor_req_zc_abandon(&r->http);
            stor_get_zc_release(r->zc_pins);
            r->zc_pins = NULL;
        }
        return false;
    }
    return true;
}

/* HeadObject without a worker round trip: the index lookup of a GET
 * (stor_obj_stat_nb: in memory, try-locks, only while the index is
 * resident) and the same headers as the worker's HEAD. Anything else (a
 * missing key, which may be a delete marker; by version; a bucket whose
 * lifecycle rules are not cached yet) goes to the worker. true when it
 * answered. */
static bool head_fast(struct stor_s3_req *r)
{
    struct stor_obj_info info;

    if (r->op != S3_OP_HEAD_OBJECT || !r->http.is_head || !r->has_key ||
        stor_s3_has_query(r, "versionId") ||
        !stor_lc_cached(r->s3->lc, r->bucket))
        return false;
    memset(&info, 0, sizeof(info));
    if (stor_obj_stat_nb(r->s3->store, r->bucket, r->key, r->key_len, &info) <
        0)
        return false;
    stor_metrics_get_loop(r->s3->metrics, STOR_HEAD_LOOP);
    stor_s3_get_object_reply(r, &info, NULL);
    stor_http_respond(&r->http);
    return true;
}

/* Hook on_body_end (see http.h). */
static void s3_on_body_end(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);
    enum stor_s3_err e;

    if (r->body_mode == STOR_BODY_POST) {
        /* a job (the object's opening, a piece write) may hold r */
        if (r->piece_busy)
            r->end_pending = true;
        else if (h->resp.status)
            stor_http_respond(h);
        else
            post_finish(r);
        return;
    }
    e = body_verify(r);
    if (e != S3E_NONE) {
        stor_s3_error(r, e);
        if (r->piece_busy) {
            h->failed = true; /* respond when the write comes back */
            return;
        }
        stor_http_respond(h);
        return;
    }
    if (h->resp.status) { /* answered at head time (health) */
        stor_http_respond(h);
        return;
    }
    if (r->body_mode == STOR_BODY_STREAM) {
        if (r->piece_busy)
            r->end_pending = true;
        else
            submit_commit(r);
        return;
    }
    if (get_fast(r) || head_fast(r))
        return;
    stor_s3_submit(r, stor_s3_op_run, respond_done);
}

/* Hook on_error (see http.h): the S3 error for a transport error. */
static void s3_on_error(struct stor_req *h, enum stor_http_err he)
{
    static const enum stor_s3_err map[] = {
        [STOR_HTTP_E_INTERNAL] = S3E_INTERNAL,
        [STOR_HTTP_E_BAD_REQUEST] = S3E_BAD_REQUEST,
        [STOR_HTTP_E_HEADER_TOO_LARGE] = S3E_HEADER_TOO_LARGE,
        [STOR_HTTP_E_TIMEOUT] = S3E_REQUEST_TIMEOUT,
        [STOR_HTTP_E_BODY_TOO_LARGE] = S3E_ENTITY_TOO_LARGE,
        [STOR_HTTP_E_BODY_INCOMPLETE] = S3E_INCOMPLETE_BODY,
        [STOR_HTTP_E_NOT_IMPLEMENTED] = S3E_NOT_IMPLEMENTED,
    };
    struct stor_s3_req *r = stor_s3_req(h);

    r->s3 = h->app;
    stor_s3_error(r, (size_t)he < CM_ARRAY_SIZE(map) ? map[he] : S3E_INTERNAL);
}

/* Hook req_fini (see http.h): metrics, the debug log line, and the S3
 * state; true when a reader or an unfinished write remains. */
static bool s3_req_fini(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);
    struct stor_s3 *s3 = h->app;
    struct timespec now;
    double secs;

    if (r->post) /* counted as what the client asked, not as the PUT */
        r->op = S3_OP_POST_OBJECT;
    clock_gettime(CLOCK_MONOTONIC, &now);
    secs = (double)(now.tv_sec - h->start.tv_sec) +
           (double)(now.tv_nsec - h->start.tv_nsec) / 1e9;
    stor_metrics_request(s3->metrics, r->op,
                         h->resp.status ? h->resp.status : 499, secs,
                         r->body_bytes, h->sent_bytes);
    if (r->op != S3_OP_HEALTH && r->op != S3_OP_METRICS)
        cm_log(CM_LOG_DEBUG, 0,
               "req=%016llX api=%s %.*s %.*s payload=%d cksum=%d "
               "in=%llu out=%llu -> %d %.3fms",
               (unsigned long long)h->id, stor_metrics_op_name(r->op),
               (int)h->head.method_len, h->head.method,
               (int)CM_MIN(h->head.target_len, 200), h->head.target,
               (int)r->payload, (int)r->ck_kind,
               (unsigned long long)r->body_bytes,
               (unsigned long long)h->sent_bytes, h->resp.status, secs * 1e3);
    stor_iam_snap_unref(r->iam_snap);
    r->iam_snap = NULL;
    r->iam_user = NULL;
    free(r->extag);
    r->extag = NULL;
    json_decref(r->acl_grants);
    r->acl_grants = NULL;
    stor_s3_post_free(r);
    if (r->fg_entered) {
        r->fg_entered = false;
        stor_store_fg_leave(s3->store);
    }
    cm_digest_destroy(r->sha_chunk);
    cm_digest_destroy(r->sha_body);
    cm_digest_destroy(r->ck_digest);
    r->sha_chunk = r->sha_body = r->ck_digest = NULL;
    cm_buf_fini(&r->trailer_raw);
    cm_buf_fini(&r->body);
    stor_get_nb_free(r->get_nb);
    r->get_nb = NULL;
    stor_get_zc_release(r->zc_pins); /* the socket has the last byte */
    r->zc_pins = NULL;
    free(r->aws);
    r->aws = NULL;
    free(r->piece[0]);
    free(r->piece[1]);
    r->piece[0] = r->piece[1] = NULL;
    stor_s3_target_fini(r);
    if (r->put != NULL || r->get != NULL)
        return true; /* r->sse goes in req_release, with them */
    stor_sse_free(r->sse);
    r->sse = NULL;
    return false;
}

/* Hook req_release (see http.h), on a worker: the object-layer handles. */
static void s3_req_release(struct stor_req *h)
{
    struct stor_s3_req *r = stor_s3_req(h);

    if (r->put) {
        stor_put_abort(r->put);
        r->put = NULL;
    }
    if (r->get) {
        stor_get_close(r->get);
        r->get = NULL;
    }
    stor_sse_free(r->sse);
    r->sse = NULL;
}

/* Hook stream_fill (see http.h), on a worker: the GET's next bytes. */
static ssize_t s3_stream_fill(struct stor_req *h, uint64_t off, char *buf,
                              size_t len)
{
    struct stor_s3_req *r = stor_s3_req(h);

    return stor_sse_get_read(r->sse, r->get, off, buf, len);
}

/* Hook loop_init: the loop's body cache (--cache-mem), or none. */
static int s3_loop_init(void *app, size_t nloops, void **loop_data)
{
    struct stor_s3 *s3 = app;

    *loop_data = NULL;
    if (s3->cache_bytes == 0)
        return 0;
    *loop_data = stor_bcache_create(s3->cache_bytes / nloops);
    return *loop_data ? 0 : -ENOMEM;
}

/* Hook loop_fini. */
static void s3_loop_fini(void *app, void *loop_data)
{
    (void)app;
    stor_bcache_destroy(loop_data);
}

/* See s3.h. */
const struct stor_http_app stor_s3_app = {
    .req_size = sizeof(struct stor_s3_req),
    .req_zero = offsetof(struct stor_s3_req, query),
    .id_header = "x-amz-request-id",
    .fixed_headers = "x-amz-id-2: storaged\r\n",
    .loop_init = s3_loop_init,
    .loop_fini = s3_loop_fini,
    .on_head = s3_on_head,
    .on_body = s3_on_body,
    .body_paused = s3_body_paused,
    .on_body_end = s3_on_body_end,
    .on_error = s3_on_error,
    .req_fini = s3_req_fini,
    .req_release = s3_req_release,
    .stream_fill = s3_stream_fill,
};

/* See s3.h. */
bool stor_s3_domain_ok(const char *d)
{
    size_t n = strlen(d), i, label = 0;
    bool digits_only = true;

    if (n == 0 || n > 253 || d[0] == '.' || d[n - 1] == '.')
        return false;
    for (i = 0; i <= n; i++) {
        char c = d[i];

        if (c == '.' || c == 0) {
            if (label == 0 || label > 63 || d[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)c) && c != '-')
            return false;
        if (c == '-' && label == 0)
            return false;
        if (!isdigit((unsigned char)c))
            digits_only = false;
        label++;
    }
    return !digits_only;
}

/* See s3.h. */
int stor_s3_create(const struct stor_s3_opts *o, struct stor_s3 **out)
{
    struct stor_s3 *s3 = calloc(1, sizeof(*s3));
    char *err = NULL;
    int ret;

    *out = NULL;
    if (s3 == NULL)
        return -ENOMEM;
    s3->metrics = stor_metrics_create();
    if (s3->metrics == NULL) {
        free(s3);
        return -ENOMEM;
    }
    ret = stor_ver_create(o->store, &s3->ver);
    if (ret < 0) {
        stor_metrics_destroy(s3->metrics);
        free(s3);
        return ret;
    }
    ret = stor_sse_keys_create(o->kms_key, s3);
    if (ret == 0)
        ret = stor_iam_open(o->store, o->root_user, o->root_secret, &s3->iam,
                            &err);
    if (ret < 0) {
        stor_ver_destroy(s3->ver);
        cm_log(CM_LOG_ERROR, -ret, "S3: %s",
               err ? err : "cannot load the users and policies");
        free(err);
        stor_sse_keys_destroy(s3);
        stor_metrics_destroy(s3->metrics);
        free(s3);
        return ret;
    }
    ret = stor_lc_start(o->store, s3->ver, &s3->lc);
    if (ret < 0) {
        stor_iam_close(s3->iam);
        stor_ver_destroy(s3->ver);
        stor_metrics_destroy(s3->metrics);
        free(s3);
        return ret;
    }
    s3->store = o->store;
    s3->root_user = o->root_user;
    s3->root_secret = o->root_secret;
    s3->region = o->region ? o->region : "us-east-1";
    s3->cache_bytes = o->cache_bytes;
    s3->zero_copy = !o->no_zero_copy;
    if (s3->zero_copy && o->zc_cache_bytes) {
        s3->zcache = stor_zcache_create(o->zc_cache_bytes);
        if (s3->zcache == NULL)
            cm_log(CM_LOG_WARN, ENOMEM, "S3: no zero-copy body cache");
        stor_metrics_set_zcache(s3->metrics, s3->zcache);
    }
    s3->domain = o->domain;
    s3->tls = o->tls;
    s3->no_sigv2 = o->no_sigv2;
    s3->domain_len = o->domain ? strlen(o->domain) : 0;
    if (s3->cache_bytes)
        cm_log(CM_LOG_INFO, 0, "S3: %zu MiB small-object cache",
               s3->cache_bytes >> 20);
    stor_sse_keys_warm(s3);
    stor_sse_attach(s3);
    *out = s3;
    return 0;
}

/* See s3.h. */
void stor_s3_destroy(struct stor_s3 *s3)
{
    if (s3 == NULL)
        return;
    stor_lc_stop(s3->lc); /* before what its thread uses */
    stor_iam_close(s3->iam);
    stor_ver_destroy(s3->ver);
    stor_sse_keys_destroy(s3);
    stor_zcache_destroy(s3->zcache);
    stor_metrics_destroy(s3->metrics);
    free(s3);
}

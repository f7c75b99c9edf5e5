/* storaged/s3/s3.c - the S3 front end's loop-side half: health and metrics
 * endpoints, authentication, routing of a request to its operation, and
 * the request-body pipeline.
 *
 * DESIGN: the body pipeline is a chain of push callbacks, so no layer
 * buffers more than it must: transport bytes (already de-chunked by
 * http.c) -> aws-chunked decoder (when x-amz-content-sha256 is STREAMING-*:
 * chunk signatures chained from the request signature, trailers) -> sink
 * (SHA-256 of the payload when the client sent one, the x-amz-checksum-*
 * algorithm, then either a capped buffer for XML bodies or one of two
 * 1 MiB pieces handed to a worker for stor_put_write). While a piece is
 * being written the other fills; when both are busy body_paused() stops
 * http.c from reading the socket. All integrity checks finish before the
 * commit job runs, so a bad body never becomes visible. */
#include "storaged/s3/s3_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/log.h"
#include "storaged/s3/auth.h"
#include "storaged/s3/bcache.h"
#include "storaged/s3/metrics.h"

#define PIECE_CAP (STOR_PIECE_SIZE + 1024 * 1024)

/* ---- health and metrics (no auth) ---- */

/* Worker: renders /metrics (reads store and drive figures). */
static void metrics_run(struct stor_req *r)
{
    if (stor_metrics_render(stor_srv->metrics, stor_srv->store, &r->resp.body) <
        0) {
        stor_resp_error(r, S3E_INTERNAL);
        return;
    }
    r->resp.status = 200;
    if (stor_resp_hdr(&r->resp, "Content-Type", "text/plain; version=0.0.4") <
        0)
        stor_resp_error(r, S3E_INTERNAL);
}

/* Loop: generic job completion - the response is ready, send it. */
static void respond_done(struct stor_req *r)
{
    stor_http_respond(r);
}

/* Answers /health/live, /health/ready and /metrics; true when it did. */
static bool special_path(struct stor_req *r)
{
    bool ready;

    if (!(r->is_get || r->is_head) || r->nquery > 0)
        return false;
    if (strcmp(r->path, "/health/live") == 0) {
        r->op = S3_OP_HEALTH;
        r->resp.status = 200;
        return true;
    }
    if (strcmp(r->path, "/health/ready") == 0) {
        r->op = S3_OP_HEALTH;
        ready =
            atomic_load(&stor_srv->ready) && !atomic_load(&stor_srv->draining);
        r->resp.status = ready ? 200 : 503;
        return true;
    }
    if (strcmp(r->path, "/metrics") == 0) {
        r->op = S3_OP_METRICS;
        stor_req_submit(r, metrics_run, respond_done);
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
static bool has_any(const struct stor_req *r, const char *const *names,
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

/* Sets r->op and r->body_mode; returns S3E_NONE or the routing error. */
static enum stor_s3_err route(struct stor_req *r)
{
    bool has_upload = stor_req_has_query(r, "uploadId");
    bool has_copy = stor_req_hdr(r, "x-amz-copy-source", &(size_t){0}) != NULL;

    r->body_mode = STOR_BODY_NONE;
    if (r->bucket[0] == 0) {
        if (r->is_get || r->is_head) {
            r->op = S3_OP_LIST_BUCKETS;
            return S3E_NONE;
        }
        return S3E_METHOD_NOT_ALLOWED;
    }
    if (!r->has_key) {
        if (r->is_put) {
            r->op = S3_OP_CREATE_BUCKET;
            r->body_mode = STOR_BODY_BUFFER;
            if (has_any(r, bucket_subres, CM_ARRAY_SIZE(bucket_subres))) {
                r->op = S3_OP_BUCKET_SUBRESOURCE;
                return S3E_NOT_IMPLEMENTED;
            }
        } else if (r->is_head) {
            r->op = S3_OP_HEAD_BUCKET;
        } else if (r->is_delete) {
            r->op = S3_OP_DELETE_BUCKET;
            if (has_any(r, bucket_subres, CM_ARRAY_SIZE(bucket_subres))) {
                r->op = S3_OP_BUCKET_SUBRESOURCE;
                return S3E_NOT_IMPLEMENTED;
            }
        } else if (r->is_get) {
            if (stor_req_has_query(r, "location"))
                r->op = S3_OP_GET_BUCKET_LOCATION;
            else if (stor_req_has_query(r, "uploads"))
                r->op = S3_OP_LIST_UPLOADS;
            else if (has_any(r, bucket_subres, CM_ARRAY_SIZE(bucket_subres)))
                r->op = S3_OP_BUCKET_SUBRESOURCE;
            else if (stor_req_query(r, "list-type") &&
                     strcmp(stor_req_query(r, "list-type"), "2") == 0)
                r->op = S3_OP_LIST_OBJECTS_V2;
            else
                r->op = S3_OP_LIST_OBJECTS;
        } else if (r->is_post) {
            if (!stor_req_has_query(r, "delete"))
                return S3E_NOT_IMPLEMENTED;
            r->op = S3_OP_DELETE_OBJECTS;
            r->body_mode = STOR_BODY_BUFFER;
        }
        return S3E_NONE;
    }
    {
        /* Buckets are unversioned: the one version of a key is "null".
         * Any other id names a version we do not have; answering with
         * (or deleting) the current one would act on the wrong data. */
        const char *vid = stor_req_query(r, "versionId");

        if (vid && strcmp(vid, "null") != 0)
            return S3E_NO_SUCH_VERSION;
    }
    if (has_any(r, object_subres, CM_ARRAY_SIZE(object_subres))) {
        /* read-only answers for the two that tools ask for (s3cmd info) */
        if ((r->is_get || r->is_head) && (stor_req_has_query(r, "acl") ||
                                          stor_req_has_query(r, "tagging"))) {
            r->op = S3_OP_OBJECT_SUBRESOURCE;
            return S3E_NONE;
        }
        return S3E_NOT_IMPLEMENTED;
    }
    if (r->is_put) {
        if (has_upload || stor_req_has_query(r, "partNumber")) {
            if (!has_upload || !stor_req_has_query(r, "partNumber"))
                return S3E_INVALID_ARGUMENT;
            r->op = has_copy ? S3_OP_UPLOAD_PART_COPY : S3_OP_UPLOAD_PART;
        } else {
            r->op = has_copy ? S3_OP_COPY_OBJECT : S3_OP_PUT_OBJECT;
        }
        r->body_mode = has_copy ? STOR_BODY_NONE : STOR_BODY_STREAM;
    } else if (r->is_get) {
        r->op = has_upload ? S3_OP_LIST_PARTS : S3_OP_GET_OBJECT;
    } else if (r->is_head) {
        r->op = S3_OP_HEAD_OBJECT;
    } else if (r->is_delete) {
        r->op = has_upload ? S3_OP_ABORT_MPU : S3_OP_DELETE_OBJECT;
    } else if (r->is_post) {
        if (stor_req_has_query(r, "uploads")) {
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

static const struct {
    const char *hdr;
    enum stor_cksum kind;
    long bytes; /* digest size */
} cksums[] = {
    {"x-amz-checksum-crc32", STOR_CKSUM_CRC32, 4},
    {"x-amz-checksum-crc32c", STOR_CKSUM_CRC32C, 4},
    {"x-amz-checksum-crc64nvme", STOR_CKSUM_CRC64NVME, 8},
    {"x-amz-checksum-sha1", STOR_CKSUM_SHA1, 20},
    {"x-amz-checksum-sha256", STOR_CKSUM_SHA256, 32},
};

/* The checksum algorithm named by header @name, or STOR_CKSUM_NONE. */
static enum stor_cksum cksum_kind(const char *name, size_t n)
{
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(cksums); i++)
        if (stor_http_ieq(name, n, cksums[i].hdr))
            return cksums[i].kind;
    return STOR_CKSUM_NONE;
}

/* See s3_i.h. */
const char *stor_s3_cksum_hdr(enum stor_cksum k)
{
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(cksums); i++)
        if (cksums[i].kind == k)
            return cksums[i].hdr;
    return NULL;
}

/* Sets up checksum verification from x-amz-checksum-* headers or an
 * announced x-amz-trailer. */
static enum stor_s3_err cksum_setup(struct stor_req *r)
{
    const char *v;
    size_t n, i;

    /* CompleteMultipartUpload's x-amz-checksum-* is the object's (a
     * composite "...-N" or a full-object value), not its XML body's; we
     * keep no checksum for multipart objects, so it is not checked */
    for (i = 0; r->op != S3_OP_COMPLETE_MPU && i < CM_ARRAY_SIZE(cksums); i++) {
        uint8_t raw[48];

        v = stor_req_hdr(r, cksums[i].hdr, &n);
        if (v == NULL)
            continue;
        /* as S3: one algorithm per request, and a value of the right
         * size, refused before any body byte is read */
        if (r->ck_kind != STOR_CKSUM_NONE)
            return S3E_MULTIPLE_CHECKSUMS;
        if (n >= sizeof(r->ck_expect) || n > 64 ||
            cm_base64_decode(v, n, raw) != cksums[i].bytes)
            return S3E_INVALID_CHECKSUM;
        r->ck_kind = cksums[i].kind;
        memcpy(r->ck_expect, v, n);
        r->ck_expect[n] = 0;
    }
    v = stor_req_hdr(r, "x-amz-trailer", &n);
    if (v && r->aws_chunked) {
        enum stor_cksum k = cksum_kind(v, n);

        if (k == STOR_CKSUM_NONE)
            return S3E_NOT_IMPLEMENTED;
        if (r->ck_kind != STOR_CKSUM_NONE)
            return S3E_MULTIPLE_CHECKSUMS; /* a header's would go unchecked */
        r->ck_kind = k;
        r->ck_from_trailer = true;
    }
    if (r->ck_kind == STOR_CKSUM_SHA1)
        r->ck_digest = cm_digest_create(CM_DIGEST_SHA1);
    else if (r->ck_kind == STOR_CKSUM_SHA256)
        r->ck_digest = cm_digest_create(CM_DIGEST_SHA256);
    if ((r->ck_kind == STOR_CKSUM_SHA1 || r->ck_kind == STOR_CKSUM_SHA256) &&
        r->ck_digest == NULL)
        return S3E_INTERNAL;
    return S3E_NONE;
}

/* Base64 of the finished checksum into @out (>= 64 bytes). */
static void cksum_final(struct stor_req *r, char *out)
{
    uint8_t b[32];
    size_t n = 0;

    switch (r->ck_kind) {
    case STOR_CKSUM_CRC32:
    case STOR_CKSUM_CRC32C: {
        uint32_t c = (uint32_t)r->ck_crc;

        b[0] = (uint8_t)(c >> 24);
        b[1] = (uint8_t)(c >> 16);
        b[2] = (uint8_t)(c >> 8);
        b[3] = (uint8_t)c;
        n = 4;
        break;
    }
    case STOR_CKSUM_CRC64NVME: {
        int i;

        for (i = 0; i < 8; i++)
            b[i] = (uint8_t)(r->ck_crc >> (56 - 8 * i));
        n = 8;
        break;
    }
    case STOR_CKSUM_SHA1:
    case STOR_CKSUM_SHA256:
        n = cm_digest_final(r->ck_digest, b);
        break;
    default:
        out[0] = 0;
        return;
    }
    cm_base64_encode(b, n, out);
}

/* ---- body sink ---- */

/* Hands the full fill piece to a worker (stor_put_write). */
static void piece_write_run(struct stor_req *r)
{
    int idx = !r->pfill;

    if (r->put == NULL) {
        r->put_err = -EINVAL;
        return;
    }
    if (r->put_err == 0)
        r->put_err = stor_put_write(r->put, r->piece[idx], r->piece_len[idx]);
    r->piece_len[idx] = 0;
}

static void submit_commit(struct stor_req *r);
static void maybe_flush(struct stor_req *r);

/* Loop: a piece write came back; fail, flush the next full piece, or
 * commit once the body has ended. */
static void piece_write_done(struct stor_req *r)
{
    r->piece_busy = false;
    if (r->failed) {
        stor_http_respond(r);
        return;
    }
    if (r->put_err < 0) {
        stor_resp_error(r, stor_s3_err_from_errno(r->put_err));
        r->failed = true;
        stor_http_respond(r);
        return;
    }
    maybe_flush(r);
    if (!r->piece_busy && r->end_pending) {
        r->end_pending = false;
        submit_commit(r);
    }
}

/* Starts a write of the fill piece when it is full and the other is free. */
static void maybe_flush(struct stor_req *r)
{
    if (r->piece_busy || r->job_busy ||
        r->piece_len[r->pfill] < STOR_PIECE_SIZE)
        return;
    r->pfill = !r->pfill;
    r->piece_busy = true;
    stor_req_submit(r, piece_write_run, piece_write_done);
}

/* Final decoded payload bytes. */
static int sink(struct stor_req *r, const char *p, size_t n)
{
    size_t i;

    r->body_bytes += n;
    if (r->sha_body)
        cm_digest_update(r->sha_body, p, n);
    if (r->sha_chunk)
        cm_digest_update(r->sha_chunk, p, n);
    switch (r->ck_kind) {
    case STOR_CKSUM_CRC32:
        r->ck_crc = cm_crc32((uint32_t)r->ck_crc, p, n);
        break;
    case STOR_CKSUM_CRC32C:
        r->ck_crc = cm_crc32c((uint32_t)r->ck_crc, p, n);
        break;
    case STOR_CKSUM_CRC64NVME:
        r->ck_crc = cm_crc64nvme(r->ck_crc, p, n);
        break;
    case STOR_CKSUM_SHA1:
    case STOR_CKSUM_SHA256:
        cm_digest_update(r->ck_digest, p, n);
        break;
    default:
        break;
    }
    switch (r->body_mode) {
    case STOR_BODY_BUFFER:
        if (cm_buf_append(&r->body, p, n) < 0) {
            stor_resp_error(r, S3E_MALFORMED_XML);
            return -E2BIG;
        }
        break;
    case STOR_BODY_STREAM:
        for (i = 0; i < 2; i++)
            if (r->piece[i] == NULL) {
                r->piece[i] = malloc(PIECE_CAP);
                if (r->piece[i] == NULL) {
                    stor_resp_error(r, S3E_INTERNAL);
                    return -ENOMEM;
                }
            }
        if (r->piece_len[r->pfill] + n > PIECE_CAP) {
            stor_resp_error(r, S3E_INTERNAL);
            return -EOVERFLOW;
        }
        memcpy(r->piece[r->pfill] + r->piece_len[r->pfill], p, n);
        r->piece_len[r->pfill] += n;
        if (r->decoded_len != UINT64_MAX && r->body_bytes > r->decoded_len) {
            stor_resp_error(r, S3E_INCOMPLETE_BODY);
            return -EBADMSG;
        }
        if (r->body_bytes > S3_MAX_PUT) {
            stor_resp_error(r, S3E_ENTITY_TOO_LARGE);
            return -E2BIG;
        }
        maybe_flush(r);
        break;
    default:
        break;
    }
    return 0;
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
    struct stor_req *r = arg;
    static const char pfx[] = "chunk-signature=";
    uint8_t sha[32];
    char hex[65];

    (void)size;
    if (r->payload != STOR_PAYLOAD_STREAMING &&
        r->payload != STOR_PAYLOAD_STREAMING_TRAILER)
        return 0;
    if (ext_len < sizeof(pfx) - 1 || memcmp(ext, pfx, sizeof(pfx) - 1) != 0) {
        stor_resp_error(r, S3E_SIGNATURE_MISMATCH);
        return -EACCES;
    }
    cm_digest_final(r->sha_chunk, sha);
    cm_hex_encode(sha, 32, hex);
    if (stor_auth_chunk(r, ext + sizeof(pfx) - 1, ext_len - sizeof(pfx) + 1,
                        hex) != S3E_NONE) {
        stor_resp_error(r, S3E_SIGNATURE_MISMATCH);
        return -EACCES;
    }
    return 0;
}

static int aws_trailer(void *arg, const char *name, size_t nlen,
                       const char *value, size_t vlen)
{
    struct stor_req *r = arg;
    enum stor_cksum k;

    if (stor_http_ieq(name, nlen, "x-amz-trailer-signature")) {
        if (vlen != 64)
            goto bad;
        memcpy(r->trailer_sig, value, 64);
        r->trailer_sig[64] = 0;
        return 0;
    }
    k = cksum_kind(name, nlen);
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
    stor_resp_error(r, S3E_INVALID_CHUNK);
    return -EBADMSG;
}

/* ---- hooks ---- */

/* Validates Content-MD5 and reads the body-related headers. */
static enum stor_s3_err body_setup(struct stor_req *r)
{
    const char *v;
    size_t n;
    enum stor_s3_err e;

    v = stor_req_hdr(r, "content-md5", &n);
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
        v = stor_req_hdr(r, "x-amz-decoded-content-length", &n);
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
        if (!r->te_chunked && stor_req_hdr(r, "content-length", &n) == NULL)
            return S3E_MISSING_CONTENT_LENGTH;
        if (!r->aws_chunked && !r->te_chunked)
            r->decoded_len = r->clen;
        /* decided before any body byte is read (one PUT or part is at
         * most 5 GiB); an unannounced length is checked as it streams */
        if (r->decoded_len != UINT64_MAX && r->decoded_len > S3_MAX_PUT)
            return S3E_ENTITY_TOO_LARGE;
    }
    return S3E_NONE;
}

/* See http_i.h. */
int stor_s3_on_head(struct stor_req *r)
{
    enum stor_s3_err e;

    if (special_path(r))
        return r->job_busy ? 1 : 0;
    e = stor_auth_check(r, time(NULL));
    if (e == S3E_NONE)
        e = route(r);
    if (e == S3E_NONE && (r->op == S3_OP_CREATE_BUCKET) &&
        !stor_s3_bucket_name_ok(r->bucket))
        e = S3E_INVALID_BUCKET_NAME;
    if (e == S3E_NONE)
        e = body_setup(r);
    if (e != S3E_NONE) {
        stor_resp_error(r, e);
        return 0;
    }
    stor_store_fg_enter(stor_srv->store);
    r->fg_entered = true;
    if (r->body_mode == STOR_BODY_STREAM) {
        stor_req_submit(r, stor_s3_put_begin_run, stor_http_pre_done);
        return 1;
    }
    return 0;
}

/* See http_i.h. */
int stor_s3_on_body(struct stor_req *r, const char *p, size_t n)
{
    struct stor_chunk_cb cb = {.data = aws_data,
                               .chunk_end = aws_chunk_end,
                               .trailer = aws_trailer,
                               .arg = r};
    ssize_t used;

    if (!r->aws_chunked)
        return sink(r, p, n);
    if (r->aws->done) {
        stor_resp_error(r, S3E_INVALID_CHUNK);
        return -EBADMSG;
    }
    used = stor_chunk_decode(r->aws, p, n, &cb);
    if (used < 0) {
        if (r->resp.status == 0)
            stor_resp_error(r, S3E_INVALID_CHUNK);
        return (int)used;
    }
    if ((size_t)used != n) {
        stor_resp_error(r, S3E_INVALID_CHUNK);
        return -EBADMSG;
    }
    return 0;
}

/* See http_i.h. */
bool stor_s3_body_paused(const struct stor_req *r)
{
    return r->body_mode == STOR_BODY_STREAM && r->piece_busy &&
           r->piece_len[r->pfill] >= STOR_PIECE_SIZE;
}

/* Verifies what can only be checked once the body is complete. */
static enum stor_s3_err body_verify(struct stor_req *r)
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
        cksum_final(r, got);
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
static void commit_run(struct stor_req *r)
{
    int idx = r->pfill;

    if (r->put_err == 0 && r->piece_len[idx] > 0)
        r->put_err = stor_put_write(r->put, r->piece[idx], r->piece_len[idx]);
    r->piece_len[idx] = 0;
    stor_s3_put_commit_run(r);
}

/* Loop: queues the final write + commit; the response follows. */
static void submit_commit(struct stor_req *r)
{
    stor_req_submit(r, commit_run, respond_done);
}

/* Loop: the metas of a GET started by get_fast() were read. The body is
 * served from here when they verified; anything else (a missing, stale
 * or corrupt shard, an error) takes the regular path on a worker, which
 * rebuilds, heals and answers errors. */
static void get_fast_done(struct stor_req *r)
{
    struct stor_obj_info info;
    struct stor_get *g = NULL;
    int ret;

    memset(&info, 0, sizeof(info));
    ret = stor_get_nb_end(r->get_nb, &info, &g);
    r->get_nb = NULL;
    stor_metrics_get_loop(stor_srv->metrics, ret == 0 ? STOR_GET_LOOP_READ
                                                      : STOR_GET_LOOP_FALLBACK);
    if (ret < 0) {
        stor_req_submit(r, stor_s3_op_run, respond_done);
        return;
    }
    if (stor_req_bcache(r)) {
        uint64_t size = info.size;

        stor_bcache_put(stor_req_bcache(r), r->bucket, r->cache_id,
                        r->cache_version, stor_get_inline_body(g),
                        (size_t)size);
    }
    stor_s3_get_object_reply(r, &info, g);
    stor_http_respond(r);
}

/* Answers from this loop's body cache when it holds the version the index
 * says is current (the cache checks the bytes' CRC). true when it did. */
static bool get_cached(struct stor_req *r)
{
    struct stor_bcache *bc = stor_req_bcache(r);
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
    stor_metrics_get_loop(stor_srv->metrics, STOR_GET_LOOP_CACHED);
    stor_s3_get_object_reply(r, &info, g);
    stor_http_respond(r);
    return true;
}

/* GetObject of a small (inline) object without a worker round trip: the
 * lookup is in memory (try-locks), the meta reads go to the loop's
 * io_uring. true when it started (get_fast_done follows). */
static bool get_fast(struct stor_req *r)
{
    struct stor_nb_read *rd;
    size_t n;
    int ret;

    if (r->op != S3_OP_GET_OBJECT || r->is_head || !r->has_key)
        return false;
    if (stor_get_nb_begin(stor_srv->store, r->bucket, r->key, r->key_len,
                          &r->get_nb, &rd, &n) < 0)
        return false;
    if (get_cached(r))
        return true;
    if (r->get_nb == NULL) /* the cache's end_with() failed */
        return false;
    ret = stor_req_read_files(r, rd, n, get_fast_done);
    if (ret < 0) {
        if (ret != -EIO) /* -EIO: the kernel may still write its buffers */
            stor_get_nb_free(r->get_nb);
        r->get_nb = NULL;
        return false;
    }
    return true;
}

/* See http_i.h. */
void stor_s3_on_body_end(struct stor_req *r)
{
    enum stor_s3_err e = body_verify(r);

    if (e != S3E_NONE) {
        stor_resp_error(r, e);
        if (r->piece_busy) {
            r->failed = true; /* respond when the write comes back */
            return;
        }
        stor_http_respond(r);
        return;
    }
    if (r->resp.status) { /* answered at head time (health) */
        stor_http_respond(r);
        return;
    }
    if (r->body_mode == STOR_BODY_STREAM) {
        if (r->piece_busy)
            r->end_pending = true;
        else
            submit_commit(r);
        return;
    }
    if (get_fast(r))
        return;
    stor_req_submit(r, stor_s3_op_run, respond_done);
}

/* See http_i.h. */
void stor_s3_req_fini(struct stor_req *r)
{
    cm_digest_destroy(r->sha_chunk);
    cm_digest_destroy(r->sha_body);
    cm_digest_destroy(r->ck_digest);
    r->sha_chunk = r->sha_body = r->ck_digest = NULL;
    cm_buf_fini(&r->trailer_raw);
    stor_get_nb_free(r->get_nb);
    r->get_nb = NULL;
    if (r->fg_entered) {
        r->fg_entered = false;
        stor_store_fg_leave(stor_srv->store);
    }
}

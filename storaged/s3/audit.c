/* storaged/s3/audit.c - the request-header audit: headers S3 defines that
 * change what a request means, and that storaged does not implement, are
 * refused with S3's error for them instead of being silently ignored (a
 * PUT with SSE-C headers must never store plaintext and answer 200).
 * storaged/README.md "Request headers" lists every header and what
 * storaged does with it. */
#include "storaged/s3/s3_i.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "storaged/s3/iam.h"

/* Headers that only a bucket with Object Lock may carry. */
static const char *const lock_hdrs[] = {
    "x-amz-object-lock-mode",
    "x-amz-object-lock-retain-until-date",
    "x-amz-object-lock-legal-hold",
};
/* Storage classes S3 defines; STANDARD is the one storaged implements. */
static const char *const classes[] = {
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER",
    "DEEP_ARCHIVE",
    "OUTPOSTS",
    "GLACIER_IR",
    "SNOW",
    "EXPRESS_ONEZONE",
};

/* true when any of the @n headers @names is present. */
static bool any_hdr(const struct stor_s3_req *r, const char *const *names,
                    size_t n)
{
    size_t i, len;

    for (i = 0; i < n; i++)
        if (stor_s3_hdr(r, names[i], &len) != NULL)
            return true;
    return false;
}

/* S3E_NONE when x-amz-storage-class is absent or STANDARD. */
static enum stor_s3_err class_check(const struct stor_s3_req *r)
{
    size_t n, i;
    const char *v = stor_s3_hdr(r, "x-amz-storage-class", &n);

    if (v == NULL || (n == 8 && memcmp(v, "STANDARD", 8) == 0))
        return S3E_NONE;
    for (i = 1; i < CM_ARRAY_SIZE(classes); i++)
        if (strlen(classes[i]) == n && memcmp(v, classes[i], n) == 0)
            return S3E_STORAGE_CLASS_NOT_IMPLEMENTED;
    return S3E_INVALID_STORAGE_CLASS;
}

/* S3E_NONE when header @name is absent or names the canonical id of the
 * account that owns @bucket (root's unless another account made it). */
static enum stor_s3_err owner_check(const struct stor_s3_req *r,
                                    const char *name, const char *bucket)
{
    struct stor_iam_owner o;
    size_t n;
    const char *v = stor_s3_hdr(r, name, &n);

    if (v == NULL)
        return S3E_NONE;
    stor_iam_owner(r, bucket, &o);
    if (n == strlen(o.id) && memcmp(v, o.id, n) == 0)
        return S3E_NONE;
    return S3E_ACCESS_DENIED;
}

/* The rules of a request that writes an object's data and metadata. SSE
 * on PutObject, CopyObject, CreateMultipartUpload and its parts is
 * sse.c's (stor_sse_write_begin, stor_sse_part_begin). */
static enum stor_s3_err write_check(const struct stor_s3_req *r)
{
    size_t n;

    if (any_hdr(r, lock_hdrs, CM_ARRAY_SIZE(lock_hdrs)))
        return S3E_NO_OBJECT_LOCK;
    if (r->op == S3_OP_PUT_OBJECT &&
        stor_s3_hdr(r, "x-amz-write-offset-bytes", &n) != NULL)
        return S3E_APPEND_NOT_IMPLEMENTED;
    return class_check(r);
}

/* See s3_i.h. */
enum stor_s3_err stor_s3_hdr_audit(const struct stor_s3_req *r)
{
    enum stor_s3_err e = S3E_NONE;
    size_t n;
    const char *v;

    if (r->bucket[0] != 0)
        e = owner_check(r, "x-amz-expected-bucket-owner", r->bucket);
    if (e == S3E_NONE &&
        (r->op == S3_OP_COPY_OBJECT || r->op == S3_OP_UPLOAD_PART_COPY) &&
        stor_s3_hdr(r, "x-amz-source-expected-bucket-owner", &n)) {
        char sb[64];
        char *sk = NULL;
        size_t skl;

        /* a malformed source is refused by the authorisation after this */
        if (stor_s3_copy_source(r, sb, &sk, &skl) == S3E_NONE)
            e = owner_check(r, "x-amz-source-expected-bucket-owner", sb);
        free(sk);
    }
    if (e != S3E_NONE)
        return e;
    switch (r->op) {
    case S3_OP_PUT_OBJECT:
    case S3_OP_CREATE_MPU:
        return write_check(r);
    case S3_OP_COPY_OBJECT:
        /* the source's SSE-C key is checked against the source (sse.c) */
        return write_check(r);
    case S3_OP_UPLOAD_PART_COPY:
        /* an SSE-C key is checked against the upload's (sse.c) */
        break;
    case S3_OP_UPLOAD_PART:
        if (stor_s3_hdr(r, "x-amz-server-side-encryption", &n) != NULL)
            return S3E_SSE_HDR_UNSUPPORTED;
        break;
    case S3_OP_GET_OBJECT:
    case S3_OP_HEAD_OBJECT:
        /* an SSE-C key is checked against the object (sse.c) */
        if (stor_s3_hdr(r, "x-amz-server-side-encryption", &n) != NULL ||
            stor_s3_hdr(r, "x-amz-server-side-encryption-aws-kms-key-id", &n) !=
                NULL)
            return S3E_SSE_HDR_UNSUPPORTED;
        break;
    case S3_OP_CREATE_BUCKET:
        v = stor_s3_hdr(r, "x-amz-bucket-object-lock-enabled", &n);
        if (v != NULL && !(n == 5 && strncasecmp(v, "false", 5) == 0))
            return S3E_OBJECT_LOCK_NOT_IMPLEMENTED;
        break;
    default:
        break;
    }
    return S3E_NONE;
}

/* common/sigv2.h - AWS Signature Version 2 for S3 (RESTAuthentication):
 * the string to sign of a request and its base64 HMAC-SHA1 signature, used
 * by storaged to verify `Authorization: AWS AKID:sig`, SigV2 presigned
 * query strings and the SigV2 POST form.
 *
 * StringToSign = Verb "\n" Content-MD5 "\n" Content-Type "\n" Date "\n"
 *                CanonicalizedAmzHeaders CanonicalizedResource
 * The caller gives the Date line (the Date header, "" when x-amz-date is
 * sent, the Expires of a presigned URL), the x-amz-* headers as sent, the
 * raw (still encoded) path and the raw query; this module lowercases,
 * sorts, trims and joins the amz headers, and picks the sub-resources of
 * the query (decoding their values, as clients sign them). Results go into
 * caller buffers; nothing else is allocated. Thread-safe. */
#ifndef COMMON_SIGV2_H
#define COMMON_SIGV2_H
#include "common/buf.h"
#include "common/compiler.h"
#include "common/sigv4.h" /* struct cm_kv */
#include <stdbool.h>
#include <stddef.h>

#define CM_SIGV2_SIG_LEN 28 /* base64 of a 20-byte HMAC-SHA1, without NUL */
#define CM_SIGV2_MAX_AMZ 64 /* x-amz-* headers a request may sign */

/* Which query names count as sub-resources. The base set is AWS's
 * documented list joined with the one botocore, the AWS SDKs and s3cmd
 * sign (acl, cors, delete, lifecycle, location, logging, notification,
 * partNumber, policy, requestPayment, tagging, torrent, uploadId, uploads,
 * versionId, versioning, versions, website, the response-* overrides,
 * ...). CM_SIGV2_SUB_EXTRA adds the names some servers and SDKs sign and
 * botocore does not (encryption, retention, legal-hold, policyStatus,
 * publicAccessBlock, ...), so a verifier can try both. */
enum cm_sigv2_subres {
    CM_SIGV2_SUB_BASE = 1,
    CM_SIGV2_SUB_EXTRA = 2,
};

struct cm_sigv2_req {
    const char *method; /* "GET", ... */
    const char *content_md5;
    size_t content_md5_len; /* NULL / 0: the line is empty */
    const char *content_type;
    size_t content_type_len;
    const char *date; /* Date, "" or Expires (see above) */
    size_t date_len;
    const struct cm_kv *amz; /* the x-amz-* headers, any case, any order */
    size_t namz;             /* at most CM_SIGV2_MAX_AMZ */
    const char *bucket;      /* virtual-hosted style: the bucket from Host,
                                prepended as "/bucket"; NULL: path style */
    const char *path;        /* raw path as sent, starts with '/' */
    size_t path_len;
    bool path_slash; /* append '/' to the path: "/bucket" signed as
                        "/bucket/", as botocore signs a path-style bucket */
    /* botocore before 1.31 or so signs the query of the operation's URI
     * template literally after the path ("/b?uploads", "/b?list-type=2")
     * and then the sub-resources again ("/b?uploads?uploads"): @lead,
     * when set, is that text, put as "?" lead before the sub-resources
     * (which still start with '?'). NULL: AWS's form. */
    const char *lead;
    size_t lead_len;
    const char *query; /* raw query after '?', NULL: none */
    size_t query_len;
    unsigned subres; /* enum cm_sigv2_subres bits; 0 = CM_SIGV2_SUB_BASE */
};

/* Appends the string to sign of @r to @out. 0, -ENOMEM, or -EINVAL (too
 * many amz headers, a malformed escape in a sub-resource's value). */
CM_MUST_CHECK int cm_sigv2_string_to_sign(const struct cm_sigv2_req *r,
                                          struct cm_buf *out);
/* base64(HMAC-SHA1(@secret, @sts)): CM_SIGV2_SIG_LEN chars and a NUL. */
void cm_sigv2_signature(const char *secret, const char *sts, size_t sts_len,
                        char out[CM_SIGV2_SIG_LEN + 1]);
/* The class (enum cm_sigv2_subres) of query name @name, 0 for none. */
unsigned cm_sigv2_subresource(const char *name, size_t n);
/* Constant-time comparison of a computed signature @want (NUL-terminated)
 * with @n bytes of a received one; false when the lengths differ. */
bool cm_sigv2_equal(const char *want, const char *got, size_t n);

#endif /* COMMON_SIGV2_H */

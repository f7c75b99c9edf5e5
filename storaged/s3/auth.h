/* storaged/s3/auth.h - request authentication for the S3 front end: AWS
 * SigV4 (the Authorization header and presigned query strings, the payload
 * modes of x-amz-content-sha256, and the per-chunk and trailer signatures
 * of aws-chunked bodies) and SigV2 (`Authorization: AWS AKID:sig` and
 * presigned AWSAccessKeyId/Expires/Signature query strings; refused with
 * `--no-sigv2`). Both end in the same identity (root or r->iam_user). The keys
 * are root's and the users' (iam.h). Runs on the loop thread (HMACs only, no
 * I/O); each thread's scratch buffers are freed by a thread-key destructor when
 * it exits. */
#ifndef STORAGED_S3_AUTH_H
#define STORAGED_S3_AUTH_H
#include "storaged/s3/err.h"
#include <stddef.h>
#include <time.h>

struct stor_s3_req;

/* Authenticates @r at wall-clock @now: verifies the signature, the clock
 * skew or presign expiry, and sets r->payload (and the signing state that
 * aws-chunked bodies need) and who signed (r->iam_user, NULL for root). A
 * request without any credentials is S3E_NONE with r->anonymous set;
 * stor_iam_authorize decides what it may do. A disabled user's correctly
 * signed request is S3E_ACCESS_DENIED. S3E_NONE or the error to answer. */
enum stor_s3_err stor_auth_check(struct stor_s3_req *r, time_t now);

/* The secret of access key @ak (@n bytes): root's, or a user's, whose
 * snapshot reference becomes the request's (r->iam_user, r->iam_snap; an
 * earlier one is dropped). S3E_NONE, S3E_INVALID_ACCESS_KEY,
 * S3E_INDEX_REBUILDING (users not loaded yet) or S3E_ACCESS_DENIED (the
 * user's secret could not be decrypted). */
enum stor_s3_err stor_auth_secret(struct stor_s3_req *r, const char *ak,
                                  size_t n, const char **secret);

/* aws-chunked with signed chunks: verifies the signature @sig (64 hex) of
 * a chunk whose data hashed to @sha_hex, and advances the chain. */
enum stor_s3_err stor_auth_chunk(struct stor_s3_req *r, const char *sig,
                                 size_t sig_len, const char *sha_hex);
/* Verifies the trailer signature over the canonical trailer bytes
 * collected in r->trailer_raw. */
enum stor_s3_err stor_auth_trailer(struct stor_s3_req *r);

#endif /* STORAGED_S3_AUTH_H */

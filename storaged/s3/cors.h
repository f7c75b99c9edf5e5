/* storaged/s3/cors.h - bucket CORS configurations (Get/Put/DeleteBucketCors)
 * and the answers made from them: preflight OPTIONS, and the
 * Access-Control-* headers of requests that carry Origin, so browsers can
 * use presigned URLs across origins. The rules live in the state document
 * (iam.h) and are read without I/O: the loop calls these. */
#ifndef STORAGED_S3_CORS_H
#define STORAGED_S3_CORS_H
#include <stddef.h>

#include "storaged/s3/err.h"

struct stor_s3_req;

/* Loop, once the target is decoded: a request with Origin gets the
 * headers of the first rule of its bucket that allows it. */
void stor_cors_on_head(struct stor_s3_req *r);
/* Loop: OPTIONS. S3E_NONE with the 200 answer set, or the error. */
enum stor_s3_err stor_cors_preflight(struct stor_s3_req *r);
/* Worker: r->op S3_OP_BUCKET_CORS. */
void stor_cors_bucket_op(struct stor_s3_req *r);
/* The configuration parser, for the fuzz target: 0 and the rule count, or
 * minus the enum stor_s3_err a PutBucketCors of @xml would answer. */
int stor_cors_check_xml(const char *xml, size_t len, size_t *nrules);

#endif /* STORAGED_S3_CORS_H */

/* storaged/s3/lifecycle.h - S3 bucket lifecycle: Put/Get/Delete-
 * BucketLifecycleConfiguration, and the lifecycle scanner, a background
 * thread that applies the rules (Expiration by days or date with prefix,
 * tag and size filters, NoncurrentVersionExpiration, ExpiredObjectDelete-
 * Marker, AbortIncompleteMultipartUpload). Transitions are refused with
 * NotImplemented: there is one storage class.
 *
 * Test-only knobs (environment, read at start; never for production):
 * STORAGED_TEST_LIFECYCLE_DAY_S (seconds a lifecycle "day" lasts, default
 * 86400) and STORAGED_TEST_LIFECYCLE_INTERVAL_S (seconds between scanner
 * passes, default 3600).
 *
 * Threads: the op runs on a worker; the scanner has its own thread, which
 * only calls the object layer and versioning.c. */
#ifndef STORAGED_S3_LIFECYCLE_H
#define STORAGED_S3_LIFECYCLE_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>

struct stor_store;
struct stor_ver;
struct stor_s3_req;
struct stor_lc;

/* The parsed rules of one configuration. */
struct stor_lc_conf;

/* Parses and checks a LifecycleConfiguration document. 0 and *out (free
 * with stor_lc_conf_free), or a negative enum stor_s3_err (the S3 error
 * for the document: MalformedXML, InvalidArgument, NotImplemented for
 * transitions) or -ENOMEM (... as -S3E_INTERNAL). */
CM_MUST_CHECK int stor_lc_parse(const char *xml, size_t len,
                                struct stor_lc_conf **out);
void stor_lc_conf_free(struct stor_lc_conf *c);

/* GET/PUT/DELETE /bucket?lifecycle. */
void stor_lc_op(struct stor_s3_req *r);

/* Starts the scanner thread (it waits for the store to be ready). 0 or
 * -errno. @st and @v are borrowed and outlive it. */
CM_MUST_CHECK int stor_lc_start(struct stor_store *st, struct stor_ver *v,
                                struct stor_lc **out);
/* Stops and joins the scanner; frees it (NULL: no-op). */
void stor_lc_stop(struct stor_lc *lc);
/* Appends the storaged_lifecycle_* series (Prometheus text). 0 or
 * -ENOMEM. NULL @lc: nothing. */
CM_MUST_CHECK int stor_lc_metrics(struct stor_lc *lc, struct cm_buf *o);
/* x-amz-expiration of an object (PUT, GET, HEAD): loads @bucket's
 * configuration into the cache once (worker only; cheap when cached). */
void stor_lc_warm(struct stor_lc *lc, const char *bucket);
/* True when @bucket's configuration (or its absence) is in the cache, so
 * stor_lc_expiration answers for it (or @lc is NULL). Never blocks long
 * (the cache's mutex): the event loop asks it before it answers a GET or
 * HEAD itself, and leaves a bucket not cached yet to a worker. */
bool stor_lc_cached(struct stor_lc *lc, const char *bucket);
/* Forgets @bucket's cached configuration (it changed, or the bucket went). */
void stor_lc_forget(struct stor_lc *lc, const char *bucket);
struct stor_obj_info;
struct stor_resp;
/* Adds `x-amz-expiration: expiry-date="...", rule-id="..."` to @rs when a
 * cached Expiration rule of @bucket applies to @key (@info: size, mtime,
 * tags). Never blocks (no I/O: a bucket not cached yet gets no header).
 * 0 or -ENOMEM. */
CM_MUST_CHECK int stor_lc_expiration(struct stor_lc *lc, const char *bucket,
                                     const char *key, size_t kl,
                                     const struct stor_obj_info *info,
                                     struct stor_resp *rs);

#endif /* STORAGED_S3_LIFECYCLE_H */

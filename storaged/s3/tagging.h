/* storaged/s3/tagging.h - object tagging (Get/Put/DeleteObjectTagging,
 * also of a version) and bucket tagging (Get/Put/DeleteBucketTagging).
 * Tags are returned sorted by key. Runs on a worker. */
#ifndef STORAGED_S3_TAGGING_H
#define STORAGED_S3_TAGGING_H
#include <stddef.h>

struct stor_s3_req;

/* r->op S3_OP_TAGGING: the object's (r->has_key) or the bucket's. */
void stor_s3_tagging_op(struct stor_s3_req *r);

/* The request-body parser, for tests and the fuzz target: a <Tagging>
 * body of at most @max tags into the stored form (*out, malloc'd,
 * "k=v&..." sorted), checked to decode back to the same tags (-EPROTO if
 * not: a bug). 0, -ENOMEM, or minus the enum stor_s3_err it answers. */
int stor_s3_tags_from_xml(const char *xml, size_t len, size_t max, char **out,
                          size_t *ntags);

#endif /* STORAGED_S3_TAGGING_H */

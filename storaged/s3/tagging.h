/* storaged/s3/tagging.h - object tagging (Get/Put/DeleteObjectTagging,
 * also of a version) and bucket tagging (Get/Put/DeleteBucketTagging).
 * Tags are returned sorted by key. Runs on a worker. */
#ifndef STORAGED_S3_TAGGING_H
#define STORAGED_S3_TAGGING_H
#include <stddef.h>

#include "storaged/s3/err.h"

struct stor_s3_req;

/* r->op S3_OP_TAGGING: the object's (r->has_key) or the bucket's. */
void stor_s3_tagging_op(struct stor_s3_req *r);

/* Where version @vid (NULL: the current one) of r->key lives: @bucket
 * (64 bytes) and a malloc'd *key (the companion bucket's for an old
 * version). S3E_NONE, NoSuchVersion, or MethodNotAllowed for a delete
 * marker. Worker. */
enum stor_s3_err stor_s3_locate_version(struct stor_s3_req *r, const char *vid,
                                        char *bucket, char **key, size_t *klen);
/* Worker: GetObjectAttributes (r->op S3_OP_OBJECT_ATTRIBUTES; attrs.c). */
void stor_s3_attributes_op(struct stor_s3_req *r);

/* The request-body parser, for tests and the fuzz target: a <Tagging>
 * body of at most @max tags into the stored form (*out, malloc'd,
 * "k=v&..." sorted), checked to decode back to the same tags (-EPROTO if
 * not: a bug). 0, -ENOMEM, or minus the enum stor_s3_err it answers. */
int stor_s3_tags_from_xml(const char *xml, size_t len, size_t max, char **out,
                          size_t *ntags);

#endif /* STORAGED_S3_TAGGING_H */

/* storaged/s3/s3_i.h - declarations shared by the S3 front end's files:
 * s3.c (hooks, routing, body pipeline), s3_ops.c (operations, run on
 * workers), s3_xml.c (request XML). */
#ifndef STORAGED_S3_S3_I_H
#define STORAGED_S3_S3_I_H
#include "storaged/http/http_i.h"
#include <stdbool.h>
#include <stddef.h>

#define S3_XMLNS    "http://s3.amazonaws.com/doc/2006-03-01/"
#define S3_XML_DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define S3_MIN_PART (5 * 1024 * 1024)
/* The largest PutObject / UploadPart body and CopyObject / UploadPartCopy
 * source (range) S3 accepts: 5 GiB. */
#define S3_MAX_PUT ((uint64_t)5 * 1024 * 1024 * 1024)

/* ---- operations (s3_ops.c); each runs on a worker and fills r->resp ---- */
void stor_s3_op_run(struct stor_req *r);        /* dispatch on r->op */
void stor_s3_put_begin_run(struct stor_req *r); /* PutObject/UploadPart pre */
void stor_s3_put_commit_run(struct stor_req *r);
/* The rest of GetObject/HeadObject once the object is open: conditionals,
 * range, headers, body (whole, or the stream for big ones). Takes
 * ownership of @g (NULL for HEAD) and of @info's contents (left empty). */
void stor_s3_get_object_reply(struct stor_req *r, struct stor_obj_info *info,
                              struct stor_get *g);
/* Builds the stored headers of a new object from the request (content-*,
 * cache-control, expires, x-amz-meta-*, a verified checksum). *out is
 * malloc'd (free with stor_s3_hdrs_free). 0 or -ENOMEM. */
int stor_s3_req_obj_hdrs(const struct stor_req *r, struct stor_hdr **out,
                         size_t *n);
void stor_s3_hdrs_free(struct stor_hdr *h, size_t n);
/* Name of the x-amz-checksum-* header of algorithm @k (s3.c). */
const char *stor_s3_cksum_hdr(enum stor_cksum k);
/* true when @b is a valid bucket name (S3 naming rules). */
bool stor_s3_bucket_name_ok(const char *b);

/* ---- request XML (s3_xml.c) ---- */
struct stor_s3_del_key {
    char *key; /* owned */
    size_t key_len;
    bool bad_version; /* a <VersionId> other than "null" came with it */
};
/* <Delete><Quiet/><Object><Key/></Object>...</Delete>; 0 or -EBADMSG
 * (malformed or more than 1000 keys) or -ENOMEM. Free with
 * stor_s3_del_keys_free. */
int stor_s3_parse_delete(const char *xml, size_t len,
                         struct stor_s3_del_key **keys, size_t *n, bool *quiet);
void stor_s3_del_keys_free(struct stor_s3_del_key *k, size_t n);
/* <CompleteMultipartUpload><Part><PartNumber/><ETag/></Part>...; ETags
 * are stored without quotes. *parts malloc'd (free()). 0 / -EBADMSG /
 * -ENOMEM. */
int stor_s3_parse_complete(const char *xml, size_t len,
                           struct stor_part **parts, size_t *n);

#endif /* STORAGED_S3_S3_I_H */

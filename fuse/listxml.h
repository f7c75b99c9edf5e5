/* fuse/listxml.h - parsing of S3 ListObjectsV2 results and S3 error bodies
 * with expat. A page owns its strings; a listing is one or more pages folded
 * into a directory snapshot by fuse/inode.c. */
#ifndef FUSE_LISTXML_H
#define FUSE_LISTXML_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct fc_listobj {
    char *key; /* full key; owned */
    uint64_t size;
    time_t mtime;
    char *etag; /* as listed, with quotes; owned; may be "" */
};

struct fc_listpage {
    struct fc_listobj *objs; /* owned array */
    size_t nobjs, capobjs;
    char **prefixes; /* CommonPrefixes, owned */
    size_t nprefixes, capprefixes;
    bool truncated;   /* IsTruncated */
    char *next_token; /* NextContinuationToken; owned; NULL if none */
    char *error_code; /* <Error><Code> when the body was an error */
};

void fc_listpage_init(struct fc_listpage *p);
void fc_listpage_fini(struct fc_listpage *p);
/* Parses one ListBucketResult (or Error) document of @n bytes, appending to
 * @p. 0, -EBADMSG on malformed XML, -ENOMEM. */
CM_MUST_CHECK int fc_listxml_parse(const char *xml, size_t n,
                                   struct fc_listpage *p);

#endif /* FUSE_LISTXML_H */

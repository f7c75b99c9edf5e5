/* storaged/store/obj_ver.c - object conditions the S3 versioning layer and
 * the store's delete share (object.h: struct stor_del_cond).
 *
 * DESIGN: one matcher, so a conditional delete of an unversioned object
 * (checked by the store under the key's lock, obj_io.c) and of a version
 * (checked by s3/versioning.c under its own key lock) decide alike. */
#include "storaged/store/object.h"

#include <string.h>

/* See object.h. */
bool stor_del_cond_any(const struct stor_del_cond *c)
{
    return c && (c->etag_set || c->mtime_set || c->size_set);
}

/* See object.h. */
bool stor_del_cond_match(const struct stor_del_cond *c, const char *etag,
                         time_t mtime, uint64_t size)
{
    if (!stor_del_cond_any(c))
        return true;
    if (c->etag_set && strcmp(c->etag, "*") != 0 &&
        (etag == NULL || strcmp(c->etag, etag) != 0))
        return false;
    if (c->mtime_set && c->mtime != mtime)
        return false;
    if (c->size_set && (etag == NULL || c->size != size))
        return false;
    return true;
}

/* common/uri.h - percent-encoding as SigV4 and S3 require it.
 * Unreserved (A-Z a-z 0-9 - _ . ~) pass through; every other byte becomes
 * %XX with uppercase hex; '/' is kept only when @keep_slash. */
#ifndef COMMON_URI_H
#define COMMON_URI_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>

CM_MUST_CHECK int cm_uri_encode(struct cm_buf *out, const char *s, size_t n,
                                bool keep_slash);
/* Decodes %XX (and '+' as space when @plus_is_space) into @out.
 * Returns 0 or -EINVAL on a malformed escape (out is then left empty). */
CM_MUST_CHECK int cm_uri_decode(struct cm_buf *out, const char *s, size_t n,
                                bool plus_is_space);

#endif /* COMMON_URI_H */

/* storaged/s3/acl.h - S3 access control lists as grant lists: read from
 * x-amz-grant-* headers and AccessControlPolicy bodies, the permissions a
 * list gives a caller, and the AccessControlPolicy answer.
 * A list is kept in the access-control document (iam.h) as a JSON array,
 * [{"p":"READ","id":"<canonical id>"}, {"p":"WRITE","g":"AllUsers"}], in
 * the order it was given; a canned ACL stays its name (a JSON string).
 * Everything here is pure: no I/O, no locks; the caller owns what it
 * passes and gets new references back. */
#ifndef STORAGED_S3_ACL_H
#define STORAGED_S3_ACL_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "storaged/s3/err.h"

/* Permissions, as bits; FULL_CONTROL is all four. */
enum stor_acl_perm {
    STOR_ACL_READ = 1,
    STOR_ACL_WRITE = 2,
    STOR_ACL_READ_ACP = 4,
    STOR_ACL_WRITE_ACP = 8,
    STOR_ACL_FULL = 15,
};

#define STOR_ACL_MAX_GRANTS 100 /* S3's limit per ACL */

/* Whether canonical id @id (NUL-terminated) names an account. */
typedef bool stor_acl_id_known(void *arg, const char *id);
/* The display name of canonical id @id, or NULL. */
typedef const char *stor_acl_id_name(void *arg, const char *id);

/* The x-amz-grant-* headers (@get(@arg, name, &len) returns a header's
 * value or NULL) as a new list in *out (NULL when none is given), grants
 * in header order (read, write, read-acp, write-acp, full-control), each
 * value a comma-separated list of id=, uri= or emailAddress= (quoted or
 * not). S3E_NONE, or the error with *msg: InvalidArgument (malformed, an
 * unknown id or group), UnresolvableGrantByEmailAddress (no account has
 * an email address here), S3E_INTERNAL (no memory). */
typedef const char *stor_acl_hdr_get(void *arg, const char *name, size_t *n);
enum stor_s3_err stor_acl_from_headers(stor_acl_hdr_get *get, void *arg,
                                       stor_acl_id_known *known, void *karg,
                                       json_t **out, const char **msg);
/* An AccessControlPolicy body (@len bytes) as a new list in *out; its
 * Owner is not kept (the resource's owner stays). S3E_NONE,
 * S3E_MALFORMED_XML (not well-formed), S3E_MALFORMED_ACL (not an
 * AccessControlPolicy: a grant without grantee or permission, an unknown
 * permission or grantee type, more than STOR_ACL_MAX_GRANTS grants), the
 * errors of stor_acl_from_headers for grantees, S3E_INTERNAL. */
enum stor_s3_err stor_acl_from_xml(const char *xml, size_t len,
                                   stor_acl_id_known *known, void *karg,
                                   json_t **out, const char **msg);
/* What ACL @acl (a list, a canned name, or NULL: private) grants a caller
 * acting as the account with canonical id @id (NULL: none, as an
 * anonymous caller or a user, whom only its policy and the groups give
 * anything) on a resource @owner owns: enum stor_acl_perm bits.
 * @signed_in: AuthenticatedUsers counts. @ignore_public: grants to the
 * AllUsers and AuthenticatedUsers groups count for nothing
 * (IgnorePublicAcls). */
unsigned stor_acl_perms(const json_t *acl, const char *owner, const char *id,
                        bool signed_in, bool ignore_public);
/* Whether @acl grants anything to AllUsers or AuthenticatedUsers. */
bool stor_acl_is_public(const json_t *acl);
/* Appends the AccessControlPolicy document of @acl on a resource owned by
 * @owner (@owner_name) to @b, names resolved with @name. 0 or -ENOMEM. */
int stor_acl_xml(struct cm_buf *b, const json_t *acl, const char *owner,
                 const char *owner_name, stor_acl_id_name *name, void *narg);

#endif /* STORAGED_S3_ACL_H */

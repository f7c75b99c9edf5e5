/* storaged/s3/iam.h - users, keys, bucket policies and canned ACLs, kept in
 * the store's system area (one erasure-coded object, STOR_IAM_BUCKET /
 * STOR_IAM_OBJECT), and the authorisation of every request.
 *
 * Ownership and threads: the state is an immutable snapshot, replaced as a
 * whole by each change (on a worker, under the state's write mutex, after
 * the new document is committed to the store); a request takes a reference
 * to the snapshot its user came from and drops it in req_fini, so a change
 * never frees what a request still reads. Lookups and evaluation run on
 * the loop threads without I/O. Secrets are kept encrypted at rest
 * (AES-256-GCM under a key derived from the root credentials with
 * PBKDF2-HMAC-SHA256) and never logged. */
#ifndef STORAGED_S3_IAM_H
#define STORAGED_S3_IAM_H
#include "common/compiler.h"
#include "storaged/s3/err.h"
#include "storaged/s3/policy.h"
#include <stdbool.h>
#include <stddef.h>

/* The system area: a bucket name S3 clients cannot create (two dots) but
 * the store accepts, and the state document in it. */
#define STOR_IAM_BUCKET "storaged..system"
#define STOR_IAM_OBJECT "iam.json"

#define STOR_IAM_AK_LEN 20 /* access key: 20 of [A-Z0-9], as AWS's */
#define STOR_IAM_SK_LEN 40 /* secret: 40 of base64url-ish characters */

struct stor_store;
struct stor_iam;
struct stor_iam_snap;
struct stor_iam_user;
struct stor_s3_req;

/* Loads the state from @store (an empty one when there is none yet). When
 * the store is not ready yet (an index rebuild at start), a thread loads
 * it once the store is; until then stor_iam_ready() is false.
 * @root_user/@root_secret are borrowed and outlive the state. 0, or
 * -errno with *err (malloc'd) saying why. */
CM_MUST_CHECK int stor_iam_open(struct stor_store *store, const char *root_user,
                                const char *root_secret, struct stor_iam **out,
                                char **err);
void stor_iam_close(struct stor_iam *iam);
/* Any thread: the state is loaded, so users and policies can be decided
 * (true for a NULL @iam: a front end without a store, as unit tests
 * make). */
bool stor_iam_ready(struct stor_iam *iam);

/* Loop: the user with access key @ak (@n bytes) and a new reference to the
 * snapshot it lives in (drop with stor_iam_snap_unref), or NULL. */
const struct stor_iam_user *stor_iam_user_lookup(struct stor_iam *iam,
                                                 const char *ak, size_t n,
                                                 struct stor_iam_snap **snap);
void stor_iam_snap_unref(struct stor_iam_snap *s);
/* The user's secret (NUL-terminated) and whether it may sign requests
 * (enabled, and its secret could be decrypted). */
const char *stor_iam_user_secret(const struct stor_iam_user *u);
bool stor_iam_user_enabled(const struct stor_iam_user *u);
const char *stor_iam_user_name(const struct stor_iam_user *u);

/* Loop, after authentication and routing: whether @r may do what it
 * asks. S3E_NONE or S3E_ACCESS_DENIED (or the error a malformed ACL
 * header gets). */
enum stor_s3_err stor_iam_authorize(struct stor_s3_req *r);
/* Loop: whether a request refused by stor_iam_authorize() needs the
 * store to say why (it names a bucket other than the system area); then
 * stor_iam_denied_run() answers it on a worker (not CreateBucket: its
 * bucket need not exist). */
bool stor_iam_denial_checks_store(const struct stor_s3_req *r);
/* Worker: the answer to a refused request, as AWS gives it: 404
 * NoSuchBucket when the bucket does not exist, 404 NoSuchKey for a
 * GET/HEAD of a missing key when the caller may list the bucket, else 403
 * AccessDenied. */
void stor_iam_denied_run(struct stor_s3_req *r);
/* Loop, after stor_iam_authorize(): whether its decision needed the
 * stored object's tags (an s3:ExistingObjectTag condition was reached),
 * so it is not final: stor_iam_tags_run() then decides on a worker. */
bool stor_iam_needs_tags(const struct stor_s3_req *r);
/* Worker: loads the tags of the object (or ?versionId) @r names and
 * authorises @r again with them; sets the error response when refused
 * (as stor_iam_authorize and stor_iam_denied_run answer). */
void stor_iam_tags_run(struct stor_s3_req *r);
/* Worker: whether @r's caller may do @act on @key (@n bytes) of
 * r->bucket (DeleteObjects, per key). */
bool stor_iam_allowed(struct stor_s3_req *r, enum stor_act act, const char *key,
                      size_t n);
/* Worker: whether ListBuckets shows @bucket to @r's caller. */
bool stor_iam_bucket_visible(struct stor_s3_req *r, const char *bucket);

/* Worker: the operations storaged answers from this state (routing sets
 * r->op to S3_OP_ADMIN, S3_OP_BUCKET_POLICY, S3_OP_BUCKET_POLICY_STATUS,
 * S3_OP_BUCKET_ACL, S3_OP_OBJECT_ACL or S3_OP_BUCKET_PAB); each fills the
 * response. */
void stor_iam_op_run(struct stor_s3_req *r);

/* Worker, after a successful write of r->bucket/@key by @r: records the
 * object's canned ACL (x-amz-acl, private by default), as S3 resets an
 * object's ACL on overwrite. After DeleteObject @deleted says the key is
 * gone. Failures are logged (the object write itself stands). */
void stor_iam_object_written(struct stor_s3_req *r, const char *key, size_t n,
                             bool deleted);
/* Worker: a bucket was created (its x-amz-acl is recorded) or deleted
 * (its policy and ACLs go with it, so a new bucket of that name starts
 * private). */
void stor_iam_bucket_changed(struct stor_s3_req *r, bool deleted);
/* Worker: CreateBucket of a bucket the caller's account already owns, in
 * us-east-1: as S3 there, the bucket's ACL is reset to the request's
 * (x-amz-acl or x-amz-grant-*; private without them). Its policy,
 * objects and owner stay. 0, or -errno when it could not be recorded. */
int stor_iam_bucket_recreated(struct stor_s3_req *r);

/* The owner of @bucket (its creator's account; root's when none is
 * recorded), or with @bucket NULL the account @r's caller acts for: its
 * canonical id and display name (Owner elements, ACL answers), and
 * whether it is the caller's account (CreateBucket of an existing
 * bucket: BucketAlreadyOwnedByYou or BucketAlreadyExists). Any thread. */
struct stor_iam_owner {
    char id[65];
    char name[65];
    bool callers;
};
void stor_iam_owner(const struct stor_s3_req *r, const char *bucket,
                    struct stor_iam_owner *out);
/* The account @r's caller acts for when it is not the root one (its
 * name, borrowed from @r's snapshot), else NULL; always NULL until some
 * account exists. */
const char *stor_iam_caller_account(const struct stor_s3_req *r);
/* Whether some account other than root's exists (one atomic load). */
bool stor_iam_has_accounts(struct stor_iam *iam);
/* Owner fields of account @name (NULL or unknown: root's); any thread. */
void stor_iam_account_owner(struct stor_iam *iam, const char *name,
                            struct stor_iam_owner *out);
/* The stored header naming the account that started a multipart upload
 * (kept only for accounts other than root's; x-ecfs-* never reaches a
 * client). */
#define STOR_IAM_HDR_INITIATOR "x-ecfs-initiator"
/* The stored header keeping the ACL a CreateMultipartUpload asked for
 * (x-amz-acl or x-amz-grant-*), set on the object at its Complete. */
#define STOR_IAM_HDR_ACL "x-ecfs-acl"
struct stor_hdr;
/* The ACL of @r's headers as the value of STOR_IAM_HDR_ACL (malloc'd), or
 * NULL when it is private (or no memory: the upload is then refused). */
char *stor_iam_upload_acl(const struct stor_s3_req *r, bool *nomem);
/* Worker, before stor_iam_object_written at a Complete: takes the ACL the
 * upload kept in its headers @h (@n) as if @r had asked for it. */
void stor_iam_upload_acl_restore(struct stor_s3_req *r,
                                 const struct stor_hdr *h, size_t n);

/* Configuration kept in the same state document (persisted, erasure-coded,
 * replaced as a whole like the rest): per bucket, a string @field of
 * r->bucket ("encryption", "tagging", "cors", ...; dropped with the
 * bucket), and server-wide fields (the SSE-S3 master key, sse.c).
 * Getters: any thread, no I/O; a malloc'd copy or NULL (none, or out of
 * memory). Setters: a worker; @value NULL removes; 0 or -errno (nothing
 * changed). */
char *stor_iam_bucket_conf(struct stor_iam *iam, const char *bucket,
                           const char *field);
CM_MUST_CHECK int stor_iam_bucket_conf_set(struct stor_s3_req *r,
                                           const char *field,
                                           const char *value);
char *stor_iam_sys_conf(struct stor_iam *iam, const char *field);
CM_MUST_CHECK int stor_iam_sys_conf_set(struct stor_iam *iam, const char *field,
                                        const char *value);

#endif /* STORAGED_S3_IAM_H */

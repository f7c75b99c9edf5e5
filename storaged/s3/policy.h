/* storaged/s3/policy.h - access policies: the AWS policy JSON subset
 * (Version, Statement[] with Effect, Action, Resource, Principal for bucket
 * policies, Condition StringEquals/StringLike/StringNotEquals/StringNotLike
 * and Null on s3:prefix, s3:delimiter, the request-header keys
 * (s3:x-amz-acl, s3:x-amz-copy-source, s3:x-amz-metadata-directive,
 * s3:x-amz-server-side-encryption[-customer-algorithm], ...) and
 * s3:RequestObjectTag/NAME, s3:ExistingObjectTag/NAME; IpAddress/
 * NotIpAddress on aws:SourceIp)
 * compiled once into a form evaluated per request without allocation. A
 * compiled policy is immutable after creation and may be evaluated from any
 * thread. */
#ifndef STORAGED_S3_POLICY_H
#define STORAGED_S3_POLICY_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The actions storaged authorises (one bit each in a compiled statement). */
enum stor_act {
    STOR_ACT_GET_OBJECT = 0,
    STOR_ACT_PUT_OBJECT,
    STOR_ACT_DELETE_OBJECT,
    STOR_ACT_LIST_BUCKET,
    STOR_ACT_LIST_ALL_MY_BUCKETS,
    STOR_ACT_CREATE_BUCKET,
    STOR_ACT_DELETE_BUCKET,
    STOR_ACT_GET_BUCKET_LOCATION,
    STOR_ACT_LIST_BUCKET_MPU,
    STOR_ACT_LIST_MPU_PARTS,
    STOR_ACT_ABORT_MPU,
    STOR_ACT_GET_BUCKET_POLICY,
    STOR_ACT_PUT_BUCKET_POLICY,
    STOR_ACT_DELETE_BUCKET_POLICY,
    STOR_ACT_GET_BUCKET_ACL,
    STOR_ACT_PUT_BUCKET_ACL,
    STOR_ACT_GET_OBJECT_ACL,
    STOR_ACT_PUT_OBJECT_ACL,
    STOR_ACT_GET_OBJECT_TAGGING,
    STOR_ACT_PUT_OBJECT_TAGGING,
    STOR_ACT_DELETE_OBJECT_TAGGING,
    STOR_ACT_GET_BUCKET_CONFIG, /* versioning, cors, ...: read-only answers */
    STOR_ACT_LIST_BUCKET_VERSIONS, /* ListObjectVersions */
    STOR_ACT_PUT_BUCKET_VERSIONING,
    STOR_ACT_GET_OBJECT_VERSION,    /* GET/HEAD ?versionId=, copy from one */
    STOR_ACT_DELETE_OBJECT_VERSION, /* DELETE ?versionId= */
    STOR_ACT_GET_LIFECYCLE,
    STOR_ACT_PUT_LIFECYCLE, /* Put and DeleteBucketLifecycle, as AWS */
    STOR_ACT_GET_BUCKET_PAB,
    STOR_ACT_PUT_BUCKET_PAB, /* Put and DeletePublicAccessBlock, as AWS */
    STOR_ACT_GET_BUCKET_POLICY_STATUS,
    STOR_ACT_GET_BUCKET_OWNERSHIP,
    STOR_ACT_PUT_BUCKET_OWNERSHIP, /* Put and Delete, as AWS */
    STOR_ACT_ADMIN_CREATE_USER,
    STOR_ACT_ADMIN_DELETE_USER,
    STOR_ACT_ADMIN_LIST_USERS,
    STOR_ACT_ADMIN_ENABLE_USER, /* enable and disable */
    STOR_ACT_ADMIN_GET_POLICY,
    STOR_ACT_ADMIN_PUT_POLICY,
    STOR_ACT_COUNT
};

/* The policy name of @a ("s3:GetObject", "admin:CreateUser"). */
const char *stor_act_name(enum stor_act a);

enum stor_pol_kind {
    STOR_POL_USER,   /* an identity policy: no Principal */
    STOR_POL_BUCKET, /* a bucket policy: Principal required */
};

/* What a condition key's value callback is asked for. */
enum stor_pol_vkind {
    STOR_POL_V_HDR,    /* s3:x-amz-acl ...: a request header */
    STOR_POL_V_REQTAG, /* s3:RequestObjectTag/NAME */
    STOR_POL_V_EXTAG,  /* s3:ExistingObjectTag/NAME: the stored object's */
};

/* What a request is, as the evaluator sees it. Strings are borrowed. */
struct stor_pol_ctx {
    enum stor_act act;
    const char *bucket; /* "" for ListBuckets and admin actions */
    const char *key;    /* NULL: the bucket itself */
    size_t key_len;
    /* listing conditions: NULL when the request has no such parameter
     * (ListObjects without prefix= has s3:prefix "", as AWS treats it) */
    const char *prefix;
    const char *delimiter;
    /* who: NULL for an anonymous request; the account it acts for (name
     * and canonical id; "root" for the root account), NULL too */
    const char *user;
    const char *account;
    const char *account_id;
    /* the client's address, filled on first use by @peer (aws:SourceIp) */
    int (*peer)(void *arg, struct sockaddr_storage *ss);
    void *peer_arg;
    /* a condition key's value, asked for on first use (@kind): the
     * request header @name (lower case), the value of tag @name in the
     * request's x-amz-tagging, or that of the existing object's tag
     * @name. NULL when absent; else the value (*n bytes), borrowed or
     * written into @buf (@cap bytes). NULL @value: every such key is
     * absent. */
    const char *(*value)(void *arg, enum stor_pol_vkind kind, const char *name,
                         char *buf, size_t cap, size_t *n);
    void *value_arg;
};
#define STOR_POL_VALUE_MAX 2048 /* the @buf the evaluator lends @value */

enum stor_pol_effect {
    STOR_POL_NONE = 0, /* no statement applies: default deny */
    STOR_POL_ALLOW,
    STOR_POL_DENY, /* an explicit Deny: wins over every Allow */
};

struct stor_policy;

/* Compiles the policy document @json (@len bytes). 0 and *out, or -EINVAL
 * with a one-line reason in @err (for MalformedPolicy), or -ENOMEM. */
CM_MUST_CHECK int stor_policy_compile(const char *json, size_t len,
                                      enum stor_pol_kind kind,
                                      struct stor_policy **out, char *err,
                                      size_t errlen);
void stor_policy_destroy(struct stor_policy *p);

/* The effect of @p on request @c (NULL @p: STOR_POL_NONE). */
enum stor_pol_effect stor_policy_eval(const struct stor_policy *p,
                                      const struct stor_pol_ctx *c);

/* true when some statement of @p has an s3:ExistingObjectTag condition
 * (its evaluation may then ask for the stored object's tags). */
bool stor_policy_uses_existing_tags(const struct stor_policy *p);

/* true when @p has a Deny statement (root is held to those of a bucket
 * policy). */
bool stor_policy_has_deny(const struct stor_policy *p);

/* true when @p is public as S3's public access block judges it: some
 * Allow statement names every principal ("*") and is not narrowed by an
 * aws:SourceIp condition (a fixed value of the keys AWS counts; the
 * others storaged knows are not among them). */
bool stor_policy_is_public(const struct stor_policy *p);

/* true when an Allow statement of @p may apply to some request on
 * @bucket by @user (NULL: anonymous), conditions aside: what ListBuckets
 * shows. */
bool stor_policy_mentions_bucket(const struct stor_policy *p,
                                 const char *bucket, const char *user);

/* The canned policies of `storaged admin user add --policy NAME`
 * ("readonly", "readwrite", "writeonly", "admin"); NULL for others. */
const char *stor_policy_canned(const char *name);

#endif /* STORAGED_S3_POLICY_H */

/* storaged/s3/authz.c - the authorisation of each request: which policy
 * actions an S3 operation needs, on which resource, and the decision from
 * the caller's user policy, the bucket's policy and the canned ACLs.
 *
 * DESIGN: runs on the loop right after authentication and routing, before
 * any body byte is read or any job is queued, so a refused request costs
 * no I/O and changes nothing. Root skips the evaluation (it may do
 * anything but touch the system area) unless some bucket policy has a
 * Deny (one atomic flag): then that bucket's Deny statements hold it too,
 * as AWS holds an account's root user; the decision for anyone else reads
 * the snapshot the request's user came from, without locks or allocation.
 * DeleteObjects is decided per key on the worker (stor_iam_allowed), as
 * S3 reports AccessDenied per key in its result. A policy condition on
 * s3:ExistingObjectTag needs the stored object's tags, which the loop does
 * not read: such a decision is left unfinished (stor_iam_needs_tags) and
 * made again on a worker once they are loaded (stor_iam_tags_run), before
 * any body byte is read. */
#include "storaged/s3/iam.h"

#include <stdlib.h>
#include <string.h>

#include "common/codec.h"
#include "common/log.h"
#include "storaged/s3/acl.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/s3/tagging.h"
#include "storaged/store/object.h"

static int peer_cb(void *arg, struct sockaddr_storage *ss)
{
    return stor_req_peer(arg, ss);
}

/* The value of x-amz-copy-source as the policy key s3:x-amz-copy-source
 * has it: "bucket/key", percent-decoded ('+' stays), without a leading '/'
 * or a ?versionId. NULL when malformed or too long for @buf. */
static const char *copy_source_value(const char *v, size_t n, char *buf,
                                     size_t cap, size_t *out)
{
    const char *q = memchr(v, '?', n);
    size_t i, o = 0;

    if (q)
        n = (size_t)(q - v);
    if (n && v[0] == '/') {
        v++;
        n--;
    }
    for (i = 0; i < n; i++) {
        int c = (unsigned char)v[i];

        if (c == '%') {
            int hi = i + 2 < n ? cm_hex_digit(v[i + 1]) : -1;
            int lo = i + 2 < n ? cm_hex_digit(v[i + 2]) : -1;

            if (hi < 0 || lo < 0)
                return NULL;
            c = hi * 16 + lo;
            i += 2;
        }
        if (o + 1 >= cap)
            return NULL;
        buf[o++] = (char)c;
    }
    buf[o] = 0;
    *out = o;
    return buf;
}

/* The value of tag @name in x-amz-tagging (a URL query string), decoded
 * into @buf (@cap bytes); NULL when absent or too long. */
static const char *request_tag(const char *v, size_t n, const char *name,
                               char *buf, size_t cap, size_t *out)
{
    size_t i = 0, nl = strlen(name);

    while (i < n) {
        size_t e = i, eq;
        long kl, vl;

        while (e < n && v[e] != '&')
            e++;
        for (eq = i; eq < e && v[eq] != '='; eq++)
            ;
        if (eq - i < cap && e - eq < cap) {
            kl = stor_s3_pct_decode(buf, v + i, eq - i);
            if (kl == (long)nl && memcmp(buf, name, nl) == 0) {
                vl = eq < e ? stor_s3_pct_decode(buf, v + eq + 1, e - eq - 1)
                            : 0;
                if (vl < 0)
                    return NULL;
                buf[vl] = 0;
                *out = (size_t)vl;
                return buf;
            }
        }
        i = e + 1;
    }
    return NULL;
}

/* true when s3:ExistingObjectTag applies to @r's operation: one on an
 * object that exists (not one that writes a new body, whose tags come
 * with the request). */
static bool existing_tags_apply(const struct stor_s3_req *r)
{
    switch (r->op) {
    case S3_OP_GET_OBJECT:
    case S3_OP_HEAD_OBJECT:
    case S3_OP_DELETE_OBJECT:
    case S3_OP_OBJECT_ACL:
    case S3_OP_OBJECT_SUBRESOURCE:
    case S3_OP_TAGGING:
    case S3_OP_OBJECT_ATTRIBUTES:
        return r->has_key;
    default:
        return false;
    }
}

/* stor_pol_ctx.value: condition keys read from the request (@arg), and
 * the stored object's tags once a worker loaded them (before that the
 * key reads as absent and the decision is marked unfinished). */
static const char *value_cb(void *arg, enum stor_pol_vkind kind,
                            const char *name, char *buf, size_t cap,
                            size_t *out)
{
    struct stor_s3_req *r = arg;
    const char *v;
    size_t n = 0;

    if (kind == STOR_POL_V_EXTAG) {
        if (!existing_tags_apply(r))
            return NULL;
        if (!r->extag_loaded) {
            r->extag_wanted = true;
            return NULL;
        }
        return r->extag ? request_tag(r->extag, strlen(r->extag), name, buf,
                                      cap, out)
                        : NULL;
    }
    if (kind == STOR_POL_V_REQTAG) {
        v = stor_s3_hdr(r, "x-amz-tagging", &n);
        return v ? request_tag(v, n, name, buf, cap, out) : NULL;
    }
    v = stor_s3_hdr(r, name, &n);
    if (v == NULL)
        return NULL;
    if (strcmp(name, "x-amz-copy-source") == 0)
        return copy_source_value(v, n, buf, cap, out);
    *out = n;
    return v;
}

/* Root may do anything, but an explicit Deny of the bucket's policy holds
 * it too, as AWS holds the account's root user to one; the bucket policy
 * itself stays root's to read, change or delete, so no policy can lock
 * the owner out. true: denied. */
static bool root_denied(struct stor_s3_req *r, enum stor_act act,
                        const char *bucket, const char *key, size_t key_len)
{
    struct stor_iam_snap *snap;
    const struct iam_bucket *b;
    struct stor_pol_ctx c = {0};
    bool deny = false;

    if (r->s3->iam == NULL || !atomic_load(&r->s3->iam->root_deny) ||
        !bucket[0] || act == STOR_ACT_GET_BUCKET_POLICY ||
        act == STOR_ACT_PUT_BUCKET_POLICY ||
        act == STOR_ACT_DELETE_BUCKET_POLICY)
        return false;
    snap = stor_iam_snap_get(r->s3->iam);
    b = snap ? stor_iam_bucket_find(snap, bucket) : NULL;
    if (b && b->pol) {
        c.act = act;
        c.bucket = bucket;
        c.key = key;
        c.key_len = key_len;
        c.account = "root";
        c.account_id = S3_OWNER_ID;
        c.peer = peer_cb;
        c.peer_arg = &r->http;
        c.value = value_cb;
        c.value_arg = r;
        deny = stor_policy_eval(b->pol, &c) == STOR_POL_DENY;
    }
    if (snap)
        stor_iam_snap_unref(snap);
    return deny;
}

/* Whether the bucket's object @key (@n bytes) was written by account
 * @acct (not the bucket's), which owns it: it may read it and its ACL. */
static bool object_owned_by(const struct iam_bucket *b,
                            const struct iam_account *acct, const char *key,
                            size_t n)
{
    const char *o;

    if (b == NULL || b->owners == NULL || key == NULL || acct == NULL ||
        b->own == IAM_OWN_ENFORCED)
        return false;
    o = json_string_value(json_object_getn(b->owners, key, n));
    return o && strcmp(o, acct->name) == 0;
}

/* ObjectWriter and BucketOwnerPreferred (ownership.c): whether @act by
 * the bucket's own account (@acct) on its object @key is one S3 leaves to
 * the object's owner, another account here (reading the object, its ACL
 * and tags, changing its ACL and tags): then only the object's ACL can
 * grant it. Deleting stays the bucket owner's, as in S3. */
static bool foreign_object_act(const struct iam_bucket *b,
                               const struct iam_account *acct,
                               enum stor_act act, const char *key, size_t n)
{
    const char *o;

    if (b == NULL || key == NULL || b->owners == NULL ||
        (b->own != IAM_OWN_WRITER && b->own != IAM_OWN_PREFERRED))
        return false;
    switch (act) {
    case STOR_ACT_GET_OBJECT:
    case STOR_ACT_GET_OBJECT_VERSION:
    case STOR_ACT_GET_OBJECT_ACL:
    case STOR_ACT_PUT_OBJECT_ACL:
    case STOR_ACT_GET_OBJECT_TAGGING:
    case STOR_ACT_PUT_OBJECT_TAGGING:
    case STOR_ACT_DELETE_OBJECT_TAGGING:
        break;
    default:
        return false;
    }
    o = json_string_value(json_object_getn(b->owners, key, n));
    return o && (acct == NULL || strcmp(o, acct->name) != 0);
}

/* See iam_i.h. */
bool stor_iam_id_known(void *arg, const char *id)
{
    const struct stor_iam_snap *s = arg;

    if (strcmp(id, S3_OWNER_ID) == 0)
        return true;
    for (size_t i = 0; s && i < s->naccounts; i++)
        if (strcmp(s->accounts[i].id, id) == 0)
            return true;
    return false;
}

/* See iam_i.h. */
const char *stor_iam_id_name(void *arg, const char *id)
{
    const struct stor_iam_snap *s = arg;

    if (strcmp(id, S3_OWNER_ID) == 0)
        return "root";
    for (size_t i = 0; s && i < s->naccounts; i++)
        if (strcmp(s->accounts[i].id, id) == 0)
            return s->accounts[i].name;
    return NULL;
}

/* See iam_i.h. */
const char *stor_iam_object_owner_id(const struct stor_iam_snap *s,
                                     const struct iam_bucket *b,
                                     const char *key, size_t n)
{
    const struct iam_account *a = NULL;
    const char *o = NULL;

    if (b && b->owners && key && b->own != IAM_OWN_ENFORCED)
        o = json_string_value(json_object_getn(b->owners, key, n));
    if (o)
        a = stor_iam_account_find(s, o);
    if (a == NULL && b)
        a = b->owner;
    return a ? a->id : S3_OWNER_ID;
}

/* What the bucket's ACL and its objects' ACLs (canned or grant lists,
 * acl.h) grant the caller acting as the account with canonical id @id
 * (NULL: none, see stor_acl_perms; @signed_in: not anonymous) for
 * @act (@b not NULL): READ on a bucket lists it; WRITE lets the grantee
 * write and delete its objects, as S3's bucket WRITE grant does; READ_ACP
 * and WRITE_ACP read and change the ACL; READ on an object gets it.
 * IgnorePublicAcls: the AllUsers and AuthenticatedUsers grants count for
 * nothing. */
static bool acl_grants(const struct stor_iam_snap *s,
                       const struct iam_bucket *b, enum stor_act act,
                       const char *key, size_t key_len, const char *id,
                       bool signed_in)
{
    bool ign = b->pab & IAM_PAB_IGNORE_ACLS;
    const char *bowner = b->owner ? b->owner->id : S3_OWNER_ID;
    const json_t *oacl;
    unsigned need;

    if (b->own == IAM_OWN_ENFORCED)
        return false; /* BucketOwnerEnforced: ACLs are off */
    switch (act) {
    case STOR_ACT_LIST_BUCKET:
    case STOR_ACT_LIST_BUCKET_VERSIONS:
    case STOR_ACT_LIST_BUCKET_MPU:
        return stor_acl_perms(b->aclv, bowner, id, signed_in, ign) &
               STOR_ACL_READ;
    case STOR_ACT_PUT_OBJECT:
    case STOR_ACT_DELETE_OBJECT:
    case STOR_ACT_DELETE_OBJECT_VERSION:
    case STOR_ACT_ABORT_MPU:
    case STOR_ACT_LIST_MPU_PARTS:
        return key && (stor_acl_perms(b->aclv, bowner, id, signed_in, ign) &
                       STOR_ACL_WRITE);
    case STOR_ACT_GET_BUCKET_ACL:
        return stor_acl_perms(b->aclv, bowner, id, signed_in, ign) &
               STOR_ACL_READ_ACP;
    case STOR_ACT_PUT_BUCKET_ACL:
        return stor_acl_perms(b->aclv, bowner, id, signed_in, ign) &
               STOR_ACL_WRITE_ACP;
    case STOR_ACT_GET_OBJECT:
    case STOR_ACT_GET_OBJECT_VERSION:
        need = STOR_ACL_READ;
        break;
    case STOR_ACT_GET_OBJECT_ACL:
        need = STOR_ACL_READ_ACP;
        break;
    case STOR_ACT_PUT_OBJECT_ACL:
        need = STOR_ACL_WRITE_ACP;
        break;
    default:
        return false;
    }
    if (key == NULL)
        return false;
    oacl = b->objects ? json_object_getn(b->objects, key, key_len) : NULL;
    return stor_acl_perms(oacl, stor_iam_object_owner_id(s, b, key, key_len),
                          id, signed_in, ign) &
           need;
}

/* The decision for @act on @bucket/@key (key NULL: the bucket).
 *
 * DESIGN: accounts. A caller acts for an account: root and the users made
 * with `storaged admin user add` for the root one, an account's key for
 * its own. Within the account that owns the bucket, the caller's
 * identity (root and an account's key: everything; a user: its policy)
 * or the bucket's policy or ACLs may allow. Across accounts both must:
 * the identity, and the bucket's policy or ACLs (or owning the object
 * read). An explicit Deny of either wins. Until an account exists (one
 * atomic flag) root takes the old path, without a snapshot. */
static bool decide(struct stor_s3_req *r, enum stor_act act, const char *bucket,
                   const char *key, size_t key_len)
{
    const struct stor_iam_user *u = r->iam_user;
    const struct iam_account *acct = u ? u->acct : NULL;
    const struct iam_bucket *b = NULL;
    struct stor_iam_snap *snap = r->iam_snap;
    struct stor_pol_ctx c = {0};
    enum stor_pol_effect eu, eb = STOR_POL_NONE;
    bool got_snap = false, ok = false, same, foreign,
         root = !r->anonymous && !u;

    if (strcmp(bucket, STOR_IAM_BUCKET) == 0)
        return false; /* the system area: not even root */
    if (root && (r->s3->iam == NULL || !atomic_load(&r->s3->iam->accounts)))
        return !root_denied(r, act, bucket, key, key_len);
    if (snap == NULL) { /* anonymous, root: the bucket's policy and ACLs */
        snap = stor_iam_snap_get(r->s3->iam);
        got_snap = true;
    }
    if (bucket[0])
        b = stor_iam_bucket_find(snap, bucket);
    /* CreateBucket (and the ACL it sets) is the identity's alone: a bucket
     * another account owns is refused by the operation
     * (BucketAlreadyExists) */
    same = !r->anonymous &&
           ((b ? b->owner : NULL) == acct || r->op == S3_OP_CREATE_BUCKET);
    foreign = same && foreign_object_act(b, acct, act, key, key_len);
    if (root && same && !foreign) {
        ok = !root_denied(r, act, bucket, key, key_len);
        goto out;
    }
    if (acct && !bucket[0] && act != STOR_ACT_LIST_ALL_MY_BUCKETS)
        goto out; /* the admin API is the root account's */
    c.act = act;
    c.bucket = bucket;
    c.key = key;
    c.key_len = key_len;
    c.user = u ? u->name : NULL;
    if (!r->anonymous) {
        c.account = acct ? acct->name : "root";
        c.account_id = acct ? acct->id : S3_OWNER_ID;
    }
    c.peer = peer_cb;
    c.peer_arg = &r->http;
    c.value = value_cb;
    c.value_arg = r;
    if ((act == STOR_ACT_LIST_BUCKET || act == STOR_ACT_LIST_BUCKET_VERSIONS) &&
        key == NULL &&
        (r->op == S3_OP_LIST_OBJECTS || r->op == S3_OP_LIST_OBJECTS_V2 ||
         r->op == S3_OP_LIST_VERSIONS)) {
        c.prefix = stor_s3_query(r, "prefix");
        if (c.prefix == NULL)
            c.prefix = "";
        c.delimiter = stor_s3_query(r, "delimiter");
    }
    if (root || (u && u->acct_root))
        eu = STOR_POL_ALLOW; /* an account's own key */
    else
        eu = u ? stor_policy_eval(u->pol, &c) : STOR_POL_NONE;
    if (b)
        eb = stor_policy_eval(b->pol, &c);
    /* RestrictPublicBuckets: a public policy grants only the bucket's own
     * account */
    if (eb == STOR_POL_ALLOW && !same && b && (b->pab & IAM_PAB_RESTRICT) &&
        b->pol_public)
        eb = STOR_POL_NONE;
    if (eu == STOR_POL_DENY || eb == STOR_POL_DENY)
        goto out;
    if (foreign) { /* the identity must allow, and the object's ACL grant */
        ok =
            eu == STOR_POL_ALLOW &&
            acl_grants(snap, b, act, key, key_len,
                       root || (u && u->acct_root) ? c.account_id : NULL, true);
        goto out;
    }
    if (same && eu == STOR_POL_ALLOW) {
        ok = true;
        goto out;
    }
    if (!same && !r->anonymous && eu != STOR_POL_ALLOW)
        goto out; /* across accounts the identity must allow too */
    ok = eb == STOR_POL_ALLOW ||
         (b && acl_grants(snap, b, act, key, key_len,
                          root || (u && u->acct_root) ? c.account_id : NULL,
                          !r->anonymous)) ||
         (!same && key &&
          (act == STOR_ACT_GET_OBJECT || act == STOR_ACT_GET_OBJECT_VERSION ||
           act == STOR_ACT_GET_OBJECT_ACL || act == STOR_ACT_PUT_OBJECT_ACL ||
           act == STOR_ACT_GET_OBJECT_TAGGING) &&
          object_owned_by(b, acct, key, key_len));
out:
    if (got_snap)
        stor_iam_snap_unref(snap);
    return ok;
}

/* See header. */
bool stor_iam_allowed(struct stor_s3_req *r, enum stor_act act, const char *key,
                      size_t n)
{
    return decide(r, act, r->bucket, key, n);
}

/* See header. */
bool stor_iam_bucket_visible(struct stor_s3_req *r, const char *bucket)
{
    const struct iam_bucket *b;
    const struct stor_iam_user *u = r->iam_user;
    struct stor_iam_snap *snap;
    bool ok, multi;

    if (strcmp(bucket, STOR_IAM_BUCKET) == 0 || r->anonymous)
        return false;
    multi = r->s3->iam && atomic_load(&r->s3->iam->accounts);
    if (u == NULL && !multi)
        return true; /* root sees every bucket */
    snap = u ? r->iam_snap : stor_iam_snap_get(r->s3->iam);
    b = stor_iam_bucket_find(snap, bucket);
    if (multi && (b ? b->owner : NULL) != (u ? u->acct : NULL)) {
        ok = false; /* as S3: the buckets the caller's account owns */
    } else if (u == NULL || u->acct_root) {
        ok = true;
    } else {
        ok = stor_policy_mentions_bucket(u->pol, bucket, u->name) ||
             (b && (stor_policy_mentions_bucket(b->pol, bucket, u->name) ||
                    b->acl != IAM_ACL_PRIVATE || json_is_array(b->aclv)));
    }
    if (u == NULL)
        stor_iam_snap_unref(snap);
    return ok;
}

/* See header. */
bool stor_iam_denial_checks_store(const struct stor_s3_req *r)
{
    return r->bucket[0] && r->op != S3_OP_ADMIN &&
           r->op != S3_OP_LIST_BUCKETS && r->op != S3_OP_CREATE_BUCKET &&
           r->s3->store != NULL && strcmp(r->bucket, STOR_IAM_BUCKET) != 0;
}

/* See header. DESIGN: AWS answers a request on a bucket that does not
 * exist with 404 NoSuchBucket whoever asks (anonymous callers and other
 * accounts included), and a GET/HEAD of a missing key with 404 NoSuchKey
 * when the caller may list the bucket (it could learn that from a listing
 * anyway), else 403. Both need the store, so the refusal is decided here
 * rather than on the loop; the caller learns nothing else, and the
 * request still changes nothing. */
void stor_iam_denied_run(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    struct stor_obj_info info;
    int ret;

    ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);
    if (ret == -STOR_ENOKEY || ret == -STOR_ENOBUCKET) {
        stor_s3_error(r, S3E_NO_SUCH_BUCKET);
        return;
    }
    if (ret == 0 && r->has_key &&
        (r->op == S3_OP_GET_OBJECT || r->op == S3_OP_HEAD_OBJECT) &&
        stor_s3_query(r, "versionId") == NULL &&
        decide(r, STOR_ACT_LIST_BUCKET, r->bucket, NULL, 0)) {
        memset(&info, 0, sizeof(info));
        ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info);
        if (ret == 0)
            stor_obj_info_fini(&info);
        if (ret == -STOR_ENOKEY) {
            stor_s3_error(r, S3E_NO_SUCH_KEY);
            return;
        }
    }
    stor_s3_error(r, S3E_ACCESS_DENIED);
}

/* See header. */
bool stor_iam_needs_tags(const struct stor_s3_req *r)
{
    return r->extag_wanted && !r->extag_loaded;
}

/* The stored x-amz-tagging of the object (or version) @r names into
 * r->extag. 0, or -ENOMEM / -EIO; a missing object has no tags (0). */
static int load_tags(struct stor_s3_req *r)
{
    const char *vid = stor_s3_query(r, "versionId");
    struct stor_obj_info info;
    char bucket[64];
    char *key = NULL;
    size_t klen = 0;
    int ret;

    memset(&info, 0, sizeof(info));
    if (vid) {
        if (stor_s3_locate_version(r, vid, bucket, &key, &klen) != S3E_NONE)
            return 0; /* no such version (or a marker): the op says so */
        ret = stor_obj_stat(r->s3->store, bucket, key, klen, &info);
        free(key);
    } else {
        ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info);
    }
    if (ret == -STOR_ENOKEY || ret == -STOR_ENOBUCKET)
        return 0;
    if (ret < 0)
        return ret == -ENOMEM ? ret : -EIO;
    for (size_t i = 0; i < info.nhdrs && ret == 0; i++)
        if (strcmp(info.hdrs[i].name, "x-amz-tagging") == 0 &&
            (r->extag = strdup(info.hdrs[i].value)) == NULL)
            ret = -ENOMEM;
    stor_obj_info_fini(&info);
    return ret;
}

/* See header. */
void stor_iam_tags_run(struct stor_s3_req *r)
{
    enum stor_s3_err e;
    int ret = load_tags(r);

    r->extag_loaded = true;
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret,
               "req=%016llX %s: the object's tags for its policy could not "
               "be read",
               (unsigned long long)r->http.id, r->bucket);
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    e = stor_iam_authorize(r);
    if (e == S3E_ACCESS_DENIED && stor_iam_denial_checks_store(r))
        stor_iam_denied_run(r);
    else if (e != S3E_NONE)
        stor_s3_error(r, e);
}

static const char *hdr_cb(void *arg, const char *name, size_t *n)
{
    return stor_s3_hdr(arg, name, n);
}

/* Whether r->op may carry an ACL in headers (x-amz-acl, x-amz-grant-*). */
static bool op_sets_acl(const struct stor_s3_req *r)
{
    switch (r->op) {
    case S3_OP_PUT_OBJECT:
    case S3_OP_COPY_OBJECT:
    case S3_OP_CREATE_MPU:
    case S3_OP_CREATE_BUCKET:
        return true;
    case S3_OP_BUCKET_ACL:
    case S3_OP_OBJECT_ACL:
        return !r->http.is_get && !r->http.is_head;
    default:
        return false;
    }
}

/* The canned bucket-owner-read and bucket-owner-full-control of an object
 * written by an account other than the bucket's: the grant list S3
 * documents (the writer FULL_CONTROL, the bucket's owner READ or
 * FULL_CONTROL) into r->acl_grants; written by the bucket's own account
 * they are private. */
static enum stor_s3_err bucket_owner_grants(struct stor_s3_req *r,
                                            struct stor_iam_snap *snap,
                                            bool read)
{
    const struct iam_bucket *b = stor_iam_bucket_find(snap, r->bucket);
    const char *owner = b && b->owner ? b->owner->id : S3_OWNER_ID;
    const char *writer;

    if (r->anonymous || !r->has_key)
        return S3E_NONE;
    writer =
        r->iam_user && r->iam_user->acct ? r->iam_user->acct->id : S3_OWNER_ID;
    if (r->op == S3_OP_OBJECT_ACL)
        writer = stor_iam_object_owner_id(snap, b, r->key, r->key_len);
    if (strcmp(writer, owner) == 0)
        return S3E_NONE;
    r->acl_grants =
        json_pack("[{s:s, s:s}, {s:s, s:s}]", "p", "FULL_CONTROL", "id", writer,
                  "p", read ? "READ" : "FULL_CONTROL", "id", owner);
    return r->acl_grants ? S3E_NONE : S3E_INTERNAL;
}

/* x-amz-acl into r->acl_hdr and x-amz-grant-* into r->acl_grants (both:
 * InvalidRequest, as S3). Grantees must name an account that exists. */
static enum stor_s3_err acl_header(struct stor_s3_req *r)
{
    struct stor_iam_snap *snap;
    const char *v, *msg = NULL;
    enum stor_s3_err e;
    size_t n;
    int acl;

    v = stor_s3_hdr(r, "x-amz-acl", &n);
    if (v) {
        acl = stor_iam_acl_parse(v, n);
        if (acl < 0 && ((n == 18 && memcmp(v, "log-delivery-write", n) == 0) ||
                        (n == 13 && memcmp(v, "aws-exec-read", n) == 0)))
            return S3E_NOT_IMPLEMENTED;
        if (acl < 0)
            return S3E_INVALID_ARGUMENT; /* no canned ACL of that name */
        r->acl_hdr = (int8_t)(acl + 1);
    }
    if (!op_sets_acl(r) || r->acl_grants)
        return S3E_NONE; /* elsewhere S3 ignores them too */
    snap = r->iam_snap ? r->iam_snap : stor_iam_snap_get(r->s3->iam);
    e = stor_acl_from_headers(hdr_cb, r, stor_iam_id_known, snap,
                              &r->acl_grants, &msg);
    if (e == S3E_NONE && r->acl_grants && v)
        e = S3E_INVALID_REQUEST; /* a canned ACL and grants */
    if (e == S3E_NONE && v && n > 13 && memcmp(v, "bucket-owner-", 13) == 0)
        e = bucket_owner_grants(r, snap,
                                n == 17 && memcmp(v + 13, "read", 4) == 0);
    if (snap != r->iam_snap && snap)
        stor_iam_snap_unref(snap);
    return e;
}

/* BlockPublicAcls: whether r->bucket's public access block refuses the
 * public canned ACL @r sets (every canned ACL but private is public, as
 * S3 counts AllUsers and AuthenticatedUsers grants). It holds root too,
 * as S3 holds the bucket owner. */
static bool acl_blocked(struct stor_s3_req *r)
{
    struct stor_iam_snap *snap;
    const struct iam_bucket *b;
    bool block;

    if (r->op != S3_OP_PUT_OBJECT && r->op != S3_OP_COPY_OBJECT &&
        r->op != S3_OP_CREATE_MPU && r->op != S3_OP_BUCKET_ACL &&
        r->op != S3_OP_OBJECT_ACL)
        return false;
    snap = stor_iam_snap_get(r->s3->iam);
    b = snap ? stor_iam_bucket_find(snap, r->bucket) : NULL;
    block = b && (b->pab & IAM_PAB_BLOCK_ACLS);
    if (snap)
        stor_iam_snap_unref(snap);
    return block;
}

/* Whether an anonymous writer of a new object may give it a canned ACL:
 * S3's object writer owns what it creates, so a bucket ACL granting
 * everyone WRITE (public-read-write) lets it set that object's ACL too
 * (POST Object forms do: acl=public-read). Only without a bucket policy,
 * whose Deny would otherwise be passed over. */
static bool anon_writer_sets_acl(struct stor_s3_req *r)
{
    struct stor_iam_snap *snap;
    const struct iam_bucket *b;
    bool ok;

    if (!r->anonymous || r->op != S3_OP_PUT_OBJECT || !r->has_key)
        return false;
    snap = stor_iam_snap_get(r->s3->iam);
    b = snap ? stor_iam_bucket_find(snap, r->bucket) : NULL;
    ok = b && b->pol == NULL &&
         acl_grants(snap, b, STOR_ACT_PUT_OBJECT, r->key, r->key_len, NULL,
                    false);
    if (snap)
        stor_iam_snap_unref(snap);
    return ok;
}

/* The action of r->op (for the ops on one resource). */
static enum stor_act op_act(const struct stor_s3_req *r)
{
    bool get = r->http.is_get || r->http.is_head;

    switch (r->op) {
    case S3_OP_CREATE_BUCKET:
        return STOR_ACT_CREATE_BUCKET;
    case S3_OP_HEAD_BUCKET:
    case S3_OP_LIST_OBJECTS:
    case S3_OP_LIST_OBJECTS_V2:
        return STOR_ACT_LIST_BUCKET;
    case S3_OP_LIST_VERSIONS:
        return STOR_ACT_LIST_BUCKET_VERSIONS;
    case S3_OP_DELETE_BUCKET:
        return STOR_ACT_DELETE_BUCKET;
    case S3_OP_GET_BUCKET_LOCATION:
        return STOR_ACT_GET_BUCKET_LOCATION;
    case S3_OP_LIST_UPLOADS:
        return STOR_ACT_LIST_BUCKET_MPU;
    case S3_OP_PUT_OBJECT:
    case S3_OP_COPY_OBJECT:
    case S3_OP_CREATE_MPU:
    case S3_OP_UPLOAD_PART:
    case S3_OP_UPLOAD_PART_COPY:
    case S3_OP_COMPLETE_MPU:
        return STOR_ACT_PUT_OBJECT;
    case S3_OP_GET_OBJECT:
    case S3_OP_HEAD_OBJECT:
        return stor_s3_query(r, "versionId") ? STOR_ACT_GET_OBJECT_VERSION
                                             : STOR_ACT_GET_OBJECT;
    case S3_OP_DELETE_OBJECT:
        return stor_s3_query(r, "versionId") ? STOR_ACT_DELETE_OBJECT_VERSION
                                             : STOR_ACT_DELETE_OBJECT;
    case S3_OP_BUCKET_VERSIONING:
        return get ? STOR_ACT_GET_BUCKET_CONFIG
                   : STOR_ACT_PUT_BUCKET_VERSIONING;
    case S3_OP_BUCKET_LIFECYCLE:
        return get ? STOR_ACT_GET_LIFECYCLE : STOR_ACT_PUT_LIFECYCLE;
    case S3_OP_ABORT_MPU:
        return STOR_ACT_ABORT_MPU;
    case S3_OP_LIST_PARTS:
        return STOR_ACT_LIST_MPU_PARTS;
    case S3_OP_BUCKET_SUBRESOURCE:
        return STOR_ACT_GET_BUCKET_CONFIG;
    case S3_OP_OBJECT_SUBRESOURCE:
        return STOR_ACT_GET_OBJECT_TAGGING;
    case S3_OP_BUCKET_POLICY:
        return get                 ? STOR_ACT_GET_BUCKET_POLICY
               : r->http.is_delete ? STOR_ACT_DELETE_BUCKET_POLICY
                                   : STOR_ACT_PUT_BUCKET_POLICY;
    case S3_OP_BUCKET_ACL:
        return get ? STOR_ACT_GET_BUCKET_ACL : STOR_ACT_PUT_BUCKET_ACL;
    case S3_OP_OBJECT_ATTRIBUTES:
        return STOR_ACT_GET_OBJECT;
    case S3_OP_TAGGING:
        if (r->has_key)
            return get                 ? STOR_ACT_GET_OBJECT_TAGGING
                   : r->http.is_delete ? STOR_ACT_DELETE_OBJECT_TAGGING
                                       : STOR_ACT_PUT_OBJECT_TAGGING;
        return get ? STOR_ACT_GET_BUCKET_CONFIG : STOR_ACT_PUT_BUCKET_POLICY;
    case S3_OP_BUCKET_CORS:
    case S3_OP_BUCKET_ENCRYPTION:
        /* the bucket-configuration actions: read, or the owner's change */
        return get ? STOR_ACT_GET_BUCKET_CONFIG : STOR_ACT_PUT_BUCKET_POLICY;
    case S3_OP_OBJECT_ACL:
        return get ? STOR_ACT_GET_OBJECT_ACL : STOR_ACT_PUT_OBJECT_ACL;
    case S3_OP_BUCKET_PAB:
        return get ? STOR_ACT_GET_BUCKET_PAB : STOR_ACT_PUT_BUCKET_PAB;
    case S3_OP_BUCKET_POLICY_STATUS:
        return STOR_ACT_GET_BUCKET_POLICY_STATUS;
    case S3_OP_BUCKET_OWNERSHIP:
        return get ? STOR_ACT_GET_BUCKET_OWNERSHIP
                   : STOR_ACT_PUT_BUCKET_OWNERSHIP;
    default:
        return STOR_ACT_COUNT;
    }
}

/* S3 Object Ownership (ownership.c) for an ACL @r sets (after
 * acl_header). CreateBucket: x-amz-object-ownership must name a setting
 * (InvalidArgument), and BucketOwnerEnforced takes no ACL but private
 * (InvalidBucketAclWithObjectOwnership). In a BucketOwnerEnforced bucket
 * PutBucketAcl and PutObjectAcl are AccessControlListNotSupported, and so
 * is an object write with grants or a canned ACL other than
 * bucket-owner-full-control, which is dropped (the bucket's owner owns
 * the object; its ACL is private). In a BucketOwnerPreferred one that
 * canned ACL makes the bucket's owner the object's. */
static enum stor_s3_err ownership_acl(struct stor_s3_req *r)
{
    struct stor_iam_snap *snap;
    const struct iam_bucket *b;
    const char *v;
    size_t n = 0;
    bool bofc;
    int own;

    if (r->op == S3_OP_CREATE_BUCKET) {
        v = stor_s3_hdr(r, "x-amz-object-ownership", &n);
        own = v ? stor_iam_own_parse(v, n) : IAM_OWN_NONE;
        if (own < 0)
            return S3E_INVALID_ARGUMENT;
        if (own == IAM_OWN_ENFORCED &&
            (r->acl_hdr > IAM_ACL_PRIVATE + 1 || r->acl_grants))
            return S3E_OWNERSHIP_WITH_ACL;
        return S3E_NONE;
    }
    if (r->op != S3_OP_PUT_OBJECT && r->op != S3_OP_COPY_OBJECT &&
        r->op != S3_OP_CREATE_MPU && r->op != S3_OP_BUCKET_ACL &&
        r->op != S3_OP_OBJECT_ACL)
        return S3E_NONE;
    if (r->http.is_get || r->http.is_head || r->s3->iam == NULL)
        return S3E_NONE;
    snap = r->iam_snap ? r->iam_snap : stor_iam_snap_get(r->s3->iam);
    b = stor_iam_bucket_find(snap, r->bucket);
    own = b ? b->own : IAM_OWN_NONE;
    if (snap != r->iam_snap)
        stor_iam_snap_unref(snap);
    v = stor_s3_hdr(r, "x-amz-acl", &n);
    bofc = v && n == 25 && memcmp(v, "bucket-owner-full-control", 25) == 0;
    if (own == IAM_OWN_ENFORCED) {
        if (r->op == S3_OP_BUCKET_ACL || r->op == S3_OP_OBJECT_ACL ||
            (v && !bofc) || (v == NULL && r->acl_grants))
            return S3E_ACL_NOT_SUPPORTED;
    } else if (own != IAM_OWN_PREFERRED || !bofc || r->op == S3_OP_OBJECT_ACL) {
        return S3E_NONE;
    }
    r->owner_takes = true;
    r->acl_hdr = 0;
    json_decref(r->acl_grants);
    r->acl_grants = NULL;
    return S3E_NONE;
}

/* See header. */
enum stor_s3_err stor_iam_authorize(struct stor_s3_req *r)
{
    enum stor_act act;
    enum stor_s3_err e;
    bool on_key;

    e = acl_header(r);
    if (e == S3E_NONE)
        e = ownership_acl(r);
    if (e != S3E_NONE)
        return e;
    if (r->op == S3_OP_LIST_BUCKETS)
        return r->anonymous ? S3E_ACCESS_DENIED : S3E_NONE; /* filtered */
    if (r->op == S3_OP_ADMIN) {
        act = stor_iam_admin_act(r);
        if (act == STOR_ACT_COUNT)
            return S3E_ADMIN_BAD_CALL;
        if (r->anonymous)
            return S3E_ACCESS_DENIED;
        return decide(r, act, "", NULL, 0) ? S3E_NONE : S3E_ACCESS_DENIED;
    }
    if (r->op == S3_OP_DELETE_OBJECTS) /* per key, on the worker */
        return strcmp(r->bucket, STOR_IAM_BUCKET) == 0 ? S3E_ACCESS_DENIED
                                                       : S3E_NONE;
    if ((r->acl_hdr > IAM_ACL_PRIVATE + 1 ||
         (r->acl_grants && stor_acl_is_public(r->acl_grants))) &&
        acl_blocked(r))
        return S3E_ACCESS_DENIED;
    act = op_act(r);
    if (act == STOR_ACT_COUNT)
        return S3E_ACCESS_DENIED;
    on_key =
        r->has_key && r->op != S3_OP_BUCKET_POLICY && r->op != S3_OP_BUCKET_ACL;
    if (!decide(r, act, r->bucket, on_key ? r->key : NULL,
                on_key ? r->key_len : 0))
        return S3E_ACCESS_DENIED;
    /* a canned ACL other than private also needs the ACL permission, and
     * so do grants on CreateBucket (S3 asks for s3:PutBucketAcl there; an
     * object's grants need s3:PutObject only: AWS's own example policy
     * makes other accounts grant the bucket owner full control with
     * s3:PutObject and a condition on s3:x-amz-grant-full-control) */
    if ((r->acl_hdr > IAM_ACL_PRIVATE + 1 ||
         (r->acl_grants && r->op == S3_OP_CREATE_BUCKET)) &&
        (r->op == S3_OP_PUT_OBJECT || r->op == S3_OP_COPY_OBJECT ||
         r->op == S3_OP_CREATE_MPU || r->op == S3_OP_CREATE_BUCKET) &&
        !decide(r,
                r->op == S3_OP_CREATE_BUCKET ? STOR_ACT_PUT_BUCKET_ACL
                                             : STOR_ACT_PUT_OBJECT_ACL,
                r->bucket, r->has_key ? r->key : NULL,
                r->has_key ? r->key_len : 0) &&
        !anon_writer_sets_acl(r))
        return S3E_ACCESS_DENIED;
    if (r->op == S3_OP_COPY_OBJECT || r->op == S3_OP_UPLOAD_PART_COPY) {
        char sb[64];
        char *sk = NULL;
        size_t skl = 0;
        bool ok;

        e = stor_s3_copy_source(r, sb, &sk, &skl);
        if (e != S3E_NONE)
            return e;
        ok = decide(r, STOR_ACT_GET_OBJECT, sb, sk, skl);
        free(sk);
        if (!ok)
            return S3E_ACCESS_DENIED;
    }
    return S3E_NONE;
}

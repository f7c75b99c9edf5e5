/* storaged/s3/iam_api.c - the operations answered from the access-control
 * state: the admin API (/_storaged/admin/v1/users...), Get/Put/Delete-
 * BucketPolicy, Get/PutBucketAcl, Get/PutObjectAcl, and the ACL
 * bookkeeping of object and bucket writes. All run on workers.
 *
 * The admin API (JSON, SigV4-signed like any S3 request; "_storaged" is no
 * valid bucket name, so it cannot clash with one):
 *   GET    /_storaged/admin/v1/users                  list (never secrets)
 *   PUT    /_storaged/admin/v1/users/NAME[?policy=C]  create; body: policy
 *   DELETE /_storaged/admin/v1/users/NAME             remove
 *   POST   /_storaged/admin/v1/users/NAME?disable     (or ?enable)
 *   GET    /_storaged/admin/v1/users/NAME/policy      the policy document
 *   PUT    /_storaged/admin/v1/users/NAME/policy[?policy=C]  set it
 * where C is a canned policy (readonly, readwrite, writeonly, admin). The
 * create answer is the one place a secret is ever sent. Every change is
 * committed to the store before it is answered and applies to the next
 * request. */
#include "storaged/s3/iam.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xml.h"
#include "storaged/s3/acl.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/store/object.h"

#define ADMIN_PREFIX "admin/v1/users"
#define ACCT_PREFIX  "admin/v1/accounts"

enum admin_call { A_NONE, A_LIST, A_USER, A_POLICY, A_ACCT_LIST, A_ACCT };

/* Parses r->key into the call and the user or account name (@name, 65
 * bytes). */
static enum admin_call admin_parse(const struct stor_s3_req *r, char *name)
{
    const char *k = r->key, *rest, *slash;
    size_t pl = strlen(ADMIN_PREFIX), n, al = strlen(ACCT_PREFIX);

    name[0] = 0;
    if (r->has_key && r->key_len >= al && memcmp(k, ACCT_PREFIX, al) == 0) {
        if (k[al] == 0)
            return A_ACCT_LIST;
        n = strlen(k + al + 1);
        if (k[al] != '/' || n == 0 || n > 64 || strchr(k + al + 1, '/'))
            return A_NONE;
        memcpy(name, k + al + 1, n + 1);
        return A_ACCT;
    }
    if (!r->has_key || r->key_len < pl || memcmp(k, ADMIN_PREFIX, pl) != 0)
        return A_NONE;
    if (k[pl] == 0)
        return A_LIST;
    if (k[pl] != '/')
        return A_NONE;
    rest = k + pl + 1;
    slash = strchr(rest, '/');
    n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0 || n > 64)
        return A_NONE;
    memcpy(name, rest, n);
    name[n] = 0;
    if (slash == NULL)
        return A_USER;
    return strcmp(slash, "/policy") == 0 ? A_POLICY : A_NONE;
}

/* See iam_i.h. */
enum stor_act stor_iam_admin_act(const struct stor_s3_req *r)
{
    char name[65];
    const struct stor_req *h = &r->http;

    switch (admin_parse(r, name)) {
    case A_LIST:
    case A_ACCT_LIST:
        return h->is_get ? STOR_ACT_ADMIN_LIST_USERS : STOR_ACT_COUNT;
    case A_ACCT:
        return h->is_put      ? STOR_ACT_ADMIN_CREATE_USER
               : h->is_delete ? STOR_ACT_ADMIN_DELETE_USER
                              : STOR_ACT_COUNT;
    case A_USER:
        if (h->is_put)
            return STOR_ACT_ADMIN_CREATE_USER;
        if (h->is_delete)
            return STOR_ACT_ADMIN_DELETE_USER;
        if (h->is_post &&
            (stor_s3_has_query(r, "disable") || stor_s3_has_query(r, "enable")))
            return STOR_ACT_ADMIN_ENABLE_USER;
        return STOR_ACT_COUNT;
    case A_POLICY:
        return h->is_get   ? STOR_ACT_ADMIN_GET_POLICY
               : h->is_put ? STOR_ACT_ADMIN_PUT_POLICY
                           : STOR_ACT_COUNT;
    default:
        return STOR_ACT_COUNT;
    }
}

/* ---- replies ---- */

/* Answers 200 with the JSON @v (takes ownership). */
static void reply_json(struct stor_s3_req *r, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY) : NULL;

    json_decref(v);
    if (s == NULL || cm_buf_append(&r->http.resp.body, s, strlen(s)) < 0 ||
        cm_buf_appendc(&r->http.resp.body, '\n') < 0 ||
        stor_resp_hdr(&r->http.resp, "Content-Type", "application/json") < 0) {
        free(s);
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    free(s);
    r->http.resp.status = 200;
}

static void reply_errno(struct stor_s3_req *r, int ret)
{
    stor_s3_error(r,
                  ret == -ENOMEM ? S3E_INTERNAL : stor_s3_err_from_errno(ret));
}

/* The request body as a NUL-terminated string (borrowed), or NULL if
 * empty. */
static const char *body_str(struct stor_s3_req *r)
{
    if (r->body.len == 0 || cm_buf_appendc(&r->body, 0) < 0)
        return NULL;
    r->body.len--;
    return r->body.data;
}

/* The policy text a request sets: ?policy=CANNED or the body. NULL with
 * the error answered when it does not compile. */
static const char *policy_arg(struct stor_s3_req *r, enum stor_pol_kind kind,
                              bool *none)
{
    /* ?policy= names a canned one on the admin API; on a bucket it is
     * the subresource itself */
    const char *canned =
        kind == STOR_POL_USER ? stor_s3_query(r, "policy") : NULL;
    const char *text;
    struct stor_policy *p;
    char err[256], msg[300];
    int ret;

    *none = false;
    if (canned) {
        text = stor_policy_canned(canned);
        if (text == NULL) {
            snprintf(msg, sizeof(msg),
                     "unknown canned policy \"%.60s\" (readonly, readwrite, "
                     "writeonly or admin)",
                     canned);
            stor_s3_error_msg(r, S3E_MALFORMED_POLICY, msg);
        }
        return text;
    }
    text = body_str(r);
    if (text == NULL) {
        *none = true;
        return NULL;
    }
    ret = stor_policy_compile(text, r->body.len, kind, &p, err, sizeof(err));
    if (ret < 0) {
        if (ret == -EINVAL)
            stor_s3_error_msg(r, S3E_MALFORMED_POLICY, err);
        else
            stor_s3_error(r, S3E_INTERNAL);
        return NULL;
    }
    stor_policy_destroy(p);
    return text;
}

/* ---- changes ---- */

/* A copy of the current document to change, with iam->wlock held (drop
 * with change_end). */
static json_t *change_begin(struct stor_iam *iam)
{
    struct stor_iam_snap *s;
    json_t *doc;

    pthread_mutex_lock(&iam->wlock);
    s = stor_iam_snap_get(iam);
    doc = json_deep_copy(s->doc);
    stor_iam_snap_unref(s);
    if (doc == NULL)
        pthread_mutex_unlock(&iam->wlock);
    return doc;
}

/* Commits @doc (ownership taken; NULL: abandon) and drops the lock. */
static int change_end(struct stor_iam *iam, json_t *doc)
{
    int ret = doc ? stor_iam_commit(iam, doc) : 0;

    pthread_mutex_unlock(&iam->wlock);
    return ret;
}

static json_t *find_user(json_t *doc, const char *name, size_t *idx)
{
    json_t *users = json_object_get(doc, "users"), *u;
    size_t i;

    json_array_foreach(users, i, u)
    {
        const char *n = json_string_value(json_object_get(u, "name"));

        if (n && strcmp(n, name) == 0) {
            if (idx)
                *idx = i;
            return u;
        }
    }
    return NULL;
}

/* The bucket entry of @name in @doc, created when @create. */
static json_t *doc_bucket(json_t *doc, const char *name, bool create)
{
    json_t *bks = json_object_get(doc, "buckets");
    json_t *b = json_object_get(bks, name);

    if (b == NULL && create) {
        b = json_object();
        if (b == NULL || json_object_set_new(bks, name, b) < 0)
            return NULL;
    }
    return b;
}

/* Drops @name's entry when it no longer says anything. */
static void doc_bucket_tidy(json_t *doc, const char *name)
{
    json_t *b = doc_bucket(doc, name, false);

    if (b && json_object_size(json_object_get(b, "objects")) == 0)
        json_object_del(b, "objects");
    if (b && json_object_size(b) == 0)
        json_object_del(json_object_get(doc, "buckets"), name);
}

static bool name_ok(const char *n)
{
    size_t i;

    for (i = 0; n[i]; i++) {
        char c = n[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || strchr("+=,.@_-", c)))
            return false;
    }
    return i > 0 && i <= 64;
}

/* Random characters from a 32- or 64-letter alphabet (no bias). */
static int random_chars(char *out, size_t n, const char *alpha, unsigned mask)
{
    uint8_t raw[64];
    size_t i;

    if (n > sizeof(raw) || RAND_bytes(raw, (int)n) != 1)
        return -EIO;
    for (i = 0; i < n; i++)
        out[i] = alpha[raw[i] & mask];
    out[n] = 0;
    OPENSSL_cleanse(raw, sizeof(raw));
    return 0;
}

static const char *policy_label(const char *text)
{
    static const char *const names[] = {"readonly", "readwrite", "writeonly",
                                        "admin"};
    size_t i;

    if (text == NULL)
        return NULL;
    for (i = 0; i < CM_ARRAY_SIZE(names); i++)
        if (strcmp(text, stor_policy_canned(names[i])) == 0)
            return names[i];
    return "custom";
}

/* Adds account @name to @doc with a new canonical id (into @id, 65
 * bytes). 0, -EEXIST (an account or a user of that name) or -errno. */
static int account_new(json_t *doc, const char *name, char *id)
{
    json_t *accts = json_object_get(doc, "accounts");

    if (strcmp(name, "root") == 0 || json_object_get(accts, name))
        return -EEXIST;
    if (random_chars(id, 64, "0123456789abcdef", 15) < 0)
        return -EIO;
    if (accts == NULL) {
        accts = json_object();
        if (accts == NULL || json_object_set_new(doc, "accounts", accts) < 0)
            return -ENOMEM;
    }
    return json_object_set_new(accts, name, json_pack("{s:s}", "id", id));
}

/* Creates user @name with a new key; with @account, account @name too,
 * whose key the user is (it may do anything its account owns). */
static void user_add(struct stor_s3_req *r, const char *name, bool account)
{
    struct stor_iam *iam = r->s3->iam;
    char ak[STOR_IAM_AK_LEN + 1], sk[STOR_IAM_SK_LEN + 1], sealed[256];
    char id[65] = "";
    const char *pol = NULL;
    bool none = true;
    json_t *doc, *u, *users;
    size_t i;
    int ret;

    if (!name_ok(name)) {
        stor_s3_error_msg(r, S3E_INVALID_ARGUMENT,
                          account ? "an account name is 1..64 of A-Z a-z 0-9 "
                                    "+=,.@_-"
                                  : "a user name is 1..64 of A-Z a-z 0-9 "
                                    "+=,.@_-");
        return;
    }
    if (!account)
        pol = policy_arg(r, STOR_POL_USER, &none);
    if (pol == NULL && !none)
        return;
    doc = change_begin(iam);
    if (doc == NULL) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    ret = find_user(doc, name, NULL) ? -EEXIST
          : account                  ? account_new(doc, name, id)
                                     : 0;
    if (ret < 0) {
        change_end(iam, NULL);
        json_decref(doc);
        if (ret == -EEXIST)
            stor_s3_error_msg(r, S3E_USER_EXISTS,
                              "a user or account of that name exists");
        else
            stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    users = json_object_get(doc, "users");
    for (i = 0;; i++) {
        json_t *e;
        size_t j;
        bool taken = false;

        ret = random_chars(ak, STOR_IAM_AK_LEN,
                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 31);
        if (ret < 0 || i > 8)
            break;
        taken = strcmp(ak, iam->root_user) == 0;
        json_array_foreach(users, j, e)
        {
            const char *a = json_string_value(json_object_get(e, "access_key"));

            taken = taken || (a && strcmp(a, ak) == 0);
        }
        if (!taken)
            break;
    }
    if (ret == 0)
        ret =
            random_chars(sk, STOR_IAM_SK_LEN,
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                         "0123456789+/",
                         63);
    if (ret == 0)
        ret = stor_iam_seal(iam, ak, sk, sealed, sizeof(sealed));
    u = ret == 0 ? json_pack("{s:s, s:s, s:s, s:b}", "name", name, "access_key",
                             ak, "secret", sealed, "disabled", 0)
                 : NULL;
    if (u && pol)
        json_object_set_new(u, "policy", json_string(pol));
    if (u && account &&
        (json_object_set_new(u, "account", json_string(name)) < 0 ||
         json_object_set_new(u, "account_root", json_true()) < 0)) {
        json_decref(u);
        u = NULL;
    }
    if (u == NULL || json_array_append_new(users, u) < 0) {
        change_end(iam, NULL);
        json_decref(doc);
        OPENSSL_cleanse(sk, sizeof(sk));
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    ret = change_end(iam, doc);
    if (ret < 0) {
        OPENSSL_cleanse(sk, sizeof(sk));
        reply_errno(r, ret);
        return;
    }
    cm_log(CM_LOG_INFO, 0, "iam: %s %s added (access key %s, policy %s)",
           account ? "account" : "user", name, ak,
           account ? "the account's"
           : pol   ? policy_label(pol)
                   : "none");
    if (account)
        reply_json(r, json_pack("{s:s, s:s, s:s, s:s, s:s}", "account", name,
                                "id", id, "user", name, "access_key", ak,
                                "secret_key", sk));
    else
        reply_json(r, json_pack("{s:s, s:s, s:s, s:s*}", "user", name,
                                "access_key", ak, "secret_key", sk, "policy",
                                policy_label(pol)));
    OPENSSL_cleanse(sk, sizeof(sk));
}

/* Remove, disable, enable or set the policy of user @name. */
static void user_change(struct stor_s3_req *r, const char *name,
                        enum stor_act act)
{
    struct stor_iam *iam = r->s3->iam;
    const char *pol = NULL;
    bool none = false;
    json_t *doc, *u;
    size_t idx;
    int ret;

    if (act == STOR_ACT_ADMIN_PUT_POLICY) {
        pol = policy_arg(r, STOR_POL_USER, &none);
        if (pol == NULL && !none)
            return;
    }
    doc = change_begin(iam);
    if (doc == NULL) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    u = find_user(doc, name, &idx);
    if (u == NULL) {
        change_end(iam, NULL);
        json_decref(doc);
        stor_s3_error(r, S3E_NO_SUCH_USER);
        return;
    }
    if (act == STOR_ACT_ADMIN_DELETE_USER)
        json_array_remove(json_object_get(doc, "users"), idx);
    else if (act == STOR_ACT_ADMIN_ENABLE_USER)
        json_object_set_new(u, "disabled",
                            json_boolean(stor_s3_has_query(r, "disable")));
    else if (pol)
        json_object_set_new(u, "policy", json_string(pol));
    else
        json_object_del(u, "policy");
    ret = change_end(iam, doc);
    if (ret < 0) {
        reply_errno(r, ret);
        return;
    }
    cm_log(CM_LOG_INFO, 0, "iam: user %s: %s", name,
           act == STOR_ACT_ADMIN_DELETE_USER ? "removed"
           : act == STOR_ACT_ADMIN_ENABLE_USER
               ? (stor_s3_has_query(r, "disable") ? "disabled" : "enabled")
               : "policy set");
    reply_json(r, json_pack("{s:s, s:b}", "user", name, "ok", 1));
}

static void users_list(struct stor_s3_req *r)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    json_t *out = json_array(), *u;
    json_t *users = json_object_get(s->doc, "users");
    size_t i;

    json_array_foreach(users, i, u)
    {
        const char *pol = json_string_value(json_object_get(u, "policy"));

        json_array_append_new(
            out, json_pack("{s:O, s:O, s:b, s:s*, s:s*}", "name",
                           json_object_get(u, "name"), "access_key",
                           json_object_get(u, "access_key"), "enabled",
                           !json_is_true(json_object_get(u, "disabled")),
                           "policy", policy_label(pol), "account",
                           json_string_value(json_object_get(u, "account"))));
    }
    stor_iam_snap_unref(s);
    reply_json(r, json_pack("{s:o}", "users", out));
}

static void policy_get(struct stor_s3_req *r, const char *name)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    json_t *u = find_user(s->doc, name, NULL);
    const char *pol = json_string_value(json_object_get(u, "policy"));
    json_error_t je;

    if (u == NULL)
        stor_s3_error(r, S3E_NO_SUCH_USER);
    else
        reply_json(r, pol ? json_loads(pol, 0, &je) : json_null());
    stor_iam_snap_unref(s);
}

/* GET .../accounts: names, ids, and the buckets each owns. */
static void accounts_list(struct stor_s3_req *r)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    json_t *out = json_array(), *a, *bv, *acct;
    const char *name, *bname;

    json_object_foreach(json_object_get(s->doc, "accounts"), name, a)
    {
        json_t *owned = json_array();

        json_object_foreach(json_object_get(s->doc, "buckets"), bname, bv)
        {
            const char *o = json_string_value(json_object_get(bv, "owner"));

            if (o && strcmp(o, name) == 0)
                json_array_append_new(owned, json_string(bname));
        }
        acct = json_pack("{s:s, s:O, s:o}", "name", name, "id",
                         json_object_get(a, "id"), "buckets", owned);
        json_array_append_new(out, acct);
    }
    stor_iam_snap_unref(s);
    reply_json(r, json_pack("{s:o}", "accounts", out));
}

/* DELETE .../accounts/NAME: the account and its keys; refused while it
 * owns a bucket (its data would be left without an owner). */
static void account_rm(struct stor_s3_req *r, const char *name)
{
    struct stor_iam *iam = r->s3->iam;
    json_t *doc = change_begin(iam), *bv, *users, *u;
    const char *bname;
    size_t i;
    int ret;

    if (doc == NULL) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    if (json_object_get(json_object_get(doc, "accounts"), name) == NULL) {
        change_end(iam, NULL);
        json_decref(doc);
        stor_s3_error_msg(r, S3E_NO_SUCH_USER, "no such account");
        return;
    }
    json_object_foreach(json_object_get(doc, "buckets"), bname, bv)
    {
        const char *o = json_string_value(json_object_get(bv, "owner"));

        if (o && strcmp(o, name) == 0) {
            change_end(iam, NULL);
            json_decref(doc);
            stor_s3_error_msg(r, S3E_BUCKET_NOT_EMPTY,
                              "the account still owns a bucket; delete its "
                              "buckets first");
            return;
        }
    }
    users = json_object_get(doc, "users");
    for (i = json_array_size(users); i-- > 0;) {
        u = json_array_get(users, i);
        if (json_string_value(json_object_get(u, "account")) &&
            strcmp(json_string_value(json_object_get(u, "account")), name) == 0)
            json_array_remove(users, i);
    }
    json_object_del(json_object_get(doc, "accounts"), name);
    ret = change_end(iam, doc);
    if (ret < 0) {
        reply_errno(r, ret);
        return;
    }
    cm_log(CM_LOG_INFO, 0, "iam: account %s removed", name);
    reply_json(r, json_pack("{s:s, s:b}", "account", name, "ok", 1));
}

static void admin_run(struct stor_s3_req *r)
{
    char name[65];
    enum admin_call call = admin_parse(r, name);
    enum stor_act act = stor_iam_admin_act(r);

    if (call == A_LIST)
        users_list(r);
    else if (call == A_ACCT_LIST)
        accounts_list(r);
    else if (call == A_ACCT && act == STOR_ACT_ADMIN_CREATE_USER)
        user_add(r, name, true);
    else if (call == A_ACCT)
        account_rm(r, name);
    else if (act == STOR_ACT_ADMIN_CREATE_USER)
        user_add(r, name, false);
    else if (act == STOR_ACT_ADMIN_GET_POLICY)
        policy_get(r, name);
    else
        user_change(r, name, act);
}

/* ---- bucket policies and ACLs ---- */

/* 0 when r->bucket exists, else the error is answered. */
static int need_bucket(struct stor_s3_req *r)
{
    struct stor_bucket_info bi;
    int ret = stor_bucket_stat(r->s3->store, r->bucket, &bi);

    if (ret < 0)
        stor_s3_error(r, ret == -STOR_ENOKEY ? S3E_NO_SUCH_BUCKET
                                             : stor_s3_err_from_errno(ret));
    return ret;
}

/* Sets (or, @v NULL, removes) field @field of r->bucket's entry. */
static int bucket_set(struct stor_s3_req *r, const char *field, json_t *v)
{
    struct stor_iam *iam = r->s3->iam;
    json_t *doc = change_begin(iam), *b;

    if (doc == NULL) {
        json_decref(v);
        return -ENOMEM;
    }
    b = doc_bucket(doc, r->bucket, v != NULL);
    if (b && v)
        json_object_set_new(b, field, v);
    else if (b)
        json_object_del(b, field);
    doc_bucket_tidy(doc, r->bucket);
    return change_end(iam, doc);
}

/* See iam.h. */
char *stor_iam_bucket_conf(struct stor_iam *iam, const char *bucket,
                           const char *field)
{
    struct stor_iam_snap *s;
    const char *v;
    char *out = NULL;

    if (iam == NULL)
        return NULL;
    s = stor_iam_snap_get(iam);
    v = json_string_value(
        json_object_get(doc_bucket(s->doc, bucket, false), field));
    if (v)
        out = strdup(v);
    stor_iam_snap_unref(s);
    return out;
}

/* See iam.h. */
int stor_iam_bucket_conf_set(struct stor_s3_req *r, const char *field,
                             const char *value)
{
    json_t *v = NULL;

    if (value) {
        v = json_string(value);
        if (v == NULL)
            return -ENOMEM;
    }
    return bucket_set(r, field, v);
}

/* The server-wide configuration object of @doc ("config"), created when
 * @create. */
static json_t *doc_config(json_t *doc, bool create)
{
    json_t *c = json_object_get(doc, "config");

    if (c == NULL && create) {
        c = json_object();
        if (c == NULL || json_object_set_new(doc, "config", c) < 0)
            return NULL;
    }
    return c;
}

/* See iam.h. */
char *stor_iam_sys_conf(struct stor_iam *iam, const char *field)
{
    struct stor_iam_snap *s = stor_iam_snap_get(iam);
    const char *v =
        json_string_value(json_object_get(doc_config(s->doc, false), field));
    char *out = v ? strdup(v) : NULL;

    stor_iam_snap_unref(s);
    return out;
}

/* See iam.h. */
int stor_iam_sys_conf_set(struct stor_iam *iam, const char *field,
                          const char *value)
{
    json_t *doc = change_begin(iam), *c;

    if (doc == NULL)
        return -ENOMEM;
    c = doc_config(doc, value != NULL);
    if (c && value) {
        if (json_object_set_new(c, field, json_string(value)) < 0) {
            json_decref(doc);
            doc = NULL;
        }
    } else if (c) {
        json_object_del(c, field);
    }
    if (doc == NULL) {
        change_end(iam, NULL);
        return -ENOMEM;
    }
    return change_end(iam, doc);
}

/* Whether r->bucket's public access block refuses policy @pol (valid,
 * NUL-terminated): BlockPublicPolicy and @pol is public. */
static bool policy_blocked(struct stor_s3_req *r, const char *pol)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b = stor_iam_bucket_find(s, r->bucket);
    bool block = b && (b->pab & IAM_PAB_BLOCK_POLICY);
    struct stor_policy *p = NULL;
    char err[64];

    stor_iam_snap_unref(s);
    if (!block)
        return false;
    if (stor_policy_compile(pol, strlen(pol), STOR_POL_BUCKET, &p, err,
                            sizeof(err)) < 0)
        return true; /* it compiled a moment ago: out of memory; refuse */
    block = stor_policy_is_public(p);
    stor_policy_destroy(p);
    return block;
}

/* GET ?policyStatus: GetBucketPolicyStatus, as AWS answers it: whether
 * the bucket's policy is public (stor_policy_is_public, the rule
 * BlockPublicPolicy uses), 404 NoSuchBucketPolicy without a policy. ACLs
 * do not count, as in AWS (RGW also calls a public ACL public). */
static void bucket_policy_status_run(struct stor_s3_req *r)
{
    struct stor_iam_snap *s;
    const struct iam_bucket *b;
    bool has, pub;

    if (need_bucket(r) < 0)
        return;
    s = stor_iam_snap_get(r->s3->iam);
    b = stor_iam_bucket_find(s, r->bucket);
    has = b && b->policy;
    pub = has && b->pol_public;
    stor_iam_snap_unref(s);
    if (!has) {
        stor_s3_error(r, S3E_NO_SUCH_BUCKET_POLICY);
        return;
    }
    if (cm_buf_appendf(&r->http.resp.body,
                       S3_XML_DECL "<PolicyStatus xmlns=\"" S3_XMLNS
                                   "\"><IsPublic>%s</IsPublic></PolicyStatus>",
                       pub ? "true" : "false") < 0 ||
        stor_resp_hdr(&r->http.resp, "Content-Type", "application/xml") < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = 200;
}

static void bucket_policy_run(struct stor_s3_req *r)
{
    struct stor_iam_snap *s;
    const struct iam_bucket *b;
    const char *pol;
    bool none;
    int ret;

    if (need_bucket(r) < 0)
        return;
    if (r->http.is_get) {
        s = stor_iam_snap_get(r->s3->iam);
        b = stor_iam_bucket_find(s, r->bucket);
        if (b == NULL || b->policy == NULL) {
            stor_s3_error(r, S3E_NO_SUCH_BUCKET_POLICY);
        } else if (cm_buf_append(&r->http.resp.body, b->policy,
                                 strlen(b->policy)) < 0 ||
                   stor_resp_hdr(&r->http.resp, "Content-Type",
                                 "application/json") < 0) {
            stor_s3_error(r, S3E_INTERNAL);
        } else {
            r->http.resp.status = 200;
        }
        stor_iam_snap_unref(s);
        return;
    }
    if (r->http.is_delete) {
        ret = bucket_set(r, "policy", NULL);
    } else {
        pol = policy_arg(r, STOR_POL_BUCKET, &none);
        if (pol == NULL) {
            if (none)
                stor_s3_error_msg(r, S3E_MALFORMED_POLICY,
                                  "the policy document is empty");
            return;
        }
        if (policy_blocked(r, pol)) {
            stor_s3_error_msg(r, S3E_ACCESS_DENIED,
                              "the bucket's public access block "
                              "(BlockPublicPolicy) refuses a public policy");
            return;
        }
        ret = bucket_set(r, "policy", json_string(pol));
    }
    if (ret < 0) {
        reply_errno(r, ret);
        return;
    }
    cm_log(CM_LOG_INFO, 0, "iam: bucket %s: policy %s", r->bucket,
           r->http.is_delete ? "deleted" : "set");
    r->http.resp.status = 204;
}

/* See iam.h. */
void stor_iam_owner(const struct stor_s3_req *r, const char *bucket,
                    struct stor_iam_owner *out)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b =
        bucket ? stor_iam_bucket_find(s, bucket) : NULL;
    const struct iam_account *a = NULL;

    if (bucket && b)
        a = b->owner;
    else if (bucket == NULL && r->iam_user && r->iam_user->acct)
        a = stor_iam_account_find(s, r->iam_user->acct->name);
    snprintf(out->id, sizeof(out->id), "%s", a ? a->id : S3_OWNER_ID);
    snprintf(out->name, sizeof(out->name), "%s", a ? a->name : "root");
    out->callers = a == (r->iam_user ? r->iam_user->acct : NULL) ||
                   (a && r->iam_user && r->iam_user->acct &&
                    strcmp(a->name, r->iam_user->acct->name) == 0);
    if (s)
        stor_iam_snap_unref(s);
}

/* See iam.h. */
bool stor_iam_has_accounts(struct stor_iam *iam)
{
    return iam && atomic_load(&iam->accounts);
}

/* See iam.h. */
const char *stor_iam_caller_account(const struct stor_s3_req *r)
{
    return r->iam_user && r->iam_user->acct ? r->iam_user->acct->name : NULL;
}

/* See iam.h. */
void stor_iam_account_owner(struct stor_iam *iam, const char *name,
                            struct stor_iam_owner *out)
{
    struct stor_iam_snap *s = stor_iam_snap_get(iam);
    const struct iam_account *a = stor_iam_account_find(s, name);

    snprintf(out->id, sizeof(out->id), "%s", a ? a->id : S3_OWNER_ID);
    snprintf(out->name, sizeof(out->name), "%s", a ? a->name : "root");
    out->callers = false;
    if (s)
        stor_iam_snap_unref(s);
}

/* The AccessControlPolicy answer of @acl (a canned name or a grant list;
 * NULL: private) on r->bucket, or with @key on its object @key (@n
 * bytes), named by its owner. */
static void acl_reply(struct stor_s3_req *r, const char *key, size_t n)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b = stor_iam_bucket_find(s, r->bucket);
    const json_t *acl = NULL;
    const char *owner;
    int ret;

    if (key)
        acl = b && b->objects ? json_object_getn(b->objects, key, n) : NULL;
    else if (b)
        acl = b->aclv;
    owner = key ? stor_iam_object_owner_id(s, b, key, n)
                : (b && b->owner ? b->owner->id : S3_OWNER_ID);
    ret = stor_acl_xml(&r->http.resp.body, acl, owner,
                       stor_iam_id_name(s, owner), stor_iam_id_name, s);
    stor_iam_snap_unref(s);
    if (ret == 0)
        ret = stor_resp_hdr(&r->http.resp, "Content-Type", "application/xml");
    if (ret < 0) {
        stor_s3_error(r, S3E_INTERNAL);
        return;
    }
    r->http.resp.status = 200;
}

/* The ACL a PUT ?acl sets, as the new value to store (a canned name or a
 * grant list; NULL: private) in *out: an AccessControlPolicy body, the
 * x-amz-grant-* headers or x-amz-acl, exactly one of them. 0, or -1 with
 * the error answered (also a public ACL the bucket's public access block
 * refuses). */
static int acl_arg(struct stor_s3_req *r, json_t **out)
{
    struct stor_iam_snap *s;
    const struct iam_bucket *b;
    enum stor_s3_err e = S3E_NONE;
    const char *msg = NULL;
    json_t *v = NULL;
    bool block;

    *out = NULL;
    if (r->body.len > 0 && (r->acl_hdr || r->acl_grants)) {
        stor_s3_error_msg(r, S3E_UNEXPECTED_CONTENT,
                          "This request does not support content with ACL "
                          "headers");
        return -1;
    }
    s = stor_iam_snap_get(r->s3->iam);
    if (r->body.len > 0)
        e = stor_acl_from_xml(r->body.data, r->body.len, stor_iam_id_known, s,
                              &v, &msg);
    else if (r->acl_grants)
        v = json_deep_copy(r->acl_grants);
    else if (r->acl_hdr == 0)
        e = S3E_MALFORMED_ACL; /* msg: below */
    else if (r->acl_hdr - 1 != IAM_ACL_PRIVATE &&
             (v = json_string(stor_iam_acl_name(r->acl_hdr - 1))) == NULL)
        e = S3E_INTERNAL;
    if (e == S3E_MALFORMED_ACL && msg == NULL)
        msg = "PutAcl needs an AccessControlPolicy body, x-amz-grant-* or "
              "x-amz-acl";
    b = stor_iam_bucket_find(s, r->bucket);
    block = b && (b->pab & IAM_PAB_BLOCK_ACLS);
    stor_iam_snap_unref(s);
    if (e == S3E_NONE && block && stor_acl_is_public(v)) {
        e = S3E_ACCESS_DENIED;
        msg = "the bucket's public access block (BlockPublicAcls) refuses a "
              "public ACL";
    }
    if (e != S3E_NONE) {
        json_decref(v);
        if (msg)
            stor_s3_error_msg(r, e, msg);
        else
            stor_s3_error(r, e);
        return -1;
    }
    *out = v;
    return 0;
}

static void bucket_acl_run(struct stor_s3_req *r)
{
    json_t *v;
    int ret;

    if (need_bucket(r) < 0)
        return;
    if (r->http.is_get || r->http.is_head) {
        acl_reply(r, NULL, 0);
        return;
    }
    if (acl_arg(r, &v) < 0)
        return;
    ret = bucket_set(r, "acl", v);
    if (ret < 0) {
        reply_errno(r, ret);
        return;
    }
    r->http.resp.status = 200;
}

/* Records ACL @v (a canned name or a grant list; NULL: private; takes
 * ownership) of r->bucket/@key. */
static int object_acl_set(struct stor_s3_req *r, const char *key, size_t n,
                          json_t *v)
{
    struct stor_iam *iam = r->s3->iam;
    json_t *doc = change_begin(iam), *b, *objs;

    if (doc == NULL) {
        json_decref(v);
        return -ENOMEM;
    }
    b = doc_bucket(doc, r->bucket, v != NULL);
    objs = json_object_get(b, "objects");
    if (b && objs == NULL && v) {
        objs = json_object();
        json_object_set_new(b, "objects", objs);
    }
    if (objs && v)
        json_object_setn_new(objs, key, n, v);
    else if (objs)
        json_object_deln(objs, key, n);
    else
        json_decref(v);
    doc_bucket_tidy(doc, r->bucket);
    return change_end(iam, doc);
}

/* Whether the ACL recorded for r->bucket/@key equals @v (NULL: none,
 * private). */
static bool object_acl_is(struct stor_s3_req *r, const char *key, size_t n,
                          const json_t *v)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b = stor_iam_bucket_find(s, r->bucket);
    const json_t *a =
        b && b->objects ? json_object_getn(b->objects, key, n) : NULL;
    bool same = a == NULL ? v == NULL : v != NULL && json_equal(a, v);

    stor_iam_snap_unref(s);
    return same;
}

static void object_acl_run(struct stor_s3_req *r)
{
    struct stor_obj_info info;
    json_t *v;
    int ret;

    memset(&info, 0, sizeof(info));
    ret = stor_obj_stat(r->s3->store, r->bucket, r->key, r->key_len, &info);
    if (ret < 0) {
        reply_errno(r, ret);
        return;
    }
    stor_obj_info_fini(&info);
    if (r->http.is_get || r->http.is_head) {
        acl_reply(r, r->key, r->key_len);
        return;
    }
    if (acl_arg(r, &v) < 0)
        return;
    ret = object_acl_set(r, r->key, r->key_len, v);
    if (ret < 0) {
        reply_errno(r, ret);
        return;
    }
    r->http.resp.status = 200;
}

/* See header. */
void stor_iam_op_run(struct stor_s3_req *r)
{
    switch (r->op) {
    case S3_OP_ADMIN:
        admin_run(r);
        break;
    case S3_OP_BUCKET_POLICY:
        bucket_policy_run(r);
        break;
    case S3_OP_BUCKET_POLICY_STATUS:
        bucket_policy_status_run(r);
        break;
    case S3_OP_BUCKET_ACL:
        bucket_acl_run(r);
        break;
    case S3_OP_OBJECT_ACL:
        object_acl_run(r);
        break;
    case S3_OP_BUCKET_PAB:
        stor_iam_pab_op(r);
        break;
    case S3_OP_BUCKET_OWNERSHIP:
        stor_iam_ownership_op(r);
        break;
    default:
        stor_s3_error(r, S3E_INTERNAL);
        break;
    }
}

/* Records that account @acct (NULL: the bucket's own) owns r->bucket's
 * object @key (@n bytes), written by it. 0 or -errno. */
static int object_owner_set(struct stor_s3_req *r, const char *key, size_t n,
                            const struct iam_account *acct)
{
    struct stor_iam *iam = r->s3->iam;
    json_t *doc, *b, *own;

    doc = change_begin(iam);
    if (doc == NULL)
        return -ENOMEM;
    b = doc_bucket(doc, r->bucket, acct != NULL);
    own = json_object_get(b, "owners");
    if (b && own == NULL && acct) {
        own = json_object();
        json_object_set_new(b, "owners", own);
    }
    if (own && acct)
        json_object_setn_new(own, key, n, json_string(acct->name));
    else if (own)
        json_object_deln(own, key, n);
    if (b && json_object_size(json_object_get(b, "owners")) == 0)
        json_object_del(b, "owners");
    doc_bucket_tidy(doc, r->bucket);
    return change_end(iam, doc);
}

/* The account that owns a new write of r->bucket/@key by @r, when it is
 * not the bucket's (S3: the writer owns the object), and whether one is
 * recorded now; only with accounts. */
static void object_owner_written(struct stor_s3_req *r, const char *key,
                                 size_t n, bool deleted)
{
    const struct iam_account *a = r->iam_user ? r->iam_user->acct : NULL;
    struct stor_iam_snap *s;
    const struct iam_bucket *b;
    const char *had;
    bool want;
    int ret;

    if (!atomic_load(&r->s3->iam->accounts))
        return;
    s = stor_iam_snap_get(r->s3->iam);
    b = stor_iam_bucket_find(s, r->bucket);
    want = !deleted && a && !r->owner_takes &&
           (b == NULL || b->own != IAM_OWN_ENFORCED) &&
           (b == NULL || b->owner == NULL || strcmp(b->owner->name, a->name));
    had = b && b->owners
              ? json_string_value(json_object_getn(b->owners, key, n))
              : NULL;
    if ((had == NULL && !want) || (had && want && strcmp(had, a->name) == 0)) {
        stor_iam_snap_unref(s);
        return; /* the common case: nothing to record, no write */
    }
    stor_iam_snap_unref(s);
    ret = object_owner_set(r, key, n, want ? a : NULL);
    if (ret < 0)
        cm_log(CM_LOG_ERROR, -ret,
               "req=%016llX %s: cannot record the object's owner",
               (unsigned long long)r->http.id, r->bucket);
}

/* See header. */
void stor_iam_object_written(struct stor_s3_req *r, const char *key, size_t n,
                             bool deleted)
{
    json_t *want = NULL;
    int ret;

    object_owner_written(r, key, n, deleted);
    if (deleted)
        want = NULL;
    else if (r->acl_grants)
        want = json_deep_copy(r->acl_grants);
    else if (r->acl_hdr > IAM_ACL_PRIVATE + 1)
        want = json_string(stor_iam_acl_name(r->acl_hdr - 1));
    if (object_acl_is(r, key, n, want)) {
        json_decref(want);
        return; /* the common case: private before and after, no write */
    }
    ret = object_acl_set(r, key, n, want);
    if (ret < 0)
        cm_log(CM_LOG_ERROR, -ret,
               "req=%016llX %s: cannot record the object's ACL",
               (unsigned long long)r->http.id, r->bucket);
}

/* See header. */
char *stor_iam_upload_acl(const struct stor_s3_req *r, bool *nomem)
{
    json_t *v = NULL;
    char *out;

    *nomem = false;
    if (r->acl_grants)
        v = json_incref(r->acl_grants);
    else if (r->acl_hdr > IAM_ACL_PRIVATE + 1)
        v = json_string(stor_iam_acl_name(r->acl_hdr - 1));
    else if (r->owner_takes) /* ownership.c: the bucket owner's at Complete */
        v = json_string("bucket-owner-full-control");
    else
        return NULL;
    out = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    *nomem = out == NULL;
    return out;
}

/* See header. */
void stor_iam_upload_acl_restore(struct stor_s3_req *r,
                                 const struct stor_hdr *h, size_t n)
{
    json_t *v = NULL;
    const char *name;
    int acl;

    for (size_t i = 0; i < n && v == NULL; i++)
        if (strcmp(h[i].name, STOR_IAM_HDR_ACL) == 0)
            v = json_loads(h[i].value, JSON_DECODE_ANY, NULL);
    if (json_is_array(v)) {
        json_decref(r->acl_grants);
        r->acl_grants = v;
        return;
    }
    name = json_string_value(v);
    acl = name ? stor_iam_acl_parse(name, strlen(name)) : -1;
    if (name && strcmp(name, "bucket-owner-full-control") == 0)
        r->owner_takes = true; /* see stor_iam_upload_acl */
    else if (acl >= 0)
        r->acl_hdr = (int8_t)(acl + 1);
    json_decref(v);
}

/* See header. */
int stor_iam_bucket_recreated(struct stor_s3_req *r)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    const struct iam_bucket *b = stor_iam_bucket_find(s, r->bucket);
    const json_t *had = b ? b->aclv : NULL;
    json_t *want = NULL;
    bool same;

    if (r->acl_grants)
        want = json_deep_copy(r->acl_grants);
    else if (r->acl_hdr > IAM_ACL_PRIVATE + 1)
        want = json_string(stor_iam_acl_name(r->acl_hdr - 1));
    same = had == NULL ? want == NULL : want != NULL && json_equal(had, want);
    stor_iam_snap_unref(s);
    if (same) {
        json_decref(want);
        return 0; /* the common case: private before and after, no write */
    }
    return bucket_set(r, "acl", want);
}

/* See header. */
void stor_iam_bucket_changed(struct stor_s3_req *r, bool deleted)
{
    struct stor_iam_snap *s = stor_iam_snap_get(r->s3->iam);
    bool had = stor_iam_bucket_find(s, r->bucket) != NULL;
    struct stor_iam *iam = r->s3->iam;
    json_t *doc;
    int ret = 0;

    stor_iam_snap_unref(s);
    if (deleted && had) {
        doc = change_begin(iam);
        if (doc == NULL)
            return;
        json_object_del(json_object_get(doc, "buckets"), r->bucket);
        ret = change_end(iam, doc);
    } else if (!deleted) {
        const struct iam_account *a = r->iam_user ? r->iam_user->acct : NULL;
        const char *own;
        size_t n = 0;

        /* the creator's account owns it (none recorded: the root one) */
        if (a)
            ret = bucket_set(r, "owner", json_string(a->name));
        /* x-amz-object-ownership, checked by authz.c (ownership.c) */
        own = stor_s3_hdr(r, "x-amz-object-ownership", &n);
        if (ret == 0 && own && stor_iam_own_parse(own, n) > 0)
            ret = bucket_set(r, "ownership", json_stringn(own, n));
        if (ret == 0 && r->acl_grants)
            ret = bucket_set(r, "acl", json_deep_copy(r->acl_grants));
        else if (ret == 0 && r->acl_hdr > IAM_ACL_PRIVATE + 1)
            ret = bucket_set(r, "acl",
                             json_string(stor_iam_acl_name(r->acl_hdr - 1)));
    }
    if (ret < 0)
        cm_log(CM_LOG_ERROR, -ret,
               "req=%016llX %s: cannot record the bucket's policy/ACL change",
               (unsigned long long)r->http.id, r->bucket);
}

/* storaged/s3/iam.c - the access-control state (users, keys, policies,
 * bucket policies, canned ACLs), its persistence in the store's system
 * area, and the authorisation decision of every request.
 *
 * DESIGN: the state is one JSON document, STOR_IAM_OBJECT in the bucket
 * STOR_IAM_BUCKET, written with the ordinary object API, so it is
 * erasure-coded, checksummed and healed like any object and survives the
 * loss of M drives. It is small (a line per user, bucket policy or public
 * object) and rarely written, so a change rewrites all of it: a change is
 * applied to a copy of the document, the copy is compiled into a new
 * snapshot (policies compiled, secrets decrypted), committed to the store,
 * and only then swapped in; a failed write changes nothing. The snapshot is
 * what requests read: users sorted by access key (binary search), buckets
 * sorted by name, each with its compiled bucket policy, canned ACL and the
 * canned ACLs of its objects.
 *
 * Secrets: AES-256-GCM with a 12-byte random nonce and the access key as
 * associated data, under a key derived from the root credentials and a
 * random salt kept in the document (PBKDF2-HMAC-SHA256), so the drives
 * alone do not give the keys away. The derived key is computed once, the
 * first time it is needed.
 *
 * Decision (authz.c): root may do everything with the root account's
 * buckets but touch the system area (held to a bucket policy's Deny).
 * Anyone else is allowed an action when their user policy or the bucket's
 * policy allows it, or a canned ACL grants it, and neither policy denies
 * it explicitly; across accounts the caller's identity and the bucket's
 * policy or ACLs must both allow. Accounts ("accounts" in the document)
 * own the buckets they create ("owner"; none: root's). */
#include "storaged/s3/iam.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/codec.h"
#include "common/log.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/store/object.h"

#define KDF_ITERATIONS 100000
#define DOC_MAX        (16 * 1024 * 1024)

/* ---- crypto ---- */

/* The key that encrypts secrets, derived on first use; 0 or -EIO. */
static int kek(struct stor_iam *iam, uint8_t key[32])
{
    const char *salt_hex;
    uint8_t salt[16];
    char *pw;
    size_t ul, sl;
    int ok;

    pthread_mutex_lock(&iam->kek_lock);
    if (iam->kek_ready) {
        memcpy(key, iam->kek, 32);
        pthread_mutex_unlock(&iam->kek_lock);
        return 0;
    }
    salt_hex = iam->salt;
    if (cm_hex_decode(salt_hex, strlen(salt_hex), salt) != 16) {
        pthread_mutex_unlock(&iam->kek_lock);
        return -EIO;
    }
    ul = strlen(iam->root_user);
    sl = strlen(iam->root_secret);
    pw = malloc(ul + 1 + sl);
    if (pw == NULL) {
        pthread_mutex_unlock(&iam->kek_lock);
        return -ENOMEM;
    }
    memcpy(pw, iam->root_user, ul);
    pw[ul] = 0;
    memcpy(pw + ul + 1, iam->root_secret, sl);
    ok = PKCS5_PBKDF2_HMAC(pw, (int)(ul + 1 + sl), salt, 16, KDF_ITERATIONS,
                           EVP_sha256(), 32, iam->kek);
    OPENSSL_cleanse(pw, ul + 1 + sl);
    free(pw);
    if (ok == 1) {
        iam->kek_ready = true;
        memcpy(key, iam->kek, 32);
    }
    pthread_mutex_unlock(&iam->kek_lock);
    return ok == 1 ? 0 : -EIO;
}

#define NONCE 12
#define TAG   16

/* AES-256-GCM of @len bytes; @encrypt: @in plain -> @out nonce|ct|tag,
 * else the reverse (@in nonce|ct|tag, @len its size). 0 or -EIO (also a
 * failed tag check). */
static int gcm(const uint8_t key[32], bool encrypt, const uint8_t *in,
               size_t len, uint8_t *out, const char *aad)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    const uint8_t *nonce;
    int n, ok = 0;

    if (ctx == NULL)
        return -ENOMEM;
    if (encrypt) {
        if (RAND_bytes(out, NONCE) != 1)
            goto out;
        nonce = out;
    } else {
        if (len < NONCE + TAG)
            goto out;
        nonce = in;
    }
    if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, encrypt) !=
            1 ||
        EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, encrypt) != 1 ||
        EVP_CipherUpdate(ctx, NULL, &n, (const uint8_t *)aad,
                         (int)strlen(aad)) != 1)
        goto out;
    if (encrypt) {
        if (EVP_CipherUpdate(ctx, out + NONCE, &n, in, (int)len) != 1 ||
            EVP_CipherFinal_ex(ctx, out + NONCE + n, &n) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG,
                                out + NONCE + len) != 1)
            goto out;
    } else {
        size_t ct = len - NONCE - TAG;

        if (EVP_CipherUpdate(ctx, out, &n, in + NONCE, (int)ct) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG,
                                CM_UNCONST(uint8_t *, in + NONCE + ct)) != 1 ||
            EVP_CipherFinal_ex(ctx, out + n, &n) != 1)
            goto out;
    }
    ok = 1;
out:
    EVP_CIPHER_CTX_free(ctx);
    return ok ? 0 : -EIO;
}

/* Encrypts secret @sk of access key @ak into base64 @out (>= 128). */
int stor_iam_seal(struct stor_iam *iam, const char *ak, const char *sk,
                  char *out, size_t outlen)
{
    uint8_t key[32], blob[NONCE + 64 + TAG];
    size_t n = strlen(sk);
    char aad[64];
    int ret;

    if (n > 64 || CM_BASE64_LEN(NONCE + n + TAG) >= outlen)
        return -EINVAL;
    ret = kek(iam, key);
    if (ret < 0)
        return ret;
    snprintf(aad, sizeof(aad), "storaged-iam:%s", ak);
    ret = gcm(key, true, (const uint8_t *)sk, n, blob, aad);
    OPENSSL_cleanse(key, sizeof(key));
    if (ret == 0)
        cm_base64_encode(blob, NONCE + n + TAG, out);
    return ret;
}

/* Decrypts @b64 (secret of @ak) into @sk (>= 65 bytes). 0 or -EIO. */
static int unseal(struct stor_iam *iam, const char *ak, const char *b64,
                  char sk[STOR_IAM_SK_MAX + 1])
{
    uint8_t key[32], blob[NONCE + STOR_IAM_SK_MAX + TAG + 4];
    size_t bl = strlen(b64);
    char aad[64];
    long n;
    int ret;

    if (bl > CM_BASE64_LEN(sizeof(blob) - 4))
        return -EIO;
    n = cm_base64_decode(b64, bl, blob);
    if (n < NONCE + TAG)
        return -EIO;
    ret = kek(iam, key);
    if (ret < 0)
        return ret;
    snprintf(aad, sizeof(aad), "storaged-iam:%s", ak);
    ret = gcm(key, false, blob, (size_t)n, (uint8_t *)sk, aad);
    OPENSSL_cleanse(key, sizeof(key));
    if (ret == 0)
        sk[n - NONCE - TAG] = 0;
    else
        OPENSSL_cleanse(sk, STOR_IAM_SK_MAX + 1); /* no half-decrypted bytes */
    return ret;
}

/* ---- snapshots ---- */

static void user_fini(struct stor_iam_user *u)
{
    free(u->name);
    stor_policy_destroy(u->pol);
    OPENSSL_cleanse(u->sk, sizeof(u->sk));
}

static void snap_free(struct stor_iam_snap *s)
{
    size_t i;

    for (i = 0; i < s->nusers; i++)
        user_fini(&s->users[i]);
    free(s->users);
    for (i = 0; i < s->nbuckets; i++)
        stor_policy_destroy(s->buckets[i].pol);
    free(s->buckets);
    free(s->accounts);
    json_decref(s->doc);
    free(s);
}

/* See header. */
void stor_iam_snap_unref(struct stor_iam_snap *s)
{
    if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
        snap_free(s);
}

static int user_cmp(const void *a, const void *b)
{
    return strcmp(((const struct stor_iam_user *)a)->ak,
                  ((const struct stor_iam_user *)b)->ak);
}

static int account_cmp(const void *a, const void *b)
{
    return strcmp(((const struct iam_account *)a)->name,
                  ((const struct iam_account *)b)->name);
}

/* See iam_i.h. */
const struct iam_account *stor_iam_account_find(const struct stor_iam_snap *s,
                                                const char *name)
{
    struct iam_account key = {name, NULL};

    if (s == NULL || name == NULL || s->naccounts == 0)
        return NULL;
    return bsearch(&key, s->accounts, s->naccounts, sizeof(key), account_cmp);
}

static int bucket_cmp(const void *a, const void *b)
{
    return strcmp(((const struct iam_bucket *)a)->name,
                  ((const struct iam_bucket *)b)->name);
}

/* enum iam_acl of a canned ACL name; -1 when not one we serve. */
int stor_iam_acl_parse(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int acl;
    } t[] = {
        {"private", IAM_ACL_PRIVATE},
        {"public-read", IAM_ACL_PUBLIC_READ},
        {"authenticated-read", IAM_ACL_AUTH_READ},
        {"public-read-write", IAM_ACL_PUBLIC_RW},
        /* one owner: these grant nothing beyond private */
        {"bucket-owner-read", IAM_ACL_PRIVATE},
        {"bucket-owner-full-control", IAM_ACL_PRIVATE},
    };
    size_t i;

    for (i = 0; i < CM_ARRAY_SIZE(t); i++)
        if (strlen(t[i].name) == n && memcmp(t[i].name, s, n) == 0)
            return t[i].acl;
    return -1;
}

const char *stor_iam_acl_name(int acl)
{
    return acl == IAM_ACL_PUBLIC_READ ? "public-read"
           : acl == IAM_ACL_AUTH_READ ? "authenticated-read"
           : acl == IAM_ACL_PUBLIC_RW ? "public-read-write"
                                      : "private";
}

/* Compiles the stored policy @pol (NULL: none) of user or bucket @name into
 * *out; one that no longer compiles (stored by another version) is logged
 * and left out. 0 or -EINVAL. */
static int stored_policy(const char *pol, enum stor_pol_kind kind,
                         const char *name, struct stor_policy **out)
{
    char err[256];

    *out = NULL;
    if (pol == NULL ||
        stor_policy_compile(pol, strlen(pol), kind, out, err, sizeof(err)) == 0)
        return 0;
    cm_log(CM_LOG_WARN, 0,
           "iam: %s %s: its stored policy does not compile (%s); ignored",
           kind == STOR_POL_USER ? "user" : "bucket", name, err);
    *out = NULL;
    return -EINVAL;
}

/* Compiles document @doc (borrowed; the snapshot takes a reference) into
 * *out. 0, -EINVAL (a stored policy no longer compiles: reported in the
 * log) or -ENOMEM. */
static int snap_build(struct stor_iam *iam, json_t *doc,
                      struct stor_iam_snap **out)
{
    struct stor_iam_snap *s = calloc(1, sizeof(*s));
    json_t *users = json_object_get(doc, "users"), *u, *bks, *bv, *accts, *av;
    const char *bname, *aname;
    size_t i;
    int ret = 0;

    *out = NULL;
    if (s == NULL)
        return -ENOMEM;
    atomic_init(&s->refs, 1);
    s->doc = json_incref(doc);
    s->users = calloc(json_array_size(users) + 1, sizeof(*s->users));
    bks = json_object_get(doc, "buckets");
    s->buckets = calloc(json_object_size(bks) + 1, sizeof(*s->buckets));
    accts = json_object_get(doc, "accounts");
    s->accounts = calloc(json_object_size(accts) + 1, sizeof(*s->accounts));
    if (s->users == NULL || s->buckets == NULL || s->accounts == NULL) {
        ret = -ENOMEM;
        goto out_free;
    }
    json_object_foreach(accts, aname, av)
    {
        const char *id = json_string_value(json_object_get(av, "id"));

        if (id == NULL || strlen(id) != 64) {
            cm_log(CM_LOG_WARN, 0, "iam: account %s malformed; skipped", aname);
            continue;
        }
        s->accounts[s->naccounts].name = aname; /* borrows the document */
        s->accounts[s->naccounts++].id = id;
    }
    qsort(s->accounts, s->naccounts, sizeof(*s->accounts), account_cmp);
    json_array_foreach(users, i, u)
    {
        struct stor_iam_user *su = &s->users[s->nusers];
        const char *name = json_string_value(json_object_get(u, "name"));
        const char *ak = json_string_value(json_object_get(u, "access_key"));
        const char *sec = json_string_value(json_object_get(u, "secret"));
        const char *pol = json_string_value(json_object_get(u, "policy"));
        const char *acct = json_string_value(json_object_get(u, "account"));

        if (name == NULL || ak == NULL || sec == NULL ||
            strlen(ak) >= sizeof(su->ak)) {
            cm_log(CM_LOG_WARN, 0, "iam: user entry %zu malformed; skipped", i);
            continue;
        }
        su->name = strdup(name);
        if (su->name == NULL) {
            ret = -ENOMEM;
            goto out_free;
        }
        s->nusers++;
        snprintf(su->ak, sizeof(su->ak), "%s", ak);
        su->disabled = json_is_true(json_object_get(u, "disabled"));
        su->policy = pol;
        su->acct = stor_iam_account_find(s, acct);
        su->acct_root = json_is_true(json_object_get(u, "account_root"));
        if (acct && su->acct == NULL) {
            cm_log(CM_LOG_WARN, 0,
                   "iam: user %s: its account %s does not exist; the key is "
                   "unusable",
                   name, acct);
            su->broken = true;
        }
        if (unseal(iam, ak, sec, su->sk) < 0) {
            cm_log(CM_LOG_WARN, 0,
                   "iam: user %s: its secret cannot be decrypted (were the "
                   "root credentials changed?); the key is unusable",
                   name);
            su->broken = true;
        }
        if (stored_policy(pol, STOR_POL_USER, name, &su->pol) < 0)
            su->broken = true; /* denied everything */
    }
    qsort(s->users, s->nusers, sizeof(*s->users), user_cmp);
    json_object_foreach(bks, bname, bv)
    {
        struct iam_bucket *b = &s->buckets[s->nbuckets++];
        const char *pol = json_string_value(json_object_get(bv, "policy"));
        const char *acl = json_string_value(json_object_get(bv, "acl"));
        const char *pab, *owner, *own;

        b->name = bname; /* borrows the document */
        b->policy = pol;
        b->acl = acl ? stor_iam_acl_parse(acl, strlen(acl)) : 0;
        if (b->acl < 0)
            b->acl = 0;
        b->aclv = json_object_get(bv, "acl");
        b->objects = json_object_get(bv, "objects");
        b->owners = json_object_get(bv, "owners");
        owner = json_string_value(json_object_get(bv, "owner"));
        b->owner = stor_iam_account_find(s, owner);
        if (owner && b->owner == NULL)
            cm_log(CM_LOG_WARN, 0,
                   "iam: bucket %s: its owner %s is no account; root's now",
                   bname, owner);
        (void)stored_policy(pol, STOR_POL_BUCKET, bname, &b->pol);
        b->pol_public = stor_policy_is_public(b->pol);
        pab = json_string_value(json_object_get(bv, "pab"));
        b->pab = pab ? (unsigned)strtoul(pab, NULL, 10) : 0;
        own = json_string_value(json_object_get(bv, "ownership"));
        b->own = own ? stor_iam_own_parse(own, strlen(own)) : IAM_OWN_NONE;
        if (b->own < 0)
            b->own = IAM_OWN_NONE;
        if (stor_policy_has_deny(b->pol))
            s->any_deny = true;
    }
    qsort(s->buckets, s->nbuckets, sizeof(*s->buckets), bucket_cmp);
    *out = s;
    return 0;

out_free:
    snap_free(s);
    return ret;
}

/* A new reference to the current snapshot. */
struct stor_iam_snap *stor_iam_snap_get(struct stor_iam *iam)
{
    struct stor_iam_snap *s;

    if (iam == NULL)
        return NULL; /* a front end made without a store (unit tests) */
    pthread_rwlock_rdlock(&iam->lock);
    s = iam->cur;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_rwlock_unlock(&iam->lock);
    return s;
}

/* ---- the store ---- */

/* Reads the document; 0 (*doc NULL when there is none yet) or -errno. */
static int doc_read(struct stor_store *st, json_t **doc, char **err)
{
    struct stor_obj_info info;
    struct stor_get *g;
    json_error_t je;
    char *buf;
    size_t got = 0;
    ssize_t n;
    int ret;

    *doc = NULL;
    memset(&info, 0, sizeof(info));
    ret = stor_get_open(st, STOR_IAM_BUCKET, STOR_IAM_OBJECT,
                        strlen(STOR_IAM_OBJECT), &info, &g);
    if (ret == -STOR_ENOBUCKET || ret == -STOR_ENOKEY)
        return 0;
    if (ret < 0) {
        if (asprintf(err, "cannot read the users and policies (%s/%s): %s",
                     STOR_IAM_BUCKET, STOR_IAM_OBJECT, strerror(-ret)) < 0)
            *err = NULL;
        return ret;
    }
    if (info.size > DOC_MAX) {
        stor_obj_info_fini(&info);
        stor_get_close(g);
        return -EFBIG;
    }
    buf = malloc(info.size + 1);
    if (buf == NULL) {
        stor_obj_info_fini(&info);
        stor_get_close(g);
        return -ENOMEM;
    }
    while (got < info.size) {
        n = stor_get_read(g, got, buf + got, info.size - got);
        if (n <= 0) {
            ret = n < 0 ? (int)n : -EIO;
            break;
        }
        got += (size_t)n;
    }
    stor_obj_info_fini(&info);
    stor_get_close(g);
    if (ret == 0) {
        *doc = json_loadb(buf, got, 0, &je);
        if (*doc == NULL || !json_is_object(*doc)) {
            json_decref(*doc);
            *doc = NULL;
            ret = -EBADMSG;
        }
    }
    free(buf);
    if (ret < 0 &&
        asprintf(err, "cannot read the users and policies (%s/%s): %s",
                 STOR_IAM_BUCKET, STOR_IAM_OBJECT, strerror(-ret)) < 0)
        *err = NULL;
    return ret;
}

/* Writes @doc; 0 or -errno. */
static int doc_write(struct stor_store *st, json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    struct stor_put *p;
    size_t n;
    int ret;

    if (text == NULL)
        return -ENOMEM;
    n = strlen(text);
    ret = stor_put_begin(st, STOR_IAM_BUCKET, STOR_IAM_OBJECT,
                         strlen(STOR_IAM_OBJECT), (int64_t)n, NULL, 0, &p);
    if (ret == -STOR_ENOBUCKET) {
        ret = stor_bucket_create(st, STOR_IAM_BUCKET);
        if (ret == 0 || ret == -STOR_EBUCKETEXISTS)
            ret = stor_put_begin(st, STOR_IAM_BUCKET, STOR_IAM_OBJECT,
                                 strlen(STOR_IAM_OBJECT), (int64_t)n, NULL, 0,
                                 &p);
    }
    if (ret == 0) {
        ret = stor_put_write(p, text, n);
        if (ret < 0)
            stor_put_abort(p);
        else
            ret = stor_put_commit(p, NULL, NULL);
    }
    free(text);
    return ret;
}

/* See iam_i.h. */
int stor_iam_commit(struct stor_iam *iam, json_t *doc)
{
    struct stor_iam_snap *s, *old;
    int ret;

    ret = snap_build(iam, doc, &s);
    if (ret < 0) {
        json_decref(doc);
        return ret;
    }
    ret = doc_write(iam->store, doc);
    json_decref(doc);
    if (ret < 0) {
        cm_log(CM_LOG_ERROR, -ret, "iam: cannot write the users and policies");
        stor_iam_snap_unref(s);
        return ret;
    }
    pthread_rwlock_wrlock(&iam->lock);
    old = iam->cur;
    iam->cur = s;
    atomic_store(&iam->root_deny, s->any_deny);
    atomic_store(&iam->accounts, s->naccounts > 0);
    pthread_rwlock_unlock(&iam->lock);
    stor_iam_snap_unref(old);
    return 0;
}

/* Reads the document (a fresh one when there is none yet) and makes it
 * current; then the state is loaded. 0 or -errno with *err (malloc'd). */
static int iam_load(struct stor_iam *iam, char **err)
{
    struct stor_iam_snap *s, *old;
    json_t *doc = NULL;
    const char *salt;
    int ret;

    *err = NULL;
    ret = doc_read(iam->store, &doc, err);
    if (ret < 0)
        return ret;
    if (doc == NULL) {
        uint8_t raw[16];
        char hex[33];

        if (RAND_bytes(raw, sizeof(raw)) != 1)
            return -EIO;
        cm_hex_encode(raw, sizeof(raw), hex);
        doc = json_pack("{s:i, s:s, s:[], s:{}}", "format", 1, "salt", hex,
                        "users", "buckets");
        if (doc == NULL)
            return -ENOMEM;
    }
    salt = json_string_value(json_object_get(doc, "salt"));
    if (salt == NULL || strlen(salt) != 32 ||
        !json_is_array(json_object_get(doc, "users")) ||
        !json_is_object(json_object_get(doc, "buckets"))) {
        json_decref(doc);
        if (asprintf(err,
                     "the users and policies document (%s/%s) is "
                     "malformed",
                     STOR_IAM_BUCKET, STOR_IAM_OBJECT) < 0)
            *err = NULL;
        return -EBADMSG;
    }
    pthread_mutex_lock(&iam->kek_lock);
    snprintf(iam->salt, sizeof(iam->salt), "%s", salt);
    pthread_mutex_unlock(&iam->kek_lock);
    ret = snap_build(iam, doc, &s);
    json_decref(doc);
    if (ret < 0)
        return ret;
    pthread_rwlock_wrlock(&iam->lock);
    old = iam->cur;
    iam->cur = s;
    atomic_store(&iam->root_deny, s->any_deny);
    atomic_store(&iam->accounts, s->naccounts > 0);
    pthread_rwlock_unlock(&iam->lock);
    stor_iam_snap_unref(old);
    atomic_store_explicit(&iam->loaded, true, memory_order_release);
    cm_log(CM_LOG_INFO, 0, "iam: %zu users, %zu buckets with a policy or ACL",
           s->nusers, s->nbuckets);
    return 0;
}

/* Thread: waits for the store's index (a rebuild at start runs while the
 * server listens; until then nothing of the store may be read), then
 * loads the state. A failed read is logged once and retried. */
static void *load_main(void *arg)
{
    struct stor_iam *iam = arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    bool said = false;
    char *err;

    while (!atomic_load_explicit(&iam->stop, memory_order_acquire)) {
        if (stor_store_ready(iam->store)) {
            int ret = iam_load(iam, &err);

            if (ret == 0)
                break;
            if (!said)
                cm_log(CM_LOG_ERROR, -ret, "iam: %s; retrying",
                       err ? err : "cannot load the users and policies");
            said = true;
            free(err);
            ts.tv_sec = 1;
            ts.tv_nsec = 0;
        }
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* See header. */
int stor_iam_open(struct stor_store *store, const char *root_user,
                  const char *root_secret, struct stor_iam **out, char **err)
{
    struct stor_iam *iam = calloc(1, sizeof(*iam));
    json_t *empty;
    int ret;

    *out = NULL;
    *err = NULL;
    if (iam == NULL)
        return -ENOMEM;
    iam->store = store;
    iam->root_user = root_user;
    iam->root_secret = root_secret;
    pthread_rwlock_init(&iam->lock, NULL);
    pthread_mutex_init(&iam->wlock, NULL);
    pthread_mutex_init(&iam->kek_lock, NULL);
    /* until the document is read: no users, nothing public (and requests
     * answer 503, see stor_iam_ready) */
    empty = json_pack("{s:[], s:{}}", "users", "buckets");
    ret = empty ? snap_build(iam, empty, &iam->cur) : -ENOMEM;
    json_decref(empty);
    if (ret < 0)
        goto out_free;
    if (stor_store_ready(store)) {
        ret = iam_load(iam, err);
        if (ret < 0)
            goto out_snap;
    } else {
        ret = -pthread_create(&iam->loader, NULL, load_main, iam);
        if (ret < 0)
            goto out_snap;
        iam->has_loader = true;
    }
    *out = iam;
    return 0;

out_snap:
    stor_iam_snap_unref(iam->cur);
out_free:
    pthread_rwlock_destroy(&iam->lock);
    pthread_mutex_destroy(&iam->wlock);
    pthread_mutex_destroy(&iam->kek_lock);
    free(iam);
    return ret;
}

/* See header. */
bool stor_iam_ready(struct stor_iam *iam)
{
    return iam == NULL ||
           atomic_load_explicit(&iam->loaded, memory_order_acquire);
}

/* See header. */
void stor_iam_close(struct stor_iam *iam)
{
    if (iam == NULL)
        return;
    if (iam->has_loader) {
        atomic_store_explicit(&iam->stop, true, memory_order_release);
        pthread_join(iam->loader, NULL);
    }
    stor_iam_snap_unref(iam->cur);
    OPENSSL_cleanse(iam->kek, sizeof(iam->kek));
    pthread_rwlock_destroy(&iam->lock);
    pthread_mutex_destroy(&iam->wlock);
    pthread_mutex_destroy(&iam->kek_lock);
    free(iam);
}

/* ---- lookups ---- */

/* See header. */
const struct stor_iam_user *stor_iam_user_lookup(struct stor_iam *iam,
                                                 const char *ak, size_t n,
                                                 struct stor_iam_snap **snap)
{
    struct stor_iam_snap *s;
    size_t lo = 0, hi;

    *snap = NULL;
    if (n == 0 || n >= sizeof(s->users[0].ak))
        return NULL;
    s = stor_iam_snap_get(iam);
    if (s == NULL)
        return NULL;
    hi = s->nusers;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(s->users[mid].ak, ak, n);

        if (c == 0 && s->users[mid].ak[n] != 0)
            c = 1;
        if (c == 0) {
            *snap = s;
            return &s->users[mid];
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    stor_iam_snap_unref(s);
    return NULL;
}

const char *stor_iam_user_secret(const struct stor_iam_user *u)
{
    return u->sk;
}

bool stor_iam_user_enabled(const struct stor_iam_user *u)
{
    return !u->disabled && !u->broken;
}

const char *stor_iam_user_name(const struct stor_iam_user *u)
{
    return u->name;
}

/* See iam_i.h. */
const struct iam_bucket *stor_iam_bucket_find(const struct stor_iam_snap *s,
                                              const char *name)
{
    size_t lo = 0, hi = s ? s->nbuckets : 0;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(s->buckets[mid].name, name);

        if (c == 0)
            return &s->buckets[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

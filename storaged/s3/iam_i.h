/* storaged/s3/iam_i.h - the access-control state's layout, shared by
 * iam.c (state, persistence), authz.c (decisions) and iam_api.c (the admin
 * API, bucket policy and ACL operations). Everything in a snapshot is
 * immutable after creation. */
#ifndef STORAGED_S3_IAM_I_H
#define STORAGED_S3_IAM_I_H
#include "storaged/s3/iam.h"
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STOR_IAM_SK_MAX 64

enum iam_acl {
    IAM_ACL_PRIVATE = 0,
    IAM_ACL_PUBLIC_READ,
    IAM_ACL_AUTH_READ,
    IAM_ACL_PUBLIC_RW, /* on a bucket: anyone lists, writes and deletes */
};

/* A bucket's S3 Object Ownership setting (ownership.c). */
enum iam_own {
    IAM_OWN_NONE = 0,  /* none set: the writer owns, the bucket's owner
                        * keeps full control (storaged's earlier rule) */
    IAM_OWN_ENFORCED,  /* BucketOwnerEnforced: ACLs off, the bucket's */
    IAM_OWN_PREFERRED, /* BucketOwnerPreferred */
    IAM_OWN_WRITER,    /* ObjectWriter */
};

/* An account other than the root one (root and the users made with
 * `storaged admin user add` belong to that): it owns the buckets its users
 * create, and reaches other accounts' buckets only through their bucket
 * policies and canned ACLs. */
struct iam_account {
    const char *name; /* borrows the document */
    const char *id;   /* canonical id (64 hex); borrows the document */
};

struct stor_iam_user {
    char *name;                     /* owned */
    const struct iam_account *acct; /* in the snapshot; NULL: root's */
    bool acct_root; /* the account's own key: may do anything it owns */
    char ak[STOR_IAM_AK_LEN + 4];
    char sk[STOR_IAM_SK_MAX + 1]; /* decrypted; never logged */
    bool disabled;
    bool broken;             /* secret or policy unusable: denied */
    const char *policy;      /* borrows the snapshot's document; may be NULL */
    struct stor_policy *pol; /* owned; NULL: no policy (nothing allowed) */
};

/* A bucket's public access block (PutPublicAccessBlock), as bits. */
enum iam_pab {
    IAM_PAB_BLOCK_ACLS = 1,   /* refuse setting a public canned ACL */
    IAM_PAB_IGNORE_ACLS = 2,  /* public ACLs grant nothing */
    IAM_PAB_BLOCK_POLICY = 4, /* refuse a public bucket policy */
    IAM_PAB_RESTRICT = 8,     /* a public policy grants only the owner's */
    IAM_PAB_SET = 16,         /* a configuration exists (even all false) */
};

struct iam_bucket {
    const char *name;        /* borrows the document */
    const char *policy;      /* borrows the document; may be NULL */
    struct stor_policy *pol; /* owned */
    int acl;                 /* enum iam_acl */
    json_t *aclv; /* borrowed: "acl" as stored: a canned name or a grant
                   * list (acl.h); NULL: private */
    unsigned pab; /* enum iam_pab bits */
    int own;      /* enum iam_own */
    const struct iam_account *owner; /* in the snapshot; NULL: root's */
    /* borrowed: key -> account name, for objects written by an account
     * other than the bucket's (they own them), or NULL */
    json_t *owners;
    bool pol_public; /* stor_policy_is_public(pol) */
    /* borrowed: key -> canned ACL name or grant list (acl.h), or NULL */
    json_t *objects;
};

struct stor_iam_snap {
    atomic_int refs;
    struct stor_iam_user *users; /* owned, sorted by access key */
    size_t nusers;
    struct iam_bucket *buckets; /* owned, sorted by name */
    size_t nbuckets;
    struct iam_account *accounts; /* owned, sorted by name */
    size_t naccounts;
    json_t *doc;   /* owned reference: the document this was built from */
    bool any_deny; /* some bucket policy has a Deny (root is held to it) */
};

struct stor_iam {
    struct stor_store *store; /* borrowed */
    const char *root_user;    /* borrowed */
    const char *root_secret;  /* borrowed */
    char salt[40];            /* hex; immutable once loaded */
    pthread_rwlock_t lock;    /* protects cur (the pointer, not its data) */
    struct stor_iam_snap *cur;
    pthread_mutex_t wlock;    /* serialises changes (read, change, commit) */
    pthread_mutex_t kek_lock; /* protects salt (until loaded), kek */
    bool kek_ready;           /* protected by kek_lock */
    atomic_bool loaded;       /* the document has been read: serving */
    atomic_bool root_deny;    /* cur->any_deny, read without the lock */
    atomic_bool accounts;     /* cur->naccounts > 0, read without the lock */
    atomic_bool stop;         /* tells the loader to give up */
    pthread_t loader;         /* waits for the store's index, then loads */
    bool has_loader;
    uint8_t kek[32];
};

/* A new reference to the current snapshot (NULL when @iam is NULL: a front
 * end without a store, as unit tests make; nothing is allowed then). */
struct stor_iam_snap *stor_iam_snap_get(struct stor_iam *iam);
/* Under iam->wlock: compiles @doc (takes ownership, also on failure),
 * writes it to the store and makes it current. 0 or -errno. */
int stor_iam_commit(struct stor_iam *iam, json_t *doc);
/* Encrypts secret @sk of access key @ak as base64 into @out. 0 or -errno. */
int stor_iam_seal(struct stor_iam *iam, const char *ak, const char *sk,
                  char *out, size_t outlen);
/* The account @name in @s, or NULL. */
const struct iam_account *stor_iam_account_find(const struct stor_iam_snap *s,
                                                const char *name);
/* The bucket entry of @name in @s (may be NULL), or NULL. */
const struct iam_bucket *stor_iam_bucket_find(const struct stor_iam_snap *s,
                                              const char *name);
/* stor_acl_id_known and stor_acl_id_name (acl.h) over snapshot @arg:
 * root's canonical id and the accounts' (authz.c). */
bool stor_iam_id_known(void *arg, const char *id);
const char *stor_iam_id_name(void *arg, const char *id);
/* The canonical id of the account that owns r->bucket's object @key (its
 * writer when recorded, else the bucket's owner) in @s. */
const char *stor_iam_object_owner_id(const struct stor_iam_snap *s,
                                     const struct iam_bucket *b,
                                     const char *key, size_t n);
/* enum iam_acl of canned ACL @s (@n bytes), or -1; and its name. */
int stor_iam_acl_parse(const char *s, size_t n);
const char *stor_iam_acl_name(int acl);
/* The switches of a PutPublicAccessBlock body (@len bytes) into *bits
 * (IAM_PAB_* without IAM_PAB_SET; a switch left out is false, as S3 takes
 * it). S3E_NONE, S3E_MALFORMED_XML or S3E_INTERNAL (no memory). */
enum stor_s3_err stor_iam_pab_parse(const char *xml, size_t len,
                                    unsigned *bits);
/* Worker: Get/Put/DeletePublicAccessBlock (pab.c). */
void stor_iam_pab_op(struct stor_s3_req *r);
/* enum iam_own of setting name @s (@n bytes; not IAM_OWN_NONE), or -1;
 * and the name of one (NULL for IAM_OWN_NONE). */
int stor_iam_own_parse(const char *s, size_t n);
const char *stor_iam_own_name(int own);
/* The setting of a PutBucketOwnershipControls body (@len bytes: exactly
 * one Rule with one ObjectOwnership) into *own. S3E_NONE,
 * S3E_MALFORMED_XML or S3E_INTERNAL (no memory). */
enum stor_s3_err stor_iam_own_parse_xml(const char *xml, size_t len, int *own);
/* Worker: Get/Put/DeleteBucketOwnershipControls (ownership.c). */
void stor_iam_ownership_op(struct stor_s3_req *r);
/* The admin action @r (op S3_OP_ADMIN) asks for; STOR_ACT_COUNT when it
 * is no admin call. */
enum stor_act stor_iam_admin_act(const struct stor_s3_req *r);

#endif /* STORAGED_S3_IAM_I_H */

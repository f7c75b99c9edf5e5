/* fuse/inode.c - inode table (lookup/forget counting) and listing cache.
 *
 * DESIGN: one mutex guards both hash tables (by inode number, by key) and
 * every inode's mutable fields; the critical sections are tiny (no I/O under
 * it). Inode numbers come from a counter and are never reused within a
 * mount, so a stale number can never name another object. A directory
 * listing is fetched with all its ListObjectsV2 pages into an immutable,
 * refcounted snapshot; concurrent refreshes of one directory are coalesced
 * by one of 64 list_locks chosen by a hash of the directory key (the
 * second thread finds the fresh listing the first one built), so N threads
 * scanning a directory cost one LIST pass.
 * Changes made through this mount (create, unlink, mkdir, rmdir, rename)
 * are notes (key -> exists + attributes, time) that lookups prefer over
 * listings fetched before them, and mark the parent's listing stale for
 * directory reads (dirchg: directory key -> time of its last change), so
 * the mount sees its own changes at once without re-listing a directory
 * per created file. A note is dropped once list_ttl has passed: every
 * listing used after that was fetched after it. */
#include "fuse/inode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "fuse/fs.h"
#include "fuse/listxml.h"

/* An intrusive chained hash table of inodes, by number (chained through
 * next_ino) or by key (next_key, with the key's hash in khash): two
 * pointers and 4 bytes per inode instead of a 56-byte uthash handle per
 * table. It doubles at load 1 and never shrinks; a failed doubling only
 * makes the chains longer. */
struct ihash {
    struct fc_inode **b; /* buckets */
    size_t mask;         /* bucket count - 1, a power of two */
    size_t n;            /* inodes in it */
};
#define IHASH_INIT 1024

struct fc_itab {
    pthread_mutex_t lock;           /* protects both tables and inode fields */
    struct ihash by_ino;            /* protected by lock */
    struct ihash by_key;            /* protected by lock */
    fuse_ino_t next_ino;            /* protected by lock */
    size_t count;                   /* protected by lock */
    size_t peak;                    /* most ever live; protected by lock */
    struct fc_listing *listings;    /* cache by dir key; one ref each; lock */
    pthread_mutex_t list_locks[64]; /* serialise refreshes, by key hash */
    unsigned sweep_at;       /* sweep expired listings at this count; lock */
    struct fc_note *notes;   /* by key; protected by lock */
    struct fc_note *dirchg;  /* by directory key: last change; lock */
    unsigned notes_sweep_at; /* sweep old notes at this count; lock */
    struct fc_note *marks;   /* by directory key: its marker as made,
                              * changed or deleted here (the note's
                              * a.size is an enum fc_dirmark); lock */
};

/* A namespace change made through this mount (see DESIGN). */
struct fc_note {
    char *key; /* owned */
    bool exists;
    struct fc_attr a;
    double t; /* fc_now() when recorded */
    UT_hash_handle hh;
};

/* A key replaced by a rename, kept until the inode is freed. */
struct fc_oldkey {
    struct fc_oldkey *next;
    char *key; /* owned */
};

/* What only an opened or written inode needs (fc_inode.op). */
struct fc_iopen {
    char kept_etag[FC_ETAG_MAX]; /* ETag the page cache holds */
    uint64_t kept_size;          /* size of that version */
    time_t kept_mtime;           /* its mtime */
    unsigned nopen_cached;       /* open handles using the page cache, all
                                  * pinned to kept_etag */
    unsigned nwriters;           /* open write handles */
    uint64_t wsize;              /* file size as the last writer left it */
    time_t wmtime;               /* time of the last write */
    /* the latest fc_itab_adopt_etag of the inode: version adopted_from
     * is adopted_to (the same bytes); "" none */
    char adopted_from[FC_ETAG_MAX];
    char adopted_to[FC_ETAG_MAX];
};

/* FNV-1a of @n bytes at @p. */
static uint32_t key_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

static int ihash_init(struct ihash *h)
{
    h->b = calloc(IHASH_INIT, sizeof(*h->b));
    h->mask = IHASH_INIT - 1;
    h->n = 0;
    return h->b ? 0 : -ENOMEM;
}

/* Bucket of @in in @h (@by_key: which table). */
static size_t ihash_slot(const struct ihash *h, const struct fc_inode *in,
                         bool by_key)
{
    return (by_key ? in->khash : (size_t)in->ino) & h->mask;
}

static struct fc_inode **ihash_next(struct fc_inode *in, bool by_key)
{
    return by_key ? &in->next_key : &in->next_ino;
}

/* Doubles @h's buckets, if memory allows. */
static void ihash_grow(struct ihash *h, bool by_key)
{
    size_t nb = 2 * (h->mask + 1);
    struct fc_inode **b = calloc(nb, sizeof(*b));
    struct ihash g = {b, nb - 1, h->n};

    if (b == NULL)
        return;
    for (size_t i = 0; i <= h->mask; i++) {
        struct fc_inode *in = h->b[i], *next;
        for (; in != NULL; in = next) {
            size_t s = ihash_slot(&g, in, by_key);
            next = *ihash_next(in, by_key);
            *ihash_next(in, by_key) = b[s];
            b[s] = in;
        }
    }
    free(h->b);
    *h = g;
}

static void ihash_add(struct ihash *h, struct fc_inode *in, bool by_key)
{
    size_t s;

    if (h->n > h->mask)
        ihash_grow(h, by_key);
    s = ihash_slot(h, in, by_key);
    *ihash_next(in, by_key) = h->b[s];
    h->b[s] = in;
    h->n++;
}

static void ihash_del(struct ihash *h, struct fc_inode *in, bool by_key)
{
    struct fc_inode **pp = &h->b[ihash_slot(h, in, by_key)];

    for (; *pp != NULL; pp = ihash_next(*pp, by_key)) {
        if (*pp == in) {
            *pp = *ihash_next(in, by_key);
            h->n--;
            return;
        }
    }
    (void)CM_NEVER(true); /* not in the table */
}

static struct fc_inode *ino_find(const struct fc_itab *t, fuse_ino_t ino)
{
    struct fc_inode *in = t->by_ino.b[(size_t)ino & t->by_ino.mask];

    while (in != NULL && in->ino != ino)
        in = in->next_ino;
    return in;
}

static struct fc_inode *key_find(const struct fc_itab *t, const char *key,
                                 size_t len)
{
    uint32_t h = key_hash(key, len);
    struct fc_inode *in = t->by_key.b[h & t->by_key.mask];

    for (; in != NULL; in = in->next_key) {
        if (in->khash == h && strncmp(in->key, key, len) == 0 &&
            in->key[len] == '\0')
            return in;
    }
    return NULL;
}

/* Puts @in into by_key under its key. t->lock held. */
static void key_add(struct fc_itab *t, struct fc_inode *in)
{
    in->khash = key_hash(in->key, strlen(in->key));
    ihash_add(&t->by_key, in, true);
    in->hashed = true;
}

/* Stores @etag as @in's ETag (a long one on the heap; on ENOMEM it is
 * cut to "", unknown: reads then send no If-Match and nothing caches it). */
static void etag_store(struct fc_inode *in, const char *etag)
{
    size_t n = strlen(etag) + 1;

    if (in->etag != in->etag_in && in->etag != NULL &&
        strcmp(in->etag, etag) == 0)
        return;
    if (in->etag != in->etag_in)
        free(in->etag);
    in->etag = in->etag_in;
    if (n <= sizeof(in->etag_in)) {
        memcpy(in->etag_in, etag, n);
        return;
    }
    in->etag = malloc(n);
    if (in->etag == NULL) {
        in->etag = in->etag_in;
        in->etag_in[0] = '\0';
        return;
    }
    memcpy(in->etag, etag, n);
}

/* @in's attributes as an fc_attr. itab->lock held. */
static void attr_load(const struct fc_inode *in, struct fc_attr *a)
{
    a->is_dir = in->is_dir;
    a->size = in->size;
    a->mtime = in->mtime;
    snprintf(a->etag, sizeof(a->etag), "%s", in->etag);
    a->meta = in->meta;
    a->meta_unknown = in->meta_unknown;
}

/* @in's open state, allocated at the first use; NULL on ENOMEM. itab->lock
 * held. */
static struct fc_iopen *iopen_of(struct fc_inode *in)
{
    if (in->op == NULL)
        in->op = calloc(1, sizeof(*in->op));
    return in->op;
}

/* Monotonic seconds (see fs.h). */
double fc_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Freshness under the listing TTL (see fs.h). */
bool fc_fs_is_fresh(const struct fc_fs *fs, double t)
{
    if (t <= 0)
        return false;
    if (fs->cache_forever)
        return true;
    return fc_now() - t < fs->o.list_ttl;
}

/* Allocates an inode for @key with no lookups. NULL on ENOMEM. */
static struct fc_inode *inode_alloc(const char *key)
{
    size_t kl = strlen(key) + 1;
    struct fc_inode *in = calloc(1, sizeof(*in) + kl);

    if (in == NULL)
        return NULL;
    memcpy(in->kbuf, key, kl);
    in->key = in->kbuf;
    in->etag = in->etag_in;
    return in;
}

static void inode_free(struct fc_inode *in)
{
    while (in->old_keys) {
        struct fc_oldkey *o = in->old_keys;
        in->old_keys = o->next;
        free(o->key);
        free(o);
    }
    if (in->rs != NULL) {
        fc_rstate_fini(in->rs);
        free(in->rs);
    }
    free(in->op);
    if (in->etag != in->etag_in)
        free(in->etag);
    if (in->key != in->kbuf)
        free(in->key);
    free(in);
}

/* Creates the table with its root (see header). */
int fc_itab_create(const char *root_key, struct fc_itab **out)
{
    struct fc_itab *t = calloc(1, sizeof(*t));
    struct fc_inode *root;

    if (t == NULL)
        return -ENOMEM;
    root = inode_alloc(root_key);
    if (root == NULL || ihash_init(&t->by_ino) < 0 ||
        ihash_init(&t->by_key) < 0) {
        free(t->by_ino.b);
        free(root);
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    for (size_t i = 0; i < CM_ARRAY_SIZE(t->list_locks); i++)
        pthread_mutex_init(&t->list_locks[i], NULL);
    root->ino = FUSE_ROOT_ID;
    root->nlookup = 1; /* never forgotten */
    root->is_dir = true;
    root->mtime = time(NULL);
    ihash_add(&t->by_ino, root, false);
    key_add(t, root);
    t->next_ino = FUSE_ROOT_ID + 1;
    t->sweep_at = 1024;
    t->count = t->peak = 1;
    *out = t;
    return 0;
}

/* Frees every inode (unmount: the kernel is gone). */
void fc_itab_destroy(struct fc_itab *t)
{
    struct fc_inode *in, *tmp;
    struct fc_listing *l, *ltmp;

    if (t == NULL)
        return;
    for (size_t i = 0; i <= t->by_ino.mask; i++) {
        for (in = t->by_ino.b[i]; in != NULL; in = tmp) {
            tmp = in->next_ino;
            inode_free(in);
        }
    }
    free(t->by_ino.b);
    free(t->by_key.b);
    {
        struct fc_note *n, *ntmp;
        HASH_ITER(hh, t->notes, n, ntmp)
        {
            HASH_DEL(t->notes, n);
            free(n->key);
            free(n);
        }
        HASH_ITER(hh, t->dirchg, n, ntmp)
        {
            HASH_DEL(t->dirchg, n);
            free(n->key);
            free(n);
        }
        HASH_ITER(hh, t->marks, n, ntmp)
        {
            HASH_DEL(t->marks, n);
            free(n->key);
            free(n);
        }
    }
    HASH_ITER(hh, t->listings, l, ltmp)
    {
        HASH_DEL(t->listings, l);
        fc_listing_unref(l);
    }
    for (size_t i = 0; i < CM_ARRAY_SIZE(t->list_locks); i++)
        pthread_mutex_destroy(&t->list_locks[i]);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Finds an inode by number, no reference (see header). */
struct fc_inode *fc_inode_peek(struct fc_itab *t, fuse_ino_t ino)
{
    struct fc_inode *in;

    pthread_mutex_lock(&t->lock);
    in = ino_find(t, ino);
    pthread_mutex_unlock(&t->lock);
    return in;
}

/* The reader state of an inode read without a handle (see header). */
struct fc_rstate *fc_inode_rstate(struct fc_itab *t, struct fc_inode *in)
{
    struct fc_rstate *rs;

    pthread_mutex_lock(&t->lock);
    if (in->rs == NULL && (in->rs = malloc(sizeof(*in->rs))) != NULL)
        fc_rstate_init(in->rs);
    rs = in->rs;
    pthread_mutex_unlock(&t->lock);
    return rs;
}

/* Finds or creates the inode of @key and adds a lookup (see header). */
/* Replaces @in's attributes with @a; attributes without metadata (a
 * listing's) keep the metadata already known for the same version, and
 * the knowledge that it has none. itab->lock held. */
static void attr_store(struct fc_inode *in, const struct fc_attr *a)
{
    /* a listing shows a directory as a bare prefix (no ETag, never its
     * marker's metadata): keep what a HEAD of the marker, mkdir or chmod
     * told */
    bool same = (a->etag[0] != '\0' && fc_s3_etag_equal(a->etag, in->etag)) ||
                (a->is_dir && in->is_dir);
    bool keep = a->meta.has == 0 && same &&
                (in->meta.has != 0 || (a->meta_unknown && !in->meta_unknown &&
                                       in->attr_fetched > 0));

    in->is_dir = a->is_dir;
    in->size = a->size;
    in->mtime = a->mtime;
    etag_store(in, a->etag);
    if (!keep) {
        in->meta = a->meta;
        in->meta_unknown = a->meta_unknown;
    }
}

struct fc_inode *fc_inode_lookup(struct fc_itab *t, const char *key,
                                 const struct fc_attr *a, double when)
{
    struct fc_inode *in, *fresh = NULL;

    pthread_mutex_lock(&t->lock);
    in = key_find(t, key, strlen(key));
    if (in == NULL) {
        /* allocate outside the common path only; rare enough to hold lock */
        fresh = inode_alloc(key);
        if (fresh == NULL) {
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        in = fresh;
        in->ino = t->next_ino++;
        ihash_add(&t->by_ino, in, false);
        key_add(t, in);
        t->count++;
        if (t->count > t->peak)
            t->peak = t->count;
    }
    /* never replace newer attributes (a HEAD) with older ones (a listing
     * fetched earlier) */
    if (a && (in == fresh || when >= in->attr_fetched)) {
        attr_store(in, a);
        in->attr_fetched = when;
    }
    in->nlookup++;
    pthread_mutex_unlock(&t->lock);
    return in;
}

/* Attributes of a live inode by key (see header). */
bool fc_itab_cached_attr(struct fc_itab *t, const char *key, struct fc_attr *a,
                         double *fetched)
{
    struct fc_inode *in;

    pthread_mutex_lock(&t->lock);
    in = key_find(t, key, strlen(key));
    if (in) {
        attr_load(in, a);
        *fetched = in->attr_fetched;
    }
    pthread_mutex_unlock(&t->lock);
    return in != NULL;
}

/* One more lookup (see header). */
void fc_inode_ref(struct fc_itab *t, struct fc_inode *in)
{
    pthread_mutex_lock(&t->lock);
    in->nlookup++;
    pthread_mutex_unlock(&t->lock);
}

/* Drops lookups (see header). */
void fc_inode_forget(struct fc_itab *t, fuse_ino_t ino, uint64_t n)
{
    struct fc_inode *in;

    pthread_mutex_lock(&t->lock);
    in = ino_find(t, ino);
    if (in == NULL || ino == FUSE_ROOT_ID) {
        pthread_mutex_unlock(&t->lock);
        return;
    }
    if (CM_NEVER(in->nlookup < n))
        n = in->nlookup;
    in->nlookup -= n;
    if (in->nlookup > 0) {
        pthread_mutex_unlock(&t->lock);
        return;
    }
    ihash_del(&t->by_ino, in, false);
    if (in->hashed)
        ihash_del(&t->by_key, in, true);
    t->count--;
    pthread_mutex_unlock(&t->lock);
    inode_free(in);
}

/* Copies attributes (see header). */
void fc_inode_get_attr(struct fc_itab *t, struct fc_inode *in,
                       struct fc_attr *a, double *fetched)
{
    pthread_mutex_lock(&t->lock);
    attr_load(in, a);
    if (fetched)
        *fetched = in->attr_fetched;
    pthread_mutex_unlock(&t->lock);
}

/* Replaces attributes (see header). */
void fc_inode_set_attr(struct fc_itab *t, struct fc_inode *in,
                       const struct fc_attr *a, double when)
{
    pthread_mutex_lock(&t->lock);
    attr_store(in, a);
    in->attr_fetched = when;
    pthread_mutex_unlock(&t->lock);
}

/* Attributes for a reply to the kernel (see header). */
void fc_inode_reply_attr(struct fc_itab *t, struct fc_inode *in,
                         struct fc_attr *a)
{
    const struct fc_iopen *op;

    pthread_mutex_lock(&t->lock);
    op = in->op; /* set under the lock by the first open or write */
    attr_load(in, a);
    if (!a->is_dir && op != NULL && op->nwriters > 0) {
        /* being written here: the size so far (the kernel's i_size) */
        a->size = op->wsize;
        a->mtime = op->wmtime;
    } else if (!a->is_dir && op != NULL && op->nopen_cached > 0) {
        a->size = op->kept_size;
        a->mtime = op->kept_mtime;
        snprintf(a->etag, sizeof(a->etag), "%s", op->kept_etag);
    }
    if (in->shown && a->size != in->shown_size)
        in->shown_mixed = true;
    in->shown_size = a->size;
    in->shown = true;
    pthread_mutex_unlock(&t->lock);
}

/* Registers an open of version @v (see header). */
void fc_inode_open_version(struct fc_itab *t, struct fc_inode *in,
                           const struct fc_attr *v, bool *keep_cache,
                           bool *direct_io, bool *inval_attr)
{
    const char *etag = v->etag;
    struct fc_iopen *op;

    *inval_attr = false;
    pthread_mutex_lock(&t->lock);
    op = iopen_of(in);
    if (op == NULL || (op->nopen_cached > 0 &&
                       (etag[0] == '\0' || strcmp(op->kept_etag, etag) != 0))) {
        /* the page cache is in use for another version: pages this
         * handle filled would be read by the others (and theirs by it);
         * or no memory to track it: no page cache either */
        *keep_cache = false;
        *direct_io = true;
    } else {
        *keep_cache = etag[0] != '\0' && strcmp(op->kept_etag, etag) == 0;
        *direct_io = false;
        snprintf(op->kept_etag, sizeof(op->kept_etag), "%s", etag);
        op->kept_size = v->size;
        op->kept_mtime = v->mtime;
        op->nopen_cached++;
        /* from here on every reply sends kept_size; older replies of
         * another size may still be on their way: the caller's
         * notify_inval_inode makes the kernel discard them */
        if (!in->shown || in->shown_mixed || in->shown_size != v->size) {
            *inval_attr = true;
            in->shown_mixed = false;
            in->shown_size = v->size;
            in->shown = true;
        }
    }
    pthread_mutex_unlock(&t->lock);
}

/* Registers an open of @in pinned to @etag (see header). */
void fc_inode_open(struct fc_itab *t, struct fc_inode *in, const char *etag,
                   bool *keep_cache, bool *direct_io)
{
    struct fc_attr v;
    bool inval;

    fc_inode_get_attr(t, in, &v, NULL);
    snprintf(v.etag, sizeof(v.etag), "%s", etag);
    fc_inode_open_version(t, in, &v, keep_cache, direct_io, &inval);
}

/* Ends an open registered by fc_inode_open (see header). */
void fc_inode_close(struct fc_itab *t, struct fc_inode *in, bool direct_io)
{
    if (direct_io)
        return;
    pthread_mutex_lock(&t->lock);
    if (!CM_NEVER(in->op == NULL || in->op->nopen_cached == 0))
        in->op->nopen_cached--;
    pthread_mutex_unlock(&t->lock);
}

static void note_put(struct fc_note **h, const char *key, bool exists,
                     const struct fc_attr *a, double now);

/* Version @from is now @to (see header). */
void fc_itab_adopt_etag(struct fc_itab *t, const char *key, struct fc_inode *in,
                        const char *from, const char *to)
{
    size_t dl = strlen(key);
    double now = fc_now();
    struct fc_note *n;
    char *dir;

    while (dl > 0 && key[dl - 1] != '/')
        dl--;
    dir = strndup(key, dl); /* the parent directory's key */
    pthread_mutex_lock(&t->lock);
    /* dated now: a listing fetched before the copy's answer (cached, or
     * still in flight) names @from, and must not put it back */
    HASH_FIND_STR(t->notes, key, n);
    if (n != NULL && n->exists && fc_s3_etag_equal(n->a.etag, from)) {
        snprintf(n->a.etag, sizeof(n->a.etag), "%s", to);
        n->t = now;
    }
    if (in != NULL && fc_s3_etag_equal(in->etag, from)) {
        etag_store(in, to);
        in->attr_fetched = now;
    }
    if (in != NULL && in->op != NULL &&
        fc_s3_etag_equal(in->op->kept_etag, from))
        snprintf(in->op->kept_etag, sizeof(in->op->kept_etag), "%s", to);
    if (in != NULL && iopen_of(in) != NULL) { /* (ENOMEM: not kept) */
        snprintf(in->op->adopted_from, sizeof(in->op->adopted_from), "%s",
                 from);
        snprintf(in->op->adopted_to, sizeof(in->op->adopted_to), "%s", to);
    }
    if (dir != NULL) /* its cached listings are older: fetched again */
        note_put(&t->dirchg, dir, true, NULL, now);
    pthread_mutex_unlock(&t->lock);
    free(dir);
}

/* Was @etag adopted as another (see header)? */
bool fc_inode_adopted(struct fc_itab *t, struct fc_inode *in, const char *etag,
                      char *to)
{
    bool yes;

    pthread_mutex_lock(&t->lock);
    yes = in->op != NULL && in->op->adopted_from[0] != '\0' &&
          fc_s3_etag_equal(in->op->adopted_from, etag);
    if (yes)
        memcpy(to, in->op->adopted_to, FC_ETAG_MAX);
    pthread_mutex_unlock(&t->lock);
    return yes;
}

/* Counts write handles and their size (see header). */
void fc_inode_write_note(struct fc_itab *t, struct fc_inode *in, int delta,
                         uint64_t size)
{
    struct fc_iopen *op;

    pthread_mutex_lock(&t->lock);
    op = iopen_of(in);
    if (op == NULL) {
        /* no memory: attribute replies show the object's size meanwhile */
        pthread_mutex_unlock(&t->lock);
        cm_log(CM_LOG_WARN, ENOMEM, "ecfs: %s: writer not tracked", in->key);
        return;
    }
    if (delta > 0)
        op->nwriters++;
    else if (delta < 0 && !CM_NEVER(op->nwriters == 0))
        op->nwriters--;
    op->wsize = size;
    op->wmtime = time(NULL);
    pthread_mutex_unlock(&t->lock);
}

bool fc_inode_is_writing(struct fc_itab *t, struct fc_inode *in)
{
    bool w;

    pthread_mutex_lock(&t->lock);
    w = in->op != NULL && in->op->nwriters > 0;
    pthread_mutex_unlock(&t->lock);
    return w;
}

/* Takes the inode of @key out of by_key. t->lock held. */
static void unhash_locked(struct fc_itab *t, const char *key)
{
    struct fc_inode *in;

    in = key_find(t, key, strlen(key));
    if (in != NULL && in->ino != FUSE_ROOT_ID) {
        ihash_del(&t->by_key, in, true);
        in->hashed = false;
    }
}

void fc_itab_unhash(struct fc_itab *t, const char *key)
{
    pthread_mutex_lock(&t->lock);
    unhash_locked(t, key);
    pthread_mutex_unlock(&t->lock);
}

/* Gives @in the key @key (owned by the caller; copied). t->lock held.
 * 0 or -ENOMEM. */
static int rekey_locked(struct fc_itab *t, struct fc_inode *in, const char *key)
{
    /* the key in kbuf needs no keeping: it lives as long as the inode */
    struct fc_oldkey *o = in->key == in->kbuf ? NULL : calloc(1, sizeof(*o));
    char *k = strdup(key);

    if ((o == NULL && in->key != in->kbuf) || k == NULL) {
        free(o);
        free(k);
        return -ENOMEM;
    }
    if (in->hashed)
        ihash_del(&t->by_key, in, true);
    in->hashed = false;
    if (o != NULL) {
        o->key = in->key;
        o->next = in->old_keys;
        in->old_keys = o;
    }
    in->key = k;
    /* a server-side copy has its own ETag: ask again before trusting */
    in->attr_fetched = 0;
    unhash_locked(t, k);
    key_add(t, in);
    return 0;
}

/* Renames live inodes (see header). */
int fc_itab_rename(struct fc_itab *t, const char *from, const char *to)
{
    size_t fl = strlen(from);
    struct fc_inode *in, **v = NULL;
    size_t n = 0, cap = 0;
    int ret = 0;

    pthread_mutex_lock(&t->lock);
    if (fl == 0 || from[fl - 1] != '/') {
        in = key_find(t, from, fl);
        if (in != NULL)
            ret = rekey_locked(t, in, to);
        else
            unhash_locked(t, to);
        pthread_mutex_unlock(&t->lock);
        return ret;
    }
    /* a directory: collect first, the table changes while rekeying */
    for (size_t b = 0; b <= t->by_key.mask; b++) {
        for (in = t->by_key.b[b]; in != NULL; in = in->next_key) {
            if (strncmp(in->key, from, fl) != 0 || in->ino == FUSE_ROOT_ID)
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 16;
                struct fc_inode **nv = realloc(v, nc * sizeof(*v));
                if (nv == NULL) {
                    ret = -ENOMEM;
                    goto out;
                }
                v = nv;
                cap = nc;
            }
            v[n++] = in;
        }
    }
    for (size_t i = 0; i < n && ret == 0; i++) {
        char *k = NULL;
        if (asprintf(&k, "%s%s", to, v[i]->key + fl) < 0) {
            ret = -ENOMEM;
            break;
        }
        ret = rekey_locked(t, v[i], k);
        free(k);
    }
out:
    pthread_mutex_unlock(&t->lock);
    free(v);
    return ret;
}

/* Sets (or adds) the note of @key in table @h. t->lock held. */
static void note_put(struct fc_note **h, const char *key, bool exists,
                     const struct fc_attr *a, double now)
{
    struct fc_note *n;

    HASH_FIND_STR(*h, key, n);
    if (n == NULL) {
        n = calloc(1, sizeof(*n));
        if (n == NULL || (n->key = strdup(key)) == NULL) {
            free(n);
            return; /* ENOMEM: the change shows after list_ttl */
        }
        HASH_ADD_KEYPTR(hh, *h, n->key, strlen(n->key), n);
    }
    n->exists = exists;
    if (a != NULL)
        n->a = *a;
    else
        memset(&n->a, 0, sizeof(n->a));
    n->t = now;
}

/* Drops notes older than list_ttl (a listing fetched after them is as
 * good). t->lock held. */
static void note_sweep(struct fc_fs *fs, struct fc_note **h, double now)
{
    struct fc_note *n, *tmp;

    HASH_ITER(hh, *h, n, tmp)
    {
        if (now - n->t > fs->o.list_ttl + 1) {
            HASH_DEL(*h, n);
            free(n->key);
            free(n);
        }
    }
}

/* Records a change (see header). */
void fc_itab_note(struct fc_fs *fs, const char *key, bool exists,
                  const struct fc_attr *a)
{
    struct fc_itab *t = fs->itab;
    size_t kl = strlen(key), dl;
    double now = fc_now();
    char *dir;

    /* the parent directory key: up to and including the last '/' before
     * the name (a directory key ends in '/' itself) */
    dl = kl > 0 && key[kl - 1] == '/' ? kl - 1 : kl;
    while (dl > 0 && key[dl - 1] != '/')
        dl--;
    dir = strndup(key, dl);
    pthread_mutex_lock(&t->lock);
    note_put(&t->notes, key, exists, a, now);
    if (dir != NULL)
        note_put(&t->dirchg, dir, true, NULL, now);
    if (!fs->cache_forever && HASH_COUNT(t->notes) >= t->notes_sweep_at) {
        note_sweep(fs, &t->notes, now);
        note_sweep(fs, &t->dirchg, now);
        t->notes_sweep_at = CM_MAX(1024u, 2 * HASH_COUNT(t->notes));
    }
    pthread_mutex_unlock(&t->lock);
    free(dir);
}

/* Looks a change up (see header). */
bool fc_itab_noted(struct fc_fs *fs, const char *key, double since,
                   bool *exists, struct fc_attr *a, double *when)
{
    struct fc_itab *t = fs->itab;
    struct fc_note *n;
    bool found = false;

    pthread_mutex_lock(&t->lock);
    HASH_FIND_STR(t->notes, key, n);
    /* older than list_ttl: what S3 says now is as new (other clients) */
    if (n != NULL && n->t >= since && fc_fs_is_fresh(fs, n->t)) {
        found = true;
        *exists = n->exists;
        *a = n->a;
        *when = n->t;
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

/* Noted removed since (see header). */
bool fc_itab_removed_since(struct fc_fs *fs, const char *key, double since)
{
    struct fc_itab *t = fs->itab;
    struct fc_note *n;
    bool gone;

    pthread_mutex_lock(&t->lock);
    HASH_FIND_STR(t->notes, key, n);
    gone = n != NULL && !n->exists && n->t >= since;
    pthread_mutex_unlock(&t->lock);
    return gone;
}

/* Whether the directory changed here after @t. t->lock held. */
static bool dir_changed_since(struct fc_itab *t, const char *dirkey,
                              double when)
{
    struct fc_note *n;

    HASH_FIND_STR(t->dirchg, dirkey, n);
    return n != NULL && n->t >= when;
}

/* A directory made here is empty (see header). */
void fc_itab_empty_listing(struct fc_fs *fs, const char *dirkey)
{
    struct fc_itab *t = fs->itab;
    struct fc_listing *l = fc_listing_build(dirkey, NULL, 0, fc_now()), *old;

    if (l == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    HASH_FIND(hh, t->listings, dirkey, strlen(dirkey), old);
    if (old)
        HASH_DEL(t->listings, old);
    HASH_ADD_KEYPTR(hh, t->listings, l->key, strlen(l->key), l);
    pthread_mutex_unlock(&t->lock);
    fc_listing_unref(old);
}

/* Records a marker made, changed or deleted here (see header). */
void fc_itab_mark_dir(struct fc_fs *fs, const char *dirkey, enum fc_dirmark m)
{
    struct fc_itab *t = fs->itab;
    struct fc_attr a;
    struct fc_note *n;

    pthread_mutex_lock(&t->lock);
    if (m == FC_DIRMARK_UNKNOWN) {
        HASH_FIND_STR(t->marks, dirkey, n);
        if (n != NULL) {
            HASH_DEL(t->marks, n);
            free(n->key);
            free(n);
        }
    } else {
        memset(&a, 0, sizeof(a));
        a.size = (uint64_t)m;
        note_put(&t->marks, dirkey, m != FC_DIRMARK_NONE, &a, fc_now());
    }
    pthread_mutex_unlock(&t->lock);
}

/* What this mount recorded of a marker (see header). */
enum fc_dirmark fc_itab_dir_noted(struct fc_fs *fs, const char *dirkey,
                                  double *when)
{
    struct fc_itab *t = fs->itab;
    enum fc_dirmark m = FC_DIRMARK_UNKNOWN;
    struct fc_note *n;

    pthread_mutex_lock(&t->lock);
    HASH_FIND_STR(t->marks, dirkey, n);
    if (n != NULL) {
        m = (enum fc_dirmark)n->a.size;
        *when = n->t;
    }
    pthread_mutex_unlock(&t->lock);
    return m;
}

/* Drops listings of a subtree (see header). */
void fc_itab_drop_listings(struct fc_fs *fs, const char *dirkey)
{
    struct fc_itab *t = fs->itab;
    struct fc_listing *l, *tmp, *drop = NULL;
    size_t dl = strlen(dirkey);

    pthread_mutex_lock(&t->lock);
    HASH_ITER(hh, t->listings, l, tmp)
    {
        if (strncmp(l->key, dirkey, dl) == 0) {
            HASH_DEL(t->listings, l);
            l->hh.next = drop;
            drop = l;
        }
    }
    pthread_mutex_unlock(&t->lock);
    while (drop) {
        struct fc_listing *next = drop->hh.next;
        fc_listing_unref(drop);
        drop = next;
    }
}

/* Reads @field of @t under its lock. */
static size_t itab_read(struct fc_itab *t, const size_t *field)
{
    size_t n;

    pthread_mutex_lock(&t->lock);
    n = *field;
    pthread_mutex_unlock(&t->lock);
    return n;
}

size_t fc_itab_count(struct fc_itab *t)
{
    return itab_read(t, &t->count);
}

size_t fc_itab_peak(struct fc_itab *t)
{
    return itab_read(t, &t->peak);
}

/* The strings of a listing (names, ETags) live in chunks of LST_CHUNK
 * bytes, filled one after the other and freed together: one allocation
 * per ~10^4 entries instead of two per entry (a malloc'd 9-byte name costs
 * 32 bytes, a 35-byte ETag 48). */
#define LST_CHUNK (256u << 10)
struct lst_chunk {
    struct lst_chunk *next;
    size_t used, cap;
    char data[];
};

/* Drops a listing reference; frees on the last. */
void fc_listing_unref(struct fc_listing *l)
{
    struct lst_chunk *c, *next;

    if (l == NULL || atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    for (c = l->arena; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    free(l->ents);
    free(l->key);
    free(l);
}

static int dirent_cmp(const void *a, const void *b)
{
    const struct fc_dirent *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    if (c != 0)
        return c;
    /* a directory sorts first so it wins over a file of the same name */
    return (int)y->is_dir - (int)x->is_dir;
}

/* Whether @name can be a file name at all. */
static bool name_is_valid(const char *name)
{
    return name[0] != '\0' && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0 && strlen(name) <= 255;
}

/* A listing being built page by page (dir_fetch frees each page once it is
 * copied in, so a 10^6-entry directory never holds its 1000 pages at once). */
struct lst_builder {
    struct fc_listing *l;
    size_t cap; /* of l->ents */
    struct lst_chunk *cur;
    const char *dirkey;
    size_t dl;
    bool failed;
};

/* Copies @n bytes of @str (plus a NUL) into the arena; NULL on ENOMEM. */
static char *lst_strdup(struct lst_builder *b, const char *str, size_t n)
{
    struct lst_chunk *c = b->cur;
    char *p;

    if (c == NULL || c->cap - c->used < n + 1) {
        size_t cap = CM_MAX((size_t)LST_CHUNK, n + 1);
        c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = b->l->arena;
        b->l->arena = c;
        b->cur = c;
    }
    p = c->data + c->used;
    memcpy(p, str, n);
    p[n] = '\0';
    c->used += n + 1;
    return p;
}

/* Appends one entry; false on ENOMEM. */
static bool lst_add(struct lst_builder *b, const char *name, size_t nl,
                    bool is_dir, uint64_t size, time_t mtime, const char *etag)
{
    struct fc_listing *l = b->l;
    struct fc_dirent *e;

    if (l->n == b->cap) {
        size_t ncap = b->cap ? 2 * b->cap : 64;
        struct fc_dirent *ne = realloc(l->ents, ncap * sizeof(*ne));
        if (ne == NULL)
            return false;
        l->ents = ne;
        b->cap = ncap;
    }
    e = &l->ents[l->n];
    e->name = lst_strdup(b, name, nl);
    e->etag =
        etag[0] ? lst_strdup(b, etag, strlen(etag)) : CM_UNCONST(char *, "");
    if (e->name == NULL || e->etag == NULL)
        return false;
    e->is_dir = is_dir;
    e->size = size;
    e->mtime = mtime;
    l->n++;
    return true;
}

static int lst_begin(struct lst_builder *b, const char *dirkey)
{
    memset(b, 0, sizeof(*b));
    b->l = calloc(1, sizeof(*b->l));
    if (b->l == NULL)
        return -ENOMEM;
    atomic_init(&b->l->refs, 1);
    atomic_init(&b->l->mark, 0);
    b->dirkey = dirkey;
    b->dl = strlen(dirkey);
    return 0;
}

/* Copies the representable entries of @p in (@p is left as it was). */
static void lst_add_page(struct lst_builder *b, struct fc_listpage *p)
{
    size_t dl = b->dl;

    for (size_t j = 0; j < p->nobjs && !b->failed; j++) {
        const struct fc_listobj *o = &p->objs[j];
        const char *name = o->key + dl;
        if (dl > 0 && strcmp(o->key, b->dirkey) == 0)
            b->l->has_marker = true;
        if (strncmp(o->key, b->dirkey, dl) != 0 || !name_is_valid(name) ||
            strchr(name, '/') != NULL)
            continue; /* the dir marker itself, or unrepresentable */
        if (!lst_add(b, name, strlen(name), false, o->size, o->mtime,
                     o->etag ? o->etag : ""))
            b->failed = true;
    }
    for (size_t j = 0; j < p->nprefixes && !b->failed; j++) {
        const char *pre = p->prefixes[j];
        size_t pl = strlen(pre);
        char name[257];
        if (strncmp(pre, b->dirkey, dl) != 0 || pl < dl + 2 ||
            pl - 1 - dl >= sizeof(name))
            continue;
        memcpy(name, pre + dl, pl - 1 - dl); /* without the trailing '/' */
        name[pl - 1 - dl] = '\0';
        if (!name_is_valid(name))
            continue;
        if (!lst_add(b, name, pl - 1 - dl, true, 0, 0, ""))
            b->failed = true;
    }
}

/* Sorts, drops duplicate names, and hands the listing out (NULL on
 * ENOMEM: everything freed). */
static struct fc_listing *lst_finish(struct lst_builder *b, double fetched)
{
    struct fc_listing *l = b->l;
    size_t out = 0;

    if (!b->failed && (l->key = strdup(b->dirkey)) == NULL)
        b->failed = true;
    if (b->failed) {
        fc_listing_unref(l);
        return NULL;
    }
    if (l->n > 1) /* an empty listing has no array: qsort wants one */
        qsort(l->ents, l->n, sizeof(*l->ents), dirent_cmp);
    /* keep the first of equal names (the directory, by dirent_cmp) */
    for (size_t i = 0; i < l->n; i++) {
        if (out > 0 && strcmp(l->ents[out - 1].name, l->ents[i].name) == 0)
            continue; /* its strings stay in the arena */
        l->ents[out++] = l->ents[i];
    }
    l->n = out;
    if (out < b->cap) {
        /* give back the doubling's slack */
        struct fc_dirent *ne = realloc(l->ents, (out ? out : 1) * sizeof(*ne));
        if (ne != NULL)
            l->ents = ne;
    }
    l->fetched = fetched;
    return l;
}

/* Builds a listing from LIST pages (see header). */
struct fc_listing *fc_listing_build(const char *dirkey,
                                    struct fc_listpage *pages, size_t npages,
                                    double fetched)
{
    struct lst_builder b;
    struct fc_listing *l = NULL;

    if (lst_begin(&b, dirkey) == 0) {
        for (size_t i = 0; i < npages; i++)
            lst_add_page(&b, &pages[i]);
        l = lst_finish(&b, fetched);
    }
    for (size_t i = 0; i < npages; i++)
        fc_listpage_fini(&pages[i]);
    return l;
}

/* Binary search (see header). */
const struct fc_dirent *fc_listing_find(const struct fc_listing *l,
                                        const char *name)
{
    size_t lo = 0, hi = l->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->ents[mid].name, name);
        if (c == 0)
            return &l->ents[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A fresh cached listing (with @unchanged: one that no change made here
 * since its fetch made stale) or NULL. */
static struct fc_listing *cached_listing(struct fc_fs *fs, const char *dirkey,
                                         bool unchanged)
{
    struct fc_itab *t = fs->itab;
    struct fc_listing *l;

    pthread_mutex_lock(&t->lock);
    HASH_FIND(hh, t->listings, dirkey, strlen(dirkey), l);
    if (l && fc_fs_is_fresh(fs, l->fetched) &&
        !(unchanged && dir_changed_since(t, dirkey, l->fetched)))
        atomic_fetch_add(&l->refs, 1);
    else
        l = NULL;
    pthread_mutex_unlock(&t->lock);
    return l;
}

/* Fresh cached listing or NULL (see header). */
struct fc_listing *fc_dir_cached_listing(struct fc_fs *fs, const char *dirkey)
{
    return cached_listing(fs, dirkey, false);
}

/* Entries of an expired cached listing (see header). */
size_t fc_dir_stale_entries(struct fc_fs *fs, const char *dirkey)
{
    struct fc_itab *t = fs->itab;
    struct fc_listing *l;
    size_t n = SIZE_MAX;

    pthread_mutex_lock(&t->lock);
    HASH_FIND(hh, t->listings, dirkey, strlen(dirkey), l);
    if (l && !fc_fs_is_fresh(fs, l->fetched))
        n = l->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

/* Fetches all pages of a directory (with @one_page, only the first:
 * -EFBIG when there are more), copying each into the listing as it
 * comes. 0 and *out, or -errno. */
static int dir_fetch(struct fc_fs *fs, const char *dirkey, bool one_page,
                     struct fc_listing **out)
{
    struct lst_builder b;
    struct fc_listpage page;
    char *token = NULL;
    double started = fc_now();
    int ret;

    if (lst_begin(&b, dirkey) < 0)
        return -ENOMEM;
    for (;;) {
        bool more;
        fc_listpage_init(&page);
        ret = fc_s3_list(fs->s3, dirkey, token, 1000, &page);
        free(token);
        token = NULL;
        if (ret < 0) {
            fc_listpage_fini(&page);
            b.failed = true;
            (void)lst_finish(&b, started);
            return ret;
        }
        lst_add_page(&b, &page);
        more = page.truncated;
        if (more && (page.next_token == NULL || page.next_token[0] == '\0')) {
            cm_log(CM_LOG_WARN, 0,
                   "ecfs LIST %s: truncated page without a token", dirkey);
            more = false;
        }
        if (more && one_page) {
            fc_listpage_fini(&page);
            b.failed = true;
            (void)lst_finish(&b, started);
            return -EFBIG;
        }
        if (more) {
            token = page.next_token; /* ours now */
            page.next_token = NULL;
        }
        fc_listpage_fini(&page);
        if (!more || b.failed)
            break;
    }
    free(token);
    *out = lst_finish(&b, started);
    return *out ? 0 : -ENOMEM;
}

/* Cached or fetched listing; with @one_page a directory of more than one
 * LIST page is not cached (-EFBIG). */
static int dir_listing(struct fc_fs *fs, const char *dirkey,
                       struct fc_listing **out, bool one_page)
{
    struct fc_itab *t = fs->itab;
    struct fc_listing *l, *old, *stale;
    pthread_mutex_t *ll;
    uint32_t h = 2166136261u;
    int ret;

    if ((*out = cached_listing(fs, dirkey, true)) != NULL)
        return 0;
    for (const char *p = dirkey; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    ll = &t->list_locks[h % CM_ARRAY_SIZE(t->list_locks)];
    pthread_mutex_lock(ll);
    /* another thread may have refreshed it while we waited */
    if ((*out = cached_listing(fs, dirkey, true)) != NULL) {
        pthread_mutex_unlock(ll);
        return 0;
    }
    ret = dir_fetch(fs, dirkey, one_page, &l);
    if (ret < 0) {
        pthread_mutex_unlock(ll);
        return ret;
    }
    atomic_fetch_add(&l->refs, 1); /* one for the cache, one for caller */
    pthread_mutex_lock(&t->lock);
    HASH_FIND(hh, t->listings, dirkey, strlen(dirkey), old);
    if (old)
        HASH_DEL(t->listings, old);
    HASH_ADD_KEYPTR(hh, t->listings, l->key, strlen(l->key), l);
    /* with a TTL, expired listings would pile up for every directory ever
     * visited: sweep them whenever the cache doubles past the last sweep */
    stale = NULL;
    if (!fs->cache_forever && HASH_CNT(hh, t->listings) >= t->sweep_at) {
        struct fc_listing *x, *tmp;
        HASH_ITER(hh, t->listings, x, tmp)
        {
            if (x != l && !fc_fs_is_fresh(fs, x->fetched)) {
                HASH_DEL(t->listings, x);
                x->hh.next = stale; /* chain through the now unused hh */
                stale = x;
            }
        }
        t->sweep_at = CM_MAX(1024u, 2 * HASH_CNT(hh, t->listings));
    }
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_unlock(ll);
    fc_listing_unref(old);
    while (stale) {
        struct fc_listing *next = stale->hh.next;
        fc_listing_unref(stale);
        stale = next;
    }
    *out = l;
    return 0;
}

/* Cached or fetched listing (see header). */
int fc_dir_listing(struct fc_fs *fs, const char *dirkey,
                   struct fc_listing **out)
{
    return dir_listing(fs, dirkey, out, false);
}

/* Listing for lookups by path of a directory of one page (see header). */
int fc_dir_list_small(struct fc_fs *fs, const char *dirkey,
                      struct fc_listing **out)
{
    return dir_listing(fs, dirkey, out, true);
}

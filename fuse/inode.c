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

struct fc_itab {
    pthread_mutex_t lock;           /* protects both tables and inode fields */
    struct fc_inode *by_ino;        /* uthash hh_ino; protected by lock */
    struct fc_inode *by_key;        /* uthash hh_key; protected by lock */
    fuse_ino_t next_ino;            /* protected by lock */
    size_t count;                   /* protected by lock */
    struct fc_listing *listings;    /* cache by dir key; one ref each; lock */
    pthread_mutex_t list_locks[64]; /* serialise refreshes, by key hash */
    unsigned sweep_at;       /* sweep expired listings at this count; lock */
    struct fc_note *notes;   /* by key; protected by lock */
    struct fc_note *dirchg;  /* by directory key: last change; lock */
    unsigned notes_sweep_at; /* sweep old notes at this count; lock */
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
    struct fc_inode *in = calloc(1, sizeof(*in));

    if (in == NULL)
        return NULL;
    in->key = strdup(key);
    if (in->key == NULL) {
        free(in);
        return NULL;
    }
    fc_rstate_init(&in->rs);
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
    fc_rstate_fini(&in->rs);
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
    pthread_mutex_init(&t->lock, NULL);
    for (size_t i = 0; i < CM_ARRAY_SIZE(t->list_locks); i++)
        pthread_mutex_init(&t->list_locks[i], NULL);
    root = inode_alloc(root_key);
    if (root == NULL) {
        free(t);
        return -ENOMEM;
    }
    root->ino = FUSE_ROOT_ID;
    root->nlookup = 1; /* never forgotten */
    root->attr.is_dir = true;
    root->attr.mtime = time(NULL);
    HASH_ADD(hh_ino, t->by_ino, ino, sizeof(root->ino), root);
    HASH_ADD_KEYPTR(hh_key, t->by_key, root->key, strlen(root->key), root);
    root->hashed = true;
    t->next_ino = FUSE_ROOT_ID + 1;
    t->sweep_at = 1024;
    t->count = 1;
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
    HASH_ITER(hh_ino, t->by_ino, in, tmp)
    {
        HASH_DELETE(hh_ino, t->by_ino, in);
        if (in->hashed)
            HASH_DELETE(hh_key, t->by_key, in);
        inode_free(in);
    }
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
    HASH_FIND(hh_ino, t->by_ino, &ino, sizeof(ino), in);
    pthread_mutex_unlock(&t->lock);
    return in;
}

/* Finds or creates the inode of @key and adds a lookup (see header). */
/* Replaces @in's attributes with @a; attributes without metadata (a
 * listing's) keep the metadata already known for the same version.
 * itab->lock held. */
static void attr_store(struct fc_inode *in, const struct fc_attr *a)
{
    struct fc_s3_meta m = in->attr.meta;
    /* a listing shows a directory as a bare prefix (no ETag, never its
     * marker's metadata): keep what a HEAD of the marker, mkdir or chmod
     * told */
    bool keep = a->meta.has == 0 && m.has != 0 &&
                ((a->etag[0] != '\0' && strcmp(a->etag, in->attr.etag) == 0) ||
                 (a->is_dir && in->attr.is_dir));

    in->attr = *a;
    if (keep)
        in->attr.meta = m;
}

struct fc_inode *fc_inode_lookup(struct fc_itab *t, const char *key,
                                 const struct fc_attr *a, double when)
{
    struct fc_inode *in, *fresh = NULL;

    pthread_mutex_lock(&t->lock);
    HASH_FIND(hh_key, t->by_key, key, strlen(key), in);
    if (in == NULL) {
        /* allocate outside the common path only; rare enough to hold lock */
        fresh = inode_alloc(key);
        if (fresh == NULL) {
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        in = fresh;
        in->ino = t->next_ino++;
        HASH_ADD(hh_ino, t->by_ino, ino, sizeof(in->ino), in);
        HASH_ADD_KEYPTR(hh_key, t->by_key, in->key, strlen(in->key), in);
        in->hashed = true;
        t->count++;
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
    HASH_FIND(hh_key, t->by_key, key, strlen(key), in);
    if (in) {
        *a = in->attr;
        *fetched = in->attr_fetched;
    }
    pthread_mutex_unlock(&t->lock);
    return in != NULL;
}

/* Drops lookups (see header). */
void fc_inode_forget(struct fc_itab *t, fuse_ino_t ino, uint64_t n)
{
    struct fc_inode *in;

    pthread_mutex_lock(&t->lock);
    HASH_FIND(hh_ino, t->by_ino, &ino, sizeof(ino), in);
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
    HASH_DELETE(hh_ino, t->by_ino, in);
    if (in->hashed)
        HASH_DELETE(hh_key, t->by_key, in);
    t->count--;
    pthread_mutex_unlock(&t->lock);
    inode_free(in);
}

/* Copies attributes (see header). */
void fc_inode_get_attr(struct fc_itab *t, struct fc_inode *in,
                       struct fc_attr *a, double *fetched)
{
    pthread_mutex_lock(&t->lock);
    *a = in->attr;
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
    pthread_mutex_lock(&t->lock);
    *a = in->attr;
    if (!a->is_dir && in->nwriters > 0) {
        /* being written here: the size so far (the kernel's i_size) */
        a->size = in->wsize;
        a->mtime = in->wmtime;
    } else if (!a->is_dir && in->nopen_cached > 0) {
        a->size = in->kept_size;
        a->mtime = in->kept_mtime;
        snprintf(a->etag, sizeof(a->etag), "%s", in->kept_etag);
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

    *inval_attr = false;
    pthread_mutex_lock(&t->lock);
    if (in->nopen_cached > 0 &&
        (etag[0] == '\0' || strcmp(in->kept_etag, etag) != 0)) {
        /* the page cache is in use for another version: pages this
         * handle filled would be read by the others (and theirs by it) */
        *keep_cache = false;
        *direct_io = true;
    } else {
        *keep_cache = etag[0] != '\0' && strcmp(in->kept_etag, etag) == 0;
        *direct_io = false;
        snprintf(in->kept_etag, sizeof(in->kept_etag), "%s", etag);
        in->kept_size = v->size;
        in->kept_mtime = v->mtime;
        in->nopen_cached++;
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
    in->nopen_cached--;
    pthread_mutex_unlock(&t->lock);
}

/* Counts write handles and their size (see header). */
void fc_inode_write_note(struct fc_itab *t, struct fc_inode *in, int delta,
                         uint64_t size)
{
    pthread_mutex_lock(&t->lock);
    if (delta > 0)
        in->nwriters++;
    else if (delta < 0 && !CM_NEVER(in->nwriters == 0))
        in->nwriters--;
    in->wsize = size;
    in->wmtime = time(NULL);
    pthread_mutex_unlock(&t->lock);
}

bool fc_inode_is_writing(struct fc_itab *t, struct fc_inode *in)
{
    bool w;

    pthread_mutex_lock(&t->lock);
    w = in->nwriters > 0;
    pthread_mutex_unlock(&t->lock);
    return w;
}

/* Takes the inode of @key out of by_key. t->lock held. */
static void unhash_locked(struct fc_itab *t, const char *key)
{
    struct fc_inode *in;

    HASH_FIND(hh_key, t->by_key, key, strlen(key), in);
    if (in != NULL && in->ino != FUSE_ROOT_ID) {
        HASH_DELETE(hh_key, t->by_key, in);
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
    struct fc_oldkey *o = calloc(1, sizeof(*o));
    char *k = strdup(key);

    if (o == NULL || k == NULL) {
        free(o);
        free(k);
        return -ENOMEM;
    }
    if (in->hashed)
        HASH_DELETE(hh_key, t->by_key, in);
    o->key = in->key;
    o->next = in->old_keys;
    in->old_keys = o;
    in->key = k;
    /* a server-side copy has its own ETag: ask again before trusting */
    in->attr_fetched = 0;
    unhash_locked(t, k);
    HASH_ADD_KEYPTR(hh_key, t->by_key, in->key, strlen(in->key), in);
    in->hashed = true;
    return 0;
}

/* Renames live inodes (see header). */
int fc_itab_rename(struct fc_itab *t, const char *from, const char *to)
{
    size_t fl = strlen(from);
    struct fc_inode *in, *tmp, **v = NULL;
    size_t n = 0, cap = 0;
    int ret = 0;

    pthread_mutex_lock(&t->lock);
    if (fl == 0 || from[fl - 1] != '/') {
        HASH_FIND(hh_key, t->by_key, from, fl, in);
        if (in != NULL)
            ret = rekey_locked(t, in, to);
        else
            unhash_locked(t, to);
        pthread_mutex_unlock(&t->lock);
        return ret;
    }
    /* a directory: collect first, the table changes while rekeying */
    HASH_ITER(hh_key, t->by_key, in, tmp)
    {
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

size_t fc_itab_count(struct fc_itab *t)
{
    size_t n;

    pthread_mutex_lock(&t->lock);
    n = t->count;
    pthread_mutex_unlock(&t->lock);
    return n;
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

/* Fetches all pages of a directory, copying each into the listing as it
 * comes. 0 and *out, or -errno. */
static int dir_fetch(struct fc_fs *fs, const char *dirkey,
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

/* Cached or fetched listing (see header). */
int fc_dir_listing(struct fc_fs *fs, const char *dirkey,
                   struct fc_listing **out)
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
    ret = dir_fetch(fs, dirkey, &l);
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

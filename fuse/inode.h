/* fuse/inode.h - the inode table and the directory listing cache.
 * An fc_inode maps a FUSE inode number to an S3 key ("a/b" for a file,
 * "a/b/" for a directory, the mount prefix for the root). It lives while the
 * kernel holds lookups on it (nlookup, raised by every entry reply and
 * readdirplus entry, lowered by forget), as in passthrough_ll. Directory
 * listings are refcounted snapshots kept in a cache keyed by directory key
 * (not by inode, so they outlive the kernel forgetting an inode), shared
 * with open directory handles. */
#ifndef FUSE_INODE_H
#define FUSE_INODE_H
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uthash.h>

#include "common/compiler.h"
#include "fuse/read.h"
#include "fuse/s3.h"

struct fc_fs;
struct fc_wfile;

/* One directory entry of a listing snapshot. */
struct fc_dirent {
    char *name; /* entry name (no '/'); in the listing's arena */
    bool is_dir;
    uint64_t size;
    time_t mtime;
    char *etag; /* in the listing's arena; "" for directories */
};

/* Immutable after creation; freed when the last reference goes. */
struct fc_listing {
    atomic_int refs;
    char *key;         /* directory key; owned */
    UT_hash_handle hh; /* in itab's listing cache; itab->lock */
    double fetched;    /* fc_now() when the LIST started */
    size_t n;
    struct fc_dirent *ents;  /* sorted by name (bytewise), unique names */
    struct lst_chunk *arena; /* every name and ETag of ents (inode.c) */
    /* the directory's own marker object ("dir/") was in it (made by
     * ecfs, s3fs, a console...); see enum fc_dirmark */
    bool has_marker;
    /* what the marker's HEAD said, asked once per listing when a lookup
     * or readdirplus first needs it (ops.c): 0 not asked yet, else an
     * enum fc_dirmark. The only field set after creation */
    atomic_int mark;
};

/* What a directory's marker object ("dir/") says about the attributes
 * its entries store (x-amz-meta-mode/uid/gid/mtime). ecfs stores
 * attributes that differ from the mount's defaults on a key only after
 * its directory's marker says ATTRS (x-amz-meta-ecfs-attrs: 1), so the
 * entries of a directory without a marker, or whose ecfs marker says
 * "0", are shown from the listing alone. */
enum fc_dirmark {
    FC_DIRMARK_UNKNOWN = 0, /* not known here: ask S3 */
    FC_DIRMARK_NONE,        /* no marker (a prefix only) */
    FC_DIRMARK_PLAIN,       /* an ecfs marker: entries store none */
    FC_DIRMARK_ATTRS,       /* they may: an ecfs marker saying so, or
                             * another tool's (s3fs stores them) */
};

/* Attributes of an object or directory. */
struct fc_attr {
    bool is_dir;
    uint64_t size;
    time_t mtime; /* Last-Modified (or this mount's commit time) */
    char etag[FC_ETAG_MAX];
    /* x-amz-meta-mode/uid/gid/mtime, shown instead of the mount's
     * defaults and of Last-Modified. A HEAD or GET brings them, a listing
     * does not: attributes from a listing keep those already known for
     * the same ETag */
    struct fc_s3_meta meta;
    /* from a listing that may hide x-amz-meta-* (the mount's meta_fetch
     * policy): @meta is not known yet, and a HEAD must fetch it before
     * these attributes are shown or checked for permissions (ops.c) */
    bool meta_unknown;
};

struct fc_oldkey;
struct fc_iopen;

/* ETags up to this long (with quotes and NUL) live inside the inode: an MD5
 * one ("32 hex") and a multipart one ("32 hex-N", N < 10^4). Longer ones go
 * to the heap. */
#define FC_IETAG_IN 40

/* One per object or directory the kernel holds. Kept compact (10^6 of them
 * for a scanned dataset): the attributes without fc_attr's 128-byte ETag
 * array, the key in the same allocation, intrusive hash chains instead of
 * uthash handles, and the state only open, written or read files need
 * allocated when first needed. */
struct fc_inode {
    fuse_ino_t ino; /* immutable after creation */
    /* S3 key: in kbuf, or owned after a rename; replaced (under
     * itab->lock) only by a rename, and the replaced string stays
     * allocated until the inode is freed, so a request that read the old
     * pointer can still use it */
    char *key;
    struct fc_oldkey *old_keys; /* keys replaced by renames; itab->lock */
    uint64_t nlookup;           /* kernel lookups; protected by itab->lock */
    double attr_fetched;        /* fc_now() of the attributes; itab->lock */
    /* the attributes (struct fc_attr, unpacked); protected by itab->lock */
    uint64_t size;
    time_t mtime;
    char *etag; /* in etag_in, or owned when longer; "" if unknown */
    struct fc_s3_meta meta;
    uint64_t shown_size;      /* size of the last attribute reply; itab->lock */
    struct fc_iopen *op;      /* open/write state (inode.c), NULL until the
                               * first open or write; itab->lock */
    struct fc_rstate *rs;     /* reader state when opens are skipped, NULL
                               * until the first such read; itab->lock */
    struct fc_wfile *writers; /* open write handles; write.c's lock */
    struct fc_inode *next_ino, *next_key; /* hash chains; itab->lock */
    uint32_t khash;                       /* hash of key; itab->lock */
    bool is_dir : 1;                      /* protected by itab->lock */
    bool hashed : 1;      /* in by_key (false once unlinked or renamed over) */
    bool shown : 1;       /* shown_size is set */
    bool shown_mixed : 1; /* replies of other sizes since the kernel was
                           * last told to drop its size (they may still be
                           * in flight) */
    /* the attributes came from a listing that may hide x-amz-meta-*
     * (fc_attr.meta_unknown) and no HEAD fetched them since */
    bool meta_unknown : 1;
    char etag_in[FC_IETAG_IN];
    char kbuf[]; /* the key as created */
};

struct fc_itab;

/* 0 and *out, or -ENOMEM. The root inode (FUSE_ROOT_ID) gets key @root_key. */
CM_MUST_CHECK int fc_itab_create(const char *root_key, struct fc_itab **out);
void fc_itab_destroy(struct fc_itab *t);

/* Returns the inode for @ino or NULL. Does not take a reference: valid while
 * the kernel holds a lookup on it, i.e. during any request naming @ino. */
struct fc_inode *fc_inode_peek(struct fc_itab *t, fuse_ino_t ino);
/* Finds or creates the inode of @key, stores @a as its attributes (fetched
 * at @when: the time of the request that produced them, not now) unless
 * the inode holds newer ones, and adds one kernel lookup. Returns the inode
 * or NULL (ENOMEM). */
struct fc_inode *fc_inode_lookup(struct fc_itab *t, const char *key,
                                 const struct fc_attr *a, double when);
/* Copies the attributes of the inode of @key, if one is live, and when
 * they were fetched. Returns whether it exists. */
bool fc_itab_cached_attr(struct fc_itab *t, const char *key, struct fc_attr *a,
                         double *fetched);
/* Adds one lookup to @in, which the caller knows is alive (a request names
 * it): kept past the kernel's forget until fc_inode_forget (an upload that
 * outlives its file's release). */
void fc_inode_ref(struct fc_itab *t, struct fc_inode *in);
/* Drops @n kernel lookups; frees the inode when none remain (not root). */
void fc_inode_forget(struct fc_itab *t, fuse_ino_t ino, uint64_t n);
/* The reader state of @in for reads without an open handle (opens
 * skipped), created at the first call; NULL on ENOMEM. Valid while the
 * kernel holds a lookup on @in. */
struct fc_rstate *fc_inode_rstate(struct fc_itab *t, struct fc_inode *in);
/* Copies the attributes and their age under the lock. */
void fc_inode_get_attr(struct fc_itab *t, struct fc_inode *in,
                       struct fc_attr *a, double *fetched);
/* Replaces the attributes (fetched at @when). */
void fc_inode_set_attr(struct fc_itab *t, struct fc_inode *in,
                       const struct fc_attr *a, double when);
/* Copies the attributes to send the kernel in an attribute reply (getattr,
 * lookup, readdirplus) and records the size sent. While page-cache handles
 * are open they are the size and mtime of the kept version, whatever
 * version the inode's attributes are now: the kernel cuts page-cache reads
 * at the size it was last told (and drops pages past it). */
void fc_inode_reply_attr(struct fc_itab *t, struct fc_inode *in,
                         struct fc_attr *a);
/* Registers an open of @in pinned to @etag (non-ro mounts) and says how
 * the kernel may cache it. The page cache of an inode is shared by all its
 * open files, so it must only ever hold one version: while handles pinned
 * to another ETag (or to an unknown one, "") use it, the new handle gets
 * *direct_io (bypasses the page cache, fills nothing); otherwise it uses
 * the page cache, kept (*keep_cache) only when it holds this same ETag, and
 * that ETag becomes the kept one. Each open is ended by fc_inode_close with
 * the same *direct_io. */
void fc_inode_open(struct fc_itab *t, struct fc_inode *in, const char *etag,
                   bool *keep_cache, bool *direct_io);
/* fc_inode_open of version @v (its ETag, size and mtime: attribute replies
 * report those while the page cache holds it). *inval_attr says that the
 * kernel may hold, or still get from replies in flight, another size than
 * this page-cache handle's: the caller must notify_inval_inode (attributes)
 * before replying to the open, so those replies are discarded. */
void fc_inode_open_version(struct fc_itab *t, struct fc_inode *in,
                           const struct fc_attr *v, bool *keep_cache,
                           bool *direct_io, bool *inval_attr);
/* Ends an open registered by fc_inode_open. */
void fc_inode_close(struct fc_itab *t, struct fc_inode *in, bool direct_io);
/* This mount copied @key onto itself tied to version @from, which is now
 * @to with the same bytes: its note (fc_itab_note), and the attributes of
 * @key's live inode @in (NULL: none) and the version its page cache holds,
 * take @to where they name @from (ops.c, fc_copy_self), dated now, and the
 * parent's cached listings, which still name @from, are made stale (a
 * listing fetched before would put @from back: reads pinned to it get
 * 412, EIO). */
void fc_itab_adopt_etag(struct fc_itab *t, const char *key, struct fc_inode *in,
                        const char *from, const char *to);
/* Whether the latest fc_itab_adopt_etag of @in moved version @etag: then
 * true and the version it became in @to (FC_ETAG_MAX bytes). For a handle
 * pinned to @etag after that move (its open's HEAD answered before the
 * copy, or its attributes read before the move): the same bytes. */
bool fc_inode_adopted(struct fc_itab *t, struct fc_inode *in, const char *etag,
                      char *to);
/* A write handle of @in opened (@delta 1), closed (-1) or wrote (0):
 * while any is open, attribute replies carry @size and the time of the
 * last write, and revalidation asks S3 nothing. */
void fc_inode_write_note(struct fc_itab *t, struct fc_inode *in, int delta,
                         uint64_t size);
/* Whether write handles of @in are open. */
bool fc_inode_is_writing(struct fc_itab *t, struct fc_inode *in);
/* Forgets the key of the live inode of @key, if any (after an unlink or a
 * rename onto it): a new object of that name gets a new inode. */
void fc_itab_unhash(struct fc_itab *t, const char *key);
/* Renames the live inodes of @from to @to: the one of that key, or, for a
 * directory key (ending in '/'), every inode under it. Inodes of the
 * target names are unhashed first. 0 or -ENOMEM (nothing changed). */
CM_MUST_CHECK int fc_itab_rename(struct fc_itab *t, const char *from,
                                 const char *to);

/* This mount's own namespace changes, so it sees them at once although
 * the cached listings predate them: @key (a file, or a directory ending
 * in '/') now exists with @a (@exists) or is gone. Recorded with the time
 * now; lookups prefer it over listings fetched before, and the listing of
 * its parent directory is fetched again by the next opendir. */
void fc_itab_note(struct fc_fs *fs, const char *key, bool exists,
                  const struct fc_attr *a);
/* What this mount changed at @key after time @since, within list_ttl:
 * true with *@exists, @a and the note's time *@when, when there is such a
 * note. */
bool fc_itab_noted(struct fc_fs *fs, const char *key, double since,
                   bool *exists, struct fc_attr *a, double *when);
/* Whether this mount noted @key removed (fc_itab_note, !exists) at or
 * after @since: unlike fc_itab_noted, whatever list_ttl says (a note is
 * kept at least list_ttl + 1 s), for a store that must not bring back what
 * a call removed while it ran (write.c's janitor). */
bool fc_itab_removed_since(struct fc_fs *fs, const char *key, double since);
/* Caches an empty listing of @dirkey, fetched now: a directory mkdir just
 * made, so lookups of new names in it cost no request. */
void fc_itab_empty_listing(struct fc_fs *fs, const char *dirkey);
/* Records what directory key @dirkey's marker says now (@m), as this
 * mount made, changed or deleted it (FC_DIRMARK_UNKNOWN forgets it: a
 * directory renamed here). */
void fc_itab_mark_dir(struct fc_fs *fs, const char *dirkey, enum fc_dirmark m);
/* What this mount recorded of @dirkey's marker (fc_itab_mark_dir) and
 * when (*@when, fc_now()); FC_DIRMARK_UNKNOWN when nothing. */
enum fc_dirmark fc_itab_dir_noted(struct fc_fs *fs, const char *dirkey,
                                  double *when);
/* Drops every cached listing of @dirkey and below (a directory rename). */
void fc_itab_drop_listings(struct fc_fs *fs, const char *dirkey);

/* Number of live inodes (tests, stats). */
size_t fc_itab_count(struct fc_itab *t);
/* The most inodes ever live at once in this mount (stats: survives the
 * kernel forgetting them, e.g. at drop_caches). */
size_t fc_itab_peak(struct fc_itab *t);

/* Returns a new reference to the directory's listing, fetching (all pages
 * of ListObjectsV2, 1000 keys each) when there is none or it is stale.
 * 0 and *out, or -errno. */
CM_MUST_CHECK int fc_dir_listing(struct fc_fs *fs, const char *dirkey,
                                 struct fc_listing **out);
/* Returns a new reference to the cached listing if it is fresh, else NULL
 * (fresh also when this mount changed the directory since: lookups check
 * fc_itab_noted; directory reads use fc_dir_listing, which refetches). */
struct fc_listing *fc_dir_cached_listing(struct fc_fs *fs, const char *dirkey);
/* As fc_dir_listing, for a directory looked up by path many times without
 * a listing (ops.c, lookup_list): a full listing, as readdir's, but only
 * of a directory of one LIST page (1000 keys); a bigger one costs that one
 * LIST, is not cached, and gets -EFBIG. */
CM_MUST_CHECK int fc_dir_list_small(struct fc_fs *fs, const char *dirkey,
                                    struct fc_listing **out);
/* The entry count of the cached listing of @dirkey if it is there but no
 * longer fresh (expired), SIZE_MAX when none is cached or it is fresh: a
 * lookup miss under a small expired listing refetches it (one LIST)
 * rather than probing each name (ops.c). */
size_t fc_dir_stale_entries(struct fc_fs *fs, const char *dirkey);
void fc_listing_unref(struct fc_listing *l);
/* Binary search by name; NULL when absent. */
const struct fc_dirent *fc_listing_find(const struct fc_listing *l,
                                        const char *name);
/* Builds a listing for directory key @dirkey from @pages (consumed; all
 * strings moved or freed). Returns NULL on ENOMEM. Exposed for tests. */
struct fc_listing *fc_listing_build(const char *dirkey,
                                    struct fc_listpage *pages, size_t npages,
                                    double fetched);

#endif /* FUSE_INODE_H */

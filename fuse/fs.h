/* fuse/fs.h - the mount: options and the parts every handler reaches
 * (S3 client, inode table, block cache, prefetcher). One struct fc_fs per
 * process, created by main.c, borrowed by everything else through
 * fuse_req_userdata(). */
#ifndef FUSE_FS_H
#define FUSE_FS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct fc_s3;
struct fc_itab;
struct fc_cache;
struct fc_prefetch;
struct fc_pack;
struct fc_dcache;

/* Mount options (see --help and man/ecfs.1). Strings are owned. */
struct fc_opts {
    char *endpoint;
    char *region;
    char *profile;
    char *passwd_file;
    char *ca_file; /* TLS CA bundle (absolute path), NULL = system store */
    int insecure;  /* -o insecure_skip_tls_verify_testing_only */
    char *bucket;
    char *prefix; /* "" or ending in '/' */
    char *log_level;
    unsigned uid, gid, umask;
    int set_uid, set_gid; /* whether uid=/gid= were given */
    int ro;               /* read-only mount: metadata cached until unmount */
    int immutable;        /* same caching as ro: objects never change */
    int foreground;
    /* no .ecfs-stats file: -o nostats, or an object of that name at the
     * mount root (found at mount time) */
    int no_stats;
    double attr_timeout;     /* kernel attr/entry cache, s */
    double negative_timeout; /* kernel negative dentry cache, s */
    double list_ttl;         /* our listing + attribute cache, s */
    size_t cache_size;       /* block cache bytes */
    size_t block_size;       /* block bytes; files <= this are GET whole */
    size_t whole_max;        /* files <= this: first read GETs all blocks */
    size_t readahead_max;    /* sequential window cap per reader */
    size_t readahead_init;   /* first window */
    size_t part_size;        /* one GET of a readahead window */
    size_t prefetch_mem;     /* global cap on bytes being prefetched */
    unsigned max_conns;
    unsigned retries;
    unsigned connect_timeout_ms;
    unsigned stall_timeout_s;
    unsigned threads;        /* FUSE worker threads */
    unsigned read_ahead_kb;  /* kernel bdi readahead set after mount; 0 keep */
    unsigned dir_prefetch;   /* ro: prefetch a dir's small files after this
                              * many were read; 0 = never */
    unsigned list_prefetch;  /* list a dir's subdirs ahead after this many
                              * of them were opened; 0 = never */
    unsigned lookup_list;    /* list a dir of one LIST page after this many
                              * remote lookups in it; 0 = never */
    size_t write_part_size;  /* first part size of uploads (>= 5 MiB) */
    char *stage_dir;         /* staging files go here (created if absent) */
    uint64_t stage_max;      /* largest staged file */
    unsigned rename_dir_max; /* most keys a directory rename moves */
    int default_permissions; /* -o default_permissions: the kernel checks
                              * modes (else ecfs does, perm.c) */
    int own_permissions;     /* -o own_permissions: ecfs's checks on an
                              * allow_other mount too */
    int allow_other;         /* -o allow_other or allow_root */
    int meta_fetch;          /* -o meta_fetch=: FC_META_FETCH_* */
    int async_close;         /* close() of a small new file does not wait
                              * for its PUT (write.c) */
    int pack_off;            /* -o pack=off: show a pack's raw objects */
    size_t pack_block;       /* shard block of a pack mount (pack_ops.c) */
    int pack_block_set;      /* -o pack_block= given (pack_fetch=block) */
    int pack_whole;          /* -o pack_fetch=shard: a shard is one block */
    int pack_ahead;          /* -o pack_fetch=ahead 1, block/shard 0, not
                              * given -1: ahead for a pack > its caches */
    char *cache_dir;         /* persistent disk block cache, NULL = none */
    uint64_t cache_dir_size; /* its bound */
};

/* Which entries known only from a listing (ListObjectsV2 carries no
 * x-amz-meta-*) get their stored mode, owner and mtime fetched with a
 * HEAD before ecfs shows them or checks permissions with them (ops.c). */
enum {
    FC_META_FETCH_NONE = 1, /* never: a listing's entries show the defaults */
    FC_META_FETCH_MARKED,   /* entries of directories whose marker object
                             * says they may store some (ops.c
                             * listing_hides_meta), and of the root of a
                             * whole-bucket allow_other mount: the default */
    FC_META_FETCH_ALL,      /* every entry */
};

struct fc_fs {
    struct fc_opts o;
    struct fc_s3 *s3;
    struct fc_itab *itab;
    struct fc_cache *cache;
    struct fc_prefetch *pf;
    struct fc_pack *pack; /* the prefix holds a pack: pack_ops.c serves */
    bool cache_forever;   /* ro || immutable: metadata never expires */
    time_t started;       /* mount time: the mtime of directories */
    /* ecfs checks permissions itself (perm.c): a writable mount without
     * -o default_permissions and without allow_other (or with
     * -o own_permissions); ro and pack mounts keep the kernel's */
    bool own_perms;
    /* own_perms with allow_other: entries are not cached by the kernel
     * (entry and negative timeouts 0), so every path walk of every user
     * reaches ecfs's lookup and its search (x) check; the kernel does not
     * check a directory's x bit on a cached entry without
     * default_permissions */
    bool perm_walk;
    uid_t mounter; /* the mounting user: its permission checks need no
                    * stored metadata (it holds the credentials) */

    struct fc_dcache *dcache; /* -o cache_dir (dcache.c), NULL without */
};

/* Monotonic clock in seconds. */
double fc_now(void);
/* Whether a timestamp taken at @t is still fresh under the listing TTL. */
bool fc_fs_is_fresh(const struct fc_fs *fs, double t);

#endif /* FUSE_FS_H */

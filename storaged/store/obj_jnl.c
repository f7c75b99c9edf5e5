/* storaged/store/obj_jnl.c - the meta journal, one per filesystem (obj_i.h;
 * FORMAT.md "The meta journal").
 *
 * DESIGN: a commit of a brand-new inline name on a drive synced file by
 * file (file mode, gsync.h) costs an fsync of each meta and of each object
 * directory. With the journal, the commit also appends each meta record to
 * its drive's journal, DRIVE/.ecfs.sys/journal, and its barrier is one
 * fdatasync of that file, shared with every commit that waits on the same
 * drive at the same time (stor_gsync_file). The metas are renamed into
 * place as before, unsynced.
 *
 * One journal per filesystem (format version 2): the drives of one
 * filesystem (file mode: directories of one disk) append to the journal
 * of the first of them (their host), each record naming its drive, so a
 * commit's barrier is one fdatasync per filesystem, not one fsync (and
 * one cache flush) per drive. The replay reads every drive's journal and
 * puts each record back on the drive it names; a version-1 journal (no
 * drive in its records: its own drive's) is still read.
 *
 * Checkpoint: a thread makes every file written so far durable with one
 * syncfs(2) per filesystem, then starts a new generation in the host's
 * other file (journal.1 and journal in turn: its header of the higher
 * generation is what a replay reads), and writes zeros over the old
 * file's records in place (idle_zero), so the next generation there
 * overwrites allocated blocks and its commits' fdatasyncs write no
 * metadata. Commits between their append and the end of their barrier
 * hold s->jnl->cp for reading, the checkpoint for writing.
 *
 * A clean stop leaves both files with no record, zeros to their end,
 * their length kept and their headers flagged so (JNL_HDR_ZEROED): the
 * next start keeps them as they are, and its first commits' fdatasyncs
 * write no metadata either (session 16; before, a clean stop and every
 * start cut them back to their header, and the first seconds after a
 * start appended in every commit).
 *
 * Start (obj_jnl_open, before the index is loaded): the same boot (kill
 * -9, a crash of the process) left every write in the page cache, so one
 * syncfs makes the files durable and the journal is reset. After a reboot
 * (power loss) each journal is replayed: per (bucket, id) the record of
 * the highest version; its meta is written where HEX.m is missing,
 * unreadable or of a lower version, then one syncfs makes them durable. The
 * index is rebuilt from the metas after a reboot anyway (FORMAT.md), so it sees
 * them.
 *
 * Later writes of a name that may still have a record in the journal
 * (s->jnl->maybe, a bitmap of ids, cleared by each checkpoint) that do not
 * journal first make its metas durable the old way (jnl_settle in obj_io.c:
 * a kept version links to that file), and after they commit append their
 * own metas (synced), so a replay never brings back a version older than
 * what was acknowledged. A versioned overwrite that journals appends a
 * KEPT record of the version it keeps instead, and its new metas' records
 * carry that record's SINCE: the replay takes such a record only beside
 * its KEPT one on the same drive (drop_unpaired).
 *
 * Spare meta inodes (obj_spare_*) live here too: the journal thread's tick
 * empties the ones nobody reused. Why they exist: on a journal-less ext4
 * (the test VM's disk) creating a file walks its directory's inode group
 * from the first inode and skips, with a buffer lookup each, every inode
 * freed in the last 60 s (recently_deleted(), 360 s while its table block
 * is dirty). An inline overwrite frees n metas and creates n temp metas in
 * the tmp directory's group, so at a few hundred PUT/s each create walked
 * thousands of freed inodes: perf put 60 % of storaged's CPU there. Now a
 * meta losing its last name under its key lock (the overwritten version's
 * HEX.p, a deleted object's HEX.m) is renamed to DRIVE/.ecfs.sys/tmp/sNUM
 * instead, and a later commit on that drive renames the oldest spare at
 * least SPARE_MIN_NS old to its temp name, cuts it to the new meta's
 * length and writes over it (no block freed when the lengths match: on a
 * drive mounted with -o discard, freeing blocks waits for a discard). Who
 * may still read the old inode: a GET on a worker holds the key lock the
 * remover held (none); the loop's GET and the scanner read by path without
 * it, and check the version they expected (another version or a short read
 * sends the GET to the worker path, the scanner to still_current()). The
 * bytes of a removed version leave the drive as before: a spare is
 * overwritten when reused, or cut to 0 bytes once SPARE_EMPTY_NS old (the
 * tick; it stays a spare, so a burst of deletes feeds later new names
 * instead of leaving freed inodes behind), so within 5 s (FORMAT.md
 * "Pins"); a clean stop unlinks them all, and a start empties the tmp
 * directory anyway.
 *
 * Since session 12 a commit's temp meta keeps its spare's name sNUM
 * (obj_spare_open; a new file gets the next sNUM name when there is no
 * spare), and an inline overwrite exchanges it with HEX.m
 * (renameat2 RENAME_EXCHANGE: the old meta, also linked as HEX.p, is then
 * at sNUM, and drop_prev only unlinks HEX.p and hands sNUM back): one
 * rename per meta instead of three, and no rename over an existing name
 * (which makes ext4 start the new file's writeback, auto_da_alloc). A
 * thread under SCHED_IDLE ("stor-spares") keeps a pool of empty spares
 * per drive (STORAGED_SPARE_POOL, default SPARE_POOL), so new names
 * create no inode on the request path either; a commit takes a kept
 * spare first, then one of the pool. Since session 13 a delete marker's
 * metas take spares too (obj_spare_have, which never creates; obj_io.c
 * renames the written spare to HEX.m with RENAME_NOREPLACE): a versioned
 * DELETE frees no inode, so markers draw on the pool, and a take that
 * leaves it under half wakes the filler at once (pool_kick). */
#include "common/log.h"
#include "storaged/store/gsync.h"
#include "storaged/store/meta.h"
#include "storaged/store/obj_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JNL_FILE   STOR_SYS_DIR "/journal"
#define JNL_FILE2  STOR_SYS_DIR "/journal.1" /* a host's second file */
#define JNL_ZCHUNK (1u << 20)                /* zeros written per pwrite */
/* a host's idle file is kept (zeroed, allocated) up to this length */
#define JNL_KEEP  (128ull << 20)
#define JNL_MAGIC "ECFSJNL1"
/* version 2 (session 13): one journal per filesystem, each record names
 * its drive; version 1 (one journal per drive, records without a drive)
 * is still read, for a replay after a power cut of the build before */
#define JNL_VERSION  2u
#define JNL_HDR      64u /* file header: magic, version, gen, boot, crc */
#define JNL_REC_MAG  0x4c4e4a45u /* "EJNL" little-endian */
#define JNL_REC_META 1u          /* a meta record to put at HEX.m */
#define JNL_REC_KEPT 2u  /* ... at HEX.vVERSION-SINCE (a version kept) */
#define JNL_REC_FIX1 56u /* version 1's fixed record head */
#define JNL_REC_FIX  64u /* fixed record head (+ drive); bucket, meta, crc */
#define JNL_ALIGN    64u
/* a checkpoint once a journal has this much per drive writing to it */
#define JNL_CP_BYTES (32ull << 20)
/* ... or records this old: below the 5 s within which a deleted object's
 * bytes leave the drives (FORMAT.md), since a record holds an inline body */
#define JNL_CP_SECS 3

/* header byte 55, a flag a clean stop sets (session 16): every byte after
 * the header, to the file's end, is zero (its length is kept and reused) */
#define JNL_HDR_ZEROED 1u

#define SPARE_CAP      1024         /* spare inodes kept per drive */
#define SPARE_POOL     256          /* empty ones made ahead per drive */
#define SPARE_POOL_MAX 1024         /* STORAGED_SPARE_POOL's limit */
#define SPARE_POOL_NS  100000000LL  /* the pool thread's idle tick */
#define SPARE_MIN_NS   200000000LL  /* reused once this old */
#define SPARE_EMPTY_NS 2000000000LL /* cut to 0 bytes once this old */

struct spare_ring {
    pthread_mutex_t mu;
    uint64_t num[SPARE_CAP]; /* protected by mu: names sNUM, oldest first */
    int64_t at[SPARE_CAP];   /* protected by mu: when each was kept */
    size_t head, n;          /* protected by mu */
    size_t clean;            /* protected by mu: the first ones, emptied */
    uint64_t *fresh;         /* protected by mu: empty files made ahead */
    size_t nfresh;           /* protected by mu */
};

struct jnl_drive {
    int fd;   /* -1: no journal of this drive is written (its records go to
               * its host's, or it does not journal) */
    int host; /* the drive whose journal holds this drive's records (its
               * filesystem's first journaling drive; itself for that
               * one); -1: this drive does not journal */
    dev_t dev;
    uint64_t cp_bytes; /* a host: checkpoint once tail reaches this */
    pthread_mutex_t mu;
    uint64_t tail; /* protected by mu: the next record's offset */
    struct stor_gsync_file *sync; /* fd's shared fdatasyncs */
    /* A host writes two files in turn (journal, journal.1), one per
     * generation: a checkpoint starts the next generation in the other
     * file, then zeroes the old one's records in place and fdatasyncs it,
     * so its blocks stay allocated and written, and the generation after
     * overwrites them: a commit's fdatasync then writes its data and no
     * inode, no bitmap, no journal commit of the filesystem. fd/sync and
     * fd2/sync2 swap under mu and the checkpoint's write lock; fd's
     * stores are atomic, as obj_jnl_use reads it under neither. */
    int fd2; /* the other file (idle), -1 when none */
    struct stor_gsync_file *sync2;
    /* A host whose checkpoint failed to write a header stops journaling
     * (fd -1) but keeps its two files open here until obj_jnl_close: the
     * vdel queue's barrier takes fd outside cp (obj_jnl_item), so a close
     * would let it fdatasync a closed or reused fd number. -1: none. */
    int gone, gone2;
    uint64_t zero; /* checkpoint thread: end of fd2's records to zero */
    bool dirty;    /* checkpoint thread: a zeroing failed, so a file may
                    * hold bytes past its records (no JNL_HDR_ZEROED) */
    /* protected by mu: the active file's length when it became active
     * (written and allocated: zeros past the header); a record that ends
     * JNL_ZCHUNK past it sets grow (atomic), and a growth switch follows
     * (grow_idle, then a checkpoint) */
    uint64_t room;
    bool grow;
    uint64_t want; /* checkpoint thread: both files' length a growth
                    * switch asked for (idle_zero keeps to it) */
};

struct obj_jnl {
    struct jnl_drive *d; /* ndrives */
    size_t n;
    uint32_t gen; /* written under cp (write) */
    char boot[40];
    pthread_rwlock_t cp;
    uint8_t maybe[1u << 17]; /* bit per 20 bits of the id; atomics */
    pthread_t thr;
    bool thr_started;
    pthread_mutex_t tmu;
    pthread_cond_t tcv;
    bool stop, kick;  /* protected by tmu */
    int64_t first_ns; /* atomic: when the oldest unchecked record came */
    int64_t cp_ns;    /* a checkpoint once the oldest record is this old */
    struct spare_ring *spare; /* n; NULL when none could be had */
    uint64_t spare_next;      /* atomic: the next spare's number */
    uint64_t spare_stat[5];   /* atomics: reused, kept, emptied unused,
                               * made ahead, made ahead and taken */
    size_t pool;              /* empty spares made ahead per drive */
    pthread_t pthr;           /* the pool's filler, "stor-spares" */
    bool pthr_started;
    bool pstop;     /* protected by tmu */
    bool pool_want; /* atomic: a commit had to create a temp meta or took
                     * one of the pool: fill (an idle store makes none) */
    uint8_t *zbuf;  /* JNL_ZCHUNK zeros (idle_zero), made once */
    bool early;     /* growth switches (off in tests that simulate a power
                     * cut: STORAGED_TEST_JOURNAL_CP_SECS; they are
                     * checkpoints) */
    pthread_cond_t pcv;
};

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This boot's id, "" if none. */
static void jnl_boot_id(char out[40])
{
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");

    out[0] = 0;
    if (fp == NULL)
        return;
    if (fgets(out, 40, fp) == NULL)
        out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    fclose(fp);
}

/* The file header of generation @gen, with @flags at byte 55 (the last
 * of the boot id's 40 bytes: a boot id has 36 characters, and the
 * comparison reads 39). */
static void hdr_make(uint8_t h[JNL_HDR], uint32_t gen, const char *boot,
                     uint8_t flags)
{
    memset(h, 0, JNL_HDR);
    memcpy(h, JNL_MAGIC, 8);
    put32(h + 8, JNL_VERSION);
    put32(h + 12, gen);
    snprintf((char *)h + 16, 39, "%s", boot);
    h[55] = flags;
    put64(h + 56, stor_crc64(0, h, 56));
}

/* Writes generation @gen's header (@flags: JNL_HDR_ZEROED or 0) and makes
 * it durable. 0 or -errno. */
static int hdr_write(int fd, uint32_t gen, const char *boot, uint8_t flags)
{
    uint8_t h[JNL_HDR];

    hdr_make(h, gen, boot, flags);
    if (stor_pwrite_all(fd, h, JNL_HDR, 0) < 0 || fdatasync(fd) < 0)
        return -errno;
    return 0;
}

/* One record as read back. */
struct jrec {
    uint64_t version;
    const uint8_t *id;
    const char *bucket;
    size_t blen;
    const uint8_t *meta;
    size_t mlen;
    size_t drive;  /* whose journal it is in */
    int type;      /* JNL_REC_META or JNL_REC_KEPT */
    int64_t since; /* KEPT: the SINCE of its name */
};

/* Parses the record at @p (@n bytes left) of generation @gen in a journal
 * of format version @ver, found in drive @d's journal (version 1: the
 * record is that drive's; version 2 names its drive). Returns its padded
 * length, or 0 when there is none whole there. */
static size_t rec_parse(const uint8_t *p, size_t n, uint32_t gen, uint32_t ver,
                        size_t d, struct jrec *r)
{
    uint32_t len, blen, mlen, fix = ver == 1 ? JNL_REC_FIX1 : JNL_REC_FIX;

    if (n < fix + 8 || get32(p) != JNL_REC_MAG)
        return 0;
    len = get32(p + 8);
    blen = get32(p + 40);
    mlen = get32(p + 44);
    r->type = p[6] | p[7] << 8;
    if ((uint32_t)(p[4] | p[5] << 8) != ver ||
        (r->type != JNL_REC_META && r->type != JNL_REC_KEPT) ||
        get32(p + 12) != gen || len > n || blen == 0 || blen >= 64 ||
        mlen > STOR_META_MAX || (uint64_t)fix + blen + mlen + 8 != len ||
        stor_crc64(0, p, len - 8) != get64(p + len - 8))
        return 0;
    r->version = get64(p + 16);
    r->since = (int64_t)get64(p + 48);
    r->drive = ver == 1 ? d : get32(p + 56);
    r->id = p + 24;
    r->bucket = (const char *)p + fix;
    r->blen = blen;
    r->meta = p + fix + blen;
    r->mlen = mlen;
    return (len + JNL_ALIGN - 1) / JNL_ALIGN * JNL_ALIGN;
}

static int rec_cmp(const void *a, const void *b)
{
    const struct jrec *x = a, *y = b;
    int c;

    if (x->blen != y->blen)
        return x->blen < y->blen ? -1 : 1;
    c = memcmp(x->bucket, y->bucket, x->blen);
    if (c == 0)
        c = memcmp(x->id, y->id, 16);
    if (c == 0 && x->type != y->type)
        c = x->type < y->type ? -1 : 1;
    /* a name's KEPT records by SINCE (paired() looks them up by it) */
    if (c == 0 && x->type == JNL_REC_KEPT && x->since != y->since)
        c = x->since < y->since ? -1 : 1;
    if (c == 0 && x->version != y->version)
        c = x->version < y->version ? -1 : 1;
    if (c == 0 && x->drive != y->drive)
        c = x->drive < y->drive ? -1 : 1;
    return c;
}

/* Writes @len bytes at @p as @to on @drive, through a temp file renamed
 * in (unsynced: the caller's syncfs makes it durable). 0 or -errno. */
static int put_file(const char *drive, const char *to, const void *p,
                    size_t len, uint64_t n)
{
    char tmp[PATH_MAX];
    int fd, ret = 0;

    if (obj_path_tmp(tmp, sizeof(tmp), drive, n, 900) < 0)
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (stor_pwrite_all(fd, p, len, 0) < 0)
        ret = errno ? -errno : -EIO;
    close(fd);
    if (ret == 0 && rename(tmp, to) < 0)
        ret = -errno;
    if (ret < 0)
        unlink(tmp);
    return ret;
}

/* The version of the readable meta at @path (of @want's key when @want),
 * or 0 when there is none. */
static uint64_t meta_version(const char *path, const struct stor_meta *want)
{
    struct stor_meta m;
    struct stat st;
    uint64_t v = 0;
    uint8_t *cur;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= STOR_META_MAX &&
        (cur = malloc((size_t)st.st_size)) != NULL) {
        if (pread(fd, cur, (size_t)st.st_size, 0) == st.st_size &&
            stor_meta_decode_view(cur, (size_t)st.st_size, &m) == 0) {
            /* another key's meta (a reused spare inode whose new bytes
             * did not reach the disk) is no meta of this name */
            if (want == NULL || (m.key_len == want->key_len &&
                                 memcmp(m.key, want->key, m.key_len) == 0))
                v = m.version ? m.version : 1;
            stor_meta_fini(&m);
        }
        free(cur);
    }
    close(fd);
    return v;
}

/* The bucket name of @r into @bucket (64 bytes). 1 when that bucket is on
 * @drive, 0 when it is not (deleted since), -EINVAL for a name that is not
 * a bucket's. */
static int rec_bucket(const char *drive, const struct jrec *r, char *bucket)
{
    char path[PATH_MAX];
    struct stat st;

    memcpy(bucket, r->bucket, r->blen);
    bucket[r->blen] = 0;
    if (strchr(bucket, '/') || strcmp(bucket, ".") == 0 ||
        strcmp(bucket, "..") == 0)
        return -EINVAL;
    snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s", drive, bucket);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 1 : 0;
}

/* Are the shard files the meta @m names on @drive? (Inline: none.) */
static bool shards_there(const char *drive, const char *bucket,
                         const uint8_t id[16], const struct stor_meta *m)
{
    for (size_t i = 0; !m->has_inline && i < m->nparts; i++) {
        char path[PATH_MAX];

        if (obj_path_shard(path, sizeof(path), drive, bucket, id,
                           m->parts[i].dataid) < 0 ||
            access(path, F_OK) < 0)
            return false;
    }
    return true;
}

/* Puts the meta of @r at its HEX.m on @drive unless a readable meta of the
 * same or a higher version is there, or the shard files it names are not
 * (deleted since: putting it back would make a broken object). A readable
 * older meta there is kept as HEX.p (a copy of its version for the start's
 * rule, FORMAT.md "Writes"). 1 written, 0 not needed, -errno. */
static int replay_one(const char *drive, const struct jrec *r, uint64_t n)
{
    char bucket[64], path[PATH_MAX], prev[PATH_MAX], tmp[PATH_MAX], *sl;
    struct stor_meta m;
    struct stat st;
    uint64_t cv;
    bool there;
    int ret;

    ret = rec_bucket(drive, r, bucket);
    if (ret <= 0)
        return ret; /* a bad name, or the bucket is gone: so is the object */
    if (obj_path_meta(path, sizeof(path), drive, bucket, r->id) < 0)
        return -ENAMETOOLONG;
    if (stor_meta_decode_view(r->meta, r->mlen, &m) < 0)
        return -EINVAL;
    cv = meta_version(path, &m);
    if (cv >= r->version) {
        stor_meta_fini(&m);
        return 0; /* newer or the same: keep it */
    }
    there = shards_there(drive, bucket, r->id, &m);
    stor_meta_fini(&m);
    if (!there)
        return 0;
    snprintf(prev, sizeof(prev), "%s", path);
    prev[strlen(prev) - 1] = 'p';
    snprintf(tmp, sizeof(tmp), "%s", path);
    sl = strrchr(tmp, '/');
    if (sl == NULL)
        return -EINVAL;
    *sl = 0;
    if (stat(tmp, &st) < 0) {
        ret = stor_mkdirs(tmp);
        if (ret < 0)
            return ret;
    }
    if (cv) { /* the older version there stays a copy */
        if (obj_path_tmp(tmp, sizeof(tmp), drive, n, 901) < 0)
            return -ENAMETOOLONG;
        (void)unlink(tmp);
        if (link(path, tmp) < 0 || rename(tmp, prev) < 0) {
            ret = -errno;
            unlink(tmp);
            return ret;
        }
    }
    ret = put_file(drive, path, r->meta, r->mlen, n);
    return ret < 0 ? ret : 1;
}

static bool same_obj(const struct jrec *a, const struct jrec *b)
{
    return a->blen == b->blen && memcmp(a->bucket, b->bucket, a->blen) == 0 &&
           memcmp(a->id, b->id, 16) == 0;
}

static bool same_name(const struct jrec *a, const struct jrec *b)
{
    return same_obj(a, b) && a->type == b->type;
}

/* Puts the meta of the KEPT record @r at its HEX.vVERSION-SINCE on @drive
 * unless a readable meta of that version is there (a versioned DELETE
 * linked it; the record stands for the link and its content). 1 written,
 * 0 not needed, -errno. */
static int replay_kept(const char *drive, const struct jrec *r, uint64_t n)
{
    char bucket[64], hx[33], path[PATH_MAX], *sl;
    struct stat st;
    int ret;

    ret = rec_bucket(drive, r, bucket);
    if (ret <= 0)
        return ret;
    obj_hex(r->id, 16, hx);
    ret = snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s/%.2s", drive,
                   bucket, hx);
    if (ret < 0 || (size_t)ret >= sizeof(path))
        return -ENAMETOOLONG;
    if (stat(path, &st) < 0 && (ret = stor_mkdirs(path)) < 0)
        return ret;
    sl = path + strlen(path);
    ret = snprintf(sl, sizeof(path) - (size_t)(sl - path),
                   "/%s.v%016llx-%016llx", hx, (unsigned long long)r->version,
                   (unsigned long long)r->since);
    if (ret < 0 || (size_t)ret >= sizeof(path) - (size_t)(sl - path))
        return -ENAMETOOLONG;
    if (meta_version(path, NULL) == r->version)
        return 0;
    ret = put_file(drive, path, r->meta, r->mlen, n);
    return ret < 0 ? ret : 1;
}

/* k of the meta in @r (0 when it does not decode). */
static int rec_k(const struct jrec *r)
{
    struct stor_meta m;
    int k;

    if (stor_meta_decode_view(r->meta, r->mlen, &m) < 0)
        return 0;
    k = m.k;
    stor_meta_fini(&m);
    return k;
}

/* Appends the valid records of generation @gen in @buf (@len bytes, drive
 * @d's journal, format version @ver) to *v: those of drives online now
 * (a record of an offline drive is skipped, as its own journal would be
 * unread). 0 or -ENOMEM. */
static int collect(struct stor_store *s, const uint8_t *buf, size_t len,
                   uint32_t gen, uint32_t ver, size_t d, struct jrec **v,
                   size_t *nv, size_t *cap)
{
    size_t off = JNL_HDR;

    while (off < len) {
        struct jrec r;
        size_t rl = rec_parse(buf + off, len - off, gen, ver, d, &r);

        if (rl == 0) { /* torn, a failed write, or an old generation */
            off += JNL_ALIGN;
            continue;
        }
        if (r.drive >= s->ndrives || !obj_drive_online(s, r.drive) ||
            (r.type == JNL_REC_KEPT && r.since == 0)) {
            off += rl;
            continue;
        }
        if (*nv == *cap) {
            size_t nc = *cap ? 2 * *cap : 256;
            struct jrec *nw = realloc(*v, nc * sizeof(**v));

            if (nw == NULL)
                return -ENOMEM;
            *v = nw;
            *cap = nc;
        }
        (*v)[(*nv)++] = r;
        off += rl;
    }
    return 0;
}

/* Is there, among the KEPT records v[a..b) of one name (sorted by SINCE,
 * then version and drive: rec_cmp), one of @r's SINCE on @r's drive? */
static bool paired(const struct jrec *v, size_t a, size_t b,
                   const struct jrec *r)
{
    for (size_t e = b; a < e;) { /* the first of SINCE >= r's */
        size_t m = a + (e - a) / 2;

        if (v[m].since < r->since)
            a = m + 1;
        else
            e = m;
    }
    for (; a < b && v[a].since == r->since; a++)
        if (v[a].drive == r->drive)
            return true;
    return false;
}

/* Drops from the sorted @v (rec_cmp: a name's META records, then its KEPT
 * ones) the META records of versioned overwrites (SINCE != 0) without the
 * KEPT record of the same name and SINCE on their drive, the version they
 * replace and keep: both were written in one submission before one fsync,
 * so a power cut may have kept either; without its pair such a meta counts
 * as lost, so a replay never makes a version current without the one it
 * kept. Returns the records left (in order). */
static size_t drop_unpaired(struct jrec *v, size_t nv)
{
    size_t o = 0;

    for (size_t a = 0; a < nv;) {
        size_t b = a, c;

        while (b < nv && same_name(&v[b], &v[a]))
            b++;
        c = b; /* [b, c): the same object's KEPT records, if any */
        if (v[a].type == JNL_REC_META)
            while (c < nv && v[c].type == JNL_REC_KEPT &&
                   same_obj(&v[c], &v[a]))
                c++;
        for (size_t i = a; i < b; i++)
            if (v[i].type != JNL_REC_META || v[i].since == 0 ||
                paired(v, b, c, &v[i]))
                v[o++] = v[i];
        a = b; /* the KEPT run is the next group (o <= a: unread) */
    }
    return o;
}

/* The replay after a reboot (FORMAT.md "The meta journal") of the journal
 * files with need[f] (2 per drive: file f is drive f / 2's journal or
 * journal.1, open at fd[f], of generation gen[f]). An
 * acknowledged version has a durable record on at least its write quorum
 * (>= k) of drives; a version with fewer was not acknowledged. So per name
 * the highest version with records on >= k drives is put back (with its
 * set's drives all online; otherwise the highest, whatever its count: an
 * older one might be stale). Adds the metas written per drive to done[d].
 * 0 or -errno. */
static int replay_all(struct stor_store *s, const int *fd, const uint32_t *gen,
                      const uint32_t *ver, const bool *need, long *done)
{
    size_t nf = 2 * s->ndrives;
    uint8_t **bufs = calloc(nf ? nf : 1, sizeof(*bufs));
    struct jrec *v = NULL;
    size_t nv = 0, cap = 0;
    int ret = 0;

    if (bufs == NULL)
        return -ENOMEM;
    for (size_t d = 0; ret == 0 && d < nf; d++) {
        struct stat st;

        if (!need[d])
            continue;
        if (fstat(fd[d], &st) < 0) {
            ret = -errno;
            break;
        }
        if ((uint64_t)st.st_size <= JNL_HDR)
            continue;
        bufs[d] = malloc((size_t)st.st_size);
        if (bufs[d] == NULL) {
            ret = -ENOMEM;
            break;
        }
        if (pread(fd[d], bufs[d], (size_t)st.st_size, 0) != st.st_size) {
            ret = -EIO;
            break;
        }
        ret = collect(s, bufs[d], (size_t)st.st_size, gen[d], ver[d], d / 2, &v,
                      &nv, &cap);
    }
    if (ret == 0 && nv) {
        qsort(v, nv, sizeof(*v), rec_cmp);
        nv = drop_unpaired(v, nv);
    }
    for (size_t a = 0; ret == 0 && a < nv;) {
        size_t b = a, c, e, pick_a, pick_e;
        bool all = obj_set_online(s, s->drives[v[a].drive].set) == s->set_size;

        while (b < nv && same_name(&v[a], &v[b]))
            b++;
        if (v[a].type == JNL_REC_KEPT) {
            for (size_t i = a; i < b; i++) {
                int r =
                    replay_kept(s->drives[v[i].drive].path, &v[i], (uint64_t)i);

                if (r > 0)
                    done[v[i].drive] += r;
                else if (r < 0)
                    cm_log(CM_LOG_ERROR, -r,
                           "journal of %s: a kept version could not be "
                           "replayed",
                           s->drives[v[i].drive].path);
            }
            a = b;
            continue;
        }
        /* version groups, highest first: [c, e) */
        pick_a = pick_e = 0;
        for (e = b; e > a; e = c) {
            int k;

            for (c = e - 1; c > a && v[c - 1].version == v[e - 1].version; c--)
                ;
            k = rec_k(&v[c]);
            if (!all || (k > 0 && e - c >= (size_t)k)) {
                pick_a = c;
                pick_e = e;
                break;
            }
        }
        /* none reaches k: no version of it was acknowledged through the
         * journals (or their records are lost); put nothing back, as a
         * single stale record must not become a meta */
        for (size_t i = pick_a; i < pick_e; i++) {
            int r = replay_one(s->drives[v[i].drive].path, &v[i], (uint64_t)i);

            if (r < 0) {
                cm_log(CM_LOG_ERROR, -r,
                       "journal of %s: a record could not be replayed",
                       s->drives[v[i].drive].path);
                if (r != -EINVAL)
                    ret = r;
            } else {
                done[v[i].drive] += r;
            }
        }
        a = b;
    }
    free(v);
    for (size_t d = 0; d < nf; d++)
        free(bufs[d]);
    free(bufs);
    return ret;
}

/* Opens (creating) drive @d's journal and reads its header. After the
 * same boot one syncfs makes the last run's writes durable; after a reboot
 * *need is set (replay_all). Sets *gen and *ver to the generation and the
 * format version it found, *zeroed when a clean stop left it with no
 * record and zeros to its end (JNL_HDR_ZEROED: nothing to replay, its
 * length is kept). 0, or -errno with the reason logged (-EPROTO: not a
 * format this build reads). */
static int drive_recover(struct stor_store *s, size_t d, const char *name,
                         int *fdp, uint32_t *gen, uint32_t *ver,
                         const char *boot, bool *need, bool *valid,
                         bool *zeroed)
{
    const char *drive = s->drives[d].path;
    bool second = strcmp(name, JNL_FILE2) == 0;
    char path[PATH_MAX];
    uint8_t h[JNL_HDR];
    struct stat st;
    ssize_t got;
    int fd;

    *gen = 0;
    *ver = JNL_VERSION;
    *need = *valid = *zeroed = false;
    snprintf(path, sizeof(path), "%s/%s", drive, name);
    /* the second file only where a host made it */
    fd = open(path, O_RDWR | (second ? 0 : O_CREAT) | O_CLOEXEC, 0644);
    if (fd < 0 && second && errno == ENOENT)
        return 0;
    if (fd < 0)
        return -errno;
    *fdp = fd;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size == 0)
        return 0; /* new (a store of the format before: nothing to do) */
    got = pread(fd, h, JNL_HDR, 0);
    if (got != (ssize_t)JNL_HDR || memcmp(h, JNL_MAGIC, 8) != 0) {
        cm_log(CM_LOG_ERROR, 0,
               "%s is not a meta journal this storaged knows (no %s header); "
               "refusing to start rather than ignore it: a newer storaged "
               "may have written it (start that one and stop it cleanly)",
               path, JNL_MAGIC);
        return -EPROTO;
    }
    if (get32(h + 8) != 1 && get32(h + 8) != JNL_VERSION) {
        cm_log(CM_LOG_ERROR, 0,
               "%s has journal format version %u; this storaged reads "
               "versions 1 and %u: start the storaged that wrote it and stop "
               "it cleanly (that empties it), then this one",
               path, get32(h + 8), JNL_VERSION);
        return -EPROTO;
    }
    if (stor_crc64(0, h, 56) != get64(h + 56)) {
        /* torn while a checkpoint rewrote it: that checkpoint's syncfs had
         * ended, and no commit wrote after it before the header was
         * durable, so nothing in it is needed */
        cm_log(CM_LOG_WARN, 0, "%s: header torn by a crash; nothing to replay",
               path);
        return 0;
    }
    *gen = get32(h + 12);
    *ver = get32(h + 8);
    *valid = true;
    /* version 1 wrote no flag (its byte 55 is the boot id's padding) */
    *zeroed = *ver == JNL_VERSION && (h[55] & JNL_HDR_ZEROED);
    if (boot[0] && strncmp((const char *)h + 16, boot, 39) == 0) {
        /* the process died, the machine did not: the page cache has every
         * write of the last run; make them durable before forgetting */
        if (syncfs(fd) < 0)
            return -errno;
        return 0;
    }
    *need = !*zeroed && (uint64_t)st.st_size > JNL_HDR;
    return 0;
}

/* Writes zeros over [@from, @to) of @fd. 0 or -1. */
static int zero_range(struct obj_jnl *j, int fd, uint64_t from, uint64_t to)
{
    while (from < to) {
        size_t len = (size_t)CM_MIN((uint64_t)JNL_ZCHUNK, to - from);

        if (stor_pwrite_all(fd, j->zbuf, len, from) < 0)
            return -1;
        from += len;
    }
    return 0;
}

/* Zeroes the records of host @d's idle file (the old generation's) in
 * place and fdatasyncs it: they hold inline bodies, which must not stay
 * on the drive once their object is deleted (FORMAT.md "Pins": within 5
 * s), and the next generation in this file then overwrites written,
 * allocated blocks. Where the old records ended near the file's end, it
 * is made a quarter longer too, so a growing load does not extend it in
 * every commit's fdatasync. A file never stays longer than JNL_KEEP (its
 * tail is cut: a heavy load's generations, whose fdatasyncs are shared
 * by many commits, append past it as before). Before session 13 the file
 * was cut to its header instead: every commit's fsync then allocated
 * blocks and wrote the inode. Only the checkpoint thread (or the close,
 * after it) writes the idle file; a vdel barrier may fdatasync it
 * meanwhile, which does no harm. */
static void idle_zero(struct stor_store *s, size_t d)
{
    struct obj_jnl *j = s->jnl;
    struct jnl_drive *jd = &j->d[d];
    uint64_t end = jd->zero, want, cur;
    struct stat st;

    jd->zero = 0;
    if (jd->fd2 < 0 || end <= JNL_HDR)
        return;
    if (fstat(jd->fd2, &st) < 0 ||
        (j->zbuf == NULL && (j->zbuf = calloc(1, JNL_ZCHUNK)) == NULL)) {
        jd->dirty = true;
        return;
    }
    cur = (uint64_t)st.st_size;
    if (cur > JNL_KEEP) {
        if (ftruncate(jd->fd2, JNL_KEEP) == 0)
            cur = JNL_KEEP;
        if (end > cur)
            end = cur; /* the records past it are gone with the cut */
    }
    want = end + end / 4;
    want = (want + JNL_ZCHUNK - 1) / JNL_ZCHUNK * JNL_ZCHUNK;
    if (want < jd->want)
        want = jd->want; /* a growth switch's length (grow_idle) */
    if (want > JNL_KEEP)
        want = JNL_KEEP;
    /* past the records the file holds zeros already (each generation's
     * were zeroed when it went idle) */
    if (zero_range(j, jd->fd2, JNL_HDR, end) < 0 ||
        (want > cur && zero_range(j, jd->fd2, cur, want) < 0)) {
        cm_log(CM_LOG_WARN, errno,
               "journal of %s: zeroing its old records failed; cutting them "
               "off",
               s->drives[d].path);
        if (ftruncate(jd->fd2, JNL_HDR) < 0)
            jd->dirty = true;
        return;
    }
    if (fdatasync(jd->fd2) < 0) {
        cm_log(CM_LOG_WARN, errno, "journal of %s: fdatasync of its idle file",
               s->drives[d].path);
        jd->dirty = true;
    }
}

/* The checkpoint (see the top). Caller holds nothing. True when every
 * journal is empty now. */
static bool checkpoint(struct stor_store *s)
{
    struct obj_jnl *j = s->jnl;
    dev_t done[64];
    size_t nd = 0;
    bool any = false, bad = false;

    /* a first syncfs per filesystem outside the lock writes back what is
     * dirty now while commits go on, so the one under the lock (which
     * alone makes the checkpoint safe) has little left to write */
    for (size_t d = 0; d < j->n; d++) {
        size_t i;

        if (__atomic_load_n(&j->d[d].fd, __ATOMIC_RELAXED) < 0)
            continue;
        for (i = 0; i < nd && done[i] != j->d[d].dev; i++)
            ;
        if (i < nd || nd == CM_ARRAY_SIZE(done))
            continue;
        (void)syncfs(j->d[d].fd);
        done[nd++] = j->d[d].dev;
    }
    nd = 0;
    pthread_rwlock_wrlock(&j->cp);
    for (size_t d = 0; d < j->n; d++)
        if (j->d[d].fd >= 0 && j->d[d].tail > JNL_HDR)
            any = true;
    if (!any) {
        __atomic_store_n(&j->first_ns, 0, __ATOMIC_RELAXED);
        pthread_rwlock_unlock(&j->cp);
        return true;
    }
    for (size_t d = 0; d < j->n; d++) {
        size_t i;

        if (j->d[d].fd < 0)
            continue;
        for (i = 0; i < nd && done[i] != j->d[d].dev; i++)
            ;
        if (i < nd)
            continue;
        if (syncfs(j->d[d].fd) < 0) {
            cm_log(CM_LOG_ERROR, errno,
                   "journal checkpoint: syncfs of %s failed; keeping the "
                   "journal",
                   s->drives[d].path);
            bad = true;
            break;
        }
        if (nd < CM_ARRAY_SIZE(done))
            done[nd++] = j->d[d].dev;
    }
    if (!bad) {
        j->gen++;
        for (size_t d = 0; d < j->n; d++) {
            struct jnl_drive *jd = &j->d[d];
            struct stor_gsync_file *sf;
            struct stat st;
            uint64_t room;
            int fd;

            if (jd->fd < 0)
                continue;
            /* the next generation goes to the other file: its header,
             * durable, names a generation above the old file's, so a
             * replay reads it and not the old one (drive_open_all) */
            if (hdr_write(jd->fd2, j->gen, j->boot, 0) < 0) {
                /* stop journaling here. The old file stays of the
                 * highest generation, so a replay would read it; but the
                 * syncfs above made its records durable, and the commits
                 * from now on do not journal (no jnl_after either): left
                 * valid, a replay after a power cut put an older version
                 * back where a later DELETE had removed a newer one. So
                 * its records go (cut back to its header) */
                int err = errno ? errno : EIO;

                cm_log(CM_LOG_ERROR, err,
                       "journal of %s: header write failed; the drives "
                       "of its filesystem commit without the journal from "
                       "now on",
                       s->drives[d].path);
                obj_drive_fail(s, d, err);
                if (ftruncate(jd->fd, JNL_HDR) < 0 || fdatasync(jd->fd) < 0)
                    cm_log(CM_LOG_ERROR, errno,
                           "journal of %s: cannot empty it: a replay after "
                           "a power cut may put back older versions",
                           s->drives[d].path);
                pthread_mutex_lock(&jd->mu);
                /* not closed: a vdel barrier may hold either number
                 * (obj_jnl_item) */
                jd->gone = jd->fd;
                jd->gone2 = jd->fd2;
                __atomic_store_n(&jd->fd, -1, __ATOMIC_RELAXED);
                jd->fd2 = -1;
                pthread_mutex_unlock(&jd->mu);
                continue;
            }
            /* what the next generation writes over before it appends */
            room = fstat(jd->fd2, &st) == 0 ? (uint64_t)st.st_size : JNL_HDR;
            pthread_mutex_lock(&jd->mu);
            jd->room = room;
            __atomic_store_n(&jd->grow, false, __ATOMIC_RELAXED);
            fd = jd->fd;
            sf = jd->sync;
            /* atomic: obj_jnl_use reads it without mu or cp (jnl_settle);
             * both values are >= 0, so its answer does not change */
            __atomic_store_n(&jd->fd, jd->fd2, __ATOMIC_RELAXED);
            jd->sync = jd->sync2;
            jd->fd2 = fd;
            jd->sync2 = sf;
            jd->zero = jd->tail; /* the old records end there */
            __atomic_store_n(&jd->tail, JNL_HDR, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&jd->mu);
        }
        /* not memset: obj_jnl_maybe reads the map without cp (jnl_after,
         * jnl_settle). Each clear is a release store (a plain mov on
         * x86; not a fence, which TSan cannot model and gcc refuses
         * under -fsanitize=thread with -Werror): it orders the syncfs,
         * the new headers and the swaps before the cleared bit a reader's
         * acquire load sees: one that skips finds the old records durable
         * and the old file out of the replay. Notes take cp (read): none
         * races. */
        for (size_t b = 0; b < sizeof(j->maybe); b++)
            if (__atomic_load_n(&j->maybe[b], __ATOMIC_RELAXED))
                __atomic_store_n(&j->maybe[b], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&j->first_ns, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->jnl_checkpoints, 1, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&j->cp);
    for (size_t d = 0; !bad && d < j->n; d++)
        if (__atomic_load_n(&j->d[d].fd, __ATOMIC_RELAXED) >= 0)
            idle_zero(s, d);
    return !bad;
}

/* Does some drive's journal want a checkpoint? */
static bool cp_due(struct obj_jnl *j)
{
    int64_t f = __atomic_load_n(&j->first_ns, __ATOMIC_RELAXED);

    if (f && mono_ns() - f >= j->cp_ns)
        return true;
    for (size_t d = 0; d < j->n; d++) {
        struct jnl_drive *jd = &j->d[d];

        /* a host whose journal failed (closed by a checkpoint) keeps its
         * tail and grow: it wants nothing, or every commit would kick a
         * checkpoint that cannot clear them */
        if (jd->host != (int)d ||
            __atomic_load_n(&jd->fd, __ATOMIC_RELAXED) < 0)
            continue;
        if (__atomic_load_n(&jd->tail, __ATOMIC_RELAXED) >= jd->cp_bytes ||
            (j->early && __atomic_load_n(&jd->grow, __ATOMIC_RELAXED)))
            return true;
    }
    return false;
}

/* A growth switch's first half (session 16). Where a host's records went
 * JNL_ZCHUNK past the length its active file had when it became active (a
 * fresh store, a start after a kill -9, a load above the generations
 * before), every commit's fdatasync appends past the end of the file and
 * waits for a filesystem journal commit. So its idle file (which no commit
 * writes) is zeroed out to four times the records so far (JNL_KEEP at
 * most) and fdatasynced here, and the checkpoint that follows makes it
 * the active one; the old one is zeroed to the same length (idle_zero).
 * From a fresh store at a steady load: switches at 1, ~5 and ~25 MiB,
 * within the first second or so. Checkpoint thread. */
static void grow_idle(struct stor_store *s)
{
    struct obj_jnl *j = s->jnl;

    for (size_t d = 0; j->early && d < j->n; d++) {
        struct jnl_drive *jd = &j->d[d];
        uint64_t want;
        struct stat st;

        if (jd->host != (int)d || jd->fd2 < 0 ||
            !__atomic_load_n(&jd->grow, __ATOMIC_RELAXED))
            continue;
        want = 4 * __atomic_load_n(&jd->tail, __ATOMIC_RELAXED);
        want = (want + JNL_ZCHUNK - 1) / JNL_ZCHUNK * JNL_ZCHUNK;
        if (want > JNL_KEEP)
            want = JNL_KEEP;
        if (want > jd->want)
            jd->want = want;
        if (fstat(jd->fd2, &st) < 0 || (uint64_t)st.st_size >= want)
            continue;
        if (j->zbuf == NULL && (j->zbuf = calloc(1, JNL_ZCHUNK)) == NULL)
            return;
        /* past its records (zeroed when it went idle) it holds zeros */
        if (zero_range(j, jd->fd2, (uint64_t)st.st_size, want) < 0 ||
            fdatasync(jd->fd2) < 0) {
            cm_log(CM_LOG_WARN, errno,
                   "journal of %s: making its idle file longer failed",
                   s->drives[d].path);
            jd->dirty = true; /* its zeros may not all be on the drive */
        }
    }
}

/* DRIVE/.ecfs.sys/tmp/sNUM. 0 or -ENAMETOOLONG. */
static int spare_path(char *buf, size_t cap, const char *drive, uint64_t num)
{
    int n = snprintf(buf, cap, "%s/" STOR_TMP_DIR "/s%016llx", drive,
                     (unsigned long long)num);

    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Empties (cuts to 0 bytes) the spares older than SPARE_EMPTY_NS; they stay
 * spares. With @all, unlinks every one instead (a clean stop). */
static void spare_reap(struct stor_store *s, bool all)
{
    struct obj_jnl *j = s->jnl;
    int64_t now = mono_ns();

    for (size_t d = 0; j->spare && d < j->n; d++) {
        struct spare_ring *r = &j->spare[d];

        pthread_mutex_lock(&r->mu);
        while (all ? r->n > 0
                   : r->clean < r->n &&
                         now - r->at[(r->head + r->clean) % SPARE_CAP] >=
                             SPARE_EMPTY_NS) {
            char path[PATH_MAX];
            size_t i = all ? r->head : (r->head + r->clean) % SPARE_CAP;

            /* under the ring's lock: take() renames none meanwhile */
            if (spare_path(path, sizeof(path), s->drives[d].path, r->num[i]) ==
                0) {
                if (all)
                    (void)unlink(path);
                else
                    (void)truncate(path, 0);
            }
            if (all) {
                r->head = (r->head + 1) % SPARE_CAP;
                r->n--;
                r->clean -= r->clean > 0;
            } else {
                r->clean++;
                __atomic_add_fetch(&j->spare_stat[2], 1, __ATOMIC_RELAXED);
            }
        }
        while (all && r->nfresh > 0) {
            char path[PATH_MAX];

            if (spare_path(path, sizeof(path), s->drives[d].path,
                           r->fresh[--r->nfresh]) == 0)
                (void)unlink(path);
        }
        pthread_mutex_unlock(&r->mu);
    }
}

/* Contract in obj_i.h. */
int obj_spare_path(char *buf, size_t cap, const char *drive, uint64_t num)
{
    return spare_path(buf, cap, drive, num);
}

/* Adds sNUM (@path, whose inode has no other name) to drive @d's ring;
 * false when the ring is full. Caller holds r->mu. */
static bool spare_push(struct obj_jnl *j, struct spare_ring *r, uint64_t num)
{
    if (r->n == SPARE_CAP)
        return false;
    r->num[(r->head + r->n) % SPARE_CAP] = num;
    r->at[(r->head + r->n) % SPARE_CAP] = mono_ns();
    r->n++;
    __atomic_add_fetch(&j->spare_stat[1], 1, __ATOMIC_RELAXED);
    return true;
}

/* Takes the oldest spare of @r at least SPARE_MIN_NS old off the ring;
 * false when there is none. Off the ring, the reaper no longer cuts it.
 * Caller holds r->mu. */
static bool spare_pop(struct spare_ring *r, int64_t now, uint64_t *num)
{
    if (r->n == 0 || now - r->at[r->head] < SPARE_MIN_NS)
        return false;
    *num = r->num[r->head];
    r->head = (r->head + 1) % SPARE_CAP;
    r->n--;
    r->clean -= r->clean > 0;
    return true;
}

/* Opens a spare for writing @len bytes from offset 0 over it. Only a
 * longer old meta's tail is cut: freeing blocks means a synchronous
 * discard on a drive mounted with -o discard, and a cut to the same
 * length still dirties the inode (4 % of a 320 KiB PUT's CPU, session
 * 12's profile). fd, or -1 (the file is gone: unlinked). */
static int spare_open(const char *path, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    struct stat st;

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 ||
        (st.st_size > (off_t)len && ftruncate(fd, (off_t)len) < 0)) {
        close(fd);
        (void)unlink(path);
        return -1;
    }
    return fd;
}

/* Contract in obj_i.h. */
int obj_spare_put(struct stor_store *s, size_t d, const char *path)
{
    struct obj_jnl *j = s->jnl;
    struct spare_ring *r;
    char to[PATH_MAX];
    struct stat st;
    uint64_t num;

    if (j == NULL || j->spare == NULL || d >= j->n)
        return unlink(path);
    if (lstat(path, &st) < 0)
        return -1;
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
        return unlink(path); /* a kept version links it: not ours */
    r = &j->spare[d];
    num = __atomic_fetch_add(&j->spare_next, 1, __ATOMIC_RELAXED);
    if (spare_path(to, sizeof(to), s->drives[d].path, num) < 0)
        return unlink(path);
    pthread_mutex_lock(&r->mu);
    if (r->n == SPARE_CAP || rename(path, to) < 0) {
        pthread_mutex_unlock(&r->mu);
        return unlink(path);
    }
    (void)spare_push(j, r, num);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Contract in obj_i.h. */
void obj_spare_keep(struct stor_store *s, size_t d, uint64_t num)
{
    struct obj_jnl *j = s->jnl;
    char path[PATH_MAX];
    struct stat st;
    bool kept = false;

    if (spare_path(path, sizeof(path), s->drives[d].path, num) < 0)
        return;
    if (j != NULL && j->spare != NULL && d < j->n && lstat(path, &st) == 0 &&
        S_ISREG(st.st_mode) && st.st_nlink == 1) {
        pthread_mutex_lock(&j->spare[d].mu);
        kept = spare_push(j, &j->spare[d], num);
        pthread_mutex_unlock(&j->spare[d].mu);
    }
    if (!kept) /* another name links it (a kept version), or no room */
        (void)unlink(path);
}

/* Contract in obj_i.h. */
int obj_spare_take(struct stor_store *s, size_t d, const char *tmp, size_t len)
{
    struct obj_jnl *j = s->jnl;
    struct spare_ring *r;
    char from[PATH_MAX];
    int64_t now;
    uint64_t num;
    int fd;

    if (j == NULL || j->spare == NULL || d >= j->n)
        return -1;
    r = &j->spare[d];
    now = mono_ns();
    pthread_mutex_lock(&r->mu);
    while (spare_pop(r, now, &num)) {
        /* renamed under the ring's lock, as before */
        if (spare_path(from, sizeof(from), s->drives[d].path, num) < 0 ||
            rename(from, tmp) < 0)
            continue;
        pthread_mutex_unlock(&r->mu);
        fd = spare_open(tmp, len);
        if (fd < 0)
            return -1;
        __atomic_add_fetch(&j->spare_stat[0], 1, __ATOMIC_RELAXED);
        return fd;
    }
    pthread_mutex_unlock(&r->mu);
    return -1;
}

/* Wakes the pool's filler once a take left drive @d's pool under half
 * (r->nfresh, read under r->mu by the caller): a burst (delete markers
 * draw only on the pool) need not wait for its 100 ms idle tick. Not
 * under j->tmu: a wake-up lost between the filler's check and its wait
 * costs at most one tick. */
static void pool_kick(struct obj_jnl *j, size_t nfresh)
{
    if (nfresh < j->pool / 2 && j->pthr_started)
        (void)pthread_cond_signal(&j->pcv);
}

/* Contract in obj_i.h. */
int obj_spare_have(struct stor_store *s, size_t d, size_t len, uint64_t *num)
{
    struct obj_jnl *j = s->jnl;
    struct spare_ring *r;
    char path[PATH_MAX];
    int64_t now;
    int fd;

    if (j == NULL || j->spare == NULL || d >= j->n)
        return -ENOTSUP;
    r = &j->spare[d];
    now = mono_ns();
    for (;;) {
        bool got, fresh = false;
        size_t left = 0;

        /* a kept spare first (its blocks are written over), then an
         * empty one the pool thread made ahead */
        pthread_mutex_lock(&r->mu);
        got = spare_pop(r, now, num);
        if (!got && r->nfresh > 0) {
            *num = r->fresh[--r->nfresh];
            got = fresh = true;
            left = r->nfresh;
        }
        pthread_mutex_unlock(&r->mu);
        if (!got)
            break;
        if (fresh)
            pool_kick(j, left);
        if (spare_path(path, sizeof(path), s->drives[d].path, *num) < 0)
            continue;
        fd = spare_open(path, len);
        if (fd >= 0) {
            __atomic_add_fetch(&j->spare_stat[fresh ? 4 : 0], 1,
                               __ATOMIC_RELAXED);
            if (fresh)
                __atomic_store_n(&j->pool_want, true, __ATOMIC_RELAXED);
            return fd;
        }
    }
    /* none: the caller creates a file; the pool fills from now on */
    __atomic_store_n(&j->pool_want, true, __ATOMIC_RELAXED);
    return -ENOENT;
}

/* Contract in obj_i.h. */
int obj_spare_open(struct stor_store *s, size_t d, size_t len, uint64_t *num)
{
    struct obj_jnl *j = s->jnl;
    char path[PATH_MAX];
    int fd = obj_spare_have(s, d, len, num);

    if (fd != -ENOENT)
        return fd;
    /* none: a new file under the next spare name */
    *num = __atomic_fetch_add(&j->spare_next, 1, __ATOMIC_RELAXED);
    if (spare_path(path, sizeof(path), s->drives[d].path, *num) < 0)
        return -ENAMETOOLONG;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd >= 0 ? fd : -errno;
}

/* Makes one empty spare ahead on drive @d when its pool is short. True
 * when it made one. */
static bool pool_fill_one(struct stor_store *s, size_t d)
{
    struct obj_jnl *j = s->jnl;
    struct spare_ring *r = &j->spare[d];
    char path[PATH_MAX];
    bool need, made = false;
    uint64_t num;
    int fd;

    pthread_mutex_lock(&r->mu);
    need = r->fresh && r->nfresh < j->pool;
    pthread_mutex_unlock(&r->mu);
    if (!need || !obj_drive_online(s, d))
        return false;
    num = __atomic_fetch_add(&j->spare_next, 1, __ATOMIC_RELAXED);
    if (spare_path(path, sizeof(path), s->drives[d].path, num) < 0)
        return false;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return false; /* the commits' own creates will tell a fault */
    close(fd);
    pthread_mutex_lock(&r->mu);
    if (r->nfresh < j->pool) {
        r->fresh[r->nfresh++] = num;
        made = true;
    }
    pthread_mutex_unlock(&r->mu);
    if (!made)
        (void)unlink(path);
    else
        __atomic_add_fetch(&j->spare_stat[3], 1, __ATOMIC_RELAXED);
    return made;
}

/* The pool's filler: keeps up to j->pool empty spares per drive, so a
 * new name's commit opens one instead of creating its temp metas (on a
 * journal-less ext4 a create walks the recently freed inodes of its
 * group: FORMAT.md "What a PUT costs"). It runs under SCHED_IDLE, so it
 * takes only CPU nobody else wants, one file per drive per pass, and only
 * once a commit needed a file (pool_want): a store started and left idle
 * makes none. */
static void *pool_main(void *arg)
{
    struct stor_store *s = arg;
    struct obj_jnl *j = s->jnl;
    struct sched_param sp = {0};

    (void)pthread_setname_np(pthread_self(), "stor-spares");
    (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    pthread_mutex_lock(&j->tmu);
    while (!j->pstop) {
        bool made = false;

        pthread_mutex_unlock(&j->tmu);
        for (size_t d = 0;
             d < j->n && __atomic_load_n(&j->pool_want, __ATOMIC_RELAXED); d++)
            made |= pool_fill_one(s, d);
        pthread_mutex_lock(&j->tmu);
        if (!made && !j->pstop) {
            struct timespec ts;

            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += SPARE_POOL_NS;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            (void)pthread_cond_timedwait(&j->pcv, &j->tmu, &ts);
        }
    }
    pthread_mutex_unlock(&j->tmu);
    return NULL;
}

/* Contract in obj_i.h. */
void obj_spare_stats(struct stor_store *s, uint64_t out[5])
{
    for (int i = 0; i < 5; i++)
        out[i] = s->jnl
                     ? __atomic_load_n(&s->jnl->spare_stat[i], __ATOMIC_RELAXED)
                     : 0;
}

static void *jnl_main(void *arg)
{
    struct stor_store *s = arg;
    struct obj_jnl *j = s->jnl;

    (void)pthread_setname_np(pthread_self(), "stor-journal");
    pthread_mutex_lock(&j->tmu);
    while (!j->stop) {
        struct timespec ts;

        if (!j->kick) {
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            (void)pthread_cond_timedwait(&j->tcv, &j->tmu, &ts);
        }
        j->kick = false;
        if (!j->stop) {
            pthread_mutex_unlock(&j->tmu);
            spare_reap(s, false);
            pthread_mutex_lock(&j->tmu);
        }
        if (j->stop || !cp_due(j))
            continue;
        pthread_mutex_unlock(&j->tmu);
        grow_idle(s);
        checkpoint(s);
        pthread_mutex_lock(&j->tmu);
    }
    pthread_mutex_unlock(&j->tmu);
    return NULL;
}

/* Drive @d does not journal: its files closed. */
static void jnl_off(struct obj_jnl *j, size_t d)
{
    struct jnl_drive *jd = &j->d[d];

    if (jd->fd >= 0)
        close(jd->fd);
    if (jd->fd2 >= 0)
        close(jd->fd2);
    if (jd->gone >= 0)
        close(jd->gone);
    if (jd->gone2 >= 0)
        close(jd->gone2);
    jd->fd = jd->fd2 = jd->gone = jd->gone2 = -1;
    stor_gsync_file_destroy(jd->sync);
    stor_gsync_file_destroy(jd->sync2);
    jd->sync = jd->sync2 = NULL;
}

/* Makes host @d's second file, DRIVE/.ecfs.sys/journal.1, with the header
 * of generation @gen (no records), its entry durable. fd or -1. */
static int second_create(struct stor_store *s, size_t d, uint32_t gen)
{
    char path[PATH_MAX];
    int fd;

    snprintf(path, sizeof(path), "%s/" JNL_FILE2, s->drives[d].path);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/" STOR_SYS_DIR, s->drives[d].path);
    if (hdr_write(fd, gen, s->jnl->boot, 0) < 0 || ftruncate(fd, JNL_HDR) < 0 ||
        stor_fsync_dir(path) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Contract in obj_i.h. */
int obj_jnl_open(struct stor_store *s, bool use)
{
    struct obj_jnl *j = calloc(1, sizeof(*j));
    pthread_rwlockattr_t at;
    uint32_t gen = 0, *gens, *vers;
    bool *need, *valid, *zeroed, share;
    int ret = 0, *fds;
    size_t nf;
    long *done;

    if (j == NULL)
        return -ENOMEM;
    j->d = calloc(s->ndrives ? s->ndrives : 1, sizeof(*j->d));
    if (j->d == NULL) {
        free(j);
        return -ENOMEM;
    }
    j->n = s->ndrives;
    pthread_rwlockattr_init(&at);
    /* a checkpoint must not wait behind a stream of commits */
    pthread_rwlockattr_setkind_np(&at,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&j->cp, &at);
    pthread_rwlockattr_destroy(&at);
    pthread_mutex_init(&j->tmu, NULL);
    pthread_cond_init(&j->tcv, NULL);
    jnl_boot_id(j->boot);
    j->cp_ns = (int64_t)JNL_CP_SECS * 1000000000;
    {
        /* tests that simulate a power cut keep the records that long */
        const char *v = getenv("STORAGED_TEST_JOURNAL_CP_SECS");
        char *end;
        long secs = v ? strtol(v, &end, 10) : 0;

        if (v && *end == '\0' && secs > 0 && secs <= 86400)
            j->cp_ns = (int64_t)secs * 1000000000;
        j->early = v == NULL;
    }
    j->spare = calloc(j->n ? j->n : 1, sizeof(*j->spare));
    j->pool = SPARE_POOL;
    {
        /* STORAGED_SPARE_POOL=N: empty spares made ahead per drive (0:
         * none, as before session 12; for benchmarks and tests) */
        const char *v = getenv("STORAGED_SPARE_POOL");
        char *end;
        long n = v ? strtol(v, &end, 10) : -1;

        if (v && *end == '\0' && n >= 0 && n <= SPARE_POOL_MAX)
            j->pool = (size_t)n;
    }
    pthread_cond_init(&j->pcv, NULL);
    for (size_t d = 0; j->spare && d < j->n; d++) {
        pthread_mutex_init(&j->spare[d].mu, NULL);
        if (j->pool)
            j->spare[d].fresh = calloc(j->pool, sizeof(uint64_t));
    }
    s->jnl = j;
    nf = 2 * j->n; /* file 2d: drive d's journal, 2d + 1: its journal.1 */
    need = calloc(nf ? nf : 1, sizeof(*need));
    valid = calloc(nf ? nf : 1, sizeof(*valid));
    zeroed = calloc(nf ? nf : 1, sizeof(*zeroed));
    gens = calloc(nf ? nf : 1, sizeof(*gens));
    vers = calloc(nf ? nf : 1, sizeof(*vers));
    fds = calloc(nf ? nf : 1, sizeof(*fds));
    done = calloc(j->n ? j->n : 1, sizeof(*done));
    if (need == NULL || valid == NULL || zeroed == NULL || gens == NULL ||
        vers == NULL || fds == NULL || done == NULL)
        ret = -ENOMEM;
    for (size_t i = 0; fds && i < nf; i++)
        fds[i] = -1;
    for (size_t d = 0; d < j->n; d++) {
        j->d[d].fd = j->d[d].fd2 = j->d[d].gone = j->d[d].gone2 = -1;
        j->d[d].host = -1;
        pthread_mutex_init(&j->d[d].mu, NULL);
        if (ret == -ENOMEM || !obj_drive_online(s, d))
            continue; /* recovered when it is given back at a start */
        for (size_t f = 0; f < 2; f++) {
            size_t i = 2 * d + f;
            int r = drive_recover(s, d, f ? JNL_FILE2 : JNL_FILE, &fds[i],
                                  &gens[i], &vers[i], j->boot, &need[i],
                                  &valid[i], &zeroed[i]);

            if (r == -EPROTO) {
                ret = r;
                continue;
            }
            if (r < 0) {
                cm_log(CM_LOG_ERROR, -r, "journal of %s", s->drives[d].path);
                obj_drive_fail(s, d, -r);
                for (size_t g = 2 * d; g < 2 * d + 2; g++) {
                    if (fds[g] >= 0)
                        close(fds[g]);
                    fds[g] = -1;
                    need[g] = valid[g] = zeroed[g] = false;
                }
                break;
            }
            if (valid[i] && gens[i] >= gen)
                gen = gens[i];
        }
        /* of a host's two files, the one of the higher generation holds
         * the records a replay needs: the checkpoint that started it made
         * the other's durable (its syncfs) */
        if (valid[2 * d] && valid[2 * d + 1])
            need[gens[2 * d] >= gens[2 * d + 1] ? 2 * d + 1 : 2 * d] = false;
    }
    if (ret == 0)
        ret = replay_all(s, fds, gens, vers, need, done);
    for (size_t d = 0; ret == 0 && d < j->n; d++) {
        if (done[d] == 0 || fds[2 * d] < 0)
            continue;
        /* what it wrote, durable before the journal is reset */
        if (syncfs(fds[2 * d]) < 0)
            ret = -errno;
        cm_log(CM_LOG_WARN, 0,
               "journal of %s: %ld meta(s) replayed after a restart of the "
               "machine",
               s->drives[d].path, done[d]);
        __atomic_add_fetch(&s->jnl_replayed, (uint64_t)done[d],
                           __ATOMIC_RELAXED);
    }
    free(need);
    free(valid);
    free(gens);
    free(vers);
    free(done);
    if (ret < 0) {
        for (size_t i = 0; fds && i < nf; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        free(fds);
        free(zeroed);
        return ret;
    }
    /* every journal starts a new, higher generation: a record of an
     * older one is never taken for one of this run; a second file gets
     * the one below it (no records) */
    j->gen = gen + 2;
    for (size_t d = 0; d < j->n; d++) {
        struct stat st;
        int fd = fds[2 * d], fd2 = fds[2 * d + 1];
        bool z1 = zeroed[2 * d], z2 = zeroed[2 * d + 1];
        /* a file a clean stop left zeroed keeps its length (session 16):
         * its blocks are allocated and written, so the first commits'
         * fdatasyncs write no metadata either; any other is cut back to
         * its header (its records are durable now, and no longer read).
         * A run that appends no record (offline, fs mode, no fsync) keeps
         * the flag for the next */
        bool on = use && !s->offline && s->fsync && !stor_gsync_is_fs(s->gs, d);
        uint8_t f1 = !on && z1 ? JNL_HDR_ZEROED : 0;
        uint8_t f2 = !on && z2 ? JNL_HDR_ZEROED : 0;

        if (fd < 0)
            continue;
        if (hdr_write(fd, j->gen, j->boot, f1) < 0 ||
            (!z1 && ftruncate(fd, JNL_HDR) < 0) || fstat(fd, &st) < 0 ||
            (fd2 >= 0 && (hdr_write(fd2, j->gen - 1, j->boot, f2) < 0 ||
                          (!z2 && ftruncate(fd2, JNL_HDR) < 0)))) {
            cm_log(CM_LOG_ERROR, errno, "journal of %s", s->drives[d].path);
            obj_drive_fail(s, d, errno ? errno : EIO);
            close(fd);
            if (fd2 >= 0)
                close(fd2);
            continue;
        }
        if (st.st_nlink == 1 && st.st_size == JNL_HDR && !z1) {
            char sys[PATH_MAX];

            /* a new file: its entry durable once */
            snprintf(sys, sizeof(sys), "%s/" STOR_SYS_DIR, s->drives[d].path);
            (void)stor_fsync_dir(sys);
        }
        j->d[d].fd = fd;
        j->d[d].fd2 = fd2;
        j->d[d].tail = JNL_HDR;
        j->d[d].room = (uint64_t)st.st_size;
        j->d[d].dev = st.st_dev;
        /* journal only where the drive would fsync file by file; the
         * drives given whole filesystems have syncfs rounds (gsync.h) */
        if (!on || (j->d[d].sync = stor_gsync_file_create()) == NULL)
            jnl_off(j, d);
    }
    free(fds);
    free(zeroed);
    /* one journal per filesystem: the drives of one filesystem (file mode:
     * directories of one disk) append their records, each naming its
     * drive, to the journal of the first of them, so a commit's barrier
     * is one fdatasync per filesystem instead of one per drive, each with
     * its own cache flush (FORMAT.md "The meta journal").
     * STORAGED_JOURNAL_SHARED=0: one per drive, as format version 1 did
     * (benchmarks, tests) */
    {
        const char *v = getenv("STORAGED_JOURNAL_SHARED");

        share = v == NULL || strcmp(v, "0") != 0;
    }
    for (size_t d = 0; d < j->n; d++) {
        struct jnl_drive *jd = &j->d[d];
        size_t h;

        if (jd->fd < 0)
            continue;
        for (h = 0; share && h < d; h++)
            if (j->d[h].host == (int)h && j->d[h].dev == jd->dev)
                break;
        if (share && h < d) {
            jd->host = (int)h;
            j->d[h].cp_bytes += JNL_CP_BYTES;
            /* its journal stays empty, of this generation; a length kept
             * from a run where it was a host is given back */
            (void)ftruncate(jd->fd, JNL_HDR);
            if (jd->fd2 >= 0)
                (void)ftruncate(jd->fd2, JNL_HDR);
            jnl_off(j, d);
            continue;
        }
        /* a host: it needs its second file (then the next drive of its
         * filesystem becomes the host) */
        if (jd->fd2 < 0)
            jd->fd2 = second_create(s, d, j->gen - 1);
        if (jd->fd2 < 0 || (jd->sync2 = stor_gsync_file_create()) == NULL) {
            cm_log(CM_LOG_ERROR, errno,
                   "journal of %s: no second file; the drive commits "
                   "without the journal",
                   s->drives[d].path);
            jnl_off(j, d);
            continue;
        }
        jd->host = (int)d;
        jd->cp_bytes = JNL_CP_BYTES;
    }
    if (!s->offline && pthread_create(&j->thr, NULL, jnl_main, s) == 0)
        j->thr_started = true;
    if (!s->offline && j->spare && j->pool &&
        pthread_create(&j->pthr, NULL, pool_main, s) == 0)
        j->pthr_started = true;
    return 0;
}

/* Contract in obj_i.h. */
void obj_jnl_close(struct stor_store *s)
{
    struct obj_jnl *j = s->jnl;
    bool empty;

    if (j == NULL)
        return;
    if (j->pthr_started) {
        pthread_mutex_lock(&j->tmu);
        j->pstop = true;
        pthread_cond_signal(&j->pcv);
        pthread_mutex_unlock(&j->tmu);
        pthread_join(j->pthr, NULL);
    }
    if (j->thr_started) {
        pthread_mutex_lock(&j->tmu);
        j->stop = true;
        pthread_cond_signal(&j->tcv);
        pthread_mutex_unlock(&j->tmu);
        pthread_join(j->thr, NULL);
    }
    spare_reap(s, true); /* a clean stop leaves no spare */
    /* a clean stop leaves every journal empty: the checkpoint made its
     * records durable and zeroed the old file's; the active file has none
     * since, and was zeroed before it became active. Both keep their
     * length, their headers flagged JNL_HDR_ZEROED, so the next start
     * writes its first generations over allocated blocks too (session 16:
     * cut back to the header, every commit's fdatasync of the first
     * seconds after a start appended, 2.3 against ~1 ms per PUT). A
     * zeroing that failed cuts both back to their header, as before. */
    empty = checkpoint(s);
    for (size_t d = 0; d < j->n; d++) {
        struct jnl_drive *jd = &j->d[d];

        if (jd->fd >= 0 && empty &&
            (jd->dirty || jd->fd2 < 0 ||
             hdr_write(jd->fd, j->gen, j->boot, JNL_HDR_ZEROED) < 0 ||
             hdr_write(jd->fd2, j->gen - 1, j->boot, JNL_HDR_ZEROED) < 0) &&
            (ftruncate(jd->fd, JNL_HDR) < 0 ||
             (jd->fd2 >= 0 && ftruncate(jd->fd2, JNL_HDR) < 0)))
            cm_log(CM_LOG_WARN, errno, "journal of %s: cannot cut it back",
                   s->drives[d].path);
        jnl_off(j, d);
        pthread_mutex_destroy(&j->d[d].mu);
    }
    free(j->zbuf);
    for (size_t d = 0; j->spare && d < j->n; d++) {
        pthread_mutex_destroy(&j->spare[d].mu);
        free(j->spare[d].fresh);
    }
    free(j->spare);
    pthread_cond_destroy(&j->pcv);
    pthread_rwlock_destroy(&j->cp);
    pthread_mutex_destroy(&j->tmu);
    pthread_cond_destroy(&j->tcv);
    free(j->d);
    free(j);
    s->jnl = NULL;
}

/* Contract in obj_i.h. */
bool obj_jnl_use(struct stor_store *s, size_t d)
{
    int h;

    if (s->jnl == NULL || d >= s->jnl->n)
        return false;
    h = s->jnl->d[d].host;
    /* a failed host (its journal, or its drive) ends its filesystem's
     * journaling: the drives there commit without it from then on */
    return h >= 0 && __atomic_load_n(&s->jnl->d[h].fd, __ATOMIC_RELAXED) >= 0 &&
           obj_drive_online(s, (size_t)h);
}

/* Contract in obj_i.h. */
bool obj_jnl_hosted(struct stor_store *s, size_t d)
{
    /* host is set at open and never changes: a host that failed since
     * still holds the records of this run's commits until a checkpoint */
    return s->jnl != NULL && d < s->jnl->n && s->jnl->d[d].host >= 0;
}

/* Contract in obj_i.h. */
void obj_jnl_enter(struct stor_store *s)
{
    pthread_rwlock_rdlock(&s->jnl->cp);
}

/* Contract in obj_i.h. */
void obj_jnl_leave(struct stor_store *s)
{
    struct obj_jnl *j = s->jnl;

    pthread_rwlock_unlock(&j->cp);
    if (cp_due(j)) {
        pthread_mutex_lock(&j->tmu);
        j->kick = true;
        pthread_cond_signal(&j->tcv);
        pthread_mutex_unlock(&j->tmu);
    }
}

/* The bit of @id in the maybe map. */
static unsigned id_bit(const uint8_t id[16])
{
    return (unsigned)id[0] | (unsigned)id[1] << 8 |
           (unsigned)(id[2] & 15) << 16;
}

/* Contract in obj_i.h. */
void obj_jnl_note(struct stor_store *s, const uint8_t id[16])
{
    unsigned b = id_bit(id);

    __atomic_or_fetch(&s->jnl->maybe[b >> 3], (uint8_t)(1u << (b & 7)),
                      __ATOMIC_RELAXED);
}

/* Contract in obj_i.h. */
bool obj_jnl_maybe(struct stor_store *s, const uint8_t id[16])
{
    unsigned b = id_bit(id);

    if (s->jnl == NULL)
        return false;
    /* acquire: pairs with checkpoint()'s release store that clears it */
    return (__atomic_load_n(&s->jnl->maybe[b >> 3], __ATOMIC_ACQUIRE) >>
            (b & 7)) &
           1;
}

/* Contract in obj_i.h. */
int obj_jnl_add(struct stor_store *s, size_t d, const char *bucket,
                const uint8_t id[16], uint64_t version, int64_t since,
                bool kept, const struct cm_buf *meta, struct cm_buf *rec,
                struct stor_io *io)
{
    struct jnl_drive *jd = &s->jnl->d[s->jnl->d[d].host];
    size_t blen = strlen(bucket), len = JNL_REC_FIX + blen + meta->len + 8;
    size_t pad = (len + JNL_ALIGN - 1) / JNL_ALIGN * JNL_ALIGN;
    uint8_t *p;
    int64_t zero = 0;

    cm_buf_init(rec, pad);
    if (blen == 0 || blen >= 64 || cm_buf_reserve(rec, pad) < 0)
        return -ENOMEM;
    p = (uint8_t *)rec->data;
    memset(p, 0, pad);
    put32(p, JNL_REC_MAG);
    p[4] = JNL_VERSION;
    p[6] = kept ? JNL_REC_KEPT : JNL_REC_META;
    put32(p + 8, (uint32_t)len);
    put32(p + 12, s->jnl->gen); /* stable: the caller holds cp */
    put64(p + 16, version);
    memcpy(p + 24, id, 16);
    put32(p + 40, (uint32_t)blen);
    put32(p + 44, (uint32_t)meta->len);
    put64(p + 48, (uint64_t)since);
    put32(p + 56, (uint32_t)d); /* whose record: the journal is shared */
    memcpy(p + JNL_REC_FIX, bucket, blen);
    memcpy(p + JNL_REC_FIX + blen, meta->data, meta->len);
    put64(p + len - 8, stor_crc64(0, p, len - 8));
    rec->len = pad;
    pthread_mutex_lock(&jd->mu);
    *io = (struct stor_io){
        .fd = jd->fd, .op = 'w', .buf = p, .len = pad, .off = jd->tail};
    __atomic_store_n(&jd->tail, jd->tail + pad, __ATOMIC_RELAXED);
    if (jd->tail > jd->room + JNL_ZCHUNK)
        __atomic_store_n(&jd->grow, true, __ATOMIC_RELAXED); /* cp_due */
    pthread_mutex_unlock(&jd->mu);
    (void)__atomic_compare_exchange_n(&s->jnl->first_ns, &zero, mono_ns(),
                                      false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->jnl_records, 1, __ATOMIC_RELAXED);
    return 0;
}

/* Contract in obj_i.h. */
void obj_jnl_item(struct stor_store *s, size_t d, struct stor_sync_item *it)
{
    struct jnl_drive *h = &s->jnl->d[s->jnl->d[d].host];

    /* the items of one barrier naming one shared journal share one
     * fdatasync of it (stor_gsync_barrier); fd and sync read together
     * (a checkpoint swaps them under mu: the vdel queue's barrier runs
     * outside obj_jnl_enter). A journal stopped by a failed checkpoint
     * (fd -1) gives the file it was writing, still open (gone): the vdel
     * items' records were appended under cp before that checkpoint took
     * it, and its syncfs, which succeeded before the header write failed,
     * made them durable; an fdatasync of that file changes nothing, where
     * fd -1 failed every drive it served (EBADF) and left the DELETEs'
     * metas in place. Commits read fd under cp and never see it change. */
    pthread_mutex_lock(&h->mu);
    *it = (struct stor_sync_item){.drive = d,
                                  .fd = h->fd >= 0 ? h->fd : h->gone,
                                  .shared = h->sync,
                                  .datasync = true};
    pthread_mutex_unlock(&h->mu);
}

/* storaged/store/obj_idx.c - the persistent object index over LMDB.
 *
 * DESIGN: two tables in one environment. "obj" maps bucket NUL key-prefix
 * (the first OBJ_IDX_KEYPFX bytes of the key: LMDB keys are at most 511
 * bytes, S3 keys 1024) to a group of records sorted by the full key; keys
 * that share those bytes share a group, so a cursor walk still returns
 * exact byte order (cutting keys to a prefix keeps their order). Nearly
 * every group holds one record. "sys" holds the state record and one
 * record per bucket (creation time, object count). The environment runs
 * with MDB_NOSYNC: a commit is written to the kernel (it survives kill -9)
 * and flushed at a clean close; FORMAT.md says why that is enough. Read
 * transactions come from a fixed pool made at open, so a lookup takes no
 * lock and allocates nothing in LMDB. */
#include "storaged/store/obj_idx.h"

#include "storaged/store/obj_i.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define IDX_READERS    64                    /* pre-made read transactions */
#define IDX_MAPSIZE    (1ULL << 40)          /* address space, not disk */
#define IDX_MAPMIN     (1ULL << 30)          /* the least we settle for */
#define IDX_KEYMAX     (64 + OBJ_IDX_KEYPFX) /* bucket NUL prefix */
#define IDX_SYS_STATE  "s"
#define IDX_SYS_BUCKET "b/"
#define IDX_SYS_AWAY   "a" /* drives away at the rebuild */
#define IDX_BUCKET_REC                                                         \
    32 /* u8 version, 7 pad, i64 created, u64 count, u64 sum */
#define IDX_BUCKET_VER 2  /* 1 (format 1) had no content sum */
#define IDX_STATE_REC  56 /* u32 format, u32 pad, 32 hex, u64 gen, u64 clock */
#define IDX_BODY_HDR   24 /* u8 version, 7 pad, u64 object version, u64 CRC */
#define IDX_BODY_VER   1
#define IDX_BODY_SEED  0x626f647963726321ULL /* "bodycrc!" */
#define IDX_RES_WIN    (64 << 20)  /* bytes per mincore: 16 KiB of vector */
#define IDX_REWARM_GAP 60          /* s between two passes that re-warm */
#define IDX_RA_WIN     (128 << 10) /* bytes per WILLNEED (willneed) */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; glibc 2.35's headers */
#endif

struct idx_rtxn {
    MDB_txn *t; /* reset while idle; owned */
    int busy;   /* atomic: claimed by a reader */
};

struct obj_idx {
    MDB_env *env;
    MDB_dbi obj, sys, pend, body;
    char *data_path; /* owned */
    struct idx_rtxn pool[IDX_READERS];
    unsigned hint;     /* atomic: where the next claim starts */
    uint64_t body_bad; /* atomic: bodies that failed their CRC */
    bool resident;     /* atomic: the whole file was in the page cache */
    uint64_t cold_nb;  /* atomic: loop-side lookups turned away for it */
    unsigned res_gen;  /* atomic: bumped whenever the hint is set whole */
    uint64_t res_lost; /* atomic: resident -> not, found by a step */
    uint64_t rewarmed; /* atomic: windows a step asked back in (WILLNEED) */
    int64_t rewarm_ns; /* when a pass last asked (CLOCK_MONOTONIC; stepper) */
};

struct obj_idx_cur {
    struct obj_idx *x;
    MDB_txn *t;
    struct idx_rtxn *slot; /* NULL: t is a private transaction */
    MDB_cursor *c;
    char pfx[64]; /* bucket NUL */
    size_t pfx_len;
    MDB_val k, v; /* the current group */
    size_t off;   /* next record in v */
    bool valid;
};

/* LMDB result -> 0 / -errno. */
static int mdb_err(int rc)
{
    switch (rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_NOTFOUND:
        return -ENOENT;
    case MDB_MAP_FULL:
    case MDB_TXN_FULL:
        return -ENOSPC;
    case MDB_INVALID:
    case MDB_CORRUPTED:
    case MDB_VERSION_MISMATCH:
    case MDB_PAGE_NOTFOUND:
    case MDB_BAD_TXN:
        return -EBADMSG;
    case MDB_READERS_FULL:
        return -EAGAIN;
    default:
        return rc > 0 ? -rc : -EIO;
    }
}

/* ---- little-endian fields ---- */

static void le_put(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_get(const uint8_t *p, int n)
{
    uint64_t v = 0;

    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Appends an @n-byte little-endian integer. */
static int put_int(struct cm_buf *b, uint64_t v, int n)
{
    uint8_t t[8];

    le_put(t, v, n);
    return cm_buf_append(b, t, (size_t)n);
}

/* Bounds-checked reader of one record. */
struct rd {
    const uint8_t *p;
    size_t n, off;
    bool bad;
};

static uint64_t rd_int(struct rd *r, int n)
{
    uint64_t v;

    if (r->bad || r->n - r->off < (size_t)n) {
        r->bad = true;
        return 0;
    }
    v = le_get(r->p + r->off, n);
    r->off += (size_t)n;
    return v;
}

/* Borrows @n bytes; NULL (and bad) past the end. */
static const uint8_t *rd_bytes(struct rd *r, size_t n)
{
    const uint8_t *p;

    if (r->bad || r->n - r->off < n) {
        r->bad = true;
        return NULL;
    }
    p = r->p + r->off;
    r->off += n;
    return p;
}

/* ---- the record ----
 * u8 rec version, u8 type, u16 flags (1 inline, 2 multipart), u32 length,
 * u16 key length, key, 16 id, u64 version, i64 mtime, u64 size, u8 k,
 * u8 m, u32 block, u8 etag length, etag, u16 headers (u16+name, u32+value),
 * u32 parts (u32 number, u64 size, u64 data id, u8+etag), u16 extensions
 * (u16 tag, u32 length, bytes): room for what later formats add. */

/* Contract in obj_idx.h. */
int obj_idx_rec_encode(const struct obj_ent *e, struct cm_buf *out)
{
    size_t start = out->len, el = strnlen(e->etag, sizeof(e->etag));
    uint16_t flags = (uint16_t)((e->inl ? 1 : 0) | (e->multipart ? 2 : 0) |
                                (e->ext ? 4 : 0));
    int ret = 0;

    if (e->key_len > 0xffff || e->nhdrs > 0xffff)
        return -E2BIG;
    ret |= put_int(out, OBJ_IDX_REC_VER, 1);
    ret |= put_int(out, OBJ_IDX_CURRENT, 1);
    ret |= put_int(out, flags, 2);
    ret |= put_int(out, 0, 4); /* length, filled below */
    ret |= put_int(out, e->key_len, 2);
    ret |= cm_buf_append(out, e->key, e->key_len);
    ret |= cm_buf_append(out, e->id, 16);
    ret |= put_int(out, e->version, 8);
    ret |= put_int(out, (uint64_t)e->mtime_ns, 8);
    ret |= put_int(out, e->size, 8);
    ret |= put_int(out, (uint64_t)e->k, 1);
    ret |= put_int(out, (uint64_t)e->m, 1);
    ret |= put_int(out, e->block, 4);
    ret |= put_int(out, el, 1);
    ret |= cm_buf_append(out, e->etag, el);
    ret |= put_int(out, e->nhdrs, 2);
    for (size_t i = 0; i < e->nhdrs && ret == 0; i++) {
        size_t nl = strlen(e->hdrs[i].name), vl = strlen(e->hdrs[i].value);

        if (nl > 0xffff)
            return -E2BIG;
        ret |= put_int(out, nl, 2);
        ret |= cm_buf_append(out, e->hdrs[i].name, nl);
        ret |= put_int(out, vl, 4);
        ret |= cm_buf_append(out, e->hdrs[i].value, vl);
    }
    ret |= put_int(out, e->nparts, 4);
    for (size_t i = 0; i < e->nparts && ret == 0; i++) {
        const struct stor_meta_part *p = &e->parts[i];
        size_t pl = strnlen(p->etag, sizeof(p->etag));

        ret |= put_int(out, (uint64_t)p->number, 4);
        ret |= put_int(out, p->size, 8);
        ret |= put_int(out, p->dataid, 8);
        ret |= put_int(out, pl, 1);
        ret |= cm_buf_append(out, p->etag, pl);
    }
    ret |= put_int(out, (e->ext && e->xref ? 1 : 0) + (e->at_bucket ? 1 : 0),
                   2);  /* extensions */
    if (e->at_bucket) { /* tag 3: a version kept at its base's files */
        size_t bl = strlen(e->at_bucket);

        if (bl > 0xff || e->at_key_len > 0xffff)
            return -E2BIG;
        ret |= put_int(out, 3, 2);
        ret |= put_int(out, 1 + bl + 2 + e->at_key_len, 4);
        ret |= put_int(out, bl, 1);
        ret |= cm_buf_append(out, e->at_bucket, bl);
        ret |= put_int(out, e->at_key_len, 2);
        ret |= cm_buf_append(out, e->at_key, e->at_key_len);
    }
    if (e->ext && e->xref) { /* tag 1: the shards' extent records */
        int n = e->k + e->m;

        ret |= put_int(out, 1, 2);
        ret |= put_int(out, 1 + (uint64_t)n * 12, 4);
        ret |= put_int(out, (uint64_t)n, 1);
        for (int j = 0; j < n; j++) {
            ret |= put_int(out, e->xref[j].file, 4);
            ret |= put_int(out, e->xref[j].off, 8);
        }
    }
    if (ret != 0 || out->data == NULL)
        return -ENOMEM; /* a failed append emptied the buffer */
    le_put((uint8_t *)out->data + start + 4, out->len - start, 4);
    return 0;
}

/* Contract in obj_idx.h. */
ssize_t obj_idx_rec_view(const void *p, size_t n, struct obj_idx_view *v)
{
    struct rd r = {p, n, 0, false};
    uint64_t len;

    memset(v, 0, sizeof(*v));
    if (rd_int(&r, 1) != OBJ_IDX_REC_VER)
        return -EBADMSG;
    (void)rd_int(&r, 1); /* type */
    (void)rd_int(&r, 2); /* flags */
    len = rd_int(&r, 4);
    if (r.bad || len < 8 || len > n)
        return -EBADMSG;
    r.n = len;
    v->key_len = rd_int(&r, 2);
    v->key = (const char *)rd_bytes(&r, v->key_len);
    (void)rd_bytes(&r, 16);
    v->version = rd_int(&r, 8);
    v->mtime_ns = (int64_t)rd_int(&r, 8);
    v->size = rd_int(&r, 8);
    (void)rd_bytes(&r, 6); /* k, m, block */
    v->etag_len = rd_int(&r, 1);
    v->etag = (const char *)rd_bytes(&r, v->etag_len);
    if (r.bad || v->etag_len >= STOR_ETAG_MAX)
        return -EBADMSG;
    v->rec = p;
    v->rec_len = len;
    return (ssize_t)len;
}

/* Copies @n bytes into a new NUL-terminated string. */
static char *dup0(const uint8_t *p, size_t n)
{
    char *c = malloc(n + 1);

    if (c) {
        if (n)
            memcpy(c, p, n);
        c[n] = 0;
    }
    return c;
}

/* Contract in obj_idx.h. */
int obj_idx_rec_decode(const void *p, size_t n, struct obj_ent **out)
{
    struct obj_idx_view v;
    struct rd r;
    struct obj_ent *e;
    const uint8_t *b;
    uint16_t flags;
    ssize_t len = obj_idx_rec_view(p, n, &v);

    *out = NULL;
    if (len < 0)
        return (int)len;
    r = (struct rd){p, (size_t)len, 0, false};
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return -ENOMEM;
    (void)rd_int(&r, 2);
    flags = (uint16_t)rd_int(&r, 2);
    (void)rd_int(&r, 4);
    e->key_len = rd_int(&r, 2);
    b = rd_bytes(&r, e->key_len);
    e->key = b ? dup0(b, e->key_len) : NULL;
    if (e->key == NULL)
        goto fail;
    b = rd_bytes(&r, 16);
    if (b)
        memcpy(e->id, b, 16);
    e->version = rd_int(&r, 8);
    e->mtime_ns = (int64_t)rd_int(&r, 8);
    e->size = rd_int(&r, 8);
    e->k = (int)rd_int(&r, 1);
    e->m = (int)rd_int(&r, 1);
    e->block = (uint32_t)rd_int(&r, 4);
    {
        size_t el = rd_int(&r, 1);

        b = rd_bytes(&r, el);
        if (b == NULL || el >= sizeof(e->etag))
            goto bad;
        memcpy(e->etag, b, el);
    }
    e->inl = flags & 1;
    e->multipart = (flags & 2) != 0;
    e->ext = e->inl && (flags & 4) != 0;
    e->nhdrs = rd_int(&r, 2);
    if (e->nhdrs) {
        e->hdrs = calloc(e->nhdrs, sizeof(*e->hdrs));
        if (e->hdrs == NULL)
            goto nomem;
    }
    for (size_t i = 0; i < e->nhdrs; i++) {
        size_t l = rd_int(&r, 2);

        b = rd_bytes(&r, l);
        if (b == NULL)
            goto bad;
        e->hdrs[i].name = dup0(b, l);
        l = rd_int(&r, 4);
        b = rd_bytes(&r, l);
        if (b == NULL)
            goto bad;
        e->hdrs[i].value = dup0(b, l);
        if (e->hdrs[i].name == NULL || e->hdrs[i].value == NULL)
            goto nomem;
    }
    e->nparts = rd_int(&r, 4);
    if (r.bad || e->nparts > STOR_MAX_PARTS)
        goto bad;
    if (e->nparts) {
        e->parts = calloc(e->nparts, sizeof(*e->parts));
        if (e->parts == NULL)
            goto nomem;
    }
    for (size_t i = 0; i < e->nparts; i++) {
        struct stor_meta_part *pt = &e->parts[i];
        size_t el;

        pt->number = (int)rd_int(&r, 4);
        pt->size = rd_int(&r, 8);
        pt->dataid = rd_int(&r, 8);
        el = rd_int(&r, 1);
        b = rd_bytes(&r, el);
        if (b == NULL || el >= sizeof(pt->etag))
            goto bad;
        memcpy(pt->etag, b, el);
    }
    {
        size_t next = rd_int(&r, 2);

        for (size_t i = 0; i < next; i++) {
            uint64_t tag = rd_int(&r, 2);
            size_t tl = rd_int(&r, 4);

            b = rd_bytes(&r, tl);
            if (b == NULL)
                goto bad;
            if (tag == 1 && e->ext && e->xref == NULL) {
                /* extent refs: u8 n (= k + m), n x (u32 file, u64 offset) */
                size_t nr = tl ? b[0] : 0;

                if (tl != 1 + nr * 12 || nr != (size_t)(e->k + e->m) ||
                    nr > OBJ_MAX_SHARDS)
                    goto bad;
                e->xref = calloc(nr, sizeof(*e->xref));
                if (e->xref == NULL)
                    goto nomem;
                for (size_t j = 0; j < nr; j++) {
                    e->xref[j].file = (uint32_t)le_get(b + 1 + j * 12, 4);
                    e->xref[j].off = le_get(b + 5 + j * 12, 8);
                }
            } else if (tag == 3 && e->at_bucket == NULL) {
                /* at base: u8 + bucket, u16 + key */
                size_t bl = tl ? b[0] : 0, kl;

                if (tl < 1 + bl + 2 || bl == 0)
                    goto bad;
                kl = (size_t)le_get(b + 1 + bl, 2);
                if (tl != 1 + bl + 2 + kl || kl == 0)
                    goto bad;
                e->at_bucket = dup0(b + 1, bl);
                e->at_key = dup0(b + 3 + bl, kl);
                e->at_key_len = kl;
                if (e->at_bucket == NULL || e->at_key == NULL)
                    goto nomem;
            } /* others: unknown, skipped */
        }
    }
    if (r.bad)
        goto bad;
    *out = e;
    return 0;
bad:
    obj_ent_free(e);
    return -EBADMSG;
nomem:
    obj_ent_free(e);
    return -ENOMEM;
fail:
    obj_ent_free(e);
    return r.bad ? -EBADMSG : -ENOMEM;
}

/* ---- environment ---- */

/* Contract in obj_idx.h. */
int obj_idx_open(const char *dir, bool create, struct obj_idx **out)
{
    struct obj_idx *x;
    MDB_txn *t = NULL;
    char path[PATH_MAX];
    struct stat st;
    int rc, dead = 0;

    *out = NULL;
    if (snprintf(path, sizeof(path), "%s/data.mdb", dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    if (!create && stat(path, &st) < 0)
        return -errno;
    if (create && mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    x = calloc(1, sizeof(*x));
    if (x == NULL)
        return -ENOMEM;
    x->data_path = strdup(path);
    if (x->data_path == NULL) {
        free(x);
        return -ENOMEM;
    }
    /* the map is address space, not disk: ask for 1 TiB, and less where
     * the address space is short (sanitizers, a low RLIMIT_AS: ENOMEM;
     * valgrind refuses a map over ~16 GiB with EINVAL) */
    for (uint64_t map = IDX_MAPSIZE;; map /= 4) {
        rc = mdb_env_create(&x->env);
        if (rc == 0)
            rc = mdb_env_set_maxdbs(x->env, 8);
        if (rc == 0)
            rc = mdb_env_set_mapsize(x->env, (size_t)map);
        if (rc == 0)
            rc = mdb_env_set_maxreaders(x->env, 4 * IDX_READERS);
        if (rc == 0)
            rc = mdb_env_open(x->env, dir,
                              MDB_NOTLS | MDB_NOSYNC | MDB_NORDAHEAD, 0644);
        if ((rc != ENOMEM && rc != EINVAL) || map <= IDX_MAPMIN)
            break;
        mdb_env_close(x->env);
        x->env = NULL;
    }
    if (rc != 0)
        goto fail;
    if (mdb_env_get_maxkeysize(x->env) < IDX_KEYMAX) {
        rc = MDB_INCOMPATIBLE;
        goto fail;
    }
    (void)mdb_reader_check(x->env, &dead); /* slots of a killed process */
    rc = mdb_txn_begin(x->env, NULL, 0, &t);
    if (rc == 0)
        rc = mdb_dbi_open(t, "obj", MDB_CREATE, &x->obj);
    if (rc == 0)
        rc = mdb_dbi_open(t, "sys", MDB_CREATE, &x->sys);
    if (rc == 0)
        rc = mdb_dbi_open(t, "pend", MDB_CREATE, &x->pend);
    if (rc == 0) /* an index made before issue 12's bodies gets it here */
        rc = mdb_dbi_open(t, "body", MDB_CREATE, &x->body);
    if (rc == 0) {
        rc = mdb_txn_commit(t);
        t = NULL;
    }
    for (int i = 0; rc == 0 && i < IDX_READERS; i++) {
        rc = mdb_txn_begin(x->env, NULL, MDB_RDONLY, &x->pool[i].t);
        if (rc == 0)
            mdb_txn_reset(x->pool[i].t);
        else
            x->pool[i].t = NULL;
    }
    if (rc != 0)
        goto fail;
    (void)obj_idx_resident_check(x);
    *out = x;
    return 0;
fail:
    if (t)
        mdb_txn_abort(t);
    obj_idx_close(x, false);
    return rc == MDB_INCOMPATIBLE ? -EBADMSG : mdb_err(rc);
}

/* Asks the kernel to read [@off, @off + @len) of @fd into the page cache
 * (not waited for). 0 or an errno. DESIGN: one POSIX_FADV_WILLNEED reads
 * at most the device's read-ahead window (max(read_ahead_kb, the largest
 * request): 8 MiB here) and drops the rest silently, so a 4 GiB index
 * asked in one call came in 8 MiB; asked window by window, all of it
 * comes (in 4 KiB folios: a large folio would make each 4 KiB page that
 * LMDB rewrites dirty the whole folio). */
static int willneed(int fd, off_t off, off_t len)
{
    for (off_t at = off; at < off + len; at += IDX_RA_WIN) {
        int rc = posix_fadvise(fd, at, CM_MIN(IDX_RA_WIN, off + len - at),
                               POSIX_FADV_WILLNEED);

        if (rc != 0)
            return rc;
    }
    return 0;
}

/* LMDB's map of the data file @st, from /proc/self/maps (LMDB exports its
 * address for a MDB_FIXEDMAP map only): the largest mapping of that device
 * and inode at offset 0. NULL when none. */
static void *lmdb_map(const struct stat *st, size_t *len)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    void *best = NULL;

    *len = 0;
    if (f == NULL)
        return NULL;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi, off, ino;
        unsigned maj, min;

        if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu", &lo, &hi, &off, &maj,
                   &min, &ino) == 6 &&
            off == 0 && ino == (unsigned long)st->st_ino &&
            maj == major(st->st_dev) && min == minor(st->st_dev) &&
            hi - lo > *len) {
            best = (void *)(uintptr_t)lo;
            *len = hi - lo;
        }
    }
    fclose(f);
    return best;
}

/* Contract in obj_idx.h. */
bool obj_idx_prefetch(struct obj_idx *x)
{
    struct stat st;
    long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES);
    mdb_filehandle_t fd;
    size_t maplen, len;
    void *map;

    if (mdb_env_get_fd(x->env, &fd) != 0 || fstat(fd, &st) < 0 ||
        st.st_size <= 0 || page <= 0 || pages <= 0)
        return false;
    /* only an index that fits a quarter of the RAM: a bigger one would push
     * out what the page cache holds for the objects */
    if ((uint64_t)st.st_size > (uint64_t)pages * (uint64_t)page / 4)
        return false;
    if (willneed(fd, 0, st.st_size) != 0)
        return false;
    /* DESIGN: then every page is mapped into LMDB's map, LMDB's free pages
     * too (MADV_POPULATE_READ, waiting for the reads asked above). The
     * walks that follow map only the tables' pages; a write then takes
     * free pages that this process never mapped, and each reader's first
     * touch of one was a page fault: at 10^6 objects, with ~1.9 GiB of
     * free pages after a fill, ~25 faults and ~120 us of kernel CPU per
     * DELETE (a fifth of it), against none at 10^3 (README "Scale",
     * session 11). Where the kernel refuses it (before 5.14) or the map
     * is not found, the walks map what they read, as before. */
    len = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page * (size_t)page;
    map = lmdb_map(&st, &maplen);
    if (map != NULL && len <= maplen)
        (void)madvise(map, len, MADV_POPULATE_READ);
    return true;
}

static int rtxn_get(struct obj_idx *x, bool nb, MDB_txn **t,
                    struct idx_rtxn **slot);
static void rtxn_put(MDB_txn *t, struct idx_rtxn *slot);

/* Pages of the file that some tree uses (the meta pages, the main tree and
 * our tables: what a lookup or the walk may read), or 0 when unknown. */
static uint64_t used_pages(struct obj_idx *x)
{
    const MDB_dbi dbs[] = {x->obj, x->sys, x->pend, x->body};
    MDB_txn *t;
    struct idx_rtxn *slot;
    MDB_stat ms;
    uint64_t n = 0;

    if (rtxn_get(x, false, &t, &slot) < 0)
        return 0;
    if (mdb_env_stat(x->env, &ms) == 0) {
        n = 2 + ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages;
        for (size_t i = 0; i < CM_ARRAY_SIZE(dbs) && n > 0; i++) {
            if (mdb_stat(t, dbs[i], &ms) != 0)
                n = 0;
            else
                n += ms.ms_branch_pages + ms.ms_leaf_pages +
                     ms.ms_overflow_pages;
        }
    }
    rtxn_put(t, slot);
    return n;
}

/* Contract in obj_idx.h. */
void obj_idx_resident_set(struct obj_idx *x)
{
    __atomic_add_fetch(&x->res_gen, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&x->resident, true, __ATOMIC_RELEASE);
}

/* cachestat(2) (Linux 6.5; Debian 12's headers predate it): the page-cache
 * state of a file range, asked with no map. 451 on every architecture
 * (the unified syscall table). */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct idx_cachestat_range {
    uint64_t off, len;
};
struct idx_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
static bool no_cachestat; /* atomic: the kernel refused it; mincore then */

/* Contract in obj_idx.h. */
void obj_idx_res_no_cachestat(void)
{
    __atomic_store_n(&no_cachestat, true, __ATOMIC_RELAXED);
}

/* Pages of @fd's window [@off, @off + @len) in the page cache, by
 * cachestat(2); -1 when the kernel has no cachestat (or refuses it for
 * this file: then never asked again) or it failed. */
static int64_t window_cached(int fd, off_t off, size_t len)
{
    struct idx_cachestat_range r = {(uint64_t)off, len};
    struct idx_cachestat cs;

    if (__atomic_load_n(&no_cachestat, __ATOMIC_RELAXED))
        return -1;
    if (syscall(__NR_cachestat, fd, &r, &cs, 0) == 0)
        return (int64_t)cs.nr_cache;
    if (errno == ENOSYS || errno == EPERM || errno == EOPNOTSUPP ||
        errno == EINVAL)
        obj_idx_res_no_cachestat();
    return -1;
}

/* Pages of @fd's window [@off, @off + @len) that are not in the page cache,
 * added to *out (at most @len / page of them); -1 when neither cachestat
 * nor the map and mincore worked. @vec holds one byte per page of the
 * window. DESIGN: cachestat counts the window's pages in one walk of the
 * file's page-cache tree, without a map; mincore of a map that populates
 * nothing looks each page up the same way but also costs the map, and is
 * kept for kernels before 6.5. */
static int window_out(int fd, off_t off, size_t len, size_t page,
                      unsigned char *vec, uint64_t *out)
{
    size_t pages = (len + page - 1) / page;
    int64_t cached = window_cached(fd, off, len);
    void *m;
    int ret = 0;

    if (cached >= 0) {
        *out += pages - CM_MIN((size_t)cached, pages);
        return 0;
    }
    /* a map of our own, not LMDB's: its address is not exported
     * (mdb_env_info fills me_mapaddr for MDB_FIXEDMAP only); mapping
     * populates nothing, mincore reads no page */
    m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
    if (m == MAP_FAILED)
        return -1;
    if (mincore(m, len, vec) < 0)
        ret = -1;
    for (size_t i = 0; ret == 0 && i < pages; i++)
        *out += (vec[i] & 1) == 0;
    munmap(m, len);
    return ret;
}

/* How many pages of a file of @size bytes may be out of the page cache
 * with the file still counted as resident. DESIGN: LMDB's free pages are
 * in no tree, so no lookup reads them and they may be out of the cache (a
 * filled file can be 2/3 free pages, a steady one ~1 %): as many pages may
 * be out as are free, and 1/64 more; a cold file still fails. */
static uint64_t out_slack(struct obj_idx *x, off_t size, size_t page)
{
    uint64_t all_p = (uint64_t)size / page, used = used_pages(x);

    return (used && used < all_p ? all_p - used : 0) + all_p / 64;
}

/* Contract in obj_idx.h. */
bool obj_idx_resident_check(struct obj_idx *x)
{
    unsigned char vec[IDX_RES_WIN / 4096];
    long page = sysconf(_SC_PAGESIZE);
    mdb_filehandle_t fd;
    struct stat st;
    bool all = false;

    if (page > 0 && (size_t)page * sizeof(vec) >= IDX_RES_WIN &&
        mdb_env_get_fd(x->env, &fd) == 0 && fstat(fd, &st) == 0) {
        uint64_t out = 0, slack = out_slack(x, st.st_size, (size_t)page);

        all = true;
        for (off_t off = 0; all && off < st.st_size; off += IDX_RES_WIN) {
            size_t len = (size_t)CM_MIN((off_t)IDX_RES_WIN, st.st_size - off);

            all = window_out(fd, off, len, (size_t)page, vec, &out) == 0 &&
                  out <= slack;
        }
    }
    __atomic_add_fetch(&x->res_gen, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&x->resident, all, __ATOMIC_RELEASE);
    return all;
}

/* True when a pass starting now may ask an evicted index file back into
 * the page cache: a file of at most 1/8 of the machine's memory, and no
 * pass asked in the last IDX_REWARM_GAP seconds. DESIGN: a bigger file
 * read back in would compete with the data for the page cache (its loop
 * lookups then stay on the workers, which fault in only what they use);
 * the gap bounds the reads when memory pressure keeps evicting it (at
 * most one file's worth a minute). */
static bool rewarm_ok(struct obj_idx *x, off_t size)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    struct timespec ts;

    if (pages <= 0 || page <= 0 ||
        (uint64_t)size > (uint64_t)pages / 8 * (uint64_t)page ||
        clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return false;
    return x->rewarm_ns == 0 ||
           (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - x->rewarm_ns >=
               (int64_t)IDX_REWARM_GAP * 1000000000;
}

/* Notes that a pass has just asked windows back in. */
static void rewarm_note(struct obj_idx *x)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
        x->rewarm_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    __atomic_add_fetch(&x->rewarmed, 1, __ATOMIC_RELAXED);
}

/* Contract in obj_idx.h. */
bool obj_idx_resident_step(struct obj_idx *x, struct obj_idx_res_pass *p,
                           bool rewarm)
{
    unsigned char vec[IDX_RES_WIN / 4096];
    long page = sysconf(_SC_PAGESIZE);
    unsigned gen = __atomic_load_n(&x->res_gen, __ATOMIC_RELAXED);
    mdb_filehandle_t fd;
    struct stat st;
    uint64_t before;
    size_t len;

    if (page <= 0 || (size_t)page * sizeof(vec) < IDX_RES_WIN ||
        mdb_env_get_fd(x->env, &fd) != 0 || fstat(fd, &st) != 0)
        return false;
    if (!p->active || p->gen != gen || p->off >= st.st_size) {
        /* a new pass: the hint was just set by someone else (the content
         * check's walk, a full check), so what this pass saw before is
         * stale; or the last pass ended */
        p->active = true;
        p->gen = gen;
        p->off = 0;
        p->out = 0;
        p->slack = out_slack(x, st.st_size, (size_t)page);
        p->rewarm = rewarm && rewarm_ok(x, st.st_size);
    }
    rewarm = p->rewarm;
    len = (size_t)CM_MIN((off_t)IDX_RES_WIN, st.st_size - p->off);
    before = p->out;
    if (len > 0 && window_out(fd, p->off, len, (size_t)page, vec, &p->out) < 0)
        return false; /* the same window again at the next step */
    if (rewarm && p->out > before && willneed(fd, p->off, (off_t)len) == 0)
        rewarm_note(x);
    p->off += (off_t)len;
    if (p->out > p->slack) {
        /* out already: the loop stops looking up at once, mid-pass */
        if (__atomic_exchange_n(&x->resident, false, __ATOMIC_ACQ_REL))
            __atomic_add_fetch(&x->res_lost, 1, __ATOMIC_RELAXED);
        if (!rewarm) {
            p->active = false;
            return true;
        }
        /* re-warming: walk on, so this pass asks every window with pages
         * out back in, and the next pass can find the whole file in */
    }
    if (p->off < st.st_size)
        return false;
    p->active = false;
    /* the pass saw every window with few enough pages out */
    if (p->out <= p->slack &&
        __atomic_load_n(&x->res_gen, __ATOMIC_RELAXED) == gen)
        __atomic_store_n(&x->resident, true, __ATOMIC_RELEASE);
    return true;
}

/* Contract in obj_idx.h. */
uint64_t obj_idx_rewarmed(const struct obj_idx *x)
{
    return __atomic_load_n(&x->rewarmed, __ATOMIC_RELAXED);
}

/* Contract in obj_idx.h. */
uint64_t obj_idx_resident_lost(const struct obj_idx *x)
{
    return __atomic_load_n(&x->res_lost, __ATOMIC_RELAXED);
}

/* Contract in obj_idx.h. */
bool obj_idx_resident(const struct obj_idx *x)
{
    return __atomic_load_n(&x->resident, __ATOMIC_ACQUIRE);
}

/* Contract in obj_idx.h. */
uint64_t obj_idx_cold_nb(const struct obj_idx *x)
{
    return __atomic_load_n(&x->cold_nb, __ATOMIC_RELAXED);
}

/* False (and counted) when the loop must not look up: the file was not
 * all in the page cache at the last check, so a lookup may fault a page
 * in from the disk, which blocks the loop. */
static bool nb_resident(struct obj_idx *x)
{
    if (__atomic_load_n(&x->resident, __ATOMIC_ACQUIRE))
        return true;
    __atomic_fetch_add(&x->cold_nb, 1, __ATOMIC_RELAXED);
    return false;
}

/* Contract in obj_idx.h. */
void obj_idx_close(struct obj_idx *x, bool sync)
{
    if (x == NULL)
        return;
    for (int i = 0; i < IDX_READERS; i++)
        if (x->pool[i].t)
            mdb_txn_abort(x->pool[i].t);
    if (x->env) {
        if (sync)
            (void)mdb_env_sync(x->env, 1);
        mdb_env_close(x->env);
    }
    free(x->data_path);
    free(x);
}

/* Contract in obj_idx.h. */
int obj_idx_sync(struct obj_idx *x)
{
    return mdb_err(mdb_env_sync(x->env, 1));
}

/* Contract in obj_idx.h. */
const char *obj_idx_data_path(const struct obj_idx *x)
{
    return x->data_path;
}

/* Contract in obj_idx.h. */
int obj_idx_space(struct obj_idx *x, uint64_t *free_bytes, uint64_t *file_bytes)
{
    MDB_envinfo ei;
    MDB_stat ms;
    uint64_t used, total;
    int rc = mdb_env_info(x->env, &ei);

    if (rc == 0)
        rc = mdb_env_stat(x->env, &ms);
    if (rc != 0)
        return mdb_err(rc);
    used = used_pages(x);
    if (used == 0)
        return -EIO;
    total = (uint64_t)ei.me_last_pgno + 1;
    *file_bytes = total * ms.ms_psize;
    *free_bytes = total > used ? (total - used) * ms.ms_psize : 0;
    return 0;
}

/* DESIGN: the copy's pages are in the page cache as written, in large
 * folios (up to 2 MiB on ext4), and each 4 KiB page LMDB later rewrites in
 * one makes ext4_block_write_begin walk the whole folio and dirties all of
 * it (a DELETE at 10^6 objects spent 13 % of its CPU there, against 2 % at
 * 10^3; README "Scale", session 12). So the flushed (clean) pages are
 * dropped and, for a file of at most a quarter of the RAM (as
 * obj_idx_prefetch), asked back in window by window: WILLNEED reads 4 KiB
 * folios, asynchronously, so the next start finds the file warm. */
static void refolio(int fd)
{
    struct stat st;
    long page = sysconf(_SC_PAGESIZE), pages = sysconf(_SC_PHYS_PAGES);

    if (fstat(fd, &st) < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
        return;
    if (page > 0 && pages > 0 &&
        (uint64_t)st.st_size <= (uint64_t)pages * (uint64_t)page / 4)
        (void)willneed(fd, 0, st.st_size);
}

/* Contract in obj_idx.h. */
int obj_idx_compact_to(struct obj_idx *x, const char *path)
{
    int fd, rc, ret = 0;

    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    rc = mdb_env_copyfd2(x->env, fd, MDB_CP_COMPACT);
    if (rc != 0)
        ret = mdb_err(rc);
    if (ret == 0 && fdatasync(fd) < 0)
        ret = -errno;
    if (ret == 0)
        refolio(fd);
    if (close(fd) < 0 && ret == 0)
        ret = -errno;
    if (ret < 0)
        (void)unlink(path);
    return ret;
}

/* A read transaction: from the pool (*slot set), else with !@nb a private
 * one (*slot NULL). 0, -EAGAIN (@nb and none free), -errno. */
static int rtxn_get(struct obj_idx *x, bool nb, MDB_txn **t,
                    struct idx_rtxn **slot)
{
    unsigned start = __atomic_fetch_add(&x->hint, 1, __ATOMIC_RELAXED);

    for (unsigned i = 0; i < IDX_READERS; i++) {
        struct idx_rtxn *r = &x->pool[(start + i) % IDX_READERS];

        if (__atomic_exchange_n(&r->busy, 1, __ATOMIC_ACQUIRE) != 0)
            continue;
        if (mdb_txn_renew(r->t) != 0) {
            __atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
            break;
        }
        *t = r->t;
        *slot = r;
        return 0;
    }
    if (nb)
        return -EAGAIN;
    *slot = NULL;
    return mdb_err(mdb_txn_begin(x->env, NULL, MDB_RDONLY, t));
}

static void rtxn_put(MDB_txn *t, struct idx_rtxn *slot)
{
    if (slot == NULL) {
        mdb_txn_abort(t);
        return;
    }
    mdb_txn_reset(t);
    __atomic_store_n(&slot->busy, 0, __ATOMIC_RELEASE);
}

/* LMDB key of bucket/key into @buf (IDX_KEYMAX bytes); its length. */
static size_t mkkey(char *buf, const char *bucket, const char *key,
                    size_t key_len)
{
    size_t bl = strnlen(bucket, 63), kl = CM_MIN(key_len, OBJ_IDX_KEYPFX);

    memcpy(buf, bucket, bl);
    buf[bl] = 0;
    memcpy(buf + bl + 1, key, kl);
    return bl + 1 + kl;
}

static size_t mksyskey(char *buf, const char *bucket)
{
    size_t bl = strnlen(bucket, 63);

    memcpy(buf, IDX_SYS_BUCKET, 2);
    memcpy(buf + 2, bucket, bl);
    return 2 + bl;
}

/* ---- state ---- */

/* Contract in obj_idx.h. */
int obj_idx_state_get(struct obj_idx *x, struct obj_idx_state *st)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    char sk[] = IDX_SYS_STATE;
    MDB_val k = {1, sk}, v;
    int ret = rtxn_get(x, false, &t, &slot);

    if (ret < 0)
        return ret;
    memset(st, 0, sizeof(*st));
    ret = mdb_err(mdb_get(t, x->sys, &k, &v));
    if (ret == 0 && v.mv_size != IDX_STATE_REC)
        ret = -EBADMSG;
    if (ret == 0) {
        const uint8_t *p = v.mv_data;

        st->format = (uint32_t)le_get(p, 4);
        memcpy(st->deployment, p + 8, 32);
        st->deployment[32] = 0;
        st->gen = le_get(p + 40, 8);
        st->last_version = le_get(p + 48, 8);
    }
    rtxn_put(t, slot);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_state_set(struct obj_idx *x, const struct obj_idx_state *st)
{
    uint8_t rec[IDX_STATE_REC] = {0};
    char sk[] = IDX_SYS_STATE;
    MDB_val k = {1, sk}, v = {sizeof(rec), rec};
    MDB_txn *t;
    int rc;

    le_put(rec, st->format, 4);
    memcpy(rec + 8, st->deployment, 32);
    le_put(rec + 40, st->gen, 8);
    le_put(rec + 48, st->last_version, 8);
    rc = mdb_txn_begin(x->env, NULL, 0, &t);
    if (rc != 0)
        return mdb_err(rc);
    rc = mdb_put(t, x->sys, &k, &v, 0);
    if (rc != 0) {
        mdb_txn_abort(t);
        return mdb_err(rc);
    }
    rc = mdb_txn_commit(t);
    if (rc != 0)
        return mdb_err(rc);
    return obj_idx_sync(x);
}

/* ---- buckets ---- */

/* One record's term in its bucket's content sum: a mixed CRC-64 of its
 * bytes (splitmix64's finaliser), so that any changed byte changes the sum
 * and the sum does not depend on the order records are added in. */
static uint64_t rec_term(const void *p, size_t n)
{
    uint64_t z = stor_crc64(0, p, n) + n + 0x9e3779b97f4a7c15ULL;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Reads a bucket record in @t. 0 or -ENOENT/-EBADMSG. */
static int bucket_read(struct obj_idx *x, MDB_txn *t, const char *bucket,
                       int64_t *created, uint64_t *count, uint64_t *sum)
{
    char kb[2 + 64];
    MDB_val k = {mksyskey(kb, bucket), kb}, v;
    int ret = mdb_err(mdb_get(t, x->sys, &k, &v));

    if (ret < 0)
        return ret;
    if (v.mv_size != IDX_BUCKET_REC ||
        ((const uint8_t *)v.mv_data)[0] != IDX_BUCKET_VER)
        return -EBADMSG;
    if (created)
        *created = (int64_t)le_get((const uint8_t *)v.mv_data + 8, 8);
    if (count)
        *count = le_get((const uint8_t *)v.mv_data + 16, 8);
    if (sum)
        *sum = le_get((const uint8_t *)v.mv_data + 24, 8);
    return 0;
}

static int bucket_write(struct obj_idx *x, MDB_txn *t, const char *bucket,
                        int64_t created, uint64_t count, uint64_t sum)
{
    uint8_t rec[IDX_BUCKET_REC] = {IDX_BUCKET_VER};
    char kb[2 + 64];
    MDB_val k = {mksyskey(kb, bucket), kb}, v = {sizeof(rec), rec};

    le_put(rec + 8, (uint64_t)created, 8);
    le_put(rec + 16, count, 8);
    le_put(rec + 24, sum, 8);
    return mdb_err(mdb_put(t, x->sys, &k, &v, 0));
}

/* Contract in obj_idx.h. */
int obj_idx_bucket_get(struct obj_idx *x, const char *bucket,
                       int64_t *created_ns, uint64_t *count)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    int ret = rtxn_get(x, false, &t, &slot);

    if (ret < 0)
        return ret;
    ret = bucket_read(x, t, bucket, created_ns, count, NULL);
    rtxn_put(t, slot);
    return ret;
}

/* Commits @t when @ret is 0, else aborts it; the result. */
static int wtxn_end(MDB_txn *t, int ret)
{
    if (ret < 0) {
        mdb_txn_abort(t);
        return ret;
    }
    return mdb_err(mdb_txn_commit(t));
}

/* Contract in obj_idx.h. */
int obj_idx_bucket_set(struct obj_idx *x, const char *bucket,
                       int64_t created_ns)
{
    MDB_txn *t;
    uint64_t count = 0, sum = 0;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    ret = bucket_read(x, t, bucket, NULL, &count, &sum);
    if (ret == -ENOENT || ret == -EBADMSG) {
        ret = 0;
        count = 0;
        sum = 0;
    }
    if (ret == 0)
        ret = bucket_write(x, t, bucket, created_ns, count, sum);
    return wtxn_end(t, ret);
}

/* Deletes every key of table @dbi that starts with @pfx (@pl bytes). */
static int drop_prefix(MDB_txn *t, MDB_dbi dbi, const char *pfx, size_t pl)
{
    MDB_val k = {pl, (void *)(uintptr_t)pfx}, v;
    MDB_cursor *c;
    int rc = mdb_cursor_open(t, dbi, &c);

    if (rc != 0)
        return mdb_err(rc);
    rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size >= pl && memcmp(k.mv_data, pfx, pl) == 0) {
        rc = mdb_cursor_del(c, 0);
        if (rc == 0)
            rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
    }
    mdb_cursor_close(c);
    return rc == 0 || rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
}

/* Contract in obj_idx.h. */
int obj_idx_bucket_drop(struct obj_idx *x, const char *bucket)
{
    char kb[IDX_KEYMAX], sk[2 + 64];
    size_t pl = mkkey(kb, bucket, "", 0); /* bucket NUL */
    MDB_val skv = {mksyskey(sk, bucket), sk};
    MDB_txn *t;
    int rc, ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    ret = drop_prefix(t, x->obj, kb, pl);
    if (ret == 0) /* the bodies' keys (bucket NUL id) share the prefix */
        ret = drop_prefix(t, x->body, kb, pl);
    if (ret == 0) {
        rc = mdb_del(t, x->sys, &skv, NULL);
        ret = rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
    }
    return wtxn_end(t, ret);
}

/* Contract in obj_idx.h. */
int obj_idx_bucket_each(struct obj_idx *x,
                        int (*fn)(void *arg, const char *bucket,
                                  int64_t created_ns, uint64_t count),
                        void *arg)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    MDB_cursor *c;
    char bk[] = IDX_SYS_BUCKET;
    MDB_val k = {2, bk}, v;
    int rc, ret = rtxn_get(x, false, &t, &slot);

    if (ret < 0)
        return ret;
    ret = mdb_err(mdb_cursor_open(t, x->sys, &c));
    if (ret < 0) {
        rtxn_put(t, slot);
        return ret;
    }
    rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (rc == 0 && k.mv_size > 2 && k.mv_size < 2 + 64 &&
           memcmp(k.mv_data, IDX_SYS_BUCKET, 2) == 0) {
        char name[64];
        const uint8_t *p = v.mv_data;

        if (v.mv_size != IDX_BUCKET_REC || p[0] != IDX_BUCKET_VER) {
            ret = -EBADMSG;
            break;
        }
        memcpy(name, (const char *)k.mv_data + 2, k.mv_size - 2);
        name[k.mv_size - 2] = 0;
        ret = fn(arg, name, (int64_t)le_get(p + 8, 8), le_get(p + 16, 8));
        if (ret != 0)
            break;
        rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(c);
    rtxn_put(t, slot);
    return ret;
}

/* ---- objects ---- */

/* In group @g (@n bytes), finds the record of key @key: its offset in
 * *at and length (> 0); 0 when absent (*at: where it would go); -EBADMSG. */
static ssize_t group_find(const uint8_t *g, size_t n, const char *key,
                          size_t key_len, size_t *at)
{
    size_t off = 0;

    while (off < n) {
        struct obj_idx_view v;
        ssize_t l = obj_idx_rec_view(g + off, n - off, &v);
        int c;

        if (l < 0)
            return l;
        c = obj_key_cmp(v.key, v.key_len, key, key_len);
        if (c == 0) {
            *at = off;
            return l;
        }
        if (c > 0)
            break;
        off += (size_t)l;
    }
    *at = off;
    return 0;
}

/* Lookup inside read transaction @t. */
static int lookup_in(struct obj_idx *x, MDB_txn *t, const char *bucket,
                     const char *key, size_t key_len, struct obj_ent **out)
{
    char kb[IDX_KEYMAX];
    MDB_val k = {mkkey(kb, bucket, key, key_len), kb}, v;
    size_t at;
    ssize_t l;
    int ret = mdb_err(mdb_get(t, x->obj, &k, &v));

    if (ret < 0)
        return ret;
    l = group_find(v.mv_data, v.mv_size, key, key_len, &at);
    if (l < 0)
        return (int)l;
    if (l == 0)
        return -ENOENT;
    return obj_idx_rec_decode((const uint8_t *)v.mv_data + at, (size_t)l, out);
}

static int lookup(struct obj_idx *x, bool nb, const char *bucket,
                  const char *key, size_t key_len, struct obj_ent **out)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    int ret = rtxn_get(x, nb, &t, &slot);

    *out = NULL;
    if (ret < 0)
        return ret;
    ret = lookup_in(x, t, bucket, key, key_len, out);
    rtxn_put(t, slot);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_lookup(struct obj_idx *x, const char *bucket, const char *key,
                   size_t key_len, struct obj_ent **out)
{
    return lookup(x, false, bucket, key, key_len, out);
}

/* Contract in obj_idx.h. */
int obj_idx_lookup_nb(struct obj_idx *x, const char *bucket, const char *key,
                      size_t key_len, struct obj_ent **out)
{
    if (!nb_resident(x)) {
        *out = NULL;
        return -EAGAIN;
    }
    return lookup(x, true, bucket, key, key_len, out);
}

/* Puts @e into its group in write transaction @t; with @e NULL, removes
 * the key instead. *delta: change of the object count (-1, 0, +1), *dsum
 * of the bucket's content sum. With @old, the replaced record is decoded
 * into it. */
static int group_change(struct obj_idx *x, MDB_txn *t, const char *bucket,
                        const struct obj_ent *e, const char *key,
                        size_t key_len, struct obj_ent **old, int *delta,
                        uint64_t *dsum)
{
    char kb[IDX_KEYMAX];
    MDB_val k = {mkkey(kb, bucket, key, key_len), kb}, v = {0, NULL};
    struct cm_buf nb;
    size_t at = 0;
    ssize_t l = 0;
    int ret = mdb_err(mdb_get(t, x->obj, &k, &v));

    *delta = 0;
    *dsum = 0;
    if (ret < 0 && ret != -ENOENT)
        return ret;
    if (ret == 0) {
        l = group_find(v.mv_data, v.mv_size, key, key_len, &at);
        if (l < 0)
            return (int)l;
    }
    if (e == NULL && l == 0)
        return -ENOENT;
    if (old && l > 0) {
        ret =
            obj_idx_rec_decode((const uint8_t *)v.mv_data + at, (size_t)l, old);
        if (ret < 0)
            return ret;
    }
    cm_buf_init(&nb, CM_BUF_NOLIMIT);
    ret = 0;
    if (at > 0)
        ret = cm_buf_append(&nb, v.mv_data, at);
    if (ret == 0 && e)
        ret = obj_idx_rec_encode(e, &nb);
    if (ret == 0 && e)
        *dsum = rec_term((const uint8_t *)nb.data + at, nb.len - at);
    if (l > 0)
        *dsum -= rec_term((const uint8_t *)v.mv_data + at, (size_t)l);
    if (ret == 0 && v.mv_size > at + (size_t)l)
        ret = cm_buf_append(&nb, (const uint8_t *)v.mv_data + at + l,
                            v.mv_size - at - (size_t)l);
    if (ret < 0)
        goto out;
    if (nb.len == 0) {
        ret = mdb_err(mdb_del(t, x->obj, &k, NULL));
    } else {
        MDB_val nv = {nb.len, nb.data};

        ret = mdb_err(mdb_put(t, x->obj, &k, &nv, 0));
    }
    if (ret == 0)
        *delta = e == NULL ? -1 : l == 0 ? 1 : 0;
out:
    cm_buf_fini(&nb);
    if (ret < 0 && old) {
        obj_ent_free(*old);
        *old = NULL;
    }
    return ret;
}

/* Adds @delta to the bucket's count and @dsum to its content sum in @t
 * (a missing record: created 0). */
static int count_add(struct obj_idx *x, MDB_txn *t, const char *bucket,
                     int64_t delta, uint64_t dsum)
{
    int64_t created = 0;
    uint64_t count = 0, sum = 0;
    int ret;

    if (delta == 0 && dsum == 0)
        return 0;
    ret = bucket_read(x, t, bucket, &created, &count, &sum);
    if (ret < 0 && ret != -ENOENT)
        return ret;
    count = (int64_t)count + delta < 0 ? 0 : (uint64_t)((int64_t)count + delta);
    return bucket_write(x, t, bucket, created, count, sum + dsum);
}

static size_t mkpendkey(char *buf, const char *bucket, const uint8_t id[16]);

/* ---- object bodies ("body": bucket NUL id -> header + bytes) ---- */

/* Writes @b (the body of version @version of object @id) in @t, or with @b
 * NULL removes what the table holds for @id. */
static int body_set(struct obj_idx *x, MDB_txn *t, const char *bucket,
                    const uint8_t id[16], uint64_t version,
                    const struct obj_idx_body *b)
{
    char kb[64 + 16];
    MDB_val k = {mkpendkey(kb, bucket, id), kb}, v;
    size_t off = IDX_BODY_HDR;
    uint8_t *p;
    int rc;

    if (b == NULL) {
        rc = mdb_del(t, x->body, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
    }
    if (b->k < 1 || (uint64_t)b->k * b->shard_len < b->size)
        return -EINVAL;
    v.mv_size = IDX_BODY_HDR + b->size;
    rc = mdb_put(t, x->body, &k, &v, MDB_RESERVE);
    if (rc != 0)
        return mdb_err(rc);
    p = v.mv_data;
    for (int j = 0; j < b->k && off < v.mv_size; j++) {
        size_t n = CM_MIN(b->shard_len, v.mv_size - off);

        memcpy(p + off, b->shard[j], n);
        off += n;
    }
    memset(p, 0, 8);
    p[0] = IDX_BODY_VER;
    le_put(p + 8, version, 8);
    le_put(p + 16,
           stor_crc64(IDX_BODY_SEED ^ version, p + IDX_BODY_HDR, b->size), 8);
    return 0;
}

/* A copy of the body of @e (its exact version and size) from @t into
 * *out (malloc'd). 0, -ENOENT (none, or of another version), -EBADMSG
 * (the bytes fail their CRC), -ENOMEM. */
static int body_get(struct obj_idx *x, MDB_txn *t, const char *bucket,
                    const struct obj_ent *e, void **out)
{
    char kb[64 + 16];
    MDB_val k = {mkpendkey(kb, bucket, e->id), kb}, v;
    const uint8_t *p;
    int ret = mdb_err(mdb_get(t, x->body, &k, &v));

    *out = NULL;
    if (ret < 0)
        return ret;
    p = v.mv_data;
    if (v.mv_size < IDX_BODY_HDR || p[0] != IDX_BODY_VER ||
        le_get(p + 8, 8) != e->version || v.mv_size - IDX_BODY_HDR != e->size)
        return -ENOENT; /* an older version's, left by an older binary */
    if (le_get(p + 16, 8) !=
        stor_crc64(IDX_BODY_SEED ^ e->version, p + IDX_BODY_HDR, e->size)) {
        __atomic_fetch_add(&x->body_bad, 1, __ATOMIC_RELAXED);
        return -EBADMSG;
    }
    *out = malloc(e->size ? e->size : 1);
    if (*out == NULL)
        return -ENOMEM;
    memcpy(*out, p + IDX_BODY_HDR, e->size);
    return 0;
}

/* The entry of bucket/key and its body, in one read snapshot (@nb: the
 * loop's: never waits, and only on a resident file). */
static int lookup_body(struct obj_idx *x, bool nb, const char *bucket,
                       const char *key, size_t key_len, struct obj_ent **out,
                       void **body)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    int ret;

    *out = NULL;
    *body = NULL;
    if (nb && !nb_resident(x))
        return -EAGAIN;
    ret = rtxn_get(x, nb, &t, &slot);
    if (ret < 0)
        return ret;
    ret = lookup_in(x, t, bucket, key, key_len, out);
    if (ret == 0 && (*out)->inl)
        (void)body_get(x, t, bucket, *out, body); /* absent: read the drives */
    rtxn_put(t, slot);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_lookup_body_nb(struct obj_idx *x, const char *bucket,
                           const char *key, size_t key_len,
                           struct obj_ent **out, void **body)
{
    return lookup_body(x, true, bucket, key, key_len, out, body);
}

/* Contract in obj_idx.h. */
int obj_idx_lookup_body(struct obj_idx *x, const char *bucket, const char *key,
                        size_t key_len, struct obj_ent **out, void **body)
{
    return lookup_body(x, false, bucket, key, key_len, out, body);
}

/* A read transaction (blocking claim: it may be private) and a cursor on
 * table @dbi in it, for a walk; end with mdb_cursor_close + rtxn_put. 0 or
 * -errno (nothing to release then). */
static int walk_open(struct obj_idx *x, MDB_dbi dbi, MDB_txn **t,
                     struct idx_rtxn **slot, MDB_cursor **c)
{
    int ret = rtxn_get(x, false, t, slot);

    if (ret < 0)
        return ret;
    ret = mdb_err(mdb_cursor_open(*t, dbi, c));
    if (ret < 0)
        rtxn_put(*t, *slot);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_verify_bodies(struct obj_idx *x, const bool *stop, uint64_t *n,
                          uint64_t *bad)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    MDB_cursor *c;
    MDB_val k, v;
    int rc, ret = walk_open(x, x->body, &t, &slot, &c);

    *n = *bad = 0;
    if (ret < 0)
        return ret;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *p = v.mv_data;

        (*n)++;
        /* an older version's body (left by an older binary) is checked
         * against its own version: bytes that fail are damage either way */
        if (v.mv_size < IDX_BODY_HDR || p[0] != IDX_BODY_VER ||
            le_get(p + 16, 8) != stor_crc64(IDX_BODY_SEED ^ le_get(p + 8, 8),
                                            p + IDX_BODY_HDR,
                                            v.mv_size - IDX_BODY_HDR))
            (*bad)++;
        if ((*n & 4095) == 0 && stop &&
            __atomic_load_n(stop, __ATOMIC_RELAXED)) {
            rc = MDB_SUCCESS;
            ret = -ECANCELED;
            break;
        }
    }
    if (ret == 0 && rc != MDB_NOTFOUND)
        ret = mdb_err(rc);
    mdb_cursor_close(c);
    rtxn_put(t, slot);
    return ret;
}

/* Contract in obj_idx.h. */
uint64_t obj_idx_body_damaged(const struct obj_idx *x)
{
    return __atomic_load_n(&x->body_bad, __ATOMIC_RELAXED);
}

/* Contract in obj_idx.h. */
uint64_t obj_idx_body_count(struct obj_idx *x)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    MDB_stat st;
    uint64_t n = 0;

    if (rtxn_get(x, true, &t, &slot) < 0)
        return 0;
    if (mdb_stat(t, x->body, &st) == 0)
        n = st.ms_entries;
    rtxn_put(t, slot);
    return n;
}

/* Contract in obj_idx.h. */
int obj_idx_put(struct obj_idx *x, const char *bucket, const struct obj_ent *e,
                struct obj_ent **old)
{
    return obj_idx_put_body(x, bucket, e, NULL, old);
}

/* The put of @e (and @b) in @bucket and, with @vbucket, of @ve there, in
 * one write transaction: obj_idx_put_body and obj_idx_put_pair. */
static int put_txn(struct obj_idx *x, const char *bucket,
                   const struct obj_ent *e, const struct obj_idx_body *b,
                   const char *vbucket, const struct obj_ent *ve,
                   struct obj_ent **old)
{
    MDB_txn *t;
    uint64_t dsum = 0, vsum = 0;
    int delta = 0, vdelta = 0, ret;
    struct obj_ent *prev = NULL;
    void *vbody = NULL; /* the kept version's body, moved */

    if (old)
        *old = NULL;
    if (b && (b->size != e->size || !e->inl))
        return -EINVAL;
    ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));
    if (ret < 0)
        return ret;
    ret = group_change(x, t, bucket, e, e->key, e->key_len,
                       old || vbucket ? &prev : NULL, &delta, &dsum);
    if (ret == 0)
        ret = count_add(x, t, bucket, delta, dsum);
    if (ret == 0 && vbucket && prev && prev->version == ve->version &&
        prev->size == ve->size && prev->inl && prev->k == 1 &&
        body_get(x, t, bucket, prev, &vbody) < 0)
        vbody = NULL; /* none (or damaged): its GETs read the metas */
    if (ret == 0)
        ret = body_set(x, t, bucket, e->id, e->version, b);
    if (ret == 0 && vbucket) /* the kept version: its record and body */
        ret = group_change(x, t, vbucket, ve, ve->key, ve->key_len, NULL,
                           &vdelta, &vsum);
    if (ret == 0 && vbucket)
        ret = count_add(x, t, vbucket, vdelta, vsum);
    if (ret == 0 && vbucket) {
        const uint8_t *sh[1] = {vbody};
        struct obj_idx_body vb = {.shard = sh,
                                  .shard_len = (size_t)ve->size,
                                  .k = 1,
                                  .size = (size_t)ve->size};

        ret = body_set(x, t, vbucket, ve->id, ve->version, vbody ? &vb : NULL);
    }
    free(vbody);
    if (ret == 0) {
        char kb[64 + 16];
        MDB_val k = {mkpendkey(kb, bucket, e->id), kb};
        int rc = mdb_del(t, x->pend, &k, NULL); /* its commit is done */

        ret = rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
    }
    ret = wtxn_end(t, ret);
    if (ret == 0 && old)
        *old = prev;
    else
        obj_ent_free(prev);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_put_body(struct obj_idx *x, const char *bucket,
                     const struct obj_ent *e, const struct obj_idx_body *b,
                     struct obj_ent **old)
{
    return put_txn(x, bucket, e, b, NULL, NULL, old);
}

/* Contract in obj_idx.h. */
int obj_idx_put_pair(struct obj_idx *x, const char *bucket,
                     const struct obj_ent *e, const struct obj_idx_body *b,
                     const char *vbucket, const struct obj_ent *ve,
                     struct obj_ent **old)
{
    if (vbucket == NULL || ve == NULL)
        return -EINVAL;
    return put_txn(x, bucket, e, b, vbucket, ve, old);
}

/* Contract in obj_idx.h. */
int obj_idx_put_many(struct obj_idx *x, const char *bucket,
                     struct obj_ent *const *e, size_t n)
{
    return obj_idx_put_many_body(x, bucket, e, NULL, n);
}

/* Contract in obj_idx.h. */
int obj_idx_put_many_body(struct obj_idx *x, const char *bucket,
                          struct obj_ent *const *e,
                          const struct obj_idx_body *const *b, size_t n)
{
    MDB_txn *t;
    int64_t total = 0;
    uint64_t sum = 0;
    int ret;

    if (n == 0)
        return 0;
    ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));
    if (ret < 0)
        return ret;
    for (size_t i = 0; i < n && ret == 0; i++) {
        uint64_t dsum = 0;
        int delta = 0;

        ret = group_change(x, t, bucket, e[i], e[i]->key, e[i]->key_len, NULL,
                           &delta, &dsum);
        total += delta;
        sum += dsum;
        if (ret == 0 && b && b[i]) {
            if (b[i]->size == e[i]->size && e[i]->inl)
                ret = body_set(x, t, bucket, e[i]->id, e[i]->version, b[i]);
            else
                ret = -EINVAL;
        }
    }
    if (ret == 0)
        ret = count_add(x, t, bucket, total, sum);
    return wtxn_end(t, ret);
}

/* Contract in obj_idx.h. */
int obj_idx_remove(struct obj_idx *x, const char *bucket, const char *key,
                   size_t key_len, struct obj_ent **old)
{
    struct obj_ent *gone = NULL;
    MDB_txn *t;
    uint64_t dsum = 0;
    int delta = 0, ret;

    if (old)
        *old = NULL;
    ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));
    if (ret < 0)
        return ret;
    ret = group_change(x, t, bucket, NULL, key, key_len, &gone, &delta, &dsum);
    if (ret == 0)
        ret = count_add(x, t, bucket, delta, dsum);
    if (ret == 0 && gone)
        ret = body_set(x, t, bucket, gone->id, 0, NULL);
    ret = wtxn_end(t, ret);
    if (ret == 0 && old)
        *old = gone;
    else
        obj_ent_free(gone);
    return ret;
}

/* Deletes the pending record of @bucket/@id in @t (none is not an
 * error): its change is done. */
static int pend_del(struct obj_idx *x, MDB_txn *t, const char *bucket,
                    const uint8_t id[16])
{
    char kb[64 + 16];
    MDB_val k = {mkpendkey(kb, bucket, id), kb};
    int rc = mdb_del(t, x->pend, &k, NULL);

    return rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
}

/* Contract in obj_idx.h. */
int obj_idx_remove_pair(struct obj_idx *x, const char *bucket, const char *key,
                        size_t key_len, const char *vbucket,
                        const struct obj_ent *ve, const struct obj_ent *me,
                        const struct obj_idx_body *mb, bool keep_pend,
                        struct obj_ent **old)
{
    struct obj_ent *gone = NULL;
    MDB_txn *t;
    uint64_t dsum = 0, vsum = 0;
    int delta = 0, vdelta = 0, ret;
    void *vbody = NULL; /* the kept version's body, moved */

    if (old)
        *old = NULL;
    if (vbucket == NULL || ve == NULL ||
        (mb && (me == NULL || mb->size != me->size || !me->inl)))
        return -EINVAL;
    ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));
    if (ret < 0)
        return ret;
    ret = group_change(x, t, bucket, NULL, key, key_len, &gone, &delta, &dsum);
    if (ret == 0 && gone->version == ve->version && gone->size == ve->size &&
        gone->inl && gone->k == 1 && body_get(x, t, bucket, gone, &vbody) < 0)
        vbody = NULL; /* none (or damaged): its GETs read the metas */
    if (ret == 0)
        ret = body_set(x, t, bucket, gone->id, 0, NULL);
    if (ret == 0)
        ret = group_change(x, t, vbucket, ve, ve->key, ve->key_len, NULL,
                           &vdelta, &vsum);
    if (ret == 0) {
        const uint8_t *sh[1] = {vbody};
        struct obj_idx_body vb = {.shard = sh,
                                  .shard_len = (size_t)ve->size,
                                  .k = 1,
                                  .size = (size_t)ve->size};

        ret = body_set(x, t, vbucket, ve->id, ve->version, vbody ? &vb : NULL);
    }
    if (ret == 0 && me) { /* the delete marker, with its (empty) body */
        int md = 0;
        uint64_t msum = 0;

        ret = group_change(x, t, vbucket, me, me->key, me->key_len, NULL, &md,
                           &msum);
        vdelta += md;
        vsum += msum;
        if (ret == 0)
            ret = body_set(x, t, vbucket, me->id, me->version, mb);
        if (ret == 0)
            ret = pend_del(x, t, vbucket, me->id);
    }
    if (ret == 0)
        ret = count_add(x, t, bucket, delta, dsum);
    if (ret == 0)
        ret = count_add(x, t, vbucket, vdelta, vsum);
    if (ret == 0 && !keep_pend) /* the delete's files are done */
        ret = pend_del(x, t, bucket, gone->id);
    free(vbody);
    ret = wtxn_end(t, ret);
    if (ret == 0 && old)
        *old = gone;
    else
        obj_ent_free(gone);
    return ret;
}

/* ---- cursors ---- */

/* Contract in obj_idx.h. */
int obj_idx_cur_open(struct obj_idx *x, const char *bucket,
                     struct obj_idx_cur **out)
{
    struct obj_idx_cur *c = calloc(1, sizeof(*c));
    int ret;

    *out = NULL;
    if (c == NULL)
        return -ENOMEM;
    c->x = x;
    c->pfx_len = mkkey(c->pfx, bucket, "", 0);
    ret = rtxn_get(x, false, &c->t, &c->slot);
    if (ret < 0) {
        free(c);
        return ret;
    }
    ret = mdb_err(mdb_cursor_open(c->t, x->obj, &c->c));
    if (ret < 0) {
        rtxn_put(c->t, c->slot);
        free(c);
        return ret;
    }
    *out = c;
    return 0;
}

/* Does the cursor's current LMDB key belong to the bucket? */
static bool cur_in_bucket(const struct obj_idx_cur *c)
{
    return c->k.mv_size >= c->pfx_len &&
           memcmp(c->k.mv_data, c->pfx, c->pfx_len) == 0;
}

/* Contract in obj_idx.h. */
int obj_idx_cur_seek(struct obj_idx_cur *c, const char *key, size_t key_len,
                     bool after)
{
    char kb[IDX_KEYMAX];
    int rc;

    if (key == NULL) {
        key = "";
        key_len = 0;
        after = false;
    }
    c->k.mv_size = mkkey(kb, c->pfx, key, key_len); /* pfx is bucket NUL */
    c->k.mv_data = kb;
    rc = mdb_cursor_get(c->c, &c->k, &c->v, MDB_SET_RANGE);
    c->off = 0;
    c->valid = rc == 0 && cur_in_bucket(c);
    if (rc != 0 && rc != MDB_NOTFOUND)
        return mdb_err(rc);
    if (!c->valid)
        return 0;
    /* the first group may hold keys before @key (same first bytes) */
    while (c->off < c->v.mv_size) {
        struct obj_idx_view v;
        ssize_t l = obj_idx_rec_view((const uint8_t *)c->v.mv_data + c->off,
                                     c->v.mv_size - c->off, &v);
        int cmp;

        if (l < 0)
            return (int)l;
        cmp = obj_key_cmp(v.key, v.key_len, key, key_len);
        if (cmp > 0 || (cmp == 0 && !after))
            break;
        c->off += (size_t)l;
    }
    return 0;
}

/* Contract in obj_idx.h. */
int obj_idx_cur_next(struct obj_idx_cur *c, struct obj_idx_view *v)
{
    while (c->valid) {
        if (c->off < c->v.mv_size) {
            ssize_t l = obj_idx_rec_view((const uint8_t *)c->v.mv_data + c->off,
                                         c->v.mv_size - c->off, v);

            if (l < 0)
                return (int)l;
            c->off += (size_t)l;
            return 0;
        }
        if (mdb_cursor_get(c->c, &c->k, &c->v, MDB_NEXT) != 0 ||
            !cur_in_bucket(c))
            c->valid = false;
        c->off = 0;
    }
    return -ENOENT;
}

/* Contract in obj_idx.h. */
void obj_idx_cur_close(struct obj_idx_cur *c)
{
    if (c == NULL)
        return;
    mdb_cursor_close(c->c);
    rtxn_put(c->t, c->slot);
    free(c);
}

/* Contract in obj_idx.h. */
int obj_idx_verify(struct obj_idx *x, const char *bucket, const bool *stop,
                   uint64_t *objects)
{
    struct obj_idx_cur *c;
    struct obj_idx_view v;
    uint64_t count = 0, sum = 0, want_count = 0, want_sum = 0, n = 0;
    char prev[STOR_MAX_KEY_LEN];
    size_t prev_len = 0;
    int ret = obj_idx_cur_open(x, bucket, &c);

    *objects = 0;
    if (ret < 0)
        return ret;
    /* the bucket record and the walk see one snapshot (c->t) */
    ret = bucket_read(x, c->t, bucket, NULL, &want_count, &want_sum);
    if (ret < 0) {
        obj_idx_cur_close(c);
        return ret;
    }
    ret = obj_idx_cur_seek(c, NULL, 0, false);
    while (ret == 0 && (ret = obj_idx_cur_next(c, &v)) == 0) {
        if (v.key_len > sizeof(prev) ||
            (n > 0 && obj_key_cmp(prev, prev_len, v.key, v.key_len) >= 0)) {
            ret = -EBADMSG; /* out of order, or not a key */
            break;
        }
        memcpy(prev, v.key, v.key_len);
        prev_len = v.key_len;
        n++;
        count++;
        sum += rec_term(v.rec, v.rec_len);
        if ((n & 4095) == 0 && stop && __atomic_load_n(stop, __ATOMIC_RELAXED))
            ret = -ECANCELED;
    }
    if (ret == -ENOENT) /* the end of the bucket */
        ret = count == want_count && sum == want_sum ? 0 : -EBADMSG;
    obj_idx_cur_close(c);
    *objects = count;
    return ret;
}

/* ---- keys in flight (reconcile after a crash) ---- */

/* LMDB key of a pending record: bucket NUL id. */
static size_t mkpendkey(char *buf, const char *bucket, const uint8_t id[16])
{
    size_t bl = strnlen(bucket, 63);

    memcpy(buf, bucket, bl);
    buf[bl] = 0;
    memcpy(buf + bl + 1, id, 16);
    return bl + 17;
}

/* Contract in obj_idx.h. */
int obj_idx_pend_add(struct obj_idx *x, const char *bucket,
                     const uint8_t id[16], const char *key, size_t key_len)
{
    char kb[64 + 16];
    MDB_val k = {mkpendkey(kb, bucket, id), kb};
    MDB_val v = {key_len, (void *)(uintptr_t)key};
    MDB_txn *t;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    return wtxn_end(t, mdb_err(mdb_put(t, x->pend, &k, &v, 0)));
}

/* Contract in obj_idx.h. */
int obj_idx_pend_add_pair(struct obj_idx *x, const char *bucket,
                          const uint8_t id[16], const char *key, size_t key_len,
                          const char *bucket2, const uint8_t id2[16],
                          const char *key2, size_t key2_len)
{
    char kb[64 + 16], kb2[64 + 16];
    MDB_val k = {mkpendkey(kb, bucket, id), kb};
    MDB_val v = {key_len, (void *)(uintptr_t)key};
    MDB_val k2 = {mkpendkey(kb2, bucket2, id2), kb2};
    MDB_val v2 = {key2_len, (void *)(uintptr_t)key2};
    MDB_txn *t;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    ret = mdb_err(mdb_put(t, x->pend, &k, &v, 0));
    if (ret == 0)
        ret = mdb_err(mdb_put(t, x->pend, &k2, &v2, 0));
    return wtxn_end(t, ret);
}

/* Contract in obj_idx.h. */
int obj_idx_pend_clear(struct obj_idx *x, const char *bucket,
                       const uint8_t id[16])
{
    char kb[64 + 16];
    MDB_val k = {mkpendkey(kb, bucket, id), kb};
    MDB_txn *t;
    int rc, ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    rc = mdb_del(t, x->pend, &k, NULL);
    return wtxn_end(t, rc == MDB_NOTFOUND ? 0 : mdb_err(rc));
}

/* Contract in obj_idx.h. */
int obj_idx_pend_each(struct obj_idx *x,
                      int (*fn)(void *arg, const char *bucket,
                                const uint8_t id[16], const char *key,
                                size_t key_len),
                      void *arg)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    MDB_cursor *c;
    MDB_val k, v;
    int rc, ret = walk_open(x, x->pend, &t, &slot, &c);

    if (ret < 0)
        return ret;
    rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
    while (rc == 0) {
        char bucket[64];
        const char *kp = k.mv_data;
        size_t bl = strnlen(kp, k.mv_size);

        if (bl >= sizeof(bucket) || k.mv_size != bl + 17 ||
            v.mv_size > STOR_MAX_KEY_LEN) {
            ret = -EBADMSG;
            break;
        }
        memcpy(bucket, kp, bl);
        bucket[bl] = 0;
        ret =
            fn(arg, bucket, (const uint8_t *)kp + bl + 1, v.mv_data, v.mv_size);
        if (ret != 0)
            break;
        rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(c);
    rtxn_put(t, slot);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_pend_drop_all(struct obj_idx *x)
{
    MDB_txn *t;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    return wtxn_end(t, mdb_err(mdb_drop(t, x->pend, 0)));
}

/* ---- the version lease ---- */

/* Contract in obj_idx.h. */
int obj_idx_lease_set(struct obj_idx *x, uint64_t lease)
{
    uint8_t rec[8];
    char lk[] = "l";
    MDB_val k = {1, lk}, v = {sizeof(rec), rec};
    MDB_txn *t;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    le_put(rec, lease, 8);
    return wtxn_end(t, mdb_err(mdb_put(t, x->sys, &k, &v, 0)));
}

/* Contract in obj_idx.h. */
int obj_idx_lease_get(struct obj_idx *x, uint64_t *lease)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    char lk[] = "l";
    MDB_val k = {1, lk}, v;
    int ret = rtxn_get(x, false, &t, &slot);

    if (ret < 0)
        return ret;
    ret = mdb_err(mdb_get(t, x->sys, &k, &v));
    if (ret == 0 && v.mv_size != 8)
        ret = -EBADMSG;
    if (ret == 0)
        *lease = le_get(v.mv_data, 8);
    rtxn_put(t, slot);
    return ret;
}

/* Contract in obj_idx.h. */
int obj_idx_away_set(struct obj_idx *x, const uint8_t *away, size_t n)
{
    char ak[] = IDX_SYS_AWAY;
    MDB_val k = {1, ak}, v = {n, (void *)(uintptr_t)away};
    MDB_txn *t;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    return wtxn_end(t, mdb_err(mdb_put(t, x->sys, &k, &v, 0)));
}

/* Contract in obj_idx.h. */
int obj_idx_away_clear(struct obj_idx *x)
{
    char ak[] = IDX_SYS_AWAY;
    MDB_val k = {1, ak};
    MDB_txn *t;
    int ret = mdb_err(mdb_txn_begin(x->env, NULL, 0, &t));

    if (ret < 0)
        return ret;
    ret = mdb_err(mdb_del(t, x->sys, &k, NULL));
    return wtxn_end(t, ret == -ENOENT ? 0 : ret);
}

/* Contract in obj_idx.h. */
int obj_idx_away_get(struct obj_idx *x, uint8_t *away, size_t n)
{
    MDB_txn *t;
    struct idx_rtxn *slot;
    char ak[] = IDX_SYS_AWAY;
    MDB_val k = {1, ak}, v;
    int ret = rtxn_get(x, false, &t, &slot);

    if (ret < 0)
        return ret;
    ret = mdb_err(mdb_get(t, x->sys, &k, &v));
    if (ret == 0 && v.mv_size != n)
        ret = -EBADMSG;
    if (ret == 0)
        memcpy(away, v.mv_data, n);
    rtxn_put(t, slot);
    return ret;
}

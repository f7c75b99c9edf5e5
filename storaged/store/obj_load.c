/* storaged/store/obj_load.c - builds the in-memory index from the drives at
 * start.
 *
 * DESIGN: every meta file of every online drive is read once. Per object
 * (file id) the newest version that is complete wins: an inline object needs
 * k meta copies, a shard-file object needs k shard files of every part; a
 * tombstone that is newer than every complete version deletes it. This is
 * what makes commits atomic across a crash (an incomplete newer version is
 * ignored, the previous one stays) and keeps a drive that missed overwrites
 * or deletes from resurrecting old data (its copies are older). Leftovers
 * (older metas, unreferenced shard files, tombstones) are removed only when
 * every drive of the set is online; missing copies are queued for healing. */
#include "storaged/store/obj_i.h"

#include "storaged/store/obj_idx.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
/* ids are already keyed hashes: take 4 of their bytes (and avoid uthash's
 * default Jenkins hash, whose switch falls through) */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                   \
    do {                                                                       \
        (void)(keylen);                                                        \
        memcpy(&(hashv), (keyptr), sizeof(unsigned));                          \
    } while (0)
#include "common/log.h"
#include <uthash.h>

struct ld_ver {
    uint64_t version;
    uint32_t mask;   /* set positions holding this version's meta */
    uint32_t mask_p; /* ... as a saved HEX.p copy */
    uint32_t mask_m; /* ... as the HEX.m itself */
    uint32_t mask_v; /* ... only as an overwrite's link (kept_as_copies) */
    int count;
    struct stor_meta m; /* owned: the first copy read, without its shard */
    struct obj_xref xref[OBJ_MAX_SHARDS]; /* an extent object's records,
                                             by shard, from every copy */
    uint8_t *body; /* owned: a small object's bytes (shard 0 of k = 1),
                      for the index's body table; or NULL */
    struct ld_ver *next;
};

/* Bytes of small bodies one object directory's candidates may hold (the
 * rest get none in the index: their GETs read the metas). */
#define LD_BODY_BUDGET (32u << 20)

struct ld_file {
    uint64_t dataid;
    uint32_t mask; /* set positions holding a shard file */
    struct ld_file *next;
};

/* A version kept at its base's files: HEX.vVERSION-SINCE (obj_ver.c). */
struct ld_kept {
    uint64_t version;
    int64_t since_ns;   /* when it stopped being current */
    uint32_t mask;      /* set positions holding it */
    int count;          /* positions holding a copy (not a tombstone) */
    bool dead;          /* some position holds a tombstone: deleted */
    struct stor_meta m; /* owned: the first copy read, without its shard */
    uint8_t *body;      /* owned: a small one's bytes (k = 1), or NULL */
    struct ld_kept *next;
};

struct ld_cand {
    uint8_t id[16];
    int set;       /* set of the drives it was found on */
    bool has_prev; /* some drive holds a HEX.p (interrupted overwrite) */
    struct ld_ver *vers;
    struct ld_file *files;
    struct ld_kept *kept;
    UT_hash_handle hh;
};

/* Parses 2n hex digits into @n bytes. 0 or -1. */
static int unhex(const char *p, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        char a = p[2 * i], b = p[2 * i + 1];

        hi = a >= '0' && a <= '9'   ? a - '0'
             : a >= 'a' && a <= 'f' ? a - 87
                                    : -1;
        lo = b >= '0' && b <= '9'   ? b - '0'
             : b >= 'a' && b <= 'f' ? b - 87
                                    : -1;
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Finds or adds the load candidate for @id; NULL on ENOMEM. */
static struct ld_cand *cand_get(struct ld_cand **tab, const uint8_t id[16],
                                int set)
{
    struct ld_cand *c;

    HASH_FIND(hh, *tab, id, 16, c);
    if (c)
        return c;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    memcpy(c->id, id, 16);
    c->set = set;
    HASH_ADD(hh, *tab, id, 16, c);
    return c;
}

/* Keeps the version clock ahead of everything seen on disk (atomic: the
 * merge, obj_load_merge, reads metas while requests take versions). */
static void raise_version(struct stor_store *s, uint64_t v)
{
    uint64_t cur = __atomic_load_n(&s->last_version, __ATOMIC_RELAXED);

    while (v > cur &&
           !__atomic_compare_exchange_n(&s->last_version, &cur, v, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The inline shard of @m when it is a whole small body the index keeps
 * (--index-body-max; k = 1, shard 0) and *@budget allows it: taken out of
 * @m (the caller owns it), else NULL. */
static uint8_t *take_body(const struct stor_store *s, struct stor_meta *m,
                          size_t *budget)
{
    uint8_t *body;

    if (budget == NULL || m->type != STOR_META_OBJECT || m->k != 1 ||
        m->shard != 0 || !m->has_inline || m->inl == NULL ||
        m->inl_len != m->size || m->size > s->body_max || m->size > *budget)
        return NULL;
    body = m->inl;
    m->inl = NULL;
    *budget -= m->size;
    return body;
}

/* Adds kept version @name (HEX.vVERSION-SINCE, in @dir at set position
 * @pos) to its candidate: a meta whose version is the one its name says. */
static void load_kept(struct stor_store *s, const char *dir, const char *name,
                      const uint8_t id[16], int pos, int set,
                      struct ld_cand **tab)
{
    char path[PATH_MAX];
    uint8_t vb[8], sb[8], *body;
    uint64_t version = 0, since = 0, m_size;
    struct stor_meta m;
    struct ld_cand *c;
    struct ld_kept *k;
    bool tomb;

    if (unhex(name + 34, 8, vb) < 0 || unhex(name + 51, 8, sb) < 0 ||
        snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return;
    for (int i = 0; i < 8; i++) {
        version = version << 8 | vb[i];
        since = since << 8 | sb[i];
    }
    if (stor_meta_read_file(path, &m) < 0) {
        cm_log(CM_LOG_WARN, 0, "load: %s: unreadable meta, ignored", path);
        return;
    }
    size_t budget = SIZE_MAX;

    body = take_body(s, &m, &budget); /* the index keeps its body too */
    m_size = m.size;
    free(m.inl);
    m.inl = NULL;
    m.inl_len = 0;
    /* a tombstone under that name: the version was deleted while a drive
     * of the set was offline (obj_ver_remove_kept) */
    tomb = m.type == STOR_META_TOMBSTONE;
    if ((!tomb &&
         (m.type != STOR_META_OBJECT || !m.has_inline || m.has_xref)) ||
        m.version != version || (c = cand_get(tab, id, set)) == NULL) {
        stor_meta_fini(&m);
        free(body);
        return;
    }
    raise_version(s, version);
    for (k = c->kept;
         k && (k->version != version || k->since_ns != (int64_t)since);
         k = k->next)
        ;
    if (k == NULL) {
        k = calloc(1, sizeof(*k));
        if (k == NULL) {
            stor_meta_fini(&m);
            return;
        }
        k->version = version;
        k->since_ns = (int64_t)since;
        k->m = m;
        k->next = c->kept;
        c->kept = k;
    } else {
        stor_meta_fini(&m);
    }
    if (body && k->body == NULL && k->m.size == m_size) {
        k->body = body;
        body = NULL;
    }
    free(body);
    if (tomb)
        k->dead = true;
    else if (!(k->mask & (1u << pos)))
        k->count++;
    k->mask |= 1u << pos;
}

/* Reads one object directory (DRIVE/b/BUCKET/hh) into the candidate table;
 * small bodies up to *@budget (NULL: none) come along. */
static void load_dir(struct stor_store *s, size_t d, const char *dir,
                     struct ld_cand **tab, const uint8_t *only, size_t *budget)
{
    DIR *dp = opendir(dir);
    struct dirent *de;
    int pos = s->drives[d].pos, set = s->drives[d].set;

    if (dp == NULL)
        return;
    while ((de = readdir(dp)) != NULL) {
        size_t nl = strlen(de->d_name);
        uint8_t id[16];
        struct ld_cand *c;

        if (nl < 34 || de->d_name[32] != '.' || unhex(de->d_name, 16, id) < 0)
            continue;
        if (only && memcmp(id, only, 16) != 0)
            continue;
        if (nl == 34 && (de->d_name[33] == 'm' || de->d_name[33] == 'p')) {
            bool prev = de->d_name[33] == 'p';
            char path[PATH_MAX];
            struct stor_meta m;
            struct ld_ver *v;
            uint8_t *body;
            uint64_t size;
            struct obj_xref xr;
            int xshard;

            if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
                (int)sizeof(path))
                continue;
            if (stor_meta_read_file(path, &m) < 0) {
                cm_log(CM_LOG_WARN, 0, "load: %s: unreadable meta, ignored",
                       path);
                continue;
            }
            if (m.key_len > 0) {
                uint8_t kid[16];

                /* another key's meta at this name: a reused spare inode
                 * (obj_jnl.c) whose new bytes a power cut lost */
                obj_key_id(s, m.key, m.key_len, kid);
                if (memcmp(kid, id, 16) != 0) {
                    cm_log(CM_LOG_WARN, 0,
                           "load: %s: the meta of another key, ignored", path);
                    stor_meta_fini(&m);
                    continue;
                }
            }
            if (m.type != STOR_META_OBJECT && m.type != STOR_META_TOMBSTONE) {
                stor_meta_fini(&m);
                continue;
            }
            /* the index needs the record, not the shard: a rebuild holds
             * one HH directory's candidates, without their shards (but
             * with small bodies, within a budget) */
            body = take_body(s, &m, budget);
            size = m.size; /* m may be gone below */
            xr = (struct obj_xref){.file = m.has_xref ? m.xfile : 0,
                                   .off = m.xoff};
            xshard = m.shard;
            free(m.inl);
            m.inl = NULL;
            m.inl_len = 0;
            raise_version(s, m.version);
            c = cand_get(tab, id, set);
            if (c == NULL) {
                stor_meta_fini(&m);
                free(body);
                continue;
            }
            for (v = c->vers; v && v->version != m.version; v = v->next)
                ;
            if (v == NULL) {
                v = calloc(1, sizeof(*v));
                if (v == NULL) {
                    stor_meta_fini(&m);
                    free(body);
                    continue;
                }
                v->version = m.version;
                v->m = m;
                v->next = c->vers;
                c->vers = v;
            } else {
                stor_meta_fini(&m);
            }
            if (xr.file && xshard >= 0 && xshard < OBJ_MAX_SHARDS)
                v->xref[xshard] = xr; /* where that shard's record is */
            if (body && v->body == NULL && v->m.size == size) {
                v->body = body;
                body = NULL;
            }
            free(body);
            if (!(v->mask & (1u << pos)))
                v->count++;
            v->mask |= 1u << pos;
            if (prev)
                v->mask_p |= 1u << pos;
            if (prev)
                c->has_prev = true;
            else
                v->mask_m |= 1u << pos;
        } else if (nl == 32 + 2 + 16 + 1 + 16 && de->d_name[33] == 'v' &&
                   de->d_name[50] == '-') {
            load_kept(s, dir, de->d_name, id, pos, set, tab);
        } else if (nl == 32 + 1 + 16) {
            uint8_t did[8];
            uint64_t dataid = 0;
            struct ld_file *f;

            if (unhex(de->d_name + 33, 8, did) < 0)
                continue;
            for (int i = 0; i < 8; i++)
                dataid = dataid << 8 | did[i];
            raise_version(s, dataid);
            c = cand_get(tab, id, set);
            if (c == NULL)
                continue;
            for (f = c->files; f && f->dataid != dataid; f = f->next)
                ;
            if (f == NULL) {
                f = calloc(1, sizeof(*f));
                if (f == NULL)
                    continue;
                f->dataid = dataid;
                f->next = c->files;
                c->files = f;
            }
            f->mask |= 1u << pos;
        }
    }
    closedir(dp);
}

/* Bits set in @v. */
static int popcount32(uint32_t v)
{
    return __builtin_popcount(v);
}

/* Set positions holding a shard file with @dataid. */
static uint32_t file_mask(const struct ld_cand *c, uint64_t dataid)
{
    for (const struct ld_file *f = c->files; f; f = f->next)
        if (f->dataid == dataid)
            return f->mask;
    return 0;
}

/* Is version @v readable: k copies of the inline shard, or k shard files
 * of every part? */
static bool ver_complete(const struct ld_cand *c, const struct ld_ver *v)
{
    const struct stor_meta *m = &v->m;

    if (m->has_inline)
        return v->count >= m->k;
    for (size_t p = 0; p < m->nparts; p++)
        if (m->parts[p].size > 0 &&
            popcount32(file_mask(c, m->parts[p].dataid)) < m->k)
            return false;
    return m->nparts > 0 || m->size == 0;
}

/* True when every drive of @set is online. */
static bool set_all_online(struct stor_store *s, int set)
{
    return obj_set_online(s, set) == s->set_size;
}

/* An overwrite of an inline object was interrupted: where the winner is a
 * saved HEX.p copy, put it back as HEX.m; then drop every HEX.p. */
static void settle_prev(struct stor_store *s, const char *bucket,
                        struct ld_cand *c, const struct ld_ver *win)
{
    for (int pos = 0; pos < s->set_size; pos++) {
        size_t d = (size_t)c->set * s->set_size + pos;
        char m[PATH_MAX], pv[PATH_MAX];
        size_t n;

        if (!obj_drive_online(s, d) ||
            obj_path_meta(m, sizeof(m), s->drives[d].path, bucket, c->id) < 0)
            continue;
        memcpy(pv, m, sizeof(pv));
        n = strlen(pv);
        pv[n - 1] = 'p';
        if (win && (win->mask_p & (1u << pos)) &&
            !(win->mask_m & (1u << pos)) && rename(pv, m) == 0)
            continue;
        unlink(pv);
    }
}

/* Could version @v have been acknowledged: would its metas reach its
 * write quorum if each of the @off positions of its set that are offline
 * held one? (A commit answers only once that many are in place.) */
static bool ver_maybe_acked(struct stor_store *s, const struct ld_ver *v,
                            int off)
{
    return v->count + off >= obj_write_quorum(s, v->m.k, v->m.m);
}

/* Offline drives among the placement of version @m of a key of @bucket:
 * how many of its copies a start cannot see. */
static int place_off(struct stor_store *s, const char *bucket,
                     const struct stor_meta *m)
{
    struct stor_place pl;
    int off = 0;

    obj_place(s, bucket, m->key, m->key_len, &pl);
    for (int j = 0; j < m->k + m->m; j++)
        off += !obj_drive_online(s, obj_shard_drive(s, &pl, j));
    return off;
}

/* A versioned overwrite through the journal saves no HEX.p (obj_io.c):
 * its links HEX.vVERSION-SINCE, with an even SINCE, are its copies of the
 * version it replaces. Where some HEX.m (or HEX.p) still holds that
 * version, the overwrite's renames did not all happen (a crash), and each
 * position holding such a link counts as a copy of it, as a HEX.p would
 * (FORMAT.md "Versions"). Never for a version no HEX.m holds: a kept
 * version is not made current again by its links. Nor while a newer
 * version may have been acknowledged, with its metas on the drives of the
 * set that are offline (ver_maybe_acked): a HEX.m of the old version is
 * then also what a drive away during that overwrite kept (a stale drive),
 * and the links would roll it back and settle_kept would rename over its
 * copies. A cut overwrite never reached its quorum: with every drive
 * online, or fewer away than it lacks, its links count as before. */
static void kept_as_copies(struct stor_store *s, struct ld_cand *c)
{
    int off = s->set_size - obj_set_online(s, c->set);

    for (const struct ld_kept *k = c->kept; k; k = k->next) {
        struct ld_ver *v;
        bool newer = false;
        uint32_t add;

        if ((k->since_ns & 1) || k->dead)
            continue;
        for (v = c->vers; v && v->version != k->version; v = v->next)
            ;
        if (v == NULL || v->m.type != STOR_META_OBJECT ||
            !(v->mask_m | v->mask_p))
            continue;
        for (const struct ld_ver *w = c->vers; off > 0 && w && !newer;
             w = w->next)
            newer = w->version > v->version && w->m.type == STOR_META_OBJECT &&
                    ver_maybe_acked(s, w, off);
        if (newer)
            continue;
        add = k->mask & ~v->mask;
        v->count += popcount32(add);
        v->mask |= add;
        v->mask_v |= add;
    }
}

/* Where the winner @win is a copy only as an overwrite's link
 * (kept_as_copies), that link goes back to HEX.m (renamed over whatever
 * the interrupted overwrite left there); resolve_kept drops the others. */
static void settle_kept(struct stor_store *s, const char *bucket,
                        const struct ld_cand *c, const struct ld_ver *win)
{
    uint32_t done = 0;

    for (const struct ld_kept *k = c->kept; k && win && win->mask_v;
         k = k->next) {
        if ((k->since_ns & 1) || k->dead || k->version != win->version)
            continue;
        for (int pos = 0; pos < s->set_size; pos++) {
            size_t d = (size_t)c->set * s->set_size + pos;
            char m[PATH_MAX], v[PATH_MAX];
            uint32_t bit = 1u << pos;

            if (!(win->mask_v & k->mask & bit) || (done & bit) ||
                !obj_drive_online(s, d) ||
                obj_path_meta(m, sizeof(m), s->drives[d].path, bucket, c->id) <
                    0 ||
                obj_path_kept(v, sizeof(v), s->drives[d].path, bucket, c->id,
                              k->version, k->since_ns) < 0)
                continue;
            if (rename(v, m) == 0)
                done |= bit;
        }
    }
}

/* Removes leftovers of one object on drive positions of its set. */
static void cleanup_cand(struct stor_store *s, const char *bucket,
                         const struct ld_cand *c, const struct ld_ver *win)
{
    char path[PATH_MAX];

    for (int pos = 0; pos < s->set_size; pos++) {
        size_t d = (size_t)c->set * s->set_size + pos;
        bool meta_ok = false;

        if (win && (win->mask & (1u << pos)))
            meta_ok = true;
        if (!meta_ok && win) {
            /* a drive in the winner's placement gets a healed copy */
            struct stor_place pl;

            obj_place(s, bucket, win->m.key, win->m.key_len, &pl);
            for (int j = 0; j < win->m.k + win->m.m; j++)
                if (obj_shard_drive(s, &pl, j) == d)
                    meta_ok = true;
        }
        if (!meta_ok && obj_path_meta(path, sizeof(path), s->drives[d].path,
                                      bucket, c->id) == 0)
            unlink(path);
        for (const struct ld_file *f = c->files; f; f = f->next) {
            bool used = false;

            if (!(f->mask & (1u << pos)))
                continue;
            for (size_t p = 0; win && p < win->m.nparts; p++)
                if (win->m.parts[p].dataid == f->dataid)
                    used = true;
            if (!used && obj_path_shard(path, sizeof(path), s->drives[d].path,
                                        bucket, c->id, f->dataid) == 0)
                unlink(path);
        }
    }
}

/* Frees candidate @c (out of its table). */
static void cand_free(struct ld_cand *c)
{
    while (c->kept) {
        struct ld_kept *k = c->kept;

        c->kept = k->next;
        stor_meta_fini(&k->m);
        free(k->body);
        free(k);
    }
    while (c->vers) {
        struct ld_ver *v = c->vers;

        c->vers = v->next;
        stor_meta_fini(&v->m);
        free(v->body);
        free(v);
    }
    while (c->files) {
        struct ld_file *f = c->files;

        c->files = f->next;
        free(f);
    }
    free(c);
}

/* Puts @n entries into @x in one transaction, with the small bodies that
 * came with them (@bodies[i] NULL: none). */
static int put_with_bodies(struct obj_idx *x, const char *bucket,
                           struct obj_ent *const *ents, uint8_t *const *bodies,
                           size_t n)
{
    struct obj_idx_body *bs = NULL;
    const struct obj_idx_body **bp = NULL;
    int ret;

    if (n) {
        bs = calloc(n, sizeof(*bs));
        bp = calloc(n, sizeof(*bp));
        if (bs == NULL || bp == NULL) {
            free(bs);
            free(bp);
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (bodies[i] == NULL || !ents[i]->inl || ents[i]->k != 1)
            continue;
        bs[i] =
            (struct obj_idx_body){.shard = (const uint8_t *const *)&bodies[i],
                                  .shard_len = (size_t)ents[i]->size,
                                  .k = 1,
                                  .size = (size_t)ents[i]->size};
        bp[i] = &bs[i];
    }
    ret = obj_idx_put_many_body(x, bucket, ents, bp, n);
    free(bs);
    free(bp);
    return ret;
}

/* The kept versions of candidate @c (its current version @win, may be
 * NULL) into index @x: each readable one (k copies) older than @win gets
 * its companion record (non-current since the time its name carries); one
 * not older than @win is a link left by a commit that did not finish
 * (dropped, without @dry). */
static int resolve_kept(struct stor_store *s, struct obj_bucket *b,
                        struct ld_cand *c, const struct ld_ver *win,
                        struct obj_idx *x, bool dry)
{
    int ret = 0;

    for (struct ld_kept *k = c->kept; k && ret == 0; k = k->next) {
        struct obj_ent *cur, *ve = NULL;
        struct stor_place pl;
        char vb[64];

        if ((int64_t)k->version < b->created_ns)
            continue; /* from an earlier bucket of the same name */
        obj_place(s, b->name, k->m.key, k->m.key_len, &pl);
        if (k->dead) { /* deleted: its files go once no drive can miss it */
            if (!dry && set_all_online(s, c->set))
                obj_ver_unlink_kept(s, b->name, c->id, k->version, k->since_ns,
                                    &pl, k->m.k + k->m.m, UINT32_MAX);
            continue;
        }
        if (win && k->version >= win->version) {
            if (!dry)
                obj_ver_unlink_kept(s, b->name, c->id, k->version, k->since_ns,
                                    &pl, k->m.k + k->m.m, k->mask);
            continue;
        }
        if (k->count < k->m.k)
            continue; /* unreadable: left on the drives as it is */
        cur = obj_ent_from_meta(&k->m, c->id);
        if (cur == NULL ||
            obj_ver_kept_ent(s, b->name, cur, k->since_ns, vb, &ve) < 0) {
            ret = -ENOMEM;
        } else if (obj_bucket_find(s, vb) == NULL) {
            cm_log(CM_LOG_WARN, 0,
                   "load: bucket %s: a kept version without its companion "
                   "bucket %s, ignored",
                   b->name, vb);
        } else {
            const uint8_t *sh[1] = {k->body};
            struct obj_idx_body bd = {.shard = sh,
                                      .shard_len = (size_t)ve->size,
                                      .k = 1,
                                      .size = (size_t)ve->size};
            const struct obj_idx_body *bp[1] = {k->body ? &bd : NULL};

            ret = obj_idx_put_many_body(x, vb, &ve, bp, 1);
        }
        obj_ent_free(ve);
        obj_ent_free(cur);
    }
    return ret;
}

/* A versioned DELETE answered before its metas went (obj_io.c, the
 * queue): @c's winner @win has a kept link of its own version made by a
 * DELETE (SINCE odd; an overwrite's is even), readable (k copies) or
 * deleted since: @win is that kept version, not a current one. */
static bool del_kept(const struct ld_cand *c, const struct ld_ver *win)
{
    for (const struct ld_kept *k = c->kept; k; k = k->next)
        if (k->version == win->version && (k->since_ns & 1) &&
            (k->dead || k->count >= k->m.k))
            return true;
    return false;
}

/* Makes the directory entries of @c (its kept links) durable on every
 * online drive of its set, before its HEX.m files go. */
static void sync_cand_dirs(struct stor_store *s, const char *bucket,
                           const struct ld_cand *c)
{
    for (int pos = 0; pos < s->set_size; pos++) {
        size_t d = (size_t)c->set * s->set_size + pos;
        char dir[PATH_MAX];

        if (obj_drive_online(s, d) &&
            obj_path_dir(dir, sizeof(dir), s->drives[d].path, bucket, c->id) ==
                0)
            (void)stor_fsync_dir(dir);
    }
}

/* Picks the winner of each candidate and puts it into index @x (one write
 * transaction for the lot). Without @dry, settles interrupted overwrites,
 * removes leftovers and queues missing copies for healing. *n: objects put;
 * *unsure: candidates left without a winner because their newest version
 * may be whole on drives of their set that are offline (FORMAT.md
 * "Rebuilt with drives away"). */
static int resolve(struct stor_store *s, struct obj_bucket *b,
                   struct ld_cand **tab, struct obj_idx *x, bool dry, bool kept,
                   uint64_t *n, uint64_t *unsure)
{
    struct ld_cand *c, *tmp;
    struct obj_ent **ents = NULL;
    uint8_t **bodies = NULL; /* owned, by entry: the winner's small body */
    size_t nents = 0, cap = HASH_COUNT(*tab);
    int ret = 0;

    if (cap) {
        ents = calloc(cap, sizeof(*ents));
        bodies = calloc(cap, sizeof(*bodies));
        if (ents == NULL || bodies == NULL)
            ret = -ENOMEM;
    }
    HASH_ITER(hh, *tab, c, tmp)
    {
        struct ld_ver *win = NULL, *best = NULL;
        bool away = !set_all_online(s, c->set), undecided = away && c->vers;
        int off;

        if (c->kept)
            kept_as_copies(s, c);
        /* newest first */
        for (;;) {
            struct ld_ver *cand = NULL;

            for (struct ld_ver *v = c->vers; v; v = v->next)
                if ((best == NULL || v->version < best->version) &&
                    (cand == NULL || v->version > cand->version))
                    cand = v;
            if (cand == NULL)
                break;
            best = cand;
            if ((int64_t)cand->version < b->created_ns) {
                undecided = false;
                break; /* from an earlier bucket of the same name */
            }
            if (cand->m.type == STOR_META_TOMBSTONE) {
                undecided = false;
                break; /* deleted */
            }
            if (ver_complete(c, cand)) {
                win = cand;
                undecided = false;
                break;
            }
            /* short of k here, but it may have been acknowledged with its
             * other copies on the drives away: no older version wins over
             * it (that would roll an acknowledged write back, and settle
             * the old copies over its metas); the key waits for a start
             * with those drives back (FORMAT.md "Rebuilt with drives
             * away") */
            if (away && cand->m.type == STOR_META_OBJECT &&
                (off = place_off(s, b->name, &cand->m)) > 0 &&
                ver_maybe_acked(s, cand, off))
                break;
        }
        if (undecided && unsure)
            (*unsure)++;
        if (win && c->kept && del_kept(c, win)) {
            /* FORMAT.md "Versions": a DELETE's HEX.m left for the queue */
            if (!dry)
                sync_cand_dirs(s, b->name, c);
            win = NULL;
        }
        if (win && ret == 0) {
            struct obj_ent *e = obj_ent_from_meta(&win->m, c->id);

            for (int j = 0; e && e->inl && j < OBJ_MAX_SHARDS; j++)
                if (win->xref[j].file)
                    e->ext = true; /* any copy in an extent (FORMAT.md) */
            if (e && e->ext) {     /* the index keeps where the shards are */
                size_t nx = (size_t)(e->k + e->m);

                e->xref = malloc(nx * sizeof(*e->xref));
                if (e->xref == NULL) {
                    obj_ent_free(e);
                    e = NULL;
                } else {
                    memcpy(e->xref, win->xref, nx * sizeof(*e->xref));
                }
            }
            if (e == NULL) {
                ret = -ENOMEM;
            } else {
                bool heal = win->count < win->m.k + win->m.m || c->vers->next;

                bodies[nents] = win->body;
                win->body = NULL;
                ents[nents++] = e;
                for (size_t p = 0; p < win->m.nparts; p++)
                    if (popcount32(file_mask(c, win->m.parts[p].dataid)) <
                        win->m.k + win->m.m)
                        heal = true;
                if (heal && !dry)
                    obj_heal_queue(s, b->name, e->key, e->key_len);
            }
        }
        /* undecided: a saved HEX.p may be the copy a later start needs */
        if (!dry && c->has_prev && !undecided)
            settle_prev(s, b->name, c, win);
        if (!dry && win && win->mask_v)
            settle_kept(s, b->name, c, win);
        if (!dry && set_all_online(s, c->set))
            cleanup_cand(s, b->name, c, win);
        if (kept && c->kept && ret == 0)
            ret = resolve_kept(s, b, c, win, x, dry);
        HASH_DEL(*tab, c);
        cand_free(c);
    }
    if (ret == 0)
        ret = put_with_bodies(x, b->name, ents, bodies, nents);
    if (ret == 0)
        *n += nents;
    for (size_t i = 0; i < nents; i++) {
        obj_ent_free(ents[i]);
        free(bodies[i]);
    }
    free(ents);
    free(bodies);
    return ret;
}

/* Loads multipart uploads of @b from DRIVE/.ecfs.sys/mpu/BUCKET/. */
static void load_uploads(struct stor_store *s, struct obj_bucket *b)
{
    for (size_t d = 0; d < s->ndrives; d++) {
        char dir[PATH_MAX];
        DIR *dp;
        struct dirent *de;

        if (!obj_drive_online(s, d) ||
            obj_path_upload(dir, sizeof(dir), s->drives[d].path, b->name, NULL,
                            NULL) < 0)
            continue;
        dp = opendir(dir);
        if (dp == NULL)
            continue;
        while ((de = readdir(dp)) != NULL) {
            char path[PATH_MAX];
            struct stor_meta m;
            struct obj_upload *u = NULL;
            DIR *up;
            struct dirent *pe;

            if (strlen(de->d_name) != 32)
                continue;
            for (size_t i = 0; i < b->nup; i++)
                if (strcmp(b->up[i]->uid, de->d_name) == 0)
                    u = b->up[i];
            if (u == NULL) {
                if (obj_path_upload(path, sizeof(path), s->drives[d].path,
                                    b->name, de->d_name, "upload.m") < 0 ||
                    stor_meta_read_file(path, &m) < 0)
                    continue;
                if (m.type != STOR_META_UPLOAD) {
                    stor_meta_fini(&m);
                    continue;
                }
                u = calloc(1, sizeof(*u));
                if (u == NULL) {
                    stor_meta_fini(&m);
                    continue;
                }
                u->key = m.key;
                u->key_len = m.key_len;
                u->hdrs = m.hdrs;
                u->nhdrs = m.nhdrs;
                m.key = NULL;
                m.hdrs = NULL;
                m.nhdrs = 0;
                memcpy(u->uid, de->d_name, 33);
                u->initiated_ns = m.mtime_ns;
                obj_key_id(s, u->key, u->key_len, u->id);
                stor_meta_fini(&m);
                if (obj_upload_insert(b, u) < 0) {
                    free(u->key);
                    obj_hdrs_free(u->hdrs, u->nhdrs);
                    free(u);
                    continue;
                }
            }
            if (obj_path_upload(path, sizeof(path), s->drives[d].path, b->name,
                                de->d_name, NULL) < 0)
                continue;
            up = opendir(path);
            if (up == NULL)
                continue;
            while ((pe = readdir(up)) != NULL) {
                char pp[PATH_MAX];
                uint64_t old;

                if (pe->d_name[0] != 'p' || strstr(pe->d_name, ".m") == NULL)
                    continue;
                if (snprintf(pp, sizeof(pp), "%s/%s", path, pe->d_name) >=
                        (int)sizeof(pp) ||
                    stor_meta_read_file(pp, &m) < 0)
                    continue;
                if (m.type == STOR_META_PART && m.nparts == 1) {
                    bool newer = true;

                    raise_version(s, m.parts[0].dataid);
                    for (size_t i = 0; i < u->nparts; i++)
                        if (u->parts[i].number == m.parts[0].number &&
                            u->parts[i].dataid >= m.parts[0].dataid)
                            newer = false;
                    if (newer) /* the part's headers go with it */
                        (void)obj_upload_set_part(u, &m.parts[0], m.hdrs,
                                                  m.nhdrs, &old);
                    else
                        obj_hdrs_free(m.hdrs, m.nhdrs);
                    m.hdrs = NULL;
                    m.nhdrs = 0;
                }
                stor_meta_fini(&m);
            }
            closedir(up);
        }
        closedir(dp);
    }
}

/* Reads DRIVE/b/NAME/bucket: 0 and *created, or -errno. */
static int bucket_record(struct stor_store *s, size_t d, const char *name,
                         int64_t *created)
{
    char path[PATH_MAX];
    FILE *fp;
    long long c;
    int ret = -EBADMSG;

    if (snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s/bucket",
                 s->drives[d].path, name) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    fp = fopen(path, "re");
    if (fp == NULL)
        return -errno;
    if (fscanf(fp, "created_ns=%lld", &c) == 1) {
        *created = c;
        ret = 0;
    }
    fclose(fp);
    return ret;
}

/* A drive whose record of bucket @b is missing or from another
 * incarnation of the bucket (it missed a delete and re-create) holds only
 * stale objects: empty its bucket directory and give it the current record.
 * Returns true when the drive's objects may be loaded. */
static bool bucket_drive_current(struct stor_store *s, size_t d,
                                 const struct obj_bucket *b)
{
    char dir[PATH_MAX], path[PATH_MAX];
    int64_t c = 0;
    FILE *fp;

    int r = bucket_record(s, d, b->name, &c);

    if (r == 0 && c == b->created_ns)
        return true;
    if (r == -ENOENT) {
        /* offline when the bucket was made, or a crash in the middle of a
         * delete: give it the record; older objects are filtered by
         * version in resolve() */
        if (snprintf(path, sizeof(path), "%s/" STOR_BUCKETS "/%s/bucket",
                     s->drives[d].path, b->name) >= (int)sizeof(path))
            return false;
        fp = fopen(path, "we");
        if (fp) {
            fprintf(fp, "created_ns=%lld\n", (long long)b->created_ns);
            fclose(fp);
        }
        return true;
    }
    if (snprintf(dir, sizeof(dir), "%s/" STOR_BUCKETS "/%s", s->drives[d].path,
                 b->name) >= (int)sizeof(dir))
        return false;
    cm_log(CM_LOG_WARN, 0,
           "load: drive %s: stale copy of bucket %s, "
           "emptied",
           s->drives[d].path, b->name);
    (void)stor_rmtree(dir);
    if (stor_mkdirs(dir) < 0)
        return false;
    if (snprintf(path, sizeof(path), "%s/bucket", dir) >= (int)sizeof(path))
        return false;
    fp = fopen(path, "we");
    if (fp) {
        fprintf(fp, "created_ns=%lld\n", (long long)b->created_ns);
        fclose(fp);
    }
    return false;
}

/* Finds the buckets: a bucket record on more than half the online drives. */
static int load_buckets(struct stor_store *s)
{
    size_t online = 0;

    for (size_t d = 0; d < s->ndrives; d++)
        online += obj_drive_online(s, d);
    for (size_t d = 0; d < s->ndrives; d++) {
        char dir[PATH_MAX];
        DIR *dp;
        struct dirent *de;

        if (!obj_drive_online(s, d))
            continue;
        snprintf(dir, sizeof(dir), "%s/" STOR_BUCKETS, s->drives[d].path);
        dp = opendir(dir);
        if (dp == NULL)
            continue;
        while ((de = readdir(dp)) != NULL) {
            size_t have = 0, best = 0;
            int64_t created = 0;
            int64_t *vals = calloc(s->ndrives, sizeof(*vals));
            int ret;

            if (vals == NULL) {
                closedir(dp);
                return -ENOMEM;
            }
            if (!obj_valid_bucket(de->d_name) ||
                obj_bucket_find(s, de->d_name)) {
                free(vals);
                continue;
            }
            for (size_t e = 0; e < s->ndrives; e++) {
                if (!obj_drive_online(s, e) ||
                    bucket_record(s, e, de->d_name, &vals[have]) < 0)
                    continue;
                have++;
            }
            /* the creation time most drives agree on (ties: the newest):
             * a drive that missed a delete and re-create holds an older one */
            for (size_t i = 0; i < have; i++) {
                size_t cnt = 0;

                for (size_t j = 0; j < have; j++)
                    cnt += vals[j] == vals[i];
                if (cnt > best || (cnt == best && vals[i] > created)) {
                    best = cnt;
                    created = vals[i];
                }
            }
            free(vals);
            have = best;
            if (have * 2 <= online && !(online == 1 && have == 1))
                continue;
            raise_version(s, (uint64_t)created);
            ret = obj_bucket_add_loaded(s, de->d_name, created, NULL);
            if (ret < 0) {
                closedir(dp);
                return ret;
            }
        }
        closedir(dp);
    }
    return 0;
}

/* ---- the index: where it is, whether to trust it ---- */

#define IDX_DIR         OBJ_IDX_DIR
#define IDX_PTR         OBJ_IDX_PTR
#define IDX_COMPACT_TMP "data.mdb.compact" /* a clean close's copy */
#define IDX_COMPACT_MIN (64ULL << 20)      /* free bytes worth compacting */

/* The pointer record every online drive keeps (FORMAT.md): which drive
 * holds the index of which generation, and whether it was closed cleanly
 * (then with the identity of its data file: size, inode, mtime, ctime). */
struct idx_ptr {
    bool valid;
    char deployment[33];
    uint64_t gen;
    size_t drive;
    bool clean;
    uint64_t size, ino, mtime_ns, ctime_ns;
    char boot[40]; /* the kernel's boot id when the run opened it (dirty) */
};

/* This boot's id (/proc/sys/kernel/random/boot_id) into @out, "" if none. */
static void boot_id(char out[40])
{
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");

    out[0] = 0;
    if (fp == NULL)
        return;
    if (fscanf(fp, "%39s", out) != 1)
        out[0] = 0;
    fclose(fp);
}

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads DRIVE/.ecfs.sys/index.state; p->valid when well-formed. */
static void ptr_read(const char *drive, struct idx_ptr *p)
{
    char path[PATH_MAX], line[128];
    FILE *fp;
    int seen = 0, ver = 0;

    memset(p, 0, sizeof(*p));
    if (snprintf(path, sizeof(path), "%s/" IDX_PTR, drive) >= (int)sizeof(path))
        return;
    fp = fopen(path, "re");
    if (fp == NULL)
        return;
    while (fgets(line, sizeof(line), fp)) {
        unsigned long long v;
        char hex[41];

        if (sscanf(line, "version=%d", &ver) == 1)
            seen |= 1;
        else if (sscanf(line, "deployment=%32[0-9a-f]", hex) == 1 &&
                 strlen(hex) == 32) {
            memcpy(p->deployment, hex, 33);
            seen |= 2;
        } else if (sscanf(line, "gen=%llu", &v) == 1) {
            p->gen = v;
            seen |= 4;
        } else if (sscanf(line, "drive=%llu", &v) == 1) {
            p->drive = (size_t)v;
            seen |= 8;
        } else if (sscanf(line, "clean=%llu", &v) == 1) {
            p->clean = v == 1;
            seen |= 16;
        } else if (sscanf(line, "size=%llu", &v) == 1) {
            p->size = v;
        } else if (sscanf(line, "ino=%llu", &v) == 1) {
            p->ino = v;
        } else if (sscanf(line, "mtime=%llu", &v) == 1) {
            p->mtime_ns = v;
        } else if (sscanf(line, "ctime=%llu", &v) == 1) {
            p->ctime_ns = v;
        } else if (sscanf(line, "boot=%39s", hex) == 1) {
            memcpy(p->boot, hex, sizeof(p->boot));
        }
    }
    fclose(fp);
    p->valid = seen == 31 && ver == 2; /* 1: a CRC-64, not the identity */
}

/* Writes @p as DRIVE/.ecfs.sys/index.state (stor_sys_file_replace). */
static int ptr_write(const char *drive, const struct idx_ptr *p)
{
    char body[512];
    int len;

    len = snprintf(body, sizeof(body),
                   "# ecfs storaged index pointer; do not edit\n"
                   "version=2\ndeployment=%s\ngen=%llu\ndrive=%zu\n"
                   "clean=%d\nsize=%llu\nino=%llu\nmtime=%llu\nctime=%llu\n"
                   "boot=%s\n",
                   p->deployment, (unsigned long long)p->gen, p->drive,
                   p->clean ? 1 : 0, (unsigned long long)p->size,
                   (unsigned long long)p->ino, (unsigned long long)p->mtime_ns,
                   (unsigned long long)p->ctime_ns, p->boot[0] ? p->boot : "-");
    return stor_sys_file_replace(drive, IDX_PTR, body, (size_t)len);
}

/* Writes the pointer on every online drive; how many took it. */
static size_t ptr_write_all(struct stor_store *s, const struct idx_ptr *p)
{
    size_t ok = 0;

    for (size_t d = 0; d < s->ndrives; d++) {
        int r;

        if (!obj_drive_online(s, d))
            continue;
        r = ptr_write(s->drives[d].path, p);
        if (r == 0)
            ok++;
        else
            cm_log(CM_LOG_WARN, -r, "index: drive %s: cannot write %s",
                   s->drives[d].path, IDX_PTR);
    }
    return ok;
}

/* The identity of the file at @path into @p: size, inode, mtime and ctime
 * (ns). Any write to the file, a copy or a replacement changes one of them
 * (ctime cannot be set back from user space). 0 or -errno. */
static int file_ident(const char *path, struct idx_ptr *p)
{
    struct stat st;

    if (stat(path, &st) < 0)
        return -errno;
    p->size = (uint64_t)st.st_size;
    p->ino = (uint64_t)st.st_ino;
    p->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                  (uint64_t)st.st_mtim.tv_nsec;
    p->ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000u +
                  (uint64_t)st.st_ctim.tv_nsec;
    return 0;
}

static int idx_dir(char *buf, size_t cap, const char *drive)
{
    return snprintf(buf, cap, "%s/" IDX_DIR, drive) >= (int)cap ? -ENAMETOOLONG
                                                                : 0;
}

struct bucket_cmp {
    struct stor_store *s;
    size_t seen;
};

/* obj_idx_bucket_each callback: does the index know this bucket as the
 * drives do? */
static int bucket_matches(void *arg, const char *bucket, int64_t created,
                          uint64_t count)
{
    struct bucket_cmp *bc = arg;
    struct obj_bucket *b = obj_bucket_find(bc->s, bucket);

    (void)count;
    if (b == NULL || b->created_ns != created)
        return 1;
    bc->seen++;
    return 0;
}

/* The newest pointer among the online drives (a clean one wins a tie). */
static void ptr_newest(struct stor_store *s, struct idx_ptr *best)
{
    memset(best, 0, sizeof(*best));
    for (size_t d = 0; d < s->ndrives; d++) {
        struct idx_ptr p;

        if (!obj_drive_online(s, d))
            continue;
        ptr_read(s->drives[d].path, &p);
        if (!p.valid || strcmp(p.deployment, s->deployment) != 0)
            continue;
        if (!best->valid || p.gen > best->gen ||
            (p.gen == best->gen && p.clean && !best->clean))
            *best = p;
    }
}

/* Whether error @err of reading the index file says something about the
 * file itself: not an LMDB file, damaged, of another LMDB version or our
 * format (-EBADMSG), gone (-ENOENT), or unreadable on its drive (-EIO:
 * LMDB's own panics too). Such an index is rebuilt from the metas. Any
 * other error comes from the process's environment (no memory or address
 * space, no descriptors, no permission, a lock held, a read-only file
 * system, full reader slots): the file may be fine, and rebuilding would
 * throw it away and most likely fail the same way, so the start fails with
 * the error instead. */
static bool idx_err_is_damage(int err)
{
    return err == -EBADMSG || err == -ENOENT || err == -EIO;
}

/* An index rebuilt while drives were away (FORMAT.md "Rebuilt with drives
 * away") is trusted only while all of them are still away: with one back,
 * keys whose copies are on it may be missing, and the start rebuilds (1,
 * *why). 0: trusted (s->idx_away takes the drives it names, if any), or
 * -errno and *why. */
static int away_check(struct stor_store *s, struct obj_idx *x, const char **why)
{
    uint8_t *away = malloc(s->ndrives);
    int ret;

    if (away == NULL) {
        *why = "cannot be read";
        return -ENOMEM;
    }
    ret = obj_idx_away_get(x, away, s->ndrives);
    if (ret == -ENOENT) { /* rebuilt with every drive there */
        free(away);
        return 0;
    }
    if (ret < 0) {
        free(away);
        *why = ret == -EBADMSG ? "its record of the drives away at its "
                                 "rebuild is of another drive count"
                               : "cannot be read";
        return ret;
    }
    for (size_t d = 0; d < s->ndrives; d++)
        if (away[d] && obj_drive_online(s, d)) {
            free(away);
            *why = "rebuilt while drives were away, and one is back (keys "
                   "whose copies are on it may be missing)";
            return 1;
        }
    free(s->idx_away);
    s->idx_away = away;
    return 0;
}

/* Opens the index the pointer names when it can be trusted: closed cleanly
 * with its file unchanged since, or (with @may_reconcile) left dirty by a
 * crash of the process in this boot (then obj_load reconciles the keys in
 * flight); of this deployment and generation, not marked broken, with the
 * buckets the drives hold. NULL and *why otherwise: with *env_err 0 the
 * index is not to be trusted (rebuild it), with *env_err < 0 it could not
 * be read for a reason of the environment (idx_err_is_damage): fail. */
static struct obj_idx *idx_trusted(struct stor_store *s,
                                   const struct idx_ptr *p, bool may_reconcile,
                                   const char **why, int *env_err)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];
    struct obj_idx *x = NULL;
    struct obj_idx_state st;
    struct bucket_cmp bc = {s, 0};
    struct idx_ptr now;
    int ret;

    *env_err = 0;

    if (!p->valid) {
        *why = "no index";
        return NULL;
    }
    if (p->drive >= s->ndrives || !obj_drive_online(s, p->drive)) {
        *why = "the drive holding it is offline";
        return NULL;
    }
    if (idx_dir(dir, sizeof(dir), s->drives[p->drive].path) < 0) {
        *why = "path too long";
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/broken", dir);
    if (access(path, F_OK) == 0) {
        *why = "marked broken (an index write failed in the last run)";
        return NULL;
    }
    if (!p->clean) {
        char boot[40];

        /* a crash of the process: every committed transaction reached the
         * kernel, so the file is whole; only the keys in flight need the
         * metas. After a reboot (power loss) nothing of it is trusted. */
        boot_id(boot);
        if (!may_reconcile || boot[0] == 0 || strcmp(boot, p->boot) != 0) {
            *why = "left dirty (the last run did not close it cleanly)";
            return NULL;
        }
    } else {
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        ret = file_ident(path, &now);
        if (ret < 0 && !idx_err_is_damage(ret)) {
            *why = "cannot be looked at";
            *env_err = ret;
            return NULL;
        }
        if (ret < 0) {
            *why = "missing";
            return NULL;
        }
        if (now.size != p->size || now.ino != p->ino ||
            now.mtime_ns != p->mtime_ns || now.ctime_ns != p->ctime_ns) {
            *why = "changed since its clean close (its size, inode or times "
                   "differ from the ones kept at close)";
            return NULL;
        }
    }
    ret = obj_idx_open(dir, false, &x);
    if (ret < 0 && !idx_err_is_damage(ret)) {
        *why = "cannot be opened";
        *env_err = ret;
        return NULL;
    }
    if (ret < 0) {
        *why = ret == -ENOENT ? "missing" : "unreadable (damaged)";
        return NULL;
    }
    ret = obj_idx_state_get(x, &st);
    if (ret < 0 && !idx_err_is_damage(ret)) {
        *why = "cannot be read";
        *env_err = ret;
        goto fail;
    }
    if (ret < 0 || st.format != OBJ_IDX_FORMAT) {
        *why = "of another format";
        goto fail;
    }
    if (strcmp(st.deployment, s->deployment) != 0) {
        *why = "from another deployment";
        goto fail;
    }
    if (st.gen != p->gen) {
        *why = "of another generation than the drives name";
        goto fail;
    }
    ret = obj_idx_bucket_each(x, bucket_matches, &bc);
    if (ret < 0 && !idx_err_is_damage(ret)) {
        *why = "cannot be read";
        *env_err = ret;
        goto fail;
    }
    if (ret != 0 || bc.seen != s->nbuckets) {
        *why = "its buckets differ from the drives'";
        goto fail;
    }
    ret = away_check(s, x, why);
    if (ret < 0 && !idx_err_is_damage(ret)) {
        *env_err = ret;
        goto fail;
    }
    if (ret != 0)
        goto fail;
    raise_version(s, st.last_version);
    {
        uint64_t lease;

        if (obj_idx_lease_get(x, &lease) == 0)
            raise_version(s, lease); /* above anything the last run used */
    }
    return x;
fail:
    obj_idx_close(x, false);
    return NULL;
}

/* Rebuilds bucket @b of index @x from the metas, one object directory (HH)
 * at a time across the drives, so memory stays bounded. With @dry nothing
 * on the drives changes. *n: objects put. */
static int rebuild_bucket(struct stor_store *s, struct obj_bucket *b,
                          struct obj_idx *x, bool dry, long delay_ms,
                          uint64_t *n, uint64_t *unsure)
{
    bool *cur = calloc(s->ndrives, sizeof(*cur));
    double last_log = mono_s();
    int ret = 0;

    if (cur == NULL)
        return -ENOMEM;
    for (size_t d = 0; d < s->ndrives; d++) {
        int64_t c = 0;
        int r;

        if (!obj_drive_online(s, d))
            continue;
        if (!dry) {
            cur[d] = bucket_drive_current(s, d, b);
            continue;
        }
        r = bucket_record(s, d, b->name, &c);
        cur[d] = r == -ENOENT || (r == 0 && c == b->created_ns);
    }
    for (int hh = 0; hh < 256 && ret == 0; hh++) {
        struct ld_cand *tab = NULL;
        uint64_t before = *n;
        size_t budget = LD_BODY_BUDGET;

        for (size_t d = 0; d < s->ndrives; d++) {
            char sub[PATH_MAX];

            if (!cur[d] ||
                snprintf(sub, sizeof(sub), "%s/" STOR_BUCKETS "/%s/%02x",
                         s->drives[d].path, b->name, hh) >= (int)sizeof(sub))
                continue;
            load_dir(s, d, sub, &tab, NULL, &budget);
        }
        ret = resolve(s, b, &tab, x, dry, true, n, unsure);
        __atomic_add_fetch(&s->idx_rebuild_objects, *n - before,
                           __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->idx_dirs_done, 1, __ATOMIC_RELAXED);
        if (ret == 0 && __atomic_load_n(&s->load_stop, __ATOMIC_RELAXED))
            ret = -ECANCELED;
        if (delay_ms > 0) { /* STORAGED_TEST_REBUILD_DELAY_MS (tests) */
            struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000};

            nanosleep(&ts, NULL);
        }
        if (mono_s() - last_log >= 5.0) {
            last_log = mono_s();
            cm_log(CM_LOG_INFO, 0,
                   "index: rebuilding bucket %s: %d%% of its directories, "
                   "%llu objects so far",
                   b->name, (hh + 1) * 100 / 256, (unsigned long long)*n);
        }
    }
    free(cur);
    return ret;
}

/* The drives offline now into a new array (ndrives bytes, 1: away), and
 * *@n how many; NULL on ENOMEM. */
static uint8_t *drives_away(struct stor_store *s, size_t *n)
{
    uint8_t *away = calloc(s->ndrives, 1);

    *n = 0;
    for (size_t d = 0; away && d < s->ndrives; d++)
        if (!obj_drive_online(s, d)) {
            away[d] = 1;
            (*n)++;
        }
    return away;
}

/* Creates a fresh index in @dir (removing what was there) and fills it
 * from the metas. With drives away, the index records which (FORMAT.md
 * "Rebuilt with drives away"): a start that finds one of them back does
 * not trust it but rebuilds; without @dry, s->idx_away takes them. */
static int rebuild_into(struct stor_store *s, const char *dir, bool dry,
                        struct obj_idx **out)
{
    struct obj_idx *x;
    double t0 = mono_s();
    uint64_t total = 0, unsure = 0;
    const char *dv = getenv("STORAGED_TEST_REBUILD_DELAY_MS");
    long delay_ms = dv ? strtol(dv, NULL, 10) : 0;
    size_t naway;
    uint8_t *away = drives_away(s, &naway);
    int ret;

    if (away == NULL)
        return -ENOMEM;
    if (delay_ms < 0 || delay_ms > 10000)
        delay_ms = 0;
    __atomic_store_n(&s->idx_dirs_done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->idx_dirs_total, (uint64_t)s->nbuckets * 256,
                     __ATOMIC_RELAXED);
    (void)stor_rmtree(dir);
    ret = obj_idx_open(dir, true, &x);
    if (ret < 0) {
        free(away);
        return ret;
    }
    /* first: an index that has the records has the drives away too */
    if (naway > 0)
        ret = obj_idx_away_set(x, away, s->ndrives);
    for (size_t i = 0; i < s->nbuckets && ret == 0; i++) {
        struct obj_bucket *b = s->buckets[i];
        uint64_t n = 0;

        ret = obj_idx_bucket_set(x, b->name, b->created_ns);
        if (ret == 0)
            ret = rebuild_bucket(s, b, x, dry, delay_ms, &n, &unsure);
        total += n;
        if (!dry)
            cm_log(CM_LOG_INFO, 0, "index: bucket %s: %llu objects", b->name,
                   (unsigned long long)n);
    }
    if (ret < 0) {
        obj_idx_close(x, false);
        free(away);
        return ret;
    }
    if (naway > 0 && !dry)
        cm_log(CM_LOG_WARN, 0,
               "index: rebuilt while %zu drive(s) were away; %llu key(s) "
               "left out whose newest version may be whole only with them: "
               "put back when one of them is back (while serving, or by the "
               "rebuild of the next start)",
               naway, (unsigned long long)unsure);
    if (naway > 0 && !dry) {
        free(s->idx_away);
        s->idx_away = away;
        away = NULL;
    }
    free(away);
    s->idx_rebuild_s = mono_s() - t0;
    cm_log(CM_LOG_INFO, 0,
           "index: %s: %llu objects in %zu bucket(s) from the metas in "
           "%.1f s",
           dry ? "checked" : "rebuilt", (unsigned long long)total, s->nbuckets,
           s->idx_rebuild_s);
    *out = x;
    return 0;
}

/* Removes index directories on drives other than @keep. */
static void idx_remove_others(struct stor_store *s, size_t keep)
{
    for (size_t d = 0; d < s->ndrives; d++) {
        char dir[PATH_MAX];

        if (d != keep && obj_drive_online(s, d) &&
            idx_dir(dir, sizeof(dir), s->drives[d].path) == 0)
            (void)stor_rmtree(dir);
    }
}

/* Removes a compacted copy that a close stopped in the middle of (a crash
 * before its rename: never put in place, FORMAT.md). */
static void idx_remove_compact_tmp(struct stor_store *s)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32];

    if (idx_dir(dir, sizeof(dir), s->drives[s->idx_drive].path) == 0 &&
        snprintf(tmp, sizeof(tmp), "%s/" IDX_COMPACT_TMP, dir) <
            (int)sizeof(tmp))
        (void)unlink(tmp);
}

struct rec_ctx {
    struct stor_store *s;
    uint64_t keys, present;
};

/* obj_idx_pend_each callback: settles one key that was in flight at the
 * crash from its metas (the set's drives, that object's files only). */
static int reconcile_one(void *arg, const char *bucket, const uint8_t id[16],
                         const char *key, size_t key_len)
{
    struct rec_ctx *rc = arg;
    struct stor_store *s = rc->s;
    struct obj_bucket *b = obj_bucket_find(s, bucket);
    struct ld_cand *tab = NULL;
    struct stor_place pl;
    uint64_t n = 0, unsure = 0;
    size_t budget = LD_BODY_BUDGET;
    char hex[33];
    int ret;

    if (b == NULL)
        return 0; /* its bucket is gone, and the index's with it */
    obj_place(s, bucket, key, key_len, &pl);
    obj_hex(id, 16, hex);
    for (int pos = 0; pos < s->set_size; pos++) {
        size_t d = (size_t)pl.set * s->set_size + pos;
        char dir[PATH_MAX];

        if (obj_drive_online(s, d) &&
            snprintf(dir, sizeof(dir), "%s/" STOR_BUCKETS "/%s/%.2s",
                     s->drives[d].path, bucket, hex) < (int)sizeof(dir))
            load_dir(s, d, dir, &tab, id, &budget);
    }
    ret = resolve(s, b, &tab, s->idx, false, true, &n, &unsure);
    /* no winner while drives of its set are away and its newest version
     * may be whole with them: the record the index has stays (the last
     * one written; FORMAT.md "Rebuilt with drives away") */
    if (ret == 0 && n == 0 && unsure == 0) {
        ret = obj_idx_remove(s->idx, bucket, key, key_len, NULL);
        if (ret == -ENOENT)
            ret = 0;
    }
    rc->keys++;
    rc->present += n;
    return ret;
}

/* After a crash of the process (same boot): the index file is whole, and
 * only the keys whose commit or delete was in flight can differ from the
 * metas; each is settled from its metas as a rebuild would. */
static int reconcile(struct stor_store *s)
{
    struct rec_ctx rc = {s, 0, 0};
    double t0 = mono_s();
    int ret = obj_idx_pend_each(s->idx, reconcile_one, &rc);

    if (ret < 0)
        return ret;
    __atomic_add_fetch(&s->idx_reconciled, rc.keys, __ATOMIC_RELAXED);
    cm_log(CM_LOG_INFO, 0,
           "index: reconciled %llu key(s) in flight at the crash from "
           "their metas (%llu present) in %.3f s",
           (unsigned long long)rc.keys, (unsigned long long)rc.present,
           mono_s() - t0);
    return 0;
}

/* ---- while serving: a drive the index was rebuilt without is back ---- */

/* Is the scanner asked to stop (a close)? */
static bool merge_stopping(struct stor_store *s)
{
    bool stop;

    pthread_mutex_lock(&s->heal_lock);
    stop = s->stopping;
    pthread_mutex_unlock(&s->heal_lock);
    return stop;
}

/* Puts @key of @bucket back from its metas when the index does not have
 * it, under its key lock (writers of the key wait; a DELETE of it meanwhile
 * left tombstones, obj_io.c): the rebuild's rules (resolve), without the
 * kept versions (their companion keys are not locked here: they come back
 * at the next start). 1 when put back, 0, or -errno. */
static int merge_key(struct stor_store *s, const char *bucket, const char *key,
                     size_t key_len)
{
    struct ld_cand *tab = NULL;
    struct obj_ent *cur = NULL;
    struct obj_bucket *b;
    struct stor_place pl;
    pthread_rwlock_t *kl;
    size_t budget = LD_BODY_BUDGET;
    uint64_t n = 0;
    uint8_t id[16];
    char hex[33];
    int ret;

    obj_key_id(s, key, key_len, id);
    obj_hex(id, 16, hex);
    obj_place(s, bucket, key, key_len, &pl);
    kl = obj_klock(s, id);
    pthread_rwlock_wrlock(kl);
    obj_vdel_settle(s, bucket, id); /* a queued DELETE's HEX.m goes first */
    ret = obj_cur_lookup(s, bucket, key, key_len, &cur);
    obj_ent_free(cur);
    if (ret != -STOR_ENOKEY) { /* there (or written meanwhile) */
        pthread_rwlock_unlock(kl);
        return ret < 0 && ret != -STOR_ENOBUCKET ? ret : 0;
    }
    pthread_rwlock_rdlock(&s->lock); /* the bucket stays */
    b = obj_bucket_find(s, bucket);
    for (int pos = 0; b && pos < s->set_size; pos++) {
        size_t d = (size_t)pl.set * s->set_size + pos;
        char dir[PATH_MAX];

        if (obj_drive_online(s, d) &&
            snprintf(dir, sizeof(dir), "%s/" STOR_BUCKETS "/%s/%.2s",
                     s->drives[d].path, bucket, hex) < (int)sizeof(dir))
            load_dir(s, d, dir, &tab, id, &budget);
    }
    ret = b ? resolve(s, b, &tab, s->idx, false, false, &n, NULL) : 0;
    pthread_rwlock_unlock(&s->lock);
    pthread_rwlock_unlock(kl);
    if (ret < 0)
        obj_idx_failed(s, ret);
    return ret < 0 ? ret : n > 0;
}

/* Has the index a companion record for every readable kept version of
 * @c (links HEX.vVERSION-SINCE of @bucket)? The merge does not make them
 * (merge_key); while one is missing, the record of drives away stays and
 * the next start rebuilds. */
static bool kept_indexed(struct stor_store *s, const char *bucket,
                         const struct ld_cand *c)
{
    for (const struct ld_kept *k = c->kept; k; k = k->next) {
        struct obj_ent *cur, *ve = NULL, *got = NULL;
        char vb[64];
        int r = -ENOMEM;

        if (k->dead || k->count < k->m.k)
            continue;
        cur = obj_ent_from_meta(&k->m, c->id);
        if (cur && obj_ver_kept_ent(s, bucket, cur, k->since_ns, vb, &ve) == 0)
            r = obj_cur_lookup(s, vb, ve->key, ve->key_len, &got);
        obj_ent_free(got);
        obj_ent_free(ve);
        obj_ent_free(cur);
        if (r != 0)
            return false;
    }
    return true;
}

/* The keys of one object directory (@hh) of @bucket on the drives of the
 * sets @sets that the index does not have: each merged. Keys put back
 * added to *n; *hold set when a kept version is not in the index. 0 or
 * -errno. */
static int merge_dir(struct stor_store *s, const char *bucket, int hh,
                     const uint8_t *sets, uint64_t *n, bool *hold)
{
    struct ld_cand *tab = NULL, *c, *tmp;
    int ret = 0;

    for (size_t d = 0; d < s->ndrives; d++) {
        char sub[PATH_MAX];

        if (!sets[s->drives[d].set] || !obj_drive_online(s, d) ||
            snprintf(sub, sizeof(sub), "%s/" STOR_BUCKETS "/%s/%02x",
                     s->drives[d].path, bucket, hh) >= (int)sizeof(sub))
            continue;
        load_dir(s, d, sub, &tab, NULL, NULL);
    }
    HASH_ITER(hh, tab, c, tmp)
    {
        struct obj_ent *cur = NULL;
        const struct ld_ver *v = c->vers && c->vers->m.key_len ? c->vers : NULL;
        int r = -STOR_ENOKEY;

        if (v && ret == 0) {
            r = obj_cur_lookup(s, bucket, v->m.key, v->m.key_len, &cur);
            obj_ent_free(cur);
        }
        if (v && r == -STOR_ENOKEY && ret == 0) {
            r = merge_key(s, bucket, v->m.key, v->m.key_len);
            if (r < 0)
                ret = r;
            else
                *n += (uint64_t)r;
        }
        if (c->kept && !*hold && !kept_indexed(s, bucket, c))
            *hold = true;
        HASH_DEL(tab, c);
        cand_free(c);
    }
    return ret;
}

/* Contract in obj_i.h. */
void obj_load_merge(struct stor_store *s)
{
    uint8_t *sets = calloc((size_t)s->nsets, 1);
    uint8_t *back = calloc(s->ndrives, 1);
    char(*names)[64] = NULL;
    size_t nb = 0, nback = 0;
    uint64_t n = 0;
    double t0 = mono_s();
    bool hold = false;
    int ret = 0;

    if (sets == NULL || back == NULL || s->idx_away == NULL)
        goto out;
    for (size_t d = 0; d < s->ndrives; d++)
        if (__atomic_load_n(&s->idx_away[d], __ATOMIC_RELAXED) &&
            obj_drive_online(s, d)) {
            back[d] = 1;
            sets[s->drives[d].set] = 1;
            nback++;
        }
    if (nback == 0)
        goto out;
    cm_log(CM_LOG_INFO, 0,
           "index: %zu drive(s) back that were away at its rebuild: putting "
           "the keys they hold back",
           nback);
    pthread_rwlock_rdlock(&s->lock);
    names = calloc(s->nbuckets ? s->nbuckets : 1, sizeof(*names));
    for (size_t i = 0; names && i < s->nbuckets; i++)
        snprintf(names[nb++], sizeof(names[0]), "%s", s->buckets[i]->name);
    pthread_rwlock_unlock(&s->lock);
    if (names == NULL)
        goto out;
    for (size_t i = 0; i < nb && ret == 0; i++)
        for (int hh = 0; hh < 256 && ret == 0; hh++) {
            if (merge_stopping(s)) {
                ret = -ECANCELED;
                break;
            }
            ret = merge_dir(s, names[i], hh, sets, &n, &hold);
        }
    for (size_t d = 0; d < s->ndrives && ret == 0; d++)
        if (back[d] && !obj_drive_online(s, d))
            ret = -EAGAIN; /* gone again meanwhile: the next start */
    if (ret == 0 && hold) {
        cm_log(CM_LOG_WARN, 0,
               "index: kept versions on the drive(s) back are not in it; the "
               "next start rebuilds it");
    } else if (ret == 0) {
        bool left = false;

        for (size_t d = 0; d < s->ndrives; d++) {
            if (back[d])
                __atomic_store_n(&s->idx_away[d], 0, __ATOMIC_RELAXED);
            left |= __atomic_load_n(&s->idx_away[d], __ATOMIC_RELAXED) != 0;
        }
        if (left) {
            uint8_t *now = malloc(s->ndrives);

            ret = now ? 0 : -ENOMEM;
            for (size_t d = 0; now && d < s->ndrives; d++)
                now[d] = __atomic_load_n(&s->idx_away[d], __ATOMIC_RELAXED);
            if (now)
                ret = obj_idx_away_set(s->idx, now, s->ndrives);
            free(now);
        } else {
            ret = obj_idx_away_clear(s->idx);
        }
        if (ret < 0)
            obj_idx_failed(s, ret);
    }
    cm_log(ret == 0 ? CM_LOG_INFO : CM_LOG_WARN, ret < 0 ? -ret : 0,
           "index: %llu key(s) put back from the drive(s) back in %.1f s%s",
           (unsigned long long)n, mono_s() - t0,
           ret == 0 ? "" : "; not finished: the next start rebuilds it");
out:
    free(names);
    free(sets);
    free(back);
}

/* The end of a load: the other drives' index copies go, the uploads are
 * listed, a new generation is written (dirty until a clean close) on the
 * index and on every drive's pointer, and idx_ready is published. */
static int load_finish(struct stor_store *s, double t0)
{
    struct obj_idx_state st = {0};
    struct idx_ptr p;
    int ret;

    idx_remove_others(s, s->idx_drive);
    idx_remove_compact_tmp(s);
    for (size_t i = 0; i < s->nbuckets; i++)
        load_uploads(s, s->buckets[i]);
    st.format = OBJ_IDX_FORMAT;
    memcpy(st.deployment, s->deployment, 33);
    st.gen = s->idx_gen;
    st.last_version = s->last_version;
    ret = obj_idx_state_set(s->idx, &st);
    if (ret < 0)
        return ret;
    memset(&p, 0, sizeof(p));
    p.valid = true;
    memcpy(p.deployment, s->deployment, 33);
    p.gen = s->idx_gen;
    p.drive = s->idx_drive;
    boot_id(p.boot);
    if (ptr_write_all(s, &p) == 0)
        return -EIO;
    s->idx_open_s = mono_s() - t0;
    __atomic_store_n(&s->idx_ready, true, __ATOMIC_RELEASE);
    __atomic_store_n(&s->idx_phase, STOR_INDEX_SERVING, __ATOMIC_RELEASE);
    /* requests run from here on: last_version is theirs (atomic CAS) */
    obj_lease_extend(s, __atomic_load_n(&s->last_version, __ATOMIC_RELAXED));
    cm_log(CM_LOG_INFO, 0, "index: generation %llu on drive %s, open in %.3f s",
           (unsigned long long)s->idx_gen, s->drives[s->idx_drive].path,
           s->idx_open_s);
    return 0;
}

/* Contract in obj_i.h. */
int obj_load(struct stor_store *s)
{
    struct idx_ptr p;
    const char *why = NULL;
    double t0 = mono_s();
    size_t d = 0;
    int ret;

    __atomic_store_n(&s->idx_phase, STOR_INDEX_OPENING, __ATOMIC_RELAXED);
    ret = load_buckets(s);
    if (ret < 0)
        return ret;
    ptr_newest(s, &p);
    s->idx_gen = (p.valid ? p.gen : 0) + 1; /* the generation of this run */
    s->idx = idx_trusted(s, &p, true, &why, &ret);
    if (s->idx == NULL && ret < 0) {
        char dir[PATH_MAX];

        if (idx_dir(dir, sizeof(dir), s->drives[p.drive].path) < 0)
            dir[0] = 0;
        cm_log(CM_LOG_ERROR, -ret,
               "index: %s/data.mdb %s; not rebuilding it, the error is not "
               "damage of the file (fix the cause and start again; "
               "`storaged index rebuild` rebuilds it on purpose)",
               dir, why);
        return ret;
    }
    if (s->idx) {
        s->idx_drive = p.drive;
        /* per bucket and drive, not per object: a drive that missed a
         * delete and re-create of a bucket is emptied here */
        for (size_t i = 0; i < s->nbuckets; i++)
            for (size_t dd = 0; dd < s->ndrives; dd++)
                if (obj_drive_online(s, dd))
                    (void)bucket_drive_current(s, dd, s->buckets[i]);
        if (!p.clean) {
            ret = reconcile(s);
            if (ret < 0) {
                cm_log(CM_LOG_WARN, -ret, "index: reconcile failed");
                return ret;
            }
        }
        ret = obj_idx_pend_drop_all(s->idx);
        if (ret < 0)
            return ret;
        return load_finish(s, t0);
    }
    while (d < s->ndrives && !obj_drive_online(s, d))
        d++;
    if (d == s->ndrives)
        return -EIO;
    cm_log(CM_LOG_WARN, 0,
           "index: %s: rebuilding it from the metas on "
           "drive %s",
           why, s->drives[d].path);
    s->idx_drive = d;
    /* the total first: /metrics never shows "rebuilding" with 0 to do */
    __atomic_store_n(&s->idx_dirs_total, (uint64_t)s->nbuckets * 256,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&s->idx_phase, STOR_INDEX_REBUILDING, __ATOMIC_RELEASE);
    return 1;
}

/* Contract in obj_i.h. */
int obj_load_rebuild(struct stor_store *s)
{
    char dir[PATH_MAX];
    double t0 = mono_s();
    struct obj_idx *x = NULL;
    int ret;

    if (idx_dir(dir, sizeof(dir), s->drives[s->idx_drive].path) < 0)
        return -ENAMETOOLONG;
    __atomic_add_fetch(&s->idx_rebuilds, 1, __ATOMIC_RELAXED);
    ret = rebuild_into(s, dir, false, &x);
    if (ret < 0)
        return ret;
    s->idx = x;
    return load_finish(s, t0);
}

struct verify_names {
    char (*name)[64];
    size_t n, cap;
};

/* obj_idx_bucket_each callback: collects the bucket names. */
static int verify_name(void *arg, const char *bucket, int64_t created,
                       uint64_t count)
{
    struct verify_names *vn = arg;

    (void)created;
    (void)count;
    if (vn->n == vn->cap) {
        size_t cap = vn->cap ? 2 * vn->cap : 16;
        char(*grown)[64] = realloc(vn->name, cap * sizeof(*grown));

        if (grown == NULL)
            return -ENOMEM;
        vn->name = grown;
        vn->cap = cap;
    }
    snprintf(vn->name[vn->n++], 64, "%s", bucket);
    return 0;
}

/* The body table's part of the content check: every body's CRC. Run only
 * when the file was read ahead (it fits a quarter of the RAM): the walk
 * then maps the bodies' pages from the page cache, so the GETs that
 * follow a start do not each fault one in (at 10^6 objects of 1 KiB a GET
 * of a random key cost 2.6x its 10^3 figure without it, a GET of a hot key
 * 1.15x). A damaged body is only logged: a GET never serves it. 0 or
 * -ECANCELED. */
static int verify_bodies(struct stor_store *s)
{
    uint64_t n = 0, bad = 0;
    int ret = obj_idx_verify_bodies(s->idx, &s->load_stop, &n, &bad);

    if (ret < 0 && ret != -ECANCELED) {
        cm_log(CM_LOG_WARN, -ret, "index: body table walk failed");
        return 0; /* the bodies are checked on every GET anyway */
    }
    if (bad > 0)
        cm_log(CM_LOG_ERROR, 0,
               "index: %llu of %llu bodies fail their CRC (damaged index "
               "file; a GET of them reads the drives)",
               (unsigned long long)bad, (unsigned long long)n);
    return ret;
}

/* STORAGED_TEST_CHECK_DELAY_MS (tests only, 0..60000): waits that long
 * before the content check, in 50 ms steps that a close stops, so a test
 * can watch a start whose index file is not in the page cache. */
static int check_delay(struct stor_store *s)
{
    const char *dv = getenv("STORAGED_TEST_CHECK_DELAY_MS");
    long ms = dv ? strtol(dv, NULL, 10) : 0;

    for (long left = ms > 0 && ms <= 60000 ? ms : 0; left > 0; left -= 50) {
        struct timespec ts = {0, 50 * 1000000L};

        if (__atomic_load_n(&s->load_stop, __ATOMIC_RELAXED))
            return -ECANCELED;
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Contract in obj_i.h. */
int obj_load_verify(struct stor_store *s)
{
    struct verify_names vn = {0};
    double t0 = mono_s();
    bool ahead;
    int ret = check_delay(s);

    if (ret < 0)
        return ret;
    ahead = obj_idx_prefetch(s->idx); /* the walk then hits the cache */
    ret = obj_idx_bucket_each(s->idx, verify_name, &vn);

    for (size_t i = 0; i < vn.n && ret == 0; i++) {
        uint64_t n = 0;

        ret = obj_idx_verify(s->idx, vn.name[i], &s->load_stop, &n);
        __atomic_add_fetch(&s->idx_verified, n, __ATOMIC_RELAXED);
        if (ret == -ENOENT) /* deleted since the names were read */
            ret = 0;
        if (ret == -EBADMSG) {
            __atomic_add_fetch(&s->idx_verify_bad, 1, __ATOMIC_RELAXED);
            cm_log(CM_LOG_ERROR, 0,
                   "index: bucket %s: its records differ from the count and "
                   "content sum kept with them (damaged index file)",
                   vn.name[i]);
            obj_idx_failed(s, ret);
        }
    }
    free(vn.name);
    if (ret == 0 && ahead)
        ret = verify_bodies(s);
    /* the walks have read every page of every table (when ahead): lookups
     * may now run on the event loop without waiting for the disk */
    if (ret == 0 && ahead)
        obj_idx_resident_set(s->idx);
    else if (ret == 0 && !obj_idx_resident_check(s->idx))
        cm_log(CM_LOG_INFO, 0,
               "index: not all in the page cache; GETs and HEADs look it up "
               "on the worker threads");
    if (ret == 0) {
        s->idx_verify_s = mono_s() - t0;
        __atomic_store_n(&s->idx_verify_done, true, __ATOMIC_RELEASE);
        cm_log(CM_LOG_INFO, 0,
               "index: content verified: %llu records in %zu bucket(s) in "
               "%.3f s%s",
               (unsigned long long)__atomic_load_n(&s->idx_verified,
                                                   __ATOMIC_RELAXED),
               vn.n, s->idx_verify_s,
               ahead ? " (file read ahead into the page cache)" : "");
    }
    return ret;
}

/* The least free space (bytes, and a quarter of the file) for which a
 * clean close compacts the index; STORAGED_TEST_INDEX_COMPACT_MIN (bytes)
 * lowers it for the tests. */
static uint64_t compact_min(void)
{
    const char *v = getenv("STORAGED_TEST_INDEX_COMPACT_MIN");
    char *end;
    unsigned long long n;

    if (v == NULL || *v == 0)
        return IDX_COMPACT_MIN;
    n = strtoull(v, &end, 10);
    return *end == 0 ? (uint64_t)n : IDX_COMPACT_MIN;
}

/* At a clean close, after the state record is written: when at least a
 * quarter of the index file (and IDX_COMPACT_MIN) is LMDB's free pages,
 * writes a compacted copy of it to DIR/IDX_COMPACT_TMP (flushed) for
 * idx_compact_swap. True when the copy is there. FORMAT.md "Compaction at
 * a clean close": until the pointers say clean=1 (after the swap), a crash
 * leaves the pointer of this run (clean=0), so the next start reconciles
 * whichever whole file data.mdb is (both hold the same committed state) or
 * rebuilds after a reboot. */
static bool idx_compact_copy(struct stor_store *s, const char *dir, char *tmp,
                             size_t cap)
{
    uint64_t nfree, size, min = compact_min();
    double t0 = mono_s();
    int ret;

    if (snprintf(tmp, cap, "%s/" IDX_COMPACT_TMP, dir) >= (int)cap)
        return false;
    if (obj_idx_space(s->idx, &nfree, &size) < 0 || nfree < min ||
        nfree < size / 4)
        return false;
    ret = obj_idx_compact_to(s->idx, tmp);
    if (ret < 0) {
        cm_log(CM_LOG_WARN, -ret, "index: compacting it failed; kept as is");
        return false;
    }
    cm_log(CM_LOG_INFO, 0,
           "index: %llu of %llu MiB were free pages: compacted copy written "
           "in %.3f s",
           (unsigned long long)(nfree >> 20), (unsigned long long)(size >> 20),
           mono_s() - t0);
    return true;
}

/* Puts the compacted copy @tmp in place of @path (rename, then the
 * directory is flushed), after the environment is closed. On failure the
 * old file stays (it is whole and flushed) and the copy goes. */
static void idx_compact_swap(const char *dir, const char *tmp, const char *path)
{
    int fd;

    if (rename(tmp, path) < 0) {
        cm_log(CM_LOG_WARN, errno,
               "index: cannot put the compacted copy in place; kept as is");
        (void)unlink(tmp);
        return;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Contract in obj_i.h. */
void obj_index_close(struct stor_store *s)
{
    struct obj_idx_state st = {0};
    struct idx_ptr p = {0};
    char dir[PATH_MAX], path[PATH_MAX + 16], tmp[PATH_MAX + 16];
    bool compacted = false;
    int ret;

    if (s->idx == NULL)
        return;
    if (!__atomic_load_n(&s->idx_ready, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&s->idx_broken, __ATOMIC_RELAXED) ||
        !obj_drive_online(s, s->idx_drive) ||
        idx_dir(dir, sizeof(dir), s->drives[s->idx_drive].path) < 0) {
        obj_idx_close(s->idx, false); /* stays dirty: rebuilt next start */
        s->idx = NULL;
        return;
    }
    st.format = OBJ_IDX_FORMAT;
    memcpy(st.deployment, s->deployment, 33);
    st.gen = s->idx_gen;
    st.last_version = __atomic_load_n(&s->last_version, __ATOMIC_RELAXED);
    ret = obj_idx_state_set(s->idx, &st);
    if (ret == 0)
        compacted = idx_compact_copy(s, dir, tmp, sizeof(tmp));
    obj_idx_close(s->idx, true);
    s->idx = NULL;
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    if (compacted)
        idx_compact_swap(dir, tmp, path);
    if (ret == 0)
        ret = file_ident(path, &p);
    if (ret < 0) {
        cm_log(CM_LOG_WARN, -ret, "index: not closed cleanly");
        return;
    }
    p.valid = true;
    memcpy(p.deployment, s->deployment, 33);
    p.gen = s->idx_gen;
    p.drive = s->idx_drive;
    p.clean = true;
    (void)ptr_write_all(s, &p);
}

/* ---- `storaged index check|rebuild` ---- */

/* Prints one key (bytes outside printable ASCII as \xHH). */
static void put_key(FILE *out, const char *bucket, const char *k, size_t n)
{
    fprintf(out, "%s/", bucket);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)k[i];

        if (c >= 0x20 && c < 0x7f && c != '\\')
            fputc(c, out);
        else
            fprintf(out, "\\x%02x", c);
    }
}

/* Compares bucket @b in the old index @x (may be NULL) with the one just
 * built from the metas @nx; prints and counts the differences. */
static long compare_bucket(struct obj_idx *x, struct obj_idx *nx, const char *b,
                           FILE *out)
{
    struct obj_idx_cur *oc = NULL, *nc = NULL;
    struct obj_idx_view ov, nv;
    int orc = -ENOENT, nrc;
    long diffs = 0;

    if (obj_idx_cur_open(nx, b, &nc) < 0 ||
        obj_idx_cur_seek(nc, NULL, 0, false) < 0) {
        obj_idx_cur_close(nc);
        return -EIO;
    }
    if (x && obj_idx_cur_open(x, b, &oc) == 0 &&
        obj_idx_cur_seek(oc, NULL, 0, false) == 0)
        orc = obj_idx_cur_next(oc, &ov);
    nrc = obj_idx_cur_next(nc, &nv);
    while (orc == 0 || nrc == 0) {
        int c = orc != 0 ? 1
                : nrc != 0
                    ? -1
                    : obj_key_cmp(ov.key, ov.key_len, nv.key, nv.key_len);

        if (c < 0) {
            put_key(out, b, ov.key, ov.key_len);
            fprintf(out,
                    ": in the index only (version %llu): no complete "
                    "copy on the drives\n",
                    (unsigned long long)ov.version);
            diffs++;
            orc = obj_idx_cur_next(oc, &ov);
            continue;
        }
        if (c > 0) {
            put_key(out, b, nv.key, nv.key_len);
            fprintf(out, ": missing from the index (metas: version %llu)\n",
                    (unsigned long long)nv.version);
            diffs++;
            nrc = obj_idx_cur_next(nc, &nv);
            continue;
        }
        if (ov.rec_len != nv.rec_len ||
            memcmp(ov.rec, nv.rec, ov.rec_len) != 0) {
            put_key(out, b, nv.key, nv.key_len);
            fprintf(out,
                    ": differs: index version %llu size %llu, metas "
                    "version %llu size %llu\n",
                    (unsigned long long)ov.version, (unsigned long long)ov.size,
                    (unsigned long long)nv.version,
                    (unsigned long long)nv.size);
            diffs++;
        }
        orc = obj_idx_cur_next(oc, &ov);
        nrc = obj_idx_cur_next(nc, &nv);
    }
    obj_idx_cur_close(oc);
    obj_idx_cur_close(nc);
    return diffs;
}

struct stale_buckets {
    struct stor_store *s;
    FILE *out;
    long diffs;
};

/* obj_idx_bucket_each callback: a bucket the index has, the drives not. */
static int report_stale_bucket(void *arg, const char *bucket, int64_t created,
                               uint64_t count)
{
    struct stale_buckets *sb = arg;
    struct obj_bucket *b = obj_bucket_find(sb->s, bucket);

    if (b == NULL || b->created_ns != created) {
        fprintf(sb->out,
                "%s: bucket in the index (%llu objects) but not on the "
                "drives\n",
                bucket, (unsigned long long)count);
        sb->diffs++;
    }
    return 0;
}

/* Contract in obj_i.h. */
long obj_index_check(struct stor_store *s, bool rebuild, FILE *out)
{
    struct idx_ptr p;
    struct obj_idx *x, *nx = NULL, *old = NULL;
    struct stale_buckets sb = {s, out, 0};
    const char *why = NULL;
    char dir[PATH_MAX], ndir[PATH_MAX + 8];
    size_t d = 0;
    long diffs = 0;
    int ret = load_buckets(s);

    if (ret < 0)
        return ret;
    ptr_newest(s, &p);
    x = idx_trusted(s, &p, false, &why, &ret);
    if (x == NULL && ret < 0 && !rebuild) {
        fprintf(out, "index: %s: %s (not damage of the file)\n", why,
                strerror(-ret));
        return ret;
    }
    if (x == NULL && ret < 0) {
        fprintf(out,
                "index: %s: %s (not damage of the file: the server would "
                "not start); rebuilding it as asked\n",
                why, strerror(-ret));
        diffs++;
    } else if (x == NULL) {
        fprintf(out, "index: %s: the server would rebuild it at start\n", why);
        diffs++;
        /* compare with it anyway when it can be opened */
        if (p.valid && p.drive < s->ndrives && obj_drive_online(s, p.drive) &&
            idx_dir(dir, sizeof(dir), s->drives[p.drive].path) == 0 &&
            obj_idx_open(dir, false, &old) == 0)
            x = old;
    }
    while (d < s->ndrives && !obj_drive_online(s, d))
        d++;
    if (d == s->ndrives || idx_dir(dir, sizeof(dir), s->drives[d].path) < 0) {
        obj_idx_close(x, false);
        return -EIO;
    }
    snprintf(ndir, sizeof(ndir), "%s.new", dir);
    ret = rebuild_into(s, ndir, !rebuild, &nx);
    if (ret < 0) {
        obj_idx_close(x, false);
        (void)stor_rmtree(ndir);
        return ret;
    }
    for (size_t i = 0; i < s->nbuckets && diffs >= 0; i++) {
        long n = compare_bucket(x, nx, s->buckets[i]->name, out);
        uint64_t nv = 0;

        if (x &&
            obj_idx_verify(x, s->buckets[i]->name, NULL, &nv) == -EBADMSG) {
            fprintf(out,
                    "index: bucket %s: its records differ from the count "
                    "and content sum kept with them\n",
                    s->buckets[i]->name);
            n = n < 0 ? n : n + 1;
        }

        diffs = n < 0 ? n : diffs + n;
    }
    if (x && diffs >= 0 &&
        obj_idx_bucket_each(x, report_stale_bucket, &sb) == 0)
        diffs += sb.diffs;
    obj_idx_close(x, false);
    if (!rebuild || diffs < 0) {
        obj_idx_close(nx, false);
        (void)stor_rmtree(ndir);
        return diffs;
    }
    /* put the new one in place, clean, as a clean close would */
    {
        struct obj_idx_state st = {0};
        struct idx_ptr np = {0};
        char path[PATH_MAX + 16];

        st.format = OBJ_IDX_FORMAT;
        memcpy(st.deployment, s->deployment, 33);
        st.gen = (p.valid ? p.gen : 0) + 1;
        st.last_version = s->last_version;
        ret = obj_idx_state_set(nx, &st);
        obj_idx_close(nx, true);
        if (ret == 0) {
            (void)stor_rmtree(dir);
            if (rename(ndir, dir) < 0)
                ret = -errno;
        }
        snprintf(path, sizeof(path), "%s/data.mdb", dir);
        if (ret == 0)
            ret = file_ident(path, &np);
        if (ret < 0)
            return ret;
        np.valid = true;
        memcpy(np.deployment, s->deployment, 33);
        np.gen = st.gen;
        np.drive = d;
        np.clean = true;
        if (ptr_write_all(s, &np) == 0)
            return -EIO;
        idx_remove_others(s, d);
        fprintf(out, "index: rebuilt on %s (generation %llu)\n",
                s->drives[d].path, (unsigned long long)np.gen);
    }
    return diffs;
}

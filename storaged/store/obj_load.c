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

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    int count;
    struct stor_meta m; /* owned: the first copy read */
    struct ld_ver *next;
};

struct ld_file {
    uint64_t dataid;
    uint32_t mask; /* set positions holding a shard file */
    struct ld_file *next;
};

struct ld_cand {
    uint8_t id[16];
    int set;       /* set of the drives it was found on */
    bool has_prev; /* some drive holds a HEX.p (interrupted overwrite) */
    struct ld_ver *vers;
    struct ld_file *files;
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

/* Keeps the version clock ahead of everything seen on disk. */
static void raise_version(struct stor_store *s, uint64_t v)
{
    if (v > s->last_version)
        s->last_version = v;
}

/* Reads one object directory (DRIVE/b/BUCKET/hh) into the candidate table. */
static void load_dir(struct stor_store *s, size_t d, const char *dir,
                     struct ld_cand **tab)
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
        if (nl == 34 && (de->d_name[33] == 'm' || de->d_name[33] == 'p')) {
            bool prev = de->d_name[33] == 'p';
            char path[PATH_MAX];
            struct stor_meta m;
            struct ld_ver *v;

            if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
                (int)sizeof(path))
                continue;
            if (stor_meta_read_file(path, &m) < 0) {
                cm_log(CM_LOG_WARN, 0, "load: %s: unreadable meta, ignored",
                       path);
                continue;
            }
            if (m.type != STOR_META_OBJECT && m.type != STOR_META_TOMBSTONE) {
                stor_meta_fini(&m);
                continue;
            }
            raise_version(s, m.version);
            c = cand_get(tab, id, set);
            if (c == NULL) {
                stor_meta_fini(&m);
                continue;
            }
            for (v = c->vers; v && v->version != m.version; v = v->next)
                ;
            if (v == NULL) {
                v = calloc(1, sizeof(*v));
                if (v == NULL) {
                    stor_meta_fini(&m);
                    continue;
                }
                v->version = m.version;
                v->m = m;
                v->next = c->vers;
                c->vers = v;
            } else {
                stor_meta_fini(&m);
            }
            if (!(v->mask & (1u << pos)))
                v->count++;
            v->mask |= 1u << pos;
            if (prev)
                v->mask_p |= 1u << pos;
            if (prev)
                c->has_prev = true;
            else
                v->mask_m |= 1u << pos;
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

/* qsort comparator: key order. */
static int ent_cmp(const void *a, const void *b)
{
    const struct obj_ent *x = *(struct obj_ent *const *)a;
    const struct obj_ent *y = *(struct obj_ent *const *)b;

    return obj_key_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* Picks the winner of each candidate and fills the bucket's index. */
static int resolve(struct stor_store *s, struct obj_bucket *b,
                   struct ld_cand **tab)
{
    struct ld_cand *c, *tmp;
    int ret = 0;

    HASH_ITER(hh, *tab, c, tmp)
    {
        struct ld_ver *win = NULL, *best = NULL;
        bool deleted = false;

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
            if ((int64_t)cand->version < b->created_ns)
                break; /* from an earlier bucket of the same name */
            if (cand->m.type == STOR_META_TOMBSTONE) {
                deleted = true;
                break;
            }
            if (ver_complete(c, cand)) {
                win = cand;
                break;
            }
        }
        if (win && ret == 0) {
            struct obj_ent *e = obj_ent_from_meta(&win->m, c->id);

            if (e == NULL) {
                ret = -ENOMEM;
            } else {
                if (b->n == b->cap) {
                    size_t nc = b->cap ? 2 * b->cap : 64;
                    struct obj_ent **nv = realloc(b->v, nc * sizeof(*nv));

                    if (nv == NULL) {
                        obj_ent_free(e);
                        ret = -ENOMEM;
                        goto next;
                    }
                    b->v = nv;
                    b->cap = nc;
                }
                b->v[b->n++] = e;
                if (win->count < win->m.k + win->m.m || c->vers->next)
                    obj_heal_queue(s, b->name, e->key, e->key_len);
                else
                    for (size_t p = 0; p < win->m.nparts; p++)
                        if (popcount32(file_mask(c, win->m.parts[p].dataid)) <
                            win->m.k + win->m.m)
                            obj_heal_queue(s, b->name, e->key, e->key_len);
            }
        }
        (void)deleted;
        if (c->has_prev)
            settle_prev(s, b->name, c, win);
        if (set_all_online(s, c->set))
            cleanup_cand(s, b->name, c, win);
next:
        HASH_DEL(*tab, c);
        while (c->vers) {
            struct ld_ver *v = c->vers;

            c->vers = v->next;
            stor_meta_fini(&v->m);
            free(v);
        }
        while (c->files) {
            struct ld_file *f = c->files;

            c->files = f->next;
            free(f);
        }
        free(c);
    }
    if (b->n > 1)
        qsort(b->v, b->n, sizeof(*b->v), ent_cmp);
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
                    if (newer)
                        (void)obj_upload_set_part(u, &m.parts[0], &old);
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

/* Contract in obj_i.h. */
int obj_load(struct stor_store *s)
{
    int ret = load_buckets(s);

    if (ret < 0)
        return ret;
    for (size_t i = 0; i < s->nbuckets && ret == 0; i++) {
        struct obj_bucket *b = s->buckets[i];
        struct ld_cand *tab = NULL;

        for (size_t d = 0; d < s->ndrives; d++) {
            char dir[PATH_MAX];
            DIR *dp;
            struct dirent *de;

            if (!obj_drive_online(s, d) || !bucket_drive_current(s, d, b))
                continue;
            snprintf(dir, sizeof(dir), "%s/" STOR_BUCKETS "/%s",
                     s->drives[d].path, b->name);
            dp = opendir(dir);
            if (dp == NULL)
                continue;
            while ((de = readdir(dp)) != NULL) {
                char sub[PATH_MAX];

                if (strlen(de->d_name) != 2 || de->d_name[0] == '.')
                    continue;
                if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >=
                    (int)sizeof(sub))
                    continue;
                load_dir(s, d, sub, &tab);
            }
            closedir(dp);
        }
        ret = resolve(s, b, &tab);
        load_uploads(s, b);
        cm_log(CM_LOG_INFO, 0, "load: bucket %s: %zu objects, %zu uploads",
               b->name, b->n, b->nup);
    }
    return ret;
}

/* storaged/store/obj_io.c - object PUT, GET and DELETE over erasure-coded
 * shards.
 *
 * PUT: the first 1 MiB is buffered; an object that ends there is coded
 * with the small geometry k = min(K, max(1, size/4 KiB)) + M and its shards
 * go inline into the meta files; a longer body streams stripe by stripe
 * (K data shards of 64 KiB + M parity) into temp shard files, each block
 * preceded by its CRC-64. Commit (under the key's lock): metas are written
 * to temp files, made durable (group-commit barrier, gsync.h), then shard
 * files and metas are renamed into place, made durable (second barrier),
 * the index entry swapped, and the old version's files removed (deferred
 * while a GET still reads them: see pins).
 *
 * GET: the reader pins the version it opened; reads fetch only the data
 * shards covering the range, all in one io_uring batch, verify every
 * block's CRC and fall back to reading parity and rebuilding on any miss. */
#include "storaged/store/obj_i.h"
#include "storaged/store/obj_idx.h"

#include "common/list.h"
#include "common/log.h"
#include "storaged/store/ec.h"
#include "storaged/store/gsync.h"
#include "storaged/store/obj_nb.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#define GET_BATCH        2 /* stripes per shard read */
#define GET_DIRECT_BATCH 8 /* stripes per direct read (no staging copy) */

/* ---- pins: versions that open GETs still read ---- */

struct pin {
    uint8_t id[16];
    uint64_t version;
    int refs;
    struct obj_ent *zombie; /* owned; files to remove at last unpin */
    bool now;               /* a delete: punch its extent records at once */
    char bucket[64];
    struct stor_place pl;
    struct pin *next;
};

static pthread_mutex_t pin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pin *pins[256]; /* protected by pin_lock */

/* Finds the pin slot of (id, version); caller holds pin_lock. */
static struct pin **pin_slot(const uint8_t id[16], uint64_t version)
{
    struct pin **pp = &pins[id[3]];

    while (*pp &&
           !((*pp)->version == version && memcmp((*pp)->id, id, 16) == 0))
        pp = &(*pp)->next;
    return pp;
}

/* Contract in obj_i.h. 0 or -ENOMEM. */
int obj_pin_get(const uint8_t id[16], uint64_t version)
{
    struct pin **pp, *p;

    pthread_mutex_lock(&pin_lock);
    pp = pin_slot(id, version);
    if (*pp == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&pin_lock);
            return -ENOMEM;
        }
        memcpy(p->id, id, 16);
        p->version = version;
        p->next = pins[id[3]];
        pins[id[3]] = p;
    } else {
        p = *pp;
    }
    p->refs++;
    pthread_mutex_unlock(&pin_lock);
    return 0;
}

/* Shard length of an inline-class object. */
static size_t inl_shard_len(const struct obj_ent *e)
{
    return (size_t)((e->size + (uint64_t)e->k - 1) / (uint64_t)e->k);
}

/* Removes the shard files of @e (all parts, all positions). Shard files
 * are named by a unique data id, so no lock is needed. An extent object's
 * records are freed: punched before the return when @now (a delete: its
 * bytes are gone when it answers), else queued (obj_ext_punch). */
static void remove_shards(struct stor_store *s, const char *bucket,
                          const struct obj_ent *e, const struct stor_place *pl,
                          bool now)
{
    char path[PATH_MAX];

    if (e->inl && e->ext && e->xref) { /* the extent records: punched */
        size_t L = inl_shard_len(e);

        for (int j = 0; j < e->k + e->m; j++)
            if (e->xref[j].file)
                obj_ext_punch(s, obj_shard_drive(s, pl, j), &e->xref[j], L,
                              now);
    }
    if (e->inl)
        return;
    for (int j = 0; j < e->k + e->m; j++) {
        size_t d = obj_shard_drive(s, pl, j);

        for (size_t p = 0; p < e->nparts; p++)
            if (obj_path_shard(path, sizeof(path), s->drives[d].path, bucket,
                               e->id, e->parts[p].dataid) == 0)
                unlink(path);
    }
}

/* Contract in obj_i.h: the last unpin removes a retired version's files. */
void obj_pin_put(struct stor_store *s, const uint8_t id[16], uint64_t version)
{
    struct pin **pp, *p = NULL;

    pthread_mutex_lock(&pin_lock);
    pp = pin_slot(id, version);
    if (*pp && --(*pp)->refs == 0) {
        p = *pp;
        *pp = p->next;
    }
    pthread_mutex_unlock(&pin_lock);
    if (p) {
        if (p->zombie) {
            remove_shards(s, p->bucket, p->zombie, &p->pl, p->now);
            obj_ent_free(p->zombie);
        }
        free(p);
    }
}

/* Takes ownership of @e: removes its shards now, or when the last reader
 * of that version closes (@now: as remove_shards). */
static void retire_shards(struct stor_store *s, const char *bucket,
                          struct obj_ent *e, const struct stor_place *pl,
                          bool now)
{
    struct pin **pp;

    pthread_mutex_lock(&pin_lock);
    pp = pin_slot(e->id, e->version);
    if (*pp && (*pp)->zombie == NULL) {
        (*pp)->zombie = e;
        (*pp)->now = now;
        snprintf((*pp)->bucket, sizeof((*pp)->bucket), "%s", bucket);
        (*pp)->pl = *pl;
        pthread_mutex_unlock(&pin_lock);
        return;
    }
    pthread_mutex_unlock(&pin_lock);
    remove_shards(s, bucket, e, pl, now);
    obj_ent_free(e);
}

/* Unlinks the meta of @e on every drive of its placement except where
 * @keep (indexed by shard number) says a newer meta now lives. Caller
 * holds the key lock. */
static bool remove_metas(struct stor_store *s, const char *bucket,
                         const struct obj_ent *e, const struct stor_place *pl,
                         const bool *keep)
{
    char path[PATH_MAX];
    bool sure = true;

    for (int j = 0; j < e->k + e->m; j++) {
        size_t d = obj_shard_drive(s, pl, j);

        if (keep && keep[j])
            continue;
        if (obj_path_meta(path, sizeof(path), s->drives[d].path, bucket,
                          e->id) < 0 ||
            obj_spare_put(s, d, path) == 0)
            continue;
        /* ENOENT also means "the whole drive is gone" when the probe has
         * not noticed yet: tell the two apart by the format record */
        if (errno != ENOENT) {
            sure = false;
            obj_drive_fail(s, d, errno);
        } else {
            snprintf(path, sizeof(path), "%s/" STOR_FORMAT, s->drives[d].path);
            if (access(path, F_OK) < 0)
                sure = false;
        }
    }
    return sure;
}

/* Contract in obj_i.h. */
void obj_remove_files(struct stor_store *s, const char *bucket,
                      const struct obj_ent *e, const struct stor_place *pl,
                      const bool *keep_meta)
{
    (void)remove_metas(s, bucket, e, pl, keep_meta);
    remove_shards(s, bucket, e, pl, true);
}

/* ---- PUT ---- */

struct stor_put {
    struct stor_store *s;
    char bucket[64];
    char *key; /* owned */
    size_t key_len;
    uint8_t id[16];
    struct stor_place pl;
    struct stor_hdr *hdrs; /* owned */
    size_t nhdrs;
    int64_t expect;
    EVP_MD_CTX *md5;
    uint64_t total;
    bool streaming;
    int k, m;
    uint32_t block;
    uint64_t dataid;
    uint8_t *buf; /* small buffer, then stripe data (k * block); owned */
    size_t blen, bcap;
    uint8_t *par; /* m * block; owned */
    int fd[OBJ_MAX_SHARDS];
    bool ok[OBJ_MAX_SHARDS];
    uint64_t stripes;
    int err;
    uint64_t gs_mark; /* group-commit mark taken before the shard writes */
    /* multipart part */
    bool is_part;
    char uid[STOR_UPLOAD_ID_MAX];
    int partno;
    obj_part_commit_fn *part_commit; /* multipart's, set by make_part */
    /* conditional write (stor_put_set_condition) */
    bool cond_absent;
    char cond_etag[STOR_ETAG_MAX];
    /* stor_put_set_etag: the ETag to record instead of the body's MD5 */
    char etag_set[STOR_ETAG_MAX];
    /* stor_put_set_retire: keep the current version (this one) in place */
    uint64_t retire_ver;
};

/* The condition of the commit in progress on this thread (obj_commit is
 * shared with copy and Complete, which have none). */
static __thread const struct stor_put *t_cond;
/* ... and a Complete's (obj_commit_set_cond) */
static __thread const struct stor_write_cond *t_wcond;

/* See obj_i.h. */
void obj_commit_set_cond(const struct stor_write_cond *c)
{
    t_wcond = c;
}

/* ---- group commit (gsync.h): one barrier per filesystem, shared ---- */

/* The drives of the shards j < n with ok[j] into @drv (their shard index
 * into @map); returns how many. */
static size_t shard_drives(struct stor_store *s, const struct stor_place *pl,
                           int n, const bool *ok, size_t *drv, int *map)
{
    size_t nd = 0;

    for (int j = 0; j < n; j++)
        if (ok[j]) {
            map[nd] = j;
            drv[nd++] = obj_shard_drive(s, pl, j);
        }
    return nd;
}

/* Contract in obj_i.h. */
int obj_gsync_open(struct stor_store *s)
{
    const char **paths = calloc(s->ndrives ? s->ndrives : 1, sizeof(*paths));

    if (paths == NULL)
        return -ENOMEM;
    for (size_t d = 0; d < s->ndrives; d++)
        paths[d] = s->drives[d].path;
    s->gs = stor_gsync_create(paths, s->ndrives);
    free(paths);
    return s->gs ? 0 : -ENOMEM;
}

/* Mark before writing to the drives of shards ok[j] (see gsync.h). */
static uint64_t sync_mark(struct stor_store *s, const struct stor_place *pl,
                          int n, const bool *ok)
{
    size_t drv[OBJ_MAX_SHARDS] = {0};
    int map[OBJ_MAX_SHARDS];
    size_t nd;

    if (!s->fsync)
        return 0;
    nd = shard_drives(s, pl, n, ok, drv, map);
    return stor_gsync_mark(s->gs, drv, nd);
}

/* Parents of the object directories this thread made since its last
 * barrier: their new entries must survive power loss too, so the next
 * sync_barrier() with directories covers them (one batch, or the syncfs
 * round) rather than one serial fsync each (a new bucket's first PUTs
 * make up to k + m of them each). */
struct new_dirs {
    size_t n;
    size_t drive[OBJ_MAX_SHARDS];
    char path[OBJ_MAX_SHARDS][PATH_MAX];
};
static _Thread_local struct new_dirs t_new_dirs;

/* Starts an operation's list of new directories empty: a barrier covers
 * only the directories its own operation made. (A delete marker's used to
 * stay in the list, since nothing syncs a marker, and the thread's next
 * commit with directories fsynced them; once their bucket was deleted the
 * open failed and that unrelated commit lost those drives: 503s in the
 * s3-tests' lifecycle areas, session 14.) */
static void new_dirs_begin(void)
{
    t_new_dirs.n = 0;
}

/* Is drive @d one of shards j < n with ok[j] and jnl[j]? */
static bool jnl_drive(struct stor_store *s, const struct stor_place *pl, int n,
                      const bool *ok, const bool *jnl, size_t d)
{
    for (int j = 0; j < n; j++)
        if (ok[j] && jnl[j] && obj_shard_drive(s, pl, j) == d)
            return true;
    return false;
}

/* The barrier of a commit step (gsync.h) over the shards j < n with ok[j]:
 * makes durable what this thread wrote to their drives since @mark, which
 * covers, per shard, the open file fds[j] (when @fds and fds[j] >= 0) and the
 * object directory of @bucket/@id where dirs[j] (when @dirs: new names and
 * links in it; then also the entries of the directories rename_mk made) and the
 * extent file xfds[j] (when @xfds and xfds[j] >= 0; its fsync shared with
 * concurrent commits through xsync[j]). Where jnl[j] (when @jnl), shard j's
 * meta has a record in its drive's journal: then the journal's shared fsync is
 * its only item (no fds[j], no directories on that drive). A shard that fails
 * is cleared in @ok and its drive marked failed. Returns the number of shards
 * still ok. Without --fsync it only counts them. With @during, calls
 * during(@arg) once while the barrier waits (stor_gsync_barrier_during:
 * plain syscalls only); it may clear ok[j] of shards it failed. */
static int sync_barrier_jd(struct stor_store *s, const char *bucket,
                           const uint8_t id[16], const struct stor_place *pl,
                           int n, bool *ok, uint64_t mark, const int *fds,
                           const bool *dirs, const int *xfds,
                           struct stor_gsync_file *const *xsync,
                           const bool *jnl, void (*during)(void *), void *arg)
{
    struct stor_sync_item it[3 * OBJ_MAX_SHARDS];
    int map[3 * OBJ_MAX_SHARDS], nok = 0;
    int oerr[3 * OBJ_MAX_SHARDS] = {0}; /* a directory's open failed */
    bool opened[3 * OBJ_MAX_SHARDS] = {0};
    struct new_dirs *nd = &t_new_dirs;
    size_t ni = 0;

    if (!s->fsync) {
        if (during)
            during(arg);
        if (dirs)
            nd->n = 0;
        for (int j = 0; j < n; j++)
            nok += ok[j];
        return nok;
    }
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);

        if (!ok[j])
            continue;
        if (jnl && jnl[j]) {
            /* its meta is in the drive's journal (obj_jnl.c): the journal
             * replaces the meta's, the directory's and the new directories'
             * fsyncs */
            map[ni] = j;
            obj_jnl_item(s, d, &it[ni++]);
            continue;
        }
        if (fds && fds[j] >= 0) {
            map[ni] = j;
            it[ni++] = (struct stor_sync_item){.drive = d, .fd = fds[j]};
        }
        if (xfds && xfds[j] >= 0) { /* the shard's extent file */
            map[ni] = j;
            it[ni++] = (struct stor_sync_item){
                .drive = d, .fd = xfds[j], .shared = xsync[j]};
        }
        if (dirs && dirs[j]) {
            char path[PATH_MAX];
            int fd = -1;

            if (!stor_gsync_is_fs(s->gs, d) &&
                obj_path_dir(path, sizeof(path), s->drives[d].path, bucket,
                             id) == 0)
                fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            oerr[ni] = fd < 0 ? errno : 0;
            opened[ni] = fd >= 0;
            map[ni] = j;
            it[ni++] = (struct stor_sync_item){.drive = d, .fd = fd};
        }
    }
    /* the parents of the object directories rename_mk made */
    for (size_t i = 0; dirs && i < nd->n; i++) {
        int fd = -1;

        if (jnl && jnl_drive(s, pl, n, ok, jnl, nd->drive[i]))
            continue; /* a replay makes the directories it needs */
        if (ni >= 2 * OBJ_MAX_SHARDS) { /* a barrier takes 64 items */
            (void)stor_fsync_dir(nd->path[i]);
            continue;
        }
        if (!stor_gsync_is_fs(s->gs, nd->drive[i]))
            fd = open(nd->path[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        oerr[ni] = fd < 0 ? errno : 0;
        opened[ni] = fd >= 0;
        map[ni] = -1;
        it[ni++] = (struct stor_sync_item){.drive = nd->drive[i], .fd = fd};
    }
    if (dirs)
        nd->n = 0;
    stor_gsync_barrier_during(s->gs, mark, it, ni, during, arg);
    for (size_t i = 0; i < ni; i++) {
        if (opened[i])
            close(it[i].fd);
        if (it[i].res == -EBADF && it[i].fd < 0 && oerr[i])
            it[i].res = -oerr[i]; /* the open's errno, not "no fd" */
        if (map[i] < 0) {
            /* a new directory's entry is not durable: so is nothing the
             * commit renamed into it on that drive */
            for (int j = 0; j < n && it[i].res < 0; j++)
                if (ok[j] && obj_shard_drive(s, pl, j) == it[i].drive) {
                    obj_drive_fail_at(s, it[i].drive, -it[i].res,
                                      "barrier: new directory's fsync");
                    ok[j] = false;
                }
            continue;
        }
        if (it[i].res < 0 && ok[map[i]]) {
            obj_drive_fail_at(s, it[i].drive, -it[i].res,
                              "barrier: fsync (file, directory or journal)");
            ok[map[i]] = false;
        }
    }
    for (int j = 0; j < n; j++)
        nok += ok[j];
    return nok;
}

/* sync_barrier_jd() with nothing to do while it waits. */
static int sync_barrier_j(struct stor_store *s, const char *bucket,
                          const uint8_t id[16], const struct stor_place *pl,
                          int n, bool *ok, uint64_t mark, const int *fds,
                          const bool *dirs, const int *xfds,
                          struct stor_gsync_file *const *xsync, const bool *jnl)
{
    return sync_barrier_jd(s, bucket, id, pl, n, ok, mark, fds, dirs, xfds,
                           xsync, jnl, NULL, NULL);
}

/* sync_barrier_j() without the journal. */
static int sync_barrier(struct stor_store *s, const char *bucket,
                        const uint8_t id[16], const struct stor_place *pl,
                        int n, bool *ok, uint64_t mark, const int *fds,
                        const bool *dirs, const int *xfds,
                        struct stor_gsync_file *const *xsync)
{
    return sync_barrier_j(s, bucket, id, pl, n, ok, mark, fds, dirs, xfds,
                          xsync, NULL);
}

/* Contract in object.h. */
int stor_put_set_etag(struct stor_put *p, const char *etag)
{
    if (strlen(etag) >= sizeof(p->etag_set))
        return -STOR_EINVAL;
    snprintf(p->etag_set, sizeof(p->etag_set), "%s", etag);
    return 0;
}

/* Contract in object.h. */
int stor_put_set_condition(struct stor_put *p, bool absent, const char *etag)
{
    p->cond_absent = absent;
    if (etag)
        snprintf(p->cond_etag, sizeof(p->cond_etag), "%s", etag);
    return 0;
}

/* See object.h. */
/* Contract in object.h (obj_ver.c does the work at commit). */
int stor_put_set_retire(struct stor_put *p, uint64_t version)
{
    if (p->is_part || version == 0)
        return -EINVAL;
    p->retire_ver = version;
    return 0;
}

int stor_put_add_header(struct stor_put *p, const char *name, const char *value)
{
    struct stor_hdr *h;
    char *n, *v;
    size_t i;

    v = strdup(value);
    if (v == NULL)
        return -ENOMEM;
    for (i = 0; i < p->nhdrs; i++)
        if (strcmp(p->hdrs[i].name, name) == 0) {
            free(p->hdrs[i].value);
            p->hdrs[i].value = v;
            return 0;
        }
    n = strdup(name);
    h = n ? realloc(p->hdrs, (p->nhdrs + 1) * sizeof(*h)) : NULL;
    if (h == NULL) {
        free(n);
        free(v);
        return -ENOMEM;
    }
    h[p->nhdrs].name = n;
    h[p->nhdrs].value = v;
    p->hdrs = h;
    p->nhdrs++;
    return 0;
}

/* Checks t_cond against the index; caller holds the key's write lock, so
 * no other commit or delete of the key can come in between. */
static int cond_check(struct stor_store *s, const char *bucket, const char *key,
                      size_t key_len)
{
    const struct stor_put *c = t_cond;
    bool absent = c ? c->cond_absent : t_wcond && t_wcond->absent;
    const char *etag = c ? c->cond_etag : t_wcond ? t_wcond->etag : "";
    struct obj_ent *cur;
    int ret;

    if (!absent && etag[0] == 0)
        return 0;
    ret = obj_cur_lookup(s, bucket, key, key_len, &cur);
    if (ret == -STOR_ENOBUCKET)
        return 0; /* the commit answers it */
    if (ret < 0 && ret != -STOR_ENOKEY)
        return ret;
    if (cur && absent)
        ret = -STOR_EPRECOND;
    else if (etag[0] && cur == NULL)
        ret = -STOR_ENOKEY;
    else if (etag[0] && strcmp(cur->etag, etag) != 0)
        ret = -STOR_EPRECOND;
    else
        ret = 0;
    obj_ent_free(cur);
    return ret;
}

/* Frees a put and unlinks its temp shard files. */
static void put_free(struct stor_put *p)
{
    for (int j = 0; j < OBJ_MAX_SHARDS; j++) {
        char path[PATH_MAX];

        if (p->fd[j] >= 0)
            close(p->fd[j]);
        /* committed shards were renamed away; this removes the rest */
        if (p->streaming && j < p->k + p->m &&
            obj_path_tmp(path, sizeof(path),
                         p->s->drives[obj_shard_drive(p->s, &p->pl, j)].path,
                         p->dataid, j) == 0)
            unlink(path);
    }
    if (p->md5)
        EVP_MD_CTX_free(p->md5);
    obj_hdrs_free(p->hdrs, p->nhdrs);
    free(p->key);
    free(p->buf);
    free(p->par);
    free(p);
}

/* Contract in obj_i.h: a put that has not chosen its geometry yet. */
struct stor_put *obj_put_create(struct stor_store *s, const char *bucket,
                                const char *key, size_t key_len, int64_t size,
                                const struct stor_hdr *hdrs, size_t nhdrs,
                                int *err)
{
    struct stor_put *p;

    *err = 0;
    if (!obj_valid_key(key, key_len)) {
        *err = -STOR_EINVAL;
        return NULL;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    for (int j = 0; j < OBJ_MAX_SHARDS; j++)
        p->fd[j] = -1;
    p->s = s;
    snprintf(p->bucket, sizeof(p->bucket), "%s", bucket);
    p->key = malloc(key_len + 1);
    p->md5 = EVP_MD_CTX_new();
    if (p->key == NULL || p->md5 == NULL ||
        EVP_DigestInit_ex(p->md5, EVP_md5(), NULL) != 1 ||
        obj_hdrs_copy(hdrs, nhdrs, &p->hdrs) < 0) {
        put_free(p);
        *err = -ENOMEM;
        return NULL;
    }
    p->nhdrs = nhdrs;
    memcpy(p->key, key, key_len);
    p->key[key_len] = 0;
    p->key_len = key_len;
    p->expect = size;
    obj_key_id(s, key, key_len, p->id);
    obj_place(s, bucket, key, key_len, &p->pl);
    p->dataid = obj_next_version(s);
    return p;
}

static int put_flush_stripe(struct stor_put *p);

/* Appends to the stripe buffer, flushing each full stripe. */
static int put_feed_stream(struct stor_put *p, const uint8_t *c, size_t len)
{
    while (len > 0) {
        size_t n = CM_MIN(len, p->bcap - p->blen);
        int ret;

        memcpy(p->buf + p->blen, c, n);
        p->blen += n;
        c += n;
        len -= n;
        if (p->blen == p->bcap) {
            ret = put_flush_stripe(p);
            if (ret)
                return ret;
        }
    }
    return 0;
}

/* Switches to streaming: K+M geometry, temp shard files on every online
 * drive of the placement. */
static int put_start_stream(struct stor_put *p)
{
    struct stor_store *s = p->s;
    uint8_t *old = p->buf;
    size_t olen = p->blen;
    int nok = 0;

    p->k = s->K;
    p->m = s->M;
    p->block = OBJ_BLOCK;
    p->buf = malloc((size_t)p->k * p->block);
    p->par = p->m ? malloc((size_t)p->m * p->block) : NULL;
    if (p->buf == NULL || (p->m && p->par == NULL)) {
        free(old);
        return -ENOMEM;
    }
    p->bcap = (size_t)p->k * p->block;
    p->blen = 0;
    for (int j = 0; j < p->k + p->m; j++) {
        size_t d = obj_shard_drive(s, &p->pl, j);
        char path[PATH_MAX];

        if (!obj_drive_online(s, d) ||
            obj_path_tmp(path, sizeof(path), s->drives[d].path, p->dataid, j) <
                0)
            continue;
        p->fd[j] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (p->fd[j] < 0) {
            /* no temp dir: the drive itself is gone */
            obj_drive_fail(s, d, errno == ENOENT ? ENODEV : errno);
            continue;
        }
        p->ok[j] = true;
        nok++;
    }
    p->streaming = true;
    p->gs_mark = sync_mark(s, &p->pl, p->k + p->m, p->ok);
    if (nok < obj_write_quorum(s, p->k, p->m)) {
        free(old);
        return -STOR_EQUORUM;
    }
    if (olen > 0) {
        /* olen <= OBJ_INLINE_MAX may exceed one stripe: feed it through */
        int ret = put_feed_stream(p, old, olen);

        free(old);
        return ret;
    }
    free(old);
    return 0;
}

/* Encodes the buffered stripe and writes every shard block in one batch. */
static int put_flush_stripe(struct stor_put *p)
{
    struct stor_store *s = p->s;
    int n = p->k + p->m, nio = 0, nok = 0;
    uint32_t slen = (uint32_t)((p->blen + p->k - 1) / p->k);
    uint8_t *data[OBJ_MAX_SHARDS], *par[OBJ_MAX_SHARDS];
    uint8_t crc[OBJ_MAX_SHARDS][OBJ_CRC_LEN];
    struct stor_io io[2 * OBJ_MAX_SHARDS];
    uint64_t off = p->stripes * (uint64_t)(p->block + OBJ_CRC_LEN);

    if (p->blen == 0)
        return 0;
    if (p->blen < p->bcap)
        memset(p->buf + p->blen, 0, (size_t)slen * p->k - p->blen);
    for (int j = 0; j < p->k; j++)
        data[j] = p->buf + (size_t)j * slen;
    for (int j = 0; j < p->m; j++)
        par[j] = p->par + (size_t)j * slen;
    if (p->m)
        stor_ec_encode(stor_ec_get(p->k, p->m), slen, data, par);
    for (int j = 0; j < n; j++) {
        uint8_t *b = j < p->k ? data[j] : par[j - p->k];
        uint64_t c;

        if (!p->ok[j])
            continue;
        c = stor_crc64(obj_block_seed(p->dataid, j, p->stripes), b, slen);
        for (int i = 0; i < OBJ_CRC_LEN; i++)
            crc[j][i] = (uint8_t)(c >> (8 * i));
        io[nio++] = (struct stor_io){.fd = p->fd[j],
                                     .op = 'w',
                                     .buf = crc[j],
                                     .len = OBJ_CRC_LEN,
                                     .off = off};
        io[nio++] = (struct stor_io){.fd = p->fd[j],
                                     .op = 'w',
                                     .buf = b,
                                     .len = slen,
                                     .off = off + OBJ_CRC_LEN};
    }
    stor_io_run(io, (size_t)nio);
    nio = 0;
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, &p->pl, j);

        if (!p->ok[j])
            continue;
        if (io[nio].res < 0 || io[nio + 1].res < 0 ||
            (size_t)io[nio + 1].res != slen) {
            int e = io[nio].res < 0       ? (int)-io[nio].res
                    : io[nio + 1].res < 0 ? (int)-io[nio + 1].res
                                          : EIO;
            obj_drive_fail(s, d, e);
            p->ok[j] = false;
        } else {
            obj_drive_count(s, d, true, slen + OBJ_CRC_LEN);
            nok++;
        }
        nio += 2;
    }
    p->stripes++;
    p->blen = 0;
    if (nok < obj_write_quorum(s, p->k, p->m))
        return -STOR_EQUORUM;
    return 0;
}

/* Contract in object.h: sizes above OBJ_INLINE_MAX stream from the first
 * byte. */
int stor_put_begin(struct stor_store *s, const char *bucket, const char *key,
                   size_t key_len, int64_t size, const struct stor_hdr *hdrs,
                   size_t nhdrs, struct stor_put **out)
{
    struct stor_put *p;
    struct stor_place pl;
    int ret;

    ret = stor_bucket_stat(s, bucket, NULL);
    if (ret < 0)
        return ret;
    if (!obj_valid_key(key, key_len))
        return -STOR_EINVAL;
    obj_place(s, bucket, key, key_len, &pl);
    if (obj_set_online(s, pl.set) < s->wq)
        return -STOR_EQUORUM;
    p = obj_put_create(s, bucket, key, key_len, size, hdrs, nhdrs, &ret);
    if (p == NULL)
        return ret;
    if (size > (int64_t)OBJ_INLINE_MAX) {
        ret = put_start_stream(p);
        if (ret < 0) {
            put_free(p);
            return ret;
        }
    }
    *out = p;
    return 0;
}

/* Contract in object.h: buffers up to OBJ_INLINE_MAX, then stripes. */
int stor_put_write(struct stor_put *p, const void *data, size_t len)
{
    const uint8_t *c = data;

    if (p->err)
        return p->err;
    if (len == 0)
        return 0;
    EVP_DigestUpdate(p->md5, data, len);
    p->total += len;
    if (!p->streaming) {
        if (p->blen + len <= OBJ_INLINE_MAX) {
            if (p->blen + len > p->bcap) {
                size_t nc = CM_MAX(p->blen + len,
                                   CM_MIN(2 * p->bcap + 4096, OBJ_INLINE_MAX));
                uint8_t *nb = realloc(p->buf, nc);

                if (nb == NULL)
                    return p->err = -ENOMEM;
                p->buf = nb;
                p->bcap = nc;
            }
            memcpy(p->buf + p->blen, data, len);
            p->blen += len;
            return 0;
        }
        p->err = put_start_stream(p);
        if (p->err)
            return p->err;
    }
    p->err = put_feed_stream(p, c, len);
    return p->err;
}

/* Contract in object.h. */
void stor_put_abort(struct stor_put *p)
{
    if (p)
        put_free(p);
}

/* The extent records of one commit or heal (obj_ext.h): for each shard
 * j that goes out, its place, the fd to write it with and its header. */
struct ext_batch {
    struct obj_xref xref[OBJ_MAX_SHARDS];         /* file 0: none reserved */
    int fd[OBJ_MAX_SHARDS];                       /* -1: none */
    struct stor_gsync_file *sync[OBJ_MAX_SHARDS]; /* its shared fsyncs */
    uint8_t hdr[OBJ_MAX_SHARDS][OBJ_EXT_HDR];
    uint8_t *const *shards; /* borrowed: the shard bytes, L each */
    size_t L;
};

/* Reserves a record for every shard ok[j] of @e (version set) in its
 * drive's extent file and fills its header; on a drive without extent
 * files (xref[j].file stays 0) that shard goes inline into its meta, as
 * without --extents: a reader takes either form. */
static void ext_reserve(struct stor_store *s, const struct obj_ent *e,
                        const struct stor_place *pl, uint8_t *const *shards,
                        size_t L, bool *ok, struct ext_batch *xb)
{
    memset(xb->xref, 0, sizeof(xb->xref));
    xb->shards = shards;
    xb->L = L;
    for (int j = 0; j < OBJ_MAX_SHARDS; j++)
        xb->fd[j] = -1;
    for (int j = 0; j < e->k + e->m; j++) {
        size_t d = obj_shard_drive(s, pl, j);

        if (!ok[j])
            continue;
        if (obj_ext_alloc(s, d, L, &xb->xref[j], &xb->fd[j], &xb->sync[j]) <
            0) {
            xb->xref[j] = (struct obj_xref){0};
            xb->fd[j] = -1;
            continue;
        }
        obj_ext_hdr(xb->hdr[j], e->id, e->version, j, e->k, e->m, shards[j], L);
    }
}

/* Punches the records of @xb not kept (keep[j] false; NULL: all). */
static void ext_unreserve(struct stor_store *s, const struct stor_place *pl,
                          const struct ext_batch *xb, int n, const bool *keep)
{
    for (int j = 0; j < n; j++)
        if (xb->xref[j].file && !(keep && keep[j]))
            obj_ext_punch(s, obj_shard_drive(s, pl, j), &xb->xref[j], xb->L,
                          true);
}

/* For an extent object whose index entry does not carry the records
 * (rebuilt from the metas): reads them from the metas of its placement,
 * so they can be punched or served. Caller holds the key lock. */
static void ext_refs_load(struct stor_store *s, const char *bucket,
                          struct obj_ent *e, const struct stor_place *pl)
{
    int n = e->k + e->m;

    if (!e->ext || e->xref)
        return;
    e->xref = calloc((size_t)n, sizeof(*e->xref));
    for (int j = 0; j < n && e->xref; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char path[PATH_MAX];
        struct stor_meta m;

        if (!obj_drive_online(s, d) ||
            obj_path_meta(path, sizeof(path), s->drives[d].path, bucket,
                          e->id) < 0 ||
            stor_meta_read_file(path, &m) < 0)
            continue;
        if (m.type == STOR_META_OBJECT && m.version == e->version &&
            m.shard == j && m.has_xref)
            e->xref[j] = (struct obj_xref){.file = m.xfile, .off = m.xoff};
        stor_meta_fini(&m);
    }
}

static int open_mk(const char *path, size_t d);
static int place_mk(const char *from, const char *to, size_t d);

/* No spare name: the temp meta is obj_path_tmp(uniq, 100 + j). */
#define SNUM_NONE UINT64_MAX

/* The temp meta of shard @j on @drive: sNUM (@snum[j], obj_spare_open) or
 * the commit's obj_path_tmp name. 0 or -ENAMETOOLONG. */
static int meta_tmp_path(char *buf, size_t cap, const char *drive,
                         uint64_t uniq, int j, const uint64_t *snum)
{
    if (snum && snum[j] != SNUM_NONE)
        return obj_spare_path(buf, cap, drive, snum[j]);
    return obj_path_tmp(buf, cap, drive, uniq, 100 + j);
}

/* How write_tmp_metas() writes: to temp files made durable by its own
 * barrier; to temp files without a barrier (fds[] left open for the
 * caller's), through io_uring (WM_TMP) or with plain pwrite (WM_TMPW:
 * while a barrier's fsync is in flight on this thread's ring); or in place
 * at HEX.m (O_EXCL), without a barrier. */
enum wm_mode { WM_SYNC, WM_TMP, WM_TMPW, WM_PLACE };

/* Writes one meta record per committing shard into temp files, synced
 * with one group barrier (gsync.h) that also covers what this thread wrote
 * to those drives since @mark and, where dirs[j] (@dirs may be NULL), the
 * object directory of @bucket/@id (links made in it before). Shard j is
 * skipped unless ok[j]. With @xb, shard j's extent record is written in
 * the same submission and its extent file is in the barrier too (@mode
 * WM_SYNC). WM_TMP (a brand-new inline name's commit, FORMAT.md "One
 * barrier for a brand-new inline name"): temp files and no barrier, fds[j]
 * stay open (-1 where not written) for the caller's one barrier after its
 * renames, and the caller closes them. WM_PLACE (a delete marker's metas,
 * stor_obj_delete_keep): no temp file and no barrier, each meta created at
 * its final name HEX.m (O_EXCL: the caller found none there, under the key
 * lock), fds[j] left open as with WM_TMP; one created but not written
 * whole is unlinked. With @snum, a WM_PLACE meta goes into a spare of its
 * drive where there is one (obj_spare_have: no inode created), which is
 * then renamed to HEX.m with RENAME_NOREPLACE (place_mk: the same
 * brand-new-name rule as O_EXCL; a spare not placed is handed back).
 * (Creating a commit's metas in place too was measured slower: FORMAT.md
 * "Tried and taken back".) With @snum (not WM_PLACE), each temp meta is a
 * spare or a new file named sNUM (obj_spare_open, snum[j]; SNUM_NONE where
 * the name is obj_path_tmp's): no rename to a temp name first
 * (meta_tmp_path). Returns the number written; clears ok[j] for the ones
 * that failed. */
static int write_tmp_metas(struct stor_store *s, const char *bucket,
                           const uint8_t id[16], const struct stor_place *pl,
                           uint64_t uniq, struct cm_buf *metas, int n, bool *ok,
                           int *fds, uint64_t *snum, uint64_t mark,
                           const bool *dirs, const struct ext_batch *xb,
                           enum wm_mode mode)
{
    struct stor_io io[3 * OBJ_MAX_SHARDS];
    int map[3 * OBJ_MAX_SHARDS], nio = 0, nok = 0;
    size_t xlen = xb ? xb->L : 0;
    size_t nd0 = t_new_dirs.n; /* WM_PLACE: the marker's are not synced */

    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char path[PATH_MAX];

        fds[j] = -1;
        if (snum)
            snum[j] = SNUM_NONE;
        if (!ok[j])
            continue;
        if (snum && mode != WM_PLACE) {
            /* the temp meta is a spare, or a new file, named sNUM */
            int r = obj_spare_open(s, d, metas[j].len, &snum[j]);

            if (r < 0 && r != -ENOTSUP) {
                snum[j] = SNUM_NONE;
                obj_drive_fail_at(s, d, r == -ENOENT ? ENODEV : -r,
                                  "temp meta: spare open or create");
                ok[j] = false;
                continue;
            }
            fds[j] = r < 0 ? -1 : r;
        } else if (snum) {
            /* a marker's meta: a spare when the drive has one, else
             * created at HEX.m below */
            int r = obj_spare_have(s, d, metas[j].len, &snum[j]);

            if (r < 0)
                snum[j] = SNUM_NONE;
            fds[j] = r < 0 ? -1 : r;
        }
        if (fds[j] < 0 &&
            (mode != WM_PLACE
                 ? obj_path_tmp(path, sizeof(path), s->drives[d].path, uniq,
                                100 + j)
                 : obj_path_meta(path, sizeof(path), s->drives[d].path, bucket,
                                 id)) < 0) {
            obj_drive_fail_at(s, d, ENAMETOOLONG, "temp meta: path");
            ok[j] = false;
            continue;
        }
        /* a spare inode when the drive has one (obj_jnl.c): no create */
        if (fds[j] < 0 && mode != WM_PLACE)
            fds[j] = obj_spare_take(s, d, path, metas[j].len);
        if (fds[j] < 0)
            fds[j] =
                mode != WM_PLACE
                    ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                    : open_mk(path, d);
        if (fds[j] < 0) {
            int e = mode != WM_PLACE ? errno : -fds[j];

            fds[j] = -1;
            if (e != EEXIST) /* not a drive fault: someone else's file */
                obj_drive_fail_at(s, d, e == ENOENT ? ENODEV : e,
                                  "temp meta: open");
            ok[j] = false;
            continue;
        }
        map[nio] = j;
        io[nio++] = (struct stor_io){
            .fd = fds[j], .op = 'w', .buf = metas[j].data, .len = metas[j].len};
        if (xb && xb->fd[j] >= 0) { /* the record: header, then shard */
            map[nio] = j;
            io[nio++] =
                (struct stor_io){.fd = xb->fd[j],
                                 .op = 'w',
                                 .buf = CM_UNCONST(uint8_t *, xb->hdr[j]),
                                 .len = OBJ_EXT_HDR,
                                 .off = xb->xref[j].off};
            map[nio] = j;
            io[nio++] = (struct stor_io){.fd = xb->fd[j],
                                         .op = 'w',
                                         .buf = xb->shards[j],
                                         .len = xlen,
                                         .off = xb->xref[j].off + OBJ_EXT_HDR};
        }
    }
    if (mode == WM_TMPW)
        stor_io_run_sync(io, (size_t)nio);
    else
        stor_io_run(io, (size_t)nio);
    for (int i = 0; i < nio; i++) {
        size_t d = obj_shard_drive(s, pl, map[i]);

        if (io[i].res != (ssize_t)io[i].len) {
            if (ok[map[i]])
                obj_drive_fail_at(s, d, io[i].res < 0 ? (int)-io[i].res : EIO,
                                  "temp meta: write");
            ok[map[i]] = false;
        } else {
            obj_drive_count(s, d, true, io[i].len);
        }
    }
    if (mode != WM_SYNC) {
        for (int j = 0; j < n; j++) {
            size_t d = obj_shard_drive(s, pl, j);
            char path[PATH_MAX], from[PATH_MAX];

            if (mode == WM_PLACE && snum && snum[j] != SNUM_NONE) {
                /* the written spare takes the marker's name, never over
                 * a file there (EEXIST: someone else's, no drive fault) */
                int r = -ENAMETOOLONG;

                if (obj_spare_path(from, sizeof(from), s->drives[d].path,
                                   snum[j]) == 0 &&
                    obj_path_meta(path, sizeof(path), s->drives[d].path, bucket,
                                  id) == 0)
                    r = ok[j] ? place_mk(from, path, d) : -EIO;
                if (r < 0) {
                    if (ok[j] && r != -EEXIST)
                        obj_drive_fail_at(s, d, r == -ENOENT ? ENODEV : -r,
                                          "marker meta: rename into place");
                    ok[j] = false;
                    close(fds[j]);
                    fds[j] = -1;
                    obj_spare_keep(s, d, snum[j]); /* still sNUM */
                }
                nok += ok[j];
                continue;
            }
            if (mode == WM_PLACE && !ok[j] && fds[j] >= 0 &&
                /* created, not written whole */
                obj_path_meta(path, sizeof(path), s->drives[d].path, bucket,
                              id) == 0) {
                unlink(path);
                close(fds[j]);
                fds[j] = -1;
            }
            nok += ok[j];
        }
        if (mode == WM_PLACE) /* no barrier will cover what open_mk made */
            t_new_dirs.n = CM_MIN(t_new_dirs.n, nd0);
        return nok;
    }
    nok = sync_barrier(s, bucket, id, pl, n, ok, mark, fds, dirs,
                       xb ? xb->fd : NULL, xb ? xb->sync : NULL);
    for (int j = 0; j < n; j++) {
        if (fds[j] >= 0)
            close(fds[j]);
        fds[j] = -1;
    }
    return nok;
}

/* Makes the object directory of @path (a file in it) on drive @d, and
 * notes its parent, whose new entry the next barrier with directories
 * makes durable. 0 or -errno. */
static int mk_obj_dir(const char *path, size_t d)
{
    struct new_dirs *nd = &t_new_dirs;
    char dir[PATH_MAX];
    char *slash;
    int ret;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash == NULL)
        return -ENOENT;
    *slash = 0;
    ret = stor_mkdirs(dir);
    if (ret < 0)
        return ret;
    slash = strrchr(dir, '/');
    if (slash == NULL)
        return 0;
    *slash = 0;
    if (nd->n == CM_ARRAY_SIZE(nd->path)) {
        (void)stor_fsync_dir(dir); /* full: the old way */
        return 0;
    }
    nd->drive[nd->n] = d;
    memcpy(nd->path[nd->n++], dir, (size_t)(slash - dir) + 1);
    return 0;
}

/* rename() that creates the object directory on first use (on drive @d);
 * the barrier after the renames makes the new directory durable. */
static int rename_mk(const char *from, const char *to, size_t d)
{
    int ret;

    if (rename(from, to) == 0)
        return 0;
    if (errno != ENOENT)
        return -errno;
    ret = mk_obj_dir(to, d);
    if (ret < 0)
        return ret;
    return rename(from, to) == 0 ? 0 : -errno;
}

/* Creates the new file @path (O_EXCL) for writing, and its object
 * directory on first use (on drive @d) as rename_mk() does. Returns the fd
 * or -errno. */
static int open_mk(const char *path, size_t d)
{
    const int fl = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
    int fd = open(path, fl, 0644), ret;

    if (fd >= 0 || errno != ENOENT)
        return fd >= 0 ? fd : -errno;
    ret = mk_obj_dir(path, d);
    if (ret < 0)
        return ret;
    fd = open(path, fl, 0644);
    return fd >= 0 ? fd : -errno;
}

/* Renames @from (a written spare) to the brand-new name @to, never over a
 * file there (-EEXIST, as open_mk's O_EXCL), creating the object directory
 * on first use (on drive @d) as rename_mk() does. Where the filesystem has
 * no RENAME_NOREPLACE, link() and unlink() do the same. 0 or -errno. */
static int place_mk(const char *from, const char *to, size_t d)
{
    for (int tries = 0;; tries++) {
        int ret;

        if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno == EINVAL && link(from, to) == 0) {
            (void)unlink(from);
            return 0;
        }
        if (errno != ENOENT || tries > 0)
            return -errno;
        ret = mk_obj_dir(to, d);
        if (ret < 0)
            return ret;
    }
}

/* Builds the meta records of a committing object: one per shard. Inline
 * objects carry their shard; @shards is NULL otherwise. */
static int build_metas(const struct obj_ent *e, int type,
                       uint8_t *const *shards, size_t slen,
                       struct cm_buf *metas, const bool *ok,
                       const struct ext_batch *xb)
{
    struct stor_meta m = {0};

    m.type = type;
    m.k = e->k;
    m.m = e->m;
    m.block = e->block;
    m.version = e->version;
    m.mtime_ns = e->mtime_ns;
    m.size = e->size;
    memcpy(m.etag, e->etag, sizeof(m.etag));
    m.key = e->key;
    m.key_len = e->key_len;
    if (type == STOR_META_OBJECT) {
        m.hdrs = e->hdrs;
        m.nhdrs = e->nhdrs;
        m.parts = e->parts;
        m.nparts = e->nparts;
        m.has_inline = e->inl;
    }
    for (int j = 0; j < e->k + e->m; j++) {
        cm_buf_init(&metas[j], STOR_META_MAX);
        if (!ok[j])
            continue;
        m.shard = j;
        m.has_xref = 0;
        if (xb && xb->xref[j].file && type == STOR_META_OBJECT) {
            /* the shard is in an extent record */
            m.has_xref = 1;
            m.xfile = xb->xref[j].file;
            m.xoff = xb->xref[j].off;
            m.inl_len = xb->L;
        } else if (shards && type == STOR_META_OBJECT) {
            m.inl = shards[j];
            m.inl_len = slen;
        }
        if (stor_meta_encode(&m, &metas[j]) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Contract in obj_i.h: healing rewrites metas. */
int obj_rewrite_metas(struct stor_store *s, const char *bucket,
                      const struct obj_ent *e, uint8_t *const *inl, size_t L,
                      bool *which, struct obj_xref *xrefs_out)
{
    struct cm_buf metas[OBJ_MAX_SHARDS];
    struct stor_place pl;
    int fds[OBJ_MAX_SHARDS], n = e->k + e->m, nok = 0;
    uint64_t uniq = obj_next_version(s);
    struct ext_batch *xb = NULL;
    bool asked[OBJ_MAX_SHARDS];

    memset(metas, 0, sizeof(metas));
    new_dirs_begin();
    memcpy(asked, which, sizeof(asked));
    obj_place(s, bucket, e->key, e->key_len, &pl);
    if (e->ext && inl) { /* rebuilt shards go to new extent records */
        xb = malloc(sizeof(*xb));
        if (xb == NULL)
            return 0;
        ext_reserve(s, e, &pl, inl, L, which, xb);
    }
    if (build_metas(e, STOR_META_OBJECT, e->inl ? inl : NULL, L, metas, which,
                    xb) == 0 &&
        write_tmp_metas(s, bucket, e->id, &pl, uniq, metas, n, which, fds, NULL,
                        sync_mark(s, &pl, n, which), NULL, xb, WM_SYNC) > 0) {
        uint64_t mark = sync_mark(s, &pl, n, which);

        for (int j = 0; j < n; j++) {
            char from[PATH_MAX], to[PATH_MAX];
            size_t d = obj_shard_drive(s, &pl, j);

            if (!which[j])
                continue;
            if (obj_path_tmp(from, sizeof(from), s->drives[d].path, uniq,
                             100 + j) == 0 &&
                obj_path_meta(to, sizeof(to), s->drives[d].path, bucket,
                              e->id) == 0 &&
                rename_mk(from, to, d) == 0) {
                nok++;
            } else {
                unlink(from);
                which[j] = false;
            }
        }
        nok = sync_barrier(s, bucket, e->id, &pl, n, which, mark, NULL, which,
                           NULL, NULL);
    }
    if (xb) {
        /* the caller's entry learns where the rebuilt shards are now */
        for (int j = 0; j < n && xrefs_out; j++)
            if (which[j])
                xrefs_out[j] = xb->xref[j];
        for (int j = 0; j < n; j++)
            if (asked[j] && !which[j] && xb->xref[j].file)
                obj_ext_punch(s, obj_shard_drive(s, &pl, j), &xb->xref[j], L,
                              false);
        free(xb);
    }
    for (int j = 0; j < n; j++)
        cm_buf_fini(&metas[j]);
    return nok;
}

/* DRIVE/b/BUCKET/hh/HEX.p: the previous meta kept while an inline object
 * is overwritten (its data lives in the meta, so a crash in the middle of
 * the renames could otherwise leave neither version whole). */
static int path_prev(char *buf, size_t cap, const char *drive,
                     const char *bucket, const uint8_t id[16])
{
    int ret = obj_path_meta(buf, cap, drive, bucket, id);
    size_t n = strlen(buf);

    if (ret == 0)
        buf[n - 1] = 'p';
    return ret;
}

/* Before an inline object is overwritten: hard-links each current meta to
 * HEX.p, so obj_load can roll back an interrupted commit. The caller's
 * barrier after its temp metas makes the links durable before any rename
 * (a drive whose barrier fails gets no rename). Returns the positions that
 * have a saved copy. Caller holds the key lock. */
static uint32_t save_prev(struct stor_store *s, const char *bucket,
                          const uint8_t id[16], const struct stor_place *pl,
                          int n)
{
    uint32_t mask = 0;

    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char m[PATH_MAX], pv[PATH_MAX];
        int r;

        if (!obj_drive_online(s, d) ||
            obj_path_meta(m, sizeof(m), s->drives[d].path, bucket, id) < 0 ||
            path_prev(pv, sizeof(pv), s->drives[d].path, bucket, id) < 0)
            continue;
        r = link(m, pv);
        if (r < 0 && errno == EEXIST) { /* left by a crash: replace it */
            unlink(pv);
            r = link(m, pv);
        }
        if (r < 0)
            continue; /* no current meta there */
        mask |= 1u << j;
    }
    return mask;
}

/* After the commit: drops the saved metas, or (@restore) puts them back
 * where the new meta had replaced them. Where swapped[j] (@swapped may be
 * NULL), the commit exchanged its temp meta sNUM (snum[j]) with HEX.m, so
 * sNUM names the saved meta's inode too: it becomes the spare (HEX.p is
 * only unlinked), or goes when HEX.p is put back. */
static void drop_prev(struct stor_store *s, const char *bucket,
                      const uint8_t id[16], const struct stor_place *pl,
                      uint32_t mask, const bool *restore, const bool *swapped,
                      const uint64_t *snum)
{
    for (int j = 0; j < OBJ_MAX_SHARDS; j++) {
        size_t d;
        char m[PATH_MAX], pv[PATH_MAX];
        bool sw;

        if (!(mask & (1u << j)))
            continue;
        d = obj_shard_drive(s, pl, j);
        sw = swapped && swapped[j];
        if (path_prev(pv, sizeof(pv), s->drives[d].path, bucket, id) < 0)
            continue;
        if (restore && restore[j] &&
            obj_path_meta(m, sizeof(m), s->drives[d].path, bucket, id) == 0 &&
            rename(pv, m) == 0) {
            if (sw &&
                obj_spare_path(pv, sizeof(pv), s->drives[d].path, snum[j]) == 0)
                (void)unlink(pv); /* the restored meta's other name */
            continue;
        }
        if (sw) {
            (void)unlink(pv);
            obj_spare_keep(s, d, snum[j]);
        } else {
            (void)obj_spare_put(s, d, pv);
        }
    }
}

/* Tests only (STORAGED_TEST_RESTORE_FAIL set): drop_kept_swapped's
 * rename of sNUM back over HEX.m is taken as failed, so its fallback runs
 * (test_versioned_overwrite_failed_after_renames_puts_the_old_one_back). */
static bool test_restore_fails(void)
{
    static int on = -1;

    if (__atomic_load_n(&on, __ATOMIC_RELAXED) < 0)
        __atomic_store_n(&on, getenv("STORAGED_TEST_RESTORE_FAIL") != NULL,
                         __ATOMIC_RELAXED);
    return __atomic_load_n(&on, __ATOMIC_RELAXED) == 1;
}

/* drop_prev for a versioned overwrite through the journal, which saved no
 * HEX.p (its links HEX.vVERSION-SINCE of @rt are the old metas' second
 * names): where swapped[j], sNUM names the old (kept) inode too and only
 * loses that name; with @restore[j] (a commit undone after its renames)
 * the old meta goes back to HEX.m (unlink_metas removed the new one):
 * sNUM's name where swapped (or, when that rename fails, the kept name
 * itself), else a link of the kept name. */
static void drop_kept_swapped(struct stor_store *s, const char *bucket,
                              const uint8_t id[16], const struct stor_place *pl,
                              int n, const struct obj_retire *rt,
                              const bool *restore, const bool *swapped,
                              const uint64_t *snum)
{
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char sp[PATH_MAX], m[PATH_MAX], v[PATH_MAX];

        if (!((rt->linked >> j) & 1))
            continue;
        if (swapped[j] &&
            obj_spare_path(sp, sizeof(sp), s->drives[d].path, snum[j]) < 0)
            continue;
        if (restore && restore[j] &&
            obj_path_meta(m, sizeof(m), s->drives[d].path, bucket, id) == 0) {
            bool kp = obj_path_kept(v, sizeof(v), s->drives[d].path, bucket, id,
                                    rt->version, rt->ve->mtime_ns) == 0;

            if (swapped[j]) {
                if (!test_restore_fails() && rename(sp, m) == 0)
                    continue;
                /* the link names the same inode, in HEX.m's own directory
                 * (sNUM is in tmp/): it goes back to HEX.m, and its own
                 * name is dropped as the caller would drop it */
                if (kp && rename(v, m) == 0) {
                    (void)unlink(sp);
                    continue;
                }
            } else if (kp) {
                (void)link(v, m);
            }
        }
        if (swapped[j])
            (void)unlink(sp); /* HEX.v... keeps the inode */
    }
}

/* Is the current version of @key an inline object? Its k + m in *n;
 * *any says whether @key has a current version at all (or the lookup
 * failed). An extent object's records are loaded from its metas (before
 * they are replaced) when the index has none, and the entry handed to
 * *ext. */
static bool current_is_inline(struct stor_store *s, const char *bucket,
                              const char *key, size_t key_len,
                              const struct stor_place *pl, int *n, bool *any,
                              struct obj_ent **ext)
{
    struct obj_ent *cur;
    bool inl = false;
    int r = obj_cur_lookup(s, bucket, key, key_len, &cur);

    *ext = NULL;
    *any = r != -STOR_ENOKEY;
    if (r == 0 && cur->inl) {
        inl = true;
        *n = cur->k + cur->m;
        if (cur->ext && cur->xref == NULL) {
            ext_refs_load(s, bucket, cur, pl);
            *ext = cur;
            return inl;
        }
    }
    obj_ent_free(cur);
    return inl;
}

/* A brand-new name on the drives this commit writes (ok[j]): no meta file
 * of @id there, not even a tombstone (a current version was ruled out by
 * the caller), so no rename of the commit replaces anything. Caller holds
 * the key lock. */
static bool nothing_there(struct stor_store *s, const char *bucket,
                          const uint8_t id[16], const struct stor_place *pl,
                          int n, const bool *ok)
{
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char path[PATH_MAX];

        if (!ok[j])
            continue;
        if (obj_path_meta(path, sizeof(path), s->drives[d].path, bucket, id) <
                0 ||
            access(path, F_OK) == 0 || errno != ENOENT)
            return false;
    }
    return true;
}

/* Unlinks the meta HEX.m of @id on the drive of every shard j < n with
 * placed[j] (best effort): a commit that did not reach its quorum. */
static void unlink_metas(struct stor_store *s, const char *bucket,
                         const uint8_t id[16], const struct stor_place *pl,
                         int n, const bool *placed)
{
    for (int j = 0; j < n; j++) {
        char path[PATH_MAX];
        size_t d = obj_shard_drive(s, pl, j);

        if (placed[j] && obj_path_meta(path, sizeof(path), s->drives[d].path,
                                       bucket, id) == 0)
            unlink(path);
    }
}

/* Writes the journal records @io[0..n) (stor_io_run_sync's results): a
 * run of records that follow each other in one file (a commit's records
 * on drives sharing a journal, appended under its lock one after the
 * other) goes in one pwritev, so the file's time and the write path are
 * taken once per run instead of once per record. A run written short or
 * failed is written again a record at a time for each record's own
 * result (the same bytes at the same offsets). */
static void jnl_write(struct stor_io *io, size_t n)
{
    struct iovec iov[2 * OBJ_MAX_SHARDS];

    for (size_t i = 0, e; i < n; i = e) {
        size_t total = io[i].len;
        ssize_t r;

        iov[0] = (struct iovec){.iov_base = io[i].buf, .iov_len = io[i].len};
        for (e = i + 1;
             e < n && e - i < CM_ARRAY_SIZE(iov) && io[e].fd == io[i].fd &&
             io[e].off == io[e - 1].off + io[e - 1].len;
             e++) {
            iov[e - i] =
                (struct iovec){.iov_base = io[e].buf, .iov_len = io[e].len};
            total += io[e].len;
        }
        if (e - i == 1) {
            stor_io_run_sync(&io[i], 1);
            continue;
        }
        do {
            r = pwritev(io[i].fd, iov, (int)(e - i), (off_t)io[i].off);
        } while (r < 0 && errno == EINTR);
        if (r == (ssize_t)total) {
            for (size_t k = i; k < e; k++)
                io[k].res = (ssize_t)io[k].len;
            continue;
        }
        stor_io_run_sync(&io[i], e - i);
    }
}

/* Appends the metas of the shards with ok[j] and jn[j] (version
 * @version of @bucket/@id; with @kept, of the version kept in place as
 * HEX.vVERSION-SINCE; else for HEX.m, where @since != 0 ties each record
 * to the kept one of that SINCE on its drive: obj_jnl_add) to their
 * drives' journals, in one submission; with @kmetas (may be NULL), each
 * such shard's KEPT record of version @kver (SINCE @since) goes in the
 * same submission, before it (a versioned overwrite: FORMAT.md "The meta
 * journal"). A write that fails clears ok[j] and fails its drive. Caller
 * is between obj_jnl_enter and obj_jnl_leave. Returns the shards still
 * ok. */
static int jnl_append(struct stor_store *s, const char *bucket,
                      const uint8_t id[16], uint64_t version, int64_t since,
                      bool kept, const struct stor_place *pl, int n, bool *ok,
                      const bool *jn, const struct cm_buf *metas, uint64_t kver,
                      const struct cm_buf *kmetas)
{
    struct cm_buf rec[2 * OBJ_MAX_SHARDS];
    struct stor_io io[2 * OBJ_MAX_SHARDS];
    int map[2 * OBJ_MAX_SHARDS], nio = 0, nok = 0;

    memset(rec, 0, sizeof(rec));
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);

        if (!ok[j] || !jn[j])
            continue;
        if (kmetas) {
            if (obj_jnl_add(s, d, bucket, id, kver, since, true, &kmetas[j],
                            &rec[OBJ_MAX_SHARDS + j], &io[nio]) < 0) {
                obj_drive_note(s, d, ENOMEM, "journal: KEPT record build");
                ok[j] = false;
                continue;
            }
            map[nio++] = j;
        }
        if (obj_jnl_add(s, d, bucket, id, version, since, kept, &metas[j],
                        &rec[j], &io[nio]) < 0) {
            obj_drive_note(s, d, ENOMEM, "journal: record build");
            ok[j] = false; /* its KEPT record alone ties nothing */
            continue;
        }
        map[nio++] = j;
    }
    /* a few KiB each, buffered into one file: plain pwrites cost less than
     * io_uring's punt of each to a worker (serialized there anyway), and
     * one pwritev per run of adjacent records less than a pwrite each */
    jnl_write(io, (size_t)nio);
    for (int i = 0; i < nio; i++)
        if (io[i].res != (ssize_t)io[i].len) {
            if (ok[map[i]])
                obj_drive_fail_at(s, obj_shard_drive(s, pl, map[i]),
                                  io[i].res < 0 ? (int)-io[i].res : EIO,
                                  "journal: record write");
            ok[map[i]] = false;
        }
    for (int j = 0; j < 2 * OBJ_MAX_SHARDS; j++)
        cm_buf_fini(&rec[j]);
    for (int j = 0; j < n; j++)
        nok += ok[j];
    return nok;
}

/* After a commit that did not journal placed @metas (version @version)
 * durably at HEX.m on the shards with ok[j]: if @id may have an older
 * record in the journal, appends these too (synced), so that a replay
 * after a reboot never puts back a version older than this one
 * (obj_jnl.c). */
static void jnl_after(struct stor_store *s, const char *bucket,
                      const uint8_t id[16], uint64_t version,
                      const struct stor_place *pl, int n, const bool *ok,
                      const struct cm_buf *metas)
{
    bool jn[OBJ_MAX_SHARDS] = {0}, ok2[OBJ_MAX_SHARDS] = {0};
    bool any = false;

    if (!s->fsync || !obj_jnl_maybe(s, id))
        return;
    obj_jnl_enter(s);
    obj_jnl_note(s, id);
    for (int j = 0; j < n; j++) {
        ok2[j] = ok[j];
        jn[j] = ok[j] && obj_jnl_use(s, obj_shard_drive(s, pl, j));
        any |= jn[j];
    }
    if (any && jnl_append(s, bucket, id, version, 0, false, pl, n, ok2, jn,
                          metas, 0, NULL) > 0)
        (void)sync_barrier_j(s, bucket, id, pl, n, ok2,
                             sync_mark(s, pl, n, ok2), NULL, NULL, NULL, NULL,
                             jn);
    obj_jnl_leave(s);
}

/* Before the current metas of @bucket/@id get a second name (a version
 * kept in place links HEX.m): if they may have been committed through the
 * journal, unsynced, makes them and their directories durable now, as a
 * commit without the journal would have. On every drive that journaled in
 * this run, not only those that journal now: once a filesystem's host
 * drive fails, obj_jnl_use is false for all its drives, but their metas
 * committed through the host's journal before are still unsynced (until
 * the next checkpoint), and the caller takes the old way just because of
 * that failure; a power cut would then lose the kept version's bytes under
 * a durable link, and a replay of the host's journal could not help (it
 * puts type-1 records at HEX.m only, which the newer version holds). */
static void jnl_settle(struct stor_store *s, const char *bucket,
                       const uint8_t id[16], const struct stor_place *pl)
{
    int fds[OBJ_MAX_SHARDS], n = s->set_size;
    bool ok[OBJ_MAX_SHARDS] = {0};
    int any = 0;

    if (!s->fsync || !obj_jnl_maybe(s, id))
        return;
    for (int j = 0; j < n; j++) {
        size_t d = obj_shard_drive(s, pl, j);
        char path[PATH_MAX];

        fds[j] = -1;
        if (!obj_jnl_hosted(s, d) || !obj_drive_online(s, d) ||
            obj_path_meta(path, sizeof(path), s->drives[d].path, bucket, id) <
                0)
            continue;
        fds[j] = open(path, O_RDONLY | O_CLOEXEC);
        ok[j] = fds[j] >= 0;
        any += ok[j];
    }
    if (any)
        (void)sync_barrier(s, bucket, id, pl, n, ok, sync_mark(s, pl, n, ok),
                           fds, ok, NULL, NULL);
    for (int j = 0; j < n; j++)
        if (fds[j] >= 0)
            close(fds[j]);
}

static int read_meta(struct stor_store *s, size_t d, const char *bucket,
                     const uint8_t id[16], struct cm_buf *out);

/* A versioned overwrite through the journal (FORMAT.md "The meta
 * journal"): reads into @km the meta of the version @rt keeps (from HEX.m,
 * which HEX.v<version> now links) on each shard with ok[j]; its KEPT
 * records go into the same submission as the new metas' records
 * (jnl_append), so barrier 1, the journals' fsyncs, makes the links good,
 * as for a versioned DELETE. Only when every such shard journals and was
 * linked and the kept version has the new one's geometry (k, n: so each
 * new meta's record can be tied to its drive's KEPT record: obj_jnl_add):
 * false leaves @km empty, and the caller takes the old way (jnl_settle,
 * the links' directories in barrier 1, barrier 2). */
static bool kept_metas(struct stor_store *s, const char *bucket,
                       const uint8_t id[16], const struct stor_place *pl, int k,
                       int n, const bool *ok, const bool *jn,
                       const struct obj_retire *rt, struct cm_buf *km)
{
    bool good = rt->n == n && rt->ve->k == k;

    for (int j = 0; good && j < n; j++)
        if (ok[j] &&
            (!jn[j] || !((rt->linked >> j) & 1) ||
             read_meta(s, obj_shard_drive(s, pl, j), bucket, id, &km[j]) < 0))
            good = false;
    for (int j = 0; !good && j < n; j++)
        cm_buf_fini(&km[j]);
    return good;
}

/* A commit that lost its write quorum at @step says so (WARN; at most
 * one line a second, then a count): the drives' own lines (obj_drive_fail_at)
 * say why each shard failed. */
static void commit_short(const char *bucket, const struct obj_ent *e,
                         const char *step, int nok, int n, int owq)
{
    static int64_t last_sec;
    static uint64_t quiet;
    struct timespec ts;
    int64_t was;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    was = __atomic_load_n(&last_sec, __ATOMIC_RELAXED);
    if (was == (int64_t)ts.tv_sec ||
        !__atomic_compare_exchange_n(&last_sec, &was, (int64_t)ts.tv_sec, false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&quiet, 1, __ATOMIC_RELAXED);
        return;
    }
    cm_log(
        CM_LOG_WARN, 0,
        "commit of %s/%.*s lost its write quorum at %s: %d of %d shards "
        "left, %d needed (%llu more such commits not logged before "
        "this one)",
        bucket, (int)CM_MIN(e->key_len, 200), e->key, step, nok, n, owq,
        (unsigned long long)__atomic_exchange_n(&quiet, 0, __ATOMIC_RELAXED));
}

static pthread_once_t test_cut_once = PTHREAD_ONCE_INIT;
static const char *test_cut_path;
static long test_cut_renames;

static void test_cut_init(void)
{
    const char *v = getenv("STORAGED_TEST_CUT_RENAMES");

    test_cut_path = getenv("STORAGED_TEST_CUT_FILE");
    test_cut_renames = v ? strtol(v, NULL, 10) : 0;
}

/* Tests only (STORAGED_TEST_CUT_FILE=PATH): while PATH exists, the process
 * dies here, in a new name's barrier before it ends, where a power cut
 * shows what the commit did before its records were durable
 * (test_object_new_dirs.py). Not with STORAGED_TEST_CUT_RENAMES. */
static void test_cut_here(void)
{
    pthread_once(&test_cut_once, test_cut_init);
    if (test_cut_path && test_cut_renames <= 0 &&
        access(test_cut_path, F_OK) == 0)
        raise(SIGKILL);
}

/* Tests only (STORAGED_TEST_CUT_RENAMES=N with STORAGED_TEST_CUT_FILE):
 * while that file exists, the process dies after a commit's Nth meta
 * rename (place_metas), between the renames of an overwrite
 * (test_object_jnl_host.py). */
static void test_cut_renamed(int done)
{
    pthread_once(&test_cut_once, test_cut_init);
    if (test_cut_path && done == test_cut_renames &&
        access(test_cut_path, F_OK) == 0)
        raise(SIGKILL);
}

/* Contract in obj_i.h: the commit protocol. */
/* Renames the temp metas of the shards with ok[j] (sNUM or the commit's
 * @uniq names, meta_tmp_path) to HEX.m of @bucket/@id, making object
 * directories on first use; over a meta saved as HEX.p (@prev_mask) an
 * exchange (swapped[j]; @xmask: HEX.p saved or HEX.v kept). Sets keep[j] for
 * each placed, clears ok[j] (and fails the drive) for each that was not. */
static void place_metas(struct stor_store *s, const char *bucket,
                        const uint8_t id[16], const struct stor_place *pl,
                        uint64_t uniq, int n, bool *ok, const uint64_t *snum,
                        uint32_t xmask, bool *swapped, bool *keep)
{
    int done = 0;

    for (int j = 0; j < n; j++) {
        char from[PATH_MAX], to[PATH_MAX];
        size_t d = obj_shard_drive(s, pl, j);

        if (!ok[j])
            continue;
        if (meta_tmp_path(from, sizeof(from), s->drives[d].path, uniq, j,
                          snum) < 0 ||
            obj_path_meta(to, sizeof(to), s->drives[d].path, bucket, id) < 0) {
            obj_drive_fail_at(s, d, ENAMETOOLONG, "commit: meta path");
            ok[j] = false;
            continue;
        }
        /* over a meta saved as HEX.p (or kept as HEX.v...): exchanged, so
         * sNUM keeps the old inode, the next spare (drop_prev; a kept one
         * only loses that name, drop_kept_swapped), with no rename of its
         * own */
        if ((xmask >> j) & 1 && snum[j] != SNUM_NONE &&
            renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0) {
            swapped[j] = true;
        } else if (rename_mk(from, to, d) < 0) {
            obj_drive_fail_at(s, d, errno, "commit: meta rename");
            ok[j] = false;
            continue;
        }
        keep[j] = true;
        test_cut_renamed(++done);
    }
}

/* What a brand-new inline name's commit does while its journal records'
 * fdatasync runs (obj_commit, "early"): with @check, nothing_there's look
 * for a meta file of the name on its drives first; then its temp metas
 * written with plain pwrite and, when nothing was there, renamed into
 * place (else *found: the caller renames them after the barrier). */
struct place_new {
    struct stor_store *s;
    const char *bucket;
    const uint8_t *id;
    const struct stor_place *pl;
    uint64_t uniq;
    struct cm_buf *metas;
    int n;
    bool *ok, *swapped, *keep;
    int *fds;
    uint64_t *snum;
    bool check, found;
};

/* sync_barrier_jd()'s @during for a struct place_new. */
static void place_new_run(void *arg)
{
    struct place_new *c = arg;

    /* access() on each drive, overlapped with the fdatasync */
    c->found =
        c->check && !nothing_there(c->s, c->bucket, c->id, c->pl, c->n, c->ok);
    (void)write_tmp_metas(c->s, c->bucket, c->id, c->pl, c->uniq, c->metas,
                          c->n, c->ok, c->fds, c->snum, 0, NULL, NULL, WM_TMPW);
    if (!c->found)
        place_metas(c->s, c->bucket, c->id, c->pl, c->uniq, c->n, c->ok,
                    c->snum, 0, c->swapped, c->keep);
    test_cut_here();
}

int obj_commit(struct stor_store *s, const char *bucket, struct obj_ent *e,
               uint8_t *const *inl_shards, size_t inl_len, bool *ok,
               char (*src_shard)[PATH_MAX])
{
    struct cm_buf metas[OBJ_MAX_SHARDS], km[OBJ_MAX_SHARDS];
    int fds[OBJ_MAX_SHARDS], n = e->k + e->m, nok, ret = 0;
    pthread_rwlock_t *kl = obj_klock(s, e->id);
    struct obj_ent *old = NULL;
    struct stor_place pl;
    uint64_t uniq = obj_next_version(s);
    bool keep[OBJ_MAX_SHARDS] = {0}, linked[OBJ_MAX_SHARDS] = {0};
    bool swapped[OBJ_MAX_SHARDS] = {0}; /* renameat2(RENAME_EXCHANGE) */
    uint64_t snum[OBJ_MAX_SHARDS];      /* temp metas' spare names */
    int owq = obj_write_quorum(s, e->k, e->m), prev_n = 0;
    uint32_t prev_mask = 0, xmask = 0;
    bool cur_inl = false, vkept = false; /* vkept: no HEX.p (kept links) */
    uint8_t id_copy[16];
    bool pending = false;
    struct obj_idx_body body;
    uint64_t mark;
    struct ext_batch *xb = NULL;
    struct obj_ent *cur_ext = NULL;
    bool placed = false; /* the metas are committed on the drives */
    bool any = true;     /* the key has a current version */
    bool one = false;    /* one barrier, after the renames */
    bool fresh = false;  /* @one but for nothing_there */
    bool later = false;  /* with @one: nothing_there during the barrier */
    bool alljn = true;   /* every shard's drive journals */
    bool early = true;   /* with @one: the renames while the barrier runs */
    bool jin = false;    /* between obj_jnl_enter and _leave */
    bool jov = false;    /* an overwrite through the journal */
    bool jn[OBJ_MAX_SHARDS] = {0}; /* shard j's meta goes to the journal */
    struct obj_retire *rt = NULL;  /* the version kept in place (obj_ver.c) */
    const struct obj_idx_body *bp = NULL;

    for (int j = 0; j < OBJ_MAX_SHARDS; j++) {
        fds[j] = -1;
        snum[j] = SNUM_NONE;
    }
    memcpy(id_copy, e->id, 16);
    obj_place(s, bucket, e->key, e->key_len, &pl);
    memset(metas, 0, sizeof(metas));
    memset(km, 0, sizeof(km));
    new_dirs_begin();
    pthread_rwlock_wrlock(kl);
    obj_vdel_settle(s, bucket, e->id); /* a DELETE's metas go first */
    ret = cond_check(s, bucket, e->key, e->key_len);
    if (ret < 0)
        goto out; /* nothing placed yet; the caller drops its temp files */
    e->version = obj_next_version(s);
    if (s->extents && s->ext && inl_shards && e->inl && e->size > s->body_max) {
        /* a medium object: its shards go to the drives' extent files and
         * the metas name them (FORMAT.md "Extent files") */
        xb = malloc(sizeof(*xb));
        e->xref = calloc((size_t)n, sizeof(*e->xref));
        if (xb == NULL || e->xref == NULL) {
            ret = -ENOMEM;
            goto out;
        }
        e->ext = true;
        ext_reserve(s, e, &pl, inl_shards, inl_len, ok, xb);
    }
    ret = build_metas(e, STOR_META_OBJECT, inl_shards, inl_len, metas, ok, xb);
    if (ret < 0)
        goto out;
    /* in flight until the index has it: a start after a crash reconciles
     * this key from the metas (the index write below clears it) */
    if (obj_cur_pending(s, bucket, e->id, e->key, e->key_len) < 0) {
        ret = -STOR_EDATA;
        goto out;
    }
    pending = true;
    /* one barrier makes the temp metas, the saved previous metas and (a
     * streamed PUT's mark is older) the shard files durable together */
    mark = t_cond && t_cond->streaming ? t_cond->gs_mark
                                       : sync_mark(s, &pl, n, ok);
    cur_inl = current_is_inline(s, bucket, e->key, e->key_len, &pl, &prev_n,
                                &any, &cur_ext);
    /* A brand-new inline name (FORMAT.md "Writes", one barrier): no file a
     * rename replaces, and the data is in the metas alone, so barrier 1
     * protects nothing. The metas are renamed in unsynced and one barrier
     * over them and the directories makes both durable; a crash before it
     * can only leave metas of a PUT not yet acknowledged, whole or failing
     * their CRC (a lost shard). Not for extent records (their barrier 1
     * makes a record durable before a meta names it) nor shard files. */
    fresh = !any && e->inl && inl_shards && !src_shard && xb == NULL;
    /* Through the journals (every drive's, below), nothing_there's look
     * runs while the records' fdatasync does (place_new_run); a name with
     * a meta file there after all then takes the overwrite's order (jov):
     * records durable first, then the renames. */
    later = fresh && s->fsync && s->jnl && !(t_cond && t_cond->retire_ver);
    one = fresh && (later || nothing_there(s, bucket, e->id, &pl, n, ok));
    /* An overwrite of an inline object (no shard files, no extent record)
     * whose drives all journal: its metas go to the journals, whose shared
     * fsyncs are its barrier 1, and its renames need no barrier 2: after a
     * power cut a replay puts the new metas back (FORMAT.md "The meta
     * journal"); a version it keeps in place, too (kept_metas, jnl_append). */
    jov = !one && e->inl && inl_shards && !src_shard && xb == NULL;
    if ((one || jov) && s->fsync && s->jnl) {
        /* its metas go to the drives' journals too, and its barrier is
         * their shared fsyncs (obj_jnl.c) */
        obj_jnl_enter(s);
        jin = true;
        for (int j = 0; j < n; j++) {
            jn[j] = obj_jnl_use(s, obj_shard_drive(s, &pl, j));
            if (ok[j] && !jn[j])
                jov = alljn = false;
        }
        if (later && !alljn) { /* a drive stopped journaling: look now */
            later = false;
            one = nothing_there(s, bucket, e->id, &pl, n, ok);
        }
        if (!one && !jov) {
            obj_jnl_leave(s);
            jin = false;
        } else if (one || !(t_cond && t_cond->retire_ver)) {
            obj_jnl_note(s, e->id); /* a versioned one: once it journals */
        }
    } else {
        jov = false;
    }
    if (t_cond && t_cond->retire_ver) {
        /* a versioned overwrite keeps the current version's metas as
         * HEX.v<version>: linked now, durable in barrier 1 (their records
         * in the journals, or their directories) */
        if (!jov)
            jnl_settle(s, bucket, e->id, &pl);
        ret = obj_ver_retire_begin(s, bucket, e, t_cond->retire_ver, false, &pl,
                                   &rt);
        if (ret < 0)
            goto out_tmp;
        if (jov && kept_metas(s, bucket, e->id, &pl, e->k, n, ok, jn, rt, km)) {
            obj_jnl_note(s, e->id);
        } else if (jov) {
            obj_jnl_leave(s);
            jin = jov = false;
            jnl_settle(s, bucket, e->id, &pl); /* the same inodes */
        }
    }
    /* a versioned overwrite through the journal needs no HEX.p: its links
     * HEX.vVERSION-SINCE (even SINCE) are copies of the version it
     * replaces for the start's rule (obj_load.c), and its KEPT records
     * put them back after a power cut */
    vkept = rt && jov;
    if (cur_inl && !vkept && !jov && rt == NULL) {
        /* HEX.p is the old version's copy while the renames run (the
         * start's rule): its inode's bytes must be durable, as without
         * the journal. A commit that does not journal (shard files, an
         * extent record, its filesystem's host failed) over metas that
         * may be journaled only makes them durable first; else a cut
         * between the renames, with a power cut, left the old version
         * on fewer than k drives (the replay puts records at HEX.m
         * only, which the new meta holds there) */
        jnl_settle(s, bucket, e->id, &pl);
    }
    if (cur_inl && !vkept)
        prev_mask = save_prev(s, bucket, e->id, &pl, prev_n);
    xmask = prev_mask | (vkept ? rt->linked : 0);
    for (int j = 0; j < n; j++) { /* a rename will replace it, or a link */
        linked[j] = ((prev_mask | (rt ? rt->linked : 0)) >> j) & 1;
        if (ok[j] && !jn[j])
            early = false;
    }
    early = early && one && jin && rt == NULL;
    if (early) {
        /* A brand-new inline name whose metas all journal: its records
         * first; their fdatasync is its one barrier, and while it runs
         * the temp metas are written and renamed in (place_new_run). A
         * rename before the barrier ends is what a new name did before
         * (its renames came first): nothing is replaced, and a crash
         * leaves only metas of an unacknowledged PUT (FORMAT.md "The
         * meta journal"). */
        struct place_new pn = {.s = s,
                               .bucket = bucket,
                               .id = e->id,
                               .pl = &pl,
                               .uniq = uniq,
                               .metas = metas,
                               .n = n,
                               .ok = ok,
                               .swapped = swapped,
                               .keep = keep,
                               .fds = fds,
                               .snum = snum,
                               .check = later};

        nok = jnl_append(s, bucket, e->id, e->version, 0, false, &pl, n, ok, jn,
                         metas, 0, NULL);
        if (nok < owq) {
            commit_short(bucket, e, "its journal records", nok, n, owq);
            ret = -STOR_EQUORUM;
            goto out_tmp;
        }
        nok = sync_barrier_jd(s, bucket, e->id, &pl, n, ok, mark, NULL, NULL,
                              NULL, NULL, jn, place_new_run, &pn);
        t_new_dirs.n = 0; /* a replay makes the directories it needs */
        if (!pn.found)
            goto barrier_done;
        /* a meta file of the name was there after all: the overwrite's
         * order (jov), its records durable before a rename replaces it */
        if (nok < owq) {
            commit_short(bucket, e, "its temp metas", nok, n, owq);
            ret = -STOR_EQUORUM;
            goto out_tmp;
        }
        place_metas(s, bucket, e->id, &pl, uniq, n, ok, snum, xmask, swapped,
                    keep);
        t_new_dirs.n = 0; /* no barrier 2: a replay makes the renames good */
        nok = 0;
        for (int j = 0; j < n; j++)
            nok += ok[j];
        goto barrier_done;
    }
    nok = write_tmp_metas(s, bucket, e->id, &pl, uniq, metas, n, ok, fds, snum,
                          mark, linked, xb, one || jov ? WM_TMP : WM_SYNC);
    if (jin && nok >= owq) /* with the KEPT records, tied to them */
        nok = jnl_append(s, bucket, e->id, e->version,
                         vkept ? rt->ve->mtime_ns : 0, false, &pl, n, ok, jn,
                         metas, vkept ? rt->version : 0, vkept ? km : NULL);
    if (jov && nok >= owq) /* barrier 1: the journals */
        nok = sync_barrier_j(s, bucket, e->id, &pl, n, ok, mark, NULL, NULL,
                             NULL, NULL, jn);
    if (nok < owq) {
        commit_short(bucket, e, "its temp metas", nok, n, owq);
        ret = -STOR_EQUORUM;
        goto out_tmp;
    }
    if (!one)
        mark = sync_mark(s, &pl, n, ok);
    /* shard files first: a meta never points at data that is not there */
    for (int j = 0; j < n && src_shard; j++) {
        char to[PATH_MAX];
        size_t d = obj_shard_drive(s, &pl, j);

        if (!ok[j])
            continue;
        if (obj_path_shard(to, sizeof(to), s->drives[d].path, bucket, e->id,
                           e->parts[0].dataid) < 0 ||
            rename_mk(src_shard[j], to, d) < 0) {
            obj_drive_fail_at(s, d, errno, "commit: shard file rename");
            ok[j] = false;
        }
    }
    place_metas(s, bucket, e->id, &pl, uniq, n, ok, snum, xmask, swapped, keep);
    /* the renames durable (and, with @one, the metas themselves); ok[j] is
     * now keep[j] minus failed barriers */
    if (jov) {
        /* no barrier 2: a replay makes the renames good */
        t_new_dirs.n = 0;
        nok = 0;
        for (int j = 0; j < n; j++)
            nok += ok[j];
    } else {
        nok = sync_barrier_j(s, bucket, e->id, &pl, n, ok, mark,
                             one ? fds : NULL, ok, NULL, NULL, jin ? jn : NULL);
    }
barrier_done:
    if (jin) {
        obj_jnl_leave(s);
        jin = false;
    }
    if (nok < owq) {
        commit_short(bucket, e, "its renames", nok, n, owq);
        /* not committed: take back what we placed (best effort); the old
         * version, if any, stays in the index and gets healed */
        unlink_metas(s, bucket, e->id, &pl, n, keep);
        remove_shards(s, bucket, e, &pl, true);
        /* the old inline version gets its metas back */
        drop_prev(s, bucket, e->id, &pl, prev_mask, keep, swapped, snum);
        prev_mask = 0;
        if (vkept) /* ... or from its kept links */
            drop_kept_swapped(s, bucket, e->id, &pl, n, rt, keep, swapped,
                              snum);
        vkept = false;
        obj_heal_queue(s, bucket, e->key, e->key_len);
        ret = -STOR_EQUORUM;
        goto out_tmp;
    }
    placed = true;
    if (!one && !jov) /* an older version may have a record in the journal */
        jnl_after(s, bucket, e->id, e->version, &pl, n, ok, metas);
    if (nok < n)
        obj_heal_queue(s, bucket, e->key, e->key_len);
    for (int j = 0; j < n && xb; j++) /* the index knows the good records */
        e->xref[j] = ok[j] ? xb->xref[j] : (struct obj_xref){0};
    if (inl_shards && e->inl && e->size <= s->body_max) {
        /* small: a copy in the index serves its GETs (FORMAT.md) */
        body =
            (struct obj_idx_body){.shard = (const uint8_t *const *)inl_shards,
                                  .shard_len = inl_len,
                                  .k = e->k,
                                  .size = (size_t)e->size};
        bp = &body;
    }
    /* with a kept version: its companion record in the same transaction */
    ret = rt ? obj_cur_set_pair(s, bucket, e, bp, rt, &old)
             : obj_cur_set(s, bucket, e, bp, &old);
    if (ret == -STOR_ENOBUCKET) {
        obj_remove_files(s, bucket, e, &pl, NULL);
        placed = false; /* nothing of it stays: nor does the kept link */
        goto out_tmp;
    }
    if (ret < 0) {
        /* the metas are committed (they are the truth): the object is
         * there for the rebuild at the next start, but this run's index
         * does not know it; fail the PUT rather than claim it is listed */
        ret = -STOR_EDATA;
        goto out_tmp;
    }
    if (old) {
        bool keep_old[OBJ_MAX_SHARDS] = {0};

        if (old->ext && old->xref == NULL && cur_ext &&
            cur_ext->version == old->version) {
            old->xref = cur_ext->xref; /* read from its metas above */
            cur_ext->xref = NULL;
        }
        /* same key, same rotation: old shard j sat where new shard j sits */
        for (int j = 0; j < old->k + old->m && j < n; j++)
            keep_old[j] = keep[j];
        (void)remove_metas(s, bucket, old, &pl, keep_old);
        retire_shards(s, bucket, old, &pl, false); /* an overwrite: queued */
    }
out_tmp:
    if (jin)
        obj_jnl_leave(s);
    for (int j = 0; j < n; j++) /* the metas of a one-barrier commit */
        if (fds[j] >= 0)
            close(fds[j]);
    if (rt && ret < 0 && !placed) /* the old version is still current */
        obj_ver_unlink_kept(s, bucket, rt->id, rt->version, rt->ve->mtime_ns,
                            &pl, rt->n, rt->linked);
    if (xb) /* records of shards not committed are free again */
        ext_unreserve(s, &pl, xb, n, placed ? ok : NULL);
    if (prev_mask)
        drop_prev(s, bucket, id_copy, &pl, prev_mask, NULL, swapped, snum);
    if (vkept)
        drop_kept_swapped(s, bucket, id_copy, &pl, n, rt, NULL, swapped, snum);
    for (int j = 0; j < n; j++) {
        char path[PATH_MAX];

        if ((keep[j] && ret == 0) || swapped[j])
            continue; /* renamed into place; a swapped name is drop_prev's */
        if (meta_tmp_path(path, sizeof(path),
                          s->drives[obj_shard_drive(s, &pl, j)].path, uniq, j,
                          snum) == 0)
            unlink(path);
    }
out:
    if (pending && ret < 0)
        obj_cur_settled(s, bucket, id_copy); /* undone: nothing in flight */
    pthread_rwlock_unlock(kl);
    for (int j = 0; j < OBJ_MAX_SHARDS; j++) {
        cm_buf_fini(&metas[j]);
        cm_buf_fini(&km[j]);
    }
    free(xb);
    obj_ent_free(cur_ext);
    obj_ver_retire_free(rt);
    obj_ent_free(e);
    return ret;
}

/* Finishes the body: the last stripe, or the small-object encoding. */
static int put_finish_data(struct stor_put *p, uint8_t **inl, size_t *inl_len,
                           uint8_t **inl_buf)
{
    struct stor_store *s = p->s;

    *inl_buf = NULL;
    if (p->streaming) {
        int ret = put_flush_stripe(p);
        int nok = 0;

        if (ret < 0)
            return ret;
        /* a part's shard files must be durable before its part meta; a
         * PUT's are covered by the commit's first barrier (its mark is
         * gs_mark) where their drives are in fs mode */
        if (s->fsync && p->is_part) {
            nok = sync_barrier(s, NULL, NULL, &p->pl, p->k + p->m, p->ok,
                               p->gs_mark, p->fd, NULL, NULL, NULL);
        } else if (s->fsync) {
            bool filem[OBJ_MAX_SHARDS] = {0}, was[OBJ_MAX_SHARDS] = {0};

            for (int j = 0; j < p->k + p->m; j++)
                was[j] = filem[j] =
                    p->ok[j] &&
                    !stor_gsync_is_fs(s->gs, obj_shard_drive(s, &p->pl, j));
            (void)sync_barrier(s, NULL, NULL, &p->pl, p->k + p->m, filem,
                               p->gs_mark, p->fd, NULL, NULL, NULL);
            for (int j = 0; j < p->k + p->m; j++)
                if (was[j] && !filem[j])
                    p->ok[j] = false;
        }
        for (int j = 0; j < p->k + p->m; j++) {
            if (p->fd[j] >= 0) {
                close(p->fd[j]);
                p->fd[j] = -1;
            }
        }
        nok = 0;
        for (int j = 0; j < p->k + p->m; j++)
            nok += p->ok[j];
        if (nok < obj_write_quorum(s, p->k, p->m))
            return -STOR_EQUORUM;
        return 0;
    }
    /* small object: k from the size, M parity, shards inline */
    {
        int k = stor_small_k(s->K, p->total), m = s->M;
        size_t L = (size_t)((p->total + (uint64_t)k - 1) / (uint64_t)k);
        uint8_t *b = calloc((size_t)(k + m) * (L ? L : 1), 1);
        int nok = 0;

        if (b == NULL)
            return -ENOMEM;
        if (p->total)
            memcpy(b, p->buf, p->total);
        for (int j = 0; j < k + m; j++)
            inl[j] = b + (size_t)j * L;
        if (m && L)
            stor_ec_encode(stor_ec_get(k, m), L, inl, inl + k);
        p->k = k;
        p->m = m;
        p->block = 0;
        *inl_len = L;
        *inl_buf = b;
        for (int j = 0; j < k + m; j++) {
            p->ok[j] = obj_drive_online(s, obj_shard_drive(s, &p->pl, j));
            nok += p->ok[j];
        }
        if (nok < obj_write_quorum(s, k, m))
            return -STOR_EQUORUM;
    }
    return 0;
}

/* Contract in obj_i.h: a put's identity for the multipart code. */
struct stor_store *obj_put_store(struct stor_put *p, const char **bucket,
                                 const char **key, size_t *klen)
{
    *bucket = p->bucket;
    *key = p->key;
    *klen = p->key_len;
    return p->s;
}

/* Contract in obj_i.h (for a part's commit, obj_mpu.c). */
const struct stor_hdr *obj_put_hdrs(const struct stor_put *p, size_t *n)
{
    *n = p->nhdrs;
    return p->hdrs;
}

/* Contract in obj_i.h: parts use the set's full K+M geometry. */
int obj_put_make_part(struct stor_put *p, const char *uid, int partno,
                      obj_part_commit_fn *commit)
{
    p->is_part = true;
    p->part_commit = commit;
    p->partno = partno;
    snprintf(p->uid, sizeof(p->uid), "%s", uid);
    if (obj_set_online(p->s, p->pl.set) < p->s->wq)
        return -STOR_EQUORUM;
    return put_start_stream(p);
}

/* Contract in object.h: MD5 check, then obj_commit. */
int stor_put_commit(struct stor_put *p, const uint8_t *expect_md5,
                    struct stor_obj_info *out)
{
    struct stor_store *s = p->s;
    uint8_t md[EVP_MAX_MD_SIZE], *inl[OBJ_MAX_SHARDS], *inl_buf = NULL;
    unsigned mdlen = 0;
    size_t inl_len = 0;
    struct obj_ent *e = NULL;
    char src[OBJ_MAX_SHARDS][PATH_MAX];
    int ret;

    if (p->err) {
        ret = p->err;
        goto out;
    }
    if (p->expect >= 0 && p->total != (uint64_t)p->expect) {
        ret = -STOR_EINVAL;
        goto out;
    }
    if (p->is_part && !p->streaming) {
        ret = put_start_stream(p);
        if (ret < 0)
            goto out;
    }
    ret = put_finish_data(p, inl, &inl_len, &inl_buf);
    if (ret < 0)
        goto out;
    EVP_DigestFinal_ex(p->md5, md, &mdlen);
    if (expect_md5 && memcmp(expect_md5, md, 16) != 0) {
        ret = -STOR_EBADDIGEST;
        goto out;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    if (p->etag_set[0])
        memcpy(e->etag, p->etag_set, sizeof(e->etag));
    else
        obj_hex(md, 16, e->etag);
    if (p->is_part) {
        ret =
            p->part_commit(p, e->etag, p->total, p->k, p->m, p->block,
                           p->dataid, p->ok, p->uid, p->partno, p->id, &p->pl);
        if (ret == 0 && out) {
            memset(out, 0, sizeof(*out));
            out->size = p->total;
            memcpy(out->etag, e->etag, sizeof(out->etag));
            out->mtime = (time_t)(obj_now_ns() / 1000000000LL);
        }
        free(e);
        goto out;
    }
    e->key = p->key;
    e->key_len = p->key_len;
    p->key = NULL;
    memcpy(e->id, p->id, 16);
    e->mtime_ns = obj_now_ns();
    e->size = p->total;
    e->k = p->k;
    e->m = p->m;
    e->block = p->block;
    e->inl = !p->streaming;
    e->hdrs = p->hdrs;
    e->nhdrs = p->nhdrs;
    p->hdrs = NULL;
    p->nhdrs = 0;
    if (p->streaming) {
        e->parts = calloc(1, sizeof(*e->parts));
        if (e->parts == NULL) {
            obj_ent_free(e);
            ret = -ENOMEM;
            goto out;
        }
        e->nparts = 1;
        e->parts[0].size = p->total;
        e->parts[0].dataid = p->dataid;
        memcpy(e->parts[0].etag, e->etag, sizeof(e->etag));
        for (int j = 0; j < p->k + p->m; j++)
            if (obj_path_tmp(src[j], sizeof(src[j]),
                             s->drives[obj_shard_drive(s, &p->pl, j)].path,
                             p->dataid, j) < 0)
                p->ok[j] = false;
    }
    if (out) {
        obj_info_fill(e, out, false);
        out->mtime = (time_t)(e->mtime_ns / 1000000000LL);
    }
    t_cond = p;
    ret = obj_commit(s, p->bucket, e, p->streaming ? NULL : inl, inl_len, p->ok,
                     p->streaming ? src : NULL);
    t_cond = NULL;
    if (ret < 0 && out)
        stor_obj_info_fini(out);
out:
    free(inl_buf);
    put_free(p);
    return ret;
}

/* ---- GET ---- */

struct stor_get {
    struct stor_store *s;
    char bucket[64];
    struct obj_ent *e; /* owned copy of the pinned version */
    struct stor_place pl;
    bool pinned;
    uint8_t *data;   /* inline objects: the whole body; owned */
    uint64_t *cum;   /* part start offsets; owned */
    size_t cur_part; /* part whose fds are open */
    int fd[OBJ_MAX_SHARDS];
    bool fd_tried[OBJ_MAX_SHARDS];
    uint8_t *sbuf; /* (k+m) * GET_BATCH * (block + crc); owned */
    size_t sbuf_stride;
    bool degraded_noted;
    size_t zc; /* bytes in the caller's pipes (stor_get_nb_zc_start), or 0 */
    size_t zc_first;                 /* of them, in the first pipe */
    uint64_t zc_gen[OBJ_MAX_SHARDS]; /* zc: the files checked (generation) */
    bool index_body;                 /* data is the index's copy of the body */
};

/* Closes the shard files of the current part. */
static void get_close_fds(struct stor_get *g)
{
    for (int j = 0; j < OBJ_MAX_SHARDS; j++) {
        if (g->fd[j] >= 0)
            close(g->fd[j]);
        g->fd[j] = -1;
        g->fd_tried[j] = false;
    }
}

/* Contract in object.h: also unpins the version. */
void stor_get_close(struct stor_get *g)
{
    if (g == NULL)
        return;
    get_close_fds(g);
    if (g->pinned)
        obj_pin_put(g->s, g->e->id, g->e->version);
    obj_ent_free(g->e);
    free(g->data);
    free(g->cum);
    free(g->sbuf);
    free(g);
}

/* Counts one degraded read and queues the object for healing (once). */
static void note_degraded(struct stor_get *g)
{
    if (g->degraded_noted)
        return;
    g->degraded_noted = true;
    __atomic_add_fetch(&g->s->degraded_reads, 1, __ATOMIC_RELAXED);
    obj_heal_queue(g->s, g->bucket, g->e->key, g->e->key_len);
}

/* Fills @t with the meta record fields an inline object's shard records
 * share (geometry, ETag, key, headers; shard length @L), so a record's
 * encoded size can be computed before it is read. */
static void inline_meta_tmpl(const struct obj_ent *e, size_t L,
                             struct stor_meta *t)
{
    t->k = e->k;
    t->m = e->m;
    snprintf(t->etag, sizeof(t->etag), "%s", e->etag);
    t->key = e->key;
    t->key_len = e->key_len;
    t->hdrs = e->hdrs;
    t->nhdrs = e->nhdrs;
    t->has_inline = 1;
    t->has_xref = e->ext; /* then the record names an extent instead */
    t->inl_len = L;
}

/* Reads the inline shards of @e (data shards first, parity only when one
 * is missing, stale or corrupt) and assembles the body. Caller holds the
 * key lock for reading, so the metas match the index. */
static int get_inline(struct stor_get *g)
{
    struct stor_store *s = g->s;
    const struct obj_ent *e = g->e;
    int n = e->k + e->m, good = 0;
    size_t L = (size_t)((e->size + (uint64_t)e->k - 1) / (uint64_t)e->k);
    struct stor_meta tmpl = {0};
    size_t mlen, mlen_x = 0;
    uint8_t *raw[OBJ_MAX_SHARDS] = {0}, *sh[OBJ_MAX_SHARDS];
    bool present[OBJ_MAX_SHARDS] = {0}, tried[OBJ_MAX_SHARDS] = {0};
    bool want[OBJ_MAX_SHARDS] = {0};
    uint8_t *shards = NULL;
    int ret = 0;

    inline_meta_tmpl(e, L, &tmpl);
    tmpl.has_xref = 0;
    mlen = stor_meta_encoded_size(&tmpl);
    if (e->at_bucket) /* a kept version's meta has its base's key and
                       * headers: read up to a bound, checked by decoding */
        mlen += STOR_MAX_KEY_LEN + (64u << 10);
    if (e->ext) { /* each meta names its record, or (written where the
                   * drive had no extent file) holds the shard itself */
        tmpl.has_xref = 1;
        mlen_x = stor_meta_encoded_size(&tmpl);
    }
    shards = calloc((size_t)n, L ? L : 1);
    if (shards == NULL)
        return -ENOMEM;
    for (int round = 0; round < 2 && good < e->k; round++) {
        struct stor_io io[OBJ_MAX_SHARDS];
        int map[OBJ_MAX_SHARDS], nio = 0;

        for (int j = 0; j < n; j++) {
            size_t d = obj_shard_drive(s, &g->pl, j);
            char path[PATH_MAX];
            int fd;

            if (tried[j] || (round == 0 && j >= e->k))
                continue;
            /* last round: a drive marked offline may be back already */
            if (round == 0 && !obj_drive_online(s, d))
                continue;
            tried[j] = true;
            if (obj_ver_meta_path(s, d, g->bucket, e, path, sizeof(path)) < 0)
                continue;
            fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                if (errno != ENOENT)
                    obj_drive_fail(s, d, errno);
                continue;
            }
            /* an extent meta is shorter than an inline one, except for
             * shards of a few bytes (an object of tens of bytes under a
             * small --index-body-max): then its record reference is longer
             * than the shard, and a read of mlen + 1 bytes cut it short (a
             * lost shard on every drive: EIO) */
            raw[j] = malloc(CM_MAX(mlen, mlen_x) + 1);
            if (raw[j] == NULL) {
                close(fd);
                continue;
            }
            map[nio] = j;
            io[nio++] = (struct stor_io){.fd = fd,
                                         .op = 'r',
                                         .buf = raw[j],
                                         .len = CM_MAX(mlen, mlen_x) + 1};
        }
        stor_io_run(io, (size_t)nio);
        for (int i = 0; i < nio; i++) {
            int j = map[i];
            struct stor_meta m;

            close(io[i].fd);
            obj_drive_count(s, obj_shard_drive(s, &g->pl, j), false,
                            io[i].res > 0 ? (uint64_t)io[i].res : 0);
            if ((io[i].res != (ssize_t)mlen &&
                 (mlen_x == 0 || io[i].res != (ssize_t)mlen_x) &&
                 (e->at_bucket == NULL || io[i].res <= 0 ||
                  io[i].res > (ssize_t)mlen)) ||
                stor_meta_decode_view(raw[j], (size_t)io[i].res, &m) < 0) {
                if (io[i].res == (ssize_t)mlen ||
                    (mlen_x && io[i].res == (ssize_t)mlen_x))
                    __atomic_add_fetch(&s->corrupt_found, 1, __ATOMIC_RELAXED);
                continue;
            }
            if (m.version == e->version && m.shard == j && m.has_inline &&
                m.inl_len == L && m.type == STOR_META_OBJECT && m.has_xref) {
                /* the meta names the shard's extent record */
                struct obj_xref x = {.file = m.xfile, .off = m.xoff};
                int r =
                    obj_ext_read(s, obj_shard_drive(s, &g->pl, j), &x, e->id,
                                 e->version, j, L, shards + (size_t)j * L);

                if (r == 0) {
                    present[j] = true;
                    good++;
                } else if (r == -EBADMSG) {
                    __atomic_add_fetch(&s->corrupt_found, 1, __ATOMIC_RELAXED);
                }
            } else if (m.version == e->version && m.shard == j &&
                       m.has_inline && m.inl_len == L &&
                       m.type == STOR_META_OBJECT) {
                if (L)
                    memcpy(shards + (size_t)j * L, m.inl_ref, L);
                present[j] = true;
                good++;
            }
            stor_meta_fini(&m);
        }
    }
    for (int j = 0; j < n; j++)
        free(raw[j]);
    if (good < e->k) {
        ret = -STOR_EDATA;
        goto out;
    }
    for (int j = 0; j < e->k; j++)
        want[j] = !present[j];
    for (int j = 0; j < n; j++)
        sh[j] = shards + (size_t)j * L;
    for (int j = 0; j < e->k; j++) {
        if (want[j]) {
            note_degraded(g);
            ret = stor_ec_reconstruct(stor_ec_get(e->k, e->m), L, sh, present,
                                      want);
            if (ret < 0)
                goto out;
            break;
        }
    }
    for (int j = 0; j < n && !g->degraded_noted; j++)
        if (!present[j] && tried[j])
            note_degraded(g);
    g->data = shards; /* shards 0..k-1 are the body, in order */
    shards = NULL;
out:
    free(shards);
    return ret;
}

/* Contract in object.h: pins the version; inline objects are read here. */
int stor_get_open(struct stor_store *s, const char *bucket, const char *key,
                  size_t key_len, struct stor_obj_info *info,
                  struct stor_get **out)
{
    struct stor_get *g;
    pthread_rwlock_t *kl;
    uint8_t id[16];
    void *body = NULL;
    int ret = 0;

    if (!obj_valid_key(key, key_len))
        return -STOR_EINVAL;
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return -ENOMEM;
    for (int j = 0; j < OBJ_MAX_SHARDS; j++)
        g->fd[j] = -1;
    g->s = s;
    g->cur_part = SIZE_MAX;
    snprintf(g->bucket, sizeof(g->bucket), "%s", bucket);
    obj_key_id(s, key, key_len, id);
    kl = obj_klock(s, id);
    pthread_rwlock_rdlock(kl);
    /* the index's copy of a small body, as the loop's GET takes it (here
     * when the loop handed the GET over, e.g. its index was not resident) */
    ret = obj_cur_lookup_body(s, bucket, key, key_len, &g->e, &body);
    if (ret == 0) {
        /* a version kept in place lives on its base's placement */
        obj_ver_place(s, bucket, key, key_len, g->e, &g->pl);
        if (g->e->inl && body) {
            g->data = body; /* CRC checked by the index */
            g->index_body = true;
            body = NULL;
        } else if (g->e->inl) {
            ret = get_inline(g);
        } else {
            ret = obj_pin_get(g->e->id, g->e->version);
            g->pinned = ret == 0;
        }
    }
    pthread_rwlock_unlock(kl);
    free(body); /* none, unless the entry was not inline after all */
    if (ret == 0 && !g->e->inl) {
        g->cum = malloc((g->e->nparts + 1) * sizeof(*g->cum));
        if (g->cum == NULL) {
            ret = -ENOMEM;
        } else {
            g->cum[0] = 0;
            for (size_t p = 0; p < g->e->nparts; p++)
                g->cum[p + 1] = g->cum[p] + g->e->parts[p].size;
        }
    }
    if (ret < 0) {
        stor_get_close(g);
        return ret;
    }
    if (info)
        obj_info_fill(g->e, info, true);
    *out = g;
    return 0;
}

/* ---- nonblocking inline GET (obj_nb.h) ---- */

struct stor_get_nb {
    struct stor_get *g; /* owned until end() hands it out */
    void *body;         /* owned: the index's copy of the body, or NULL */
    size_t mlen;        /* encoded size of each meta record */
    size_t L;           /* inline shard length */
    int shard[OBJ_MAX_SHARDS];
    struct stor_nb_read rd[OBJ_MAX_SHARDS];
    size_t n;
    char *paths;    /* owned: the n paths, NUL-separated, then raw */
    uint8_t *raw;   /* n * (mlen + 1) read buffers, inside paths' block */
    uint8_t *xdata; /* owned: an extent object's body (k * L), read into */
    uint8_t (*xhdr)[OBJ_EXT_HDR]; /* owned: their record headers */
    bool zc;                      /* the data shards are spliced (zero-copy) */
    bool zc_hdr_mapped;           /* zc_now(): no header read, the map's */
    size_t zc_split;              /* shards [0, split) in the first pipe */
    uint64_t gen[OBJ_MAX_SHARDS]; /* zc: the drives' extent file generations */
};

/* The pins of a zero-copy GET's records (stor_get_nb_zc_start). */
struct stor_get_zc {
    struct stor_store *s;
    int n;
    size_t d[OBJ_MAX_SHARDS];
    struct obj_xref x[OBJ_MAX_SHARDS];
};

/* One spare struct stor_get_nb per thread. DESIGN: it is ~3 KiB (the
 * read slots of every shard), so each loop GET's calloc took glibc's
 * large-request path (a fastbin consolidation each time: ~1 % of a 4 KiB
 * GET's server CPU); a loop thread runs its GETs one after another, so
 * the one it freed last is zeroed and reused instead. The key's
 * destructor frees a thread's spare when it exits. */
static pthread_key_t nb_spare_key;
static pthread_once_t nb_spare_once = PTHREAD_ONCE_INIT;

static void nb_spare_init(void)
{
    if (pthread_key_create(&nb_spare_key, free) != 0)
        abort(); /* only with the process out of keys: a bug */
}

/* A zeroed struct stor_get_nb: this thread's spare, else calloc's. */
static struct stor_get_nb *nb_alloc(void)
{
    struct stor_get_nb *nb;

    pthread_once(&nb_spare_once, nb_spare_init);
    nb = pthread_getspecific(nb_spare_key);
    if (nb == NULL)
        return calloc(1, sizeof(*nb));
    (void)pthread_setspecific(nb_spare_key, NULL);
    memset(nb, 0, sizeof(*nb));
    return nb;
}

/* Keeps @nb as this thread's spare, or frees it when there is one. */
static void nb_release(struct stor_get_nb *nb)
{
    pthread_once(&nb_spare_once, nb_spare_init);
    if (pthread_getspecific(nb_spare_key) == NULL &&
        pthread_setspecific(nb_spare_key, nb) == 0)
        return;
    free(nb);
}

/* Contract in obj_nb.h. */
void stor_get_nb_free(struct stor_get_nb *nb)
{
    if (nb == NULL)
        return;
    stor_get_close(nb->g);
    free(nb->body);
    free(nb->paths);
    free(nb->xdata);
    free(nb->xhdr);
    nb_release(nb);
}

/* Copies the index entry of bucket/key into g->e (and the index's copy of
 * its body, if it keeps one, into *body) with try-locks only. 0, or
 * -EAGAIN (a lock is held by a writer, or no such key: the regular path
 * answers errors). */
static int nb_lookup(struct stor_get *g, const char *bucket, const char *key,
                     size_t key_len, void **body)
{
    struct stor_store *s = g->s;
    pthread_rwlock_t *kl;
    uint8_t id[16];
    int ret;

    obj_key_id(s, key, key_len, id);
    kl = obj_klock(s, id);
    if (pthread_rwlock_tryrdlock(kl) != 0)
        return -EAGAIN;
    ret = obj_cur_lookup_body_nb(s, bucket, key, key_len, &g->e, body);
    pthread_rwlock_unlock(kl);
    if (ret == 0 && !g->e->inl) {
        obj_ent_free(g->e);
        g->e = NULL;
        ret = -EAGAIN;
    }
    return ret;
}

/* begin() of an extent object (FORMAT.md "Extent files"): one read per
 * data shard, at the offset the index keeps, on the drive's open extent
 * file, header and bytes straight into the body. -EAGAIN when the index
 * does not know every data shard's record (rebuilt from the metas, or a
 * shard not written) or a drive is offline: the worker path decides. */
static int nb_begin_ext(struct stor_get_nb *nb)
{
    struct stor_get *g = nb->g;
    const struct obj_ent *e = g->e;
    struct stor_store *s = g->s;

    if (e->xref == NULL)
        return -EAGAIN;
    nb->n = (size_t)e->k;
    nb->xdata = malloc(nb->n * (nb->L ? nb->L : 1));
    nb->xhdr = malloc(nb->n * sizeof(*nb->xhdr));
    if (nb->xdata == NULL || nb->xhdr == NULL)
        return -EAGAIN;
    for (int j = 0; j < e->k; j++) {
        size_t d = obj_shard_drive(s, &g->pl, j);
        int fd = obj_ext_fd(s, d, e->xref[j].file);

        if (fd < 0 || !obj_drive_online(s, d))
            return -EAGAIN;
        nb->shard[j] = j;
        nb->rd[j] = (struct stor_nb_read){.path = NULL,
                                          .buf = nb->xdata + (size_t)j * nb->L,
                                          .len = nb->L,
                                          .res = -EINVAL,
                                          .fd = fd,
                                          .off = e->xref[j].off,
                                          .hdr = nb->xhdr[j],
                                          .hdr_len = OBJ_EXT_HDR,
                                          .pipe = -1};
    }
    return 0;
}

/* Contract in obj_nb.h. */
int stor_get_nb_zc(struct stor_get_nb *nb, const char *skip_hdr,
                   size_t pipe_max, size_t pipe_bytes[2])
{
    const struct obj_ent *e = nb->g->e;
    size_t per, cap = pipe_max / 4096, first;

    if (nb->xhdr == NULL || nb->n == 0 || nb->L == 0)
        return -EAGAIN;
    for (size_t i = 0; skip_hdr && i < e->nhdrs; i++)
        if (strcasecmp(e->hdrs[i].name, skip_hdr) == 0)
            return -EAGAIN;
    /* a pipe holds one page (or part of one) per buffer: each shard's
     * bytes start OBJ_EXT_HDR into a 4 KiB-aligned record. A 1 MiB object
     * (12 shards of 22 pages) does not fit the 256 of pipe-max-size: the
     * shards are split over two pipes. */
    per = (OBJ_EXT_HDR + nb->L + 4095) / 4096;
    if (per == 0 || per > cap)
        return -EAGAIN;
    first = CM_MIN(nb->n, cap / per);
    if (nb->n - first > cap / per)
        return -EAGAIN;
    nb->zc_split = first;
    pipe_bytes[0] = first * per * 4096;
    pipe_bytes[1] = (nb->n - first) * per * 4096;
    return 0;
}

/* Contract in obj_nb.h. */
int stor_get_nb_zc_start(struct stor_get_nb *nb, const int pipe_fd[2],
                         struct stor_get_zc **out)
{
    struct stor_get *g = nb->g;
    const struct obj_ent *e = g->e;
    struct stor_get_zc *z = calloc(1, sizeof(*z));

    if (z == NULL)
        return -EAGAIN;
    z->s = g->s;
    for (size_t i = 0; i < nb->n; i++) {
        int j = nb->shard[i];
        size_t d = obj_shard_drive(g->s, &g->pl, j);

        /* the generation before the pin and the splice: end() checks the
         * bytes in the map of the same files */
        nb->gen[i] = obj_ext_gen(g->s, d);
        if (!obj_ext_pin(g->s, d, &e->xref[j])) {
            stor_get_zc_release(z);
            return -EAGAIN;
        }
        z->d[z->n] = d;
        z->x[z->n++] = e->xref[j];
    }
    for (size_t i = 0; i < nb->n; i++) {
        nb->rd[i].buf = NULL;
        nb->rd[i].pipe = pipe_fd[i < nb->zc_split ? 0 : 1];
        nb->rd[i].off = e->xref[nb->shard[i]].off;
    }
    nb->zc = true;
    free(nb->xdata); /* the bytes stay in the page cache */
    nb->xdata = NULL;
    *out = z;
    return 0;
}

/* Contract in obj_nb.h. */
int stor_get_nb_zc_now(struct stor_get_nb *nb)
{
    struct stor_get *g = nb->g;
    const struct obj_ent *e = g->e;
    size_t d[OBJ_MAX_SHARDS];

    if (!nb->zc)
        return -EAGAIN;
    for (size_t i = 0; i < nb->n; i++) {
        d[i] = obj_shard_drive(g->s, &g->pl, nb->shard[i]);
        if (!obj_ext_resident(g->s, d[i], &e->xref[nb->shard[i]], nb->gen[i],
                              nb->L))
            return -EAGAIN; /* a page to read from the disk: the ring */
    }
    /* the headers are not read: end() checks each in the map, on the first
     * page of its splice (FORMAT.md "Zero-copy GETs") */
    nb->zc_hdr_mapped = true;
    for (size_t i = 0; i < nb->n; i++) {
        struct stor_nb_read *rd = &nb->rd[i];
        loff_t off = (loff_t)(rd->off + OBJ_EXT_HDR);
        size_t got = 0;
        ssize_t n = 0;

        rd->hres = 0;
        while (got < nb->L) {
            n = splice(rd->fd, &off, rd->pipe, NULL, nb->L - got,
                       SPLICE_F_NONBLOCK);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        rd->res = n < 0 ? -errno : (ssize_t)got;
        if (got != nb->L)
            break; /* end() fails on this one; the rest stay unread */
    }
    return 0;
}

/* Contract in obj_nb.h. */
int stor_get_zc_copy(const struct stor_get *g, void *dst, size_t len)
{
    const struct obj_ent *e = g->e;
    size_t L, off = 0;

    if (g->zc == 0 || e->xref == NULL || len != e->size || e->k <= 0)
        return -EINVAL;
    L = (size_t)((e->size + (uint64_t)e->k - 1) / (uint64_t)e->k);
    for (int j = 0; j < e->k && off < len; j++) {
        size_t d = obj_shard_drive(g->s, &g->pl, j), n = CM_MIN(L, len - off);
        int ret = obj_ext_copy_mapped(g->s, d, &e->xref[j], g->zc_gen[j], n,
                                      (uint8_t *)dst + off);

        if (ret < 0)
            return ret;
        off += n;
    }
    return 0;
}

/* Contract in obj_nb.h. */
void stor_get_zc_release(struct stor_get_zc *z)
{
    if (z == NULL)
        return;
    for (int i = 0; i < z->n; i++)
        obj_ext_unpin(z->s, z->d[i], &z->x[i]);
    free(z);
}

/* Contract in obj_nb.h. */
size_t stor_get_zc_bytes(const struct stor_get *g, size_t *first)
{
    if (first)
        *first = g->zc_first;
    return g->zc;
}

/* end() of a zero-copy extent GET: each header read, each shard's bytes
 * spliced whole into the pipe and their CRC right over the page-cache
 * pages the pipe holds. */
static int nb_end_zc(struct stor_get_nb *nb)
{
    struct stor_get *g = nb->g;
    const struct obj_ent *e = g->e;

    for (size_t i = 0; i < nb->n; i++) {
        const struct stor_nb_read *rd = &nb->rd[i];
        int j = nb->shard[i];
        size_t d = obj_shard_drive(g->s, &g->pl, j);

        if ((!nb->zc_hdr_mapped && rd->hres != (ssize_t)OBJ_EXT_HDR) ||
            rd->res != (ssize_t)nb->L ||
            obj_ext_check_mapped(g->s, d, &e->xref[j], nb->gen[i],
                                 nb->zc_hdr_mapped ? NULL : nb->xhdr[i], e->id,
                                 e->version, j, nb->L) < 0)
            return -EAGAIN;
        obj_drive_count(g->s, d, false, (uint64_t)(OBJ_EXT_HDR + nb->L));
        g->zc_gen[j] = nb->gen[i];
    }
    g->zc = nb->n * nb->L;
    g->zc_first = nb->zc_split * nb->L;
    return 0;
}

/* end() of an extent object: every record's header and CRC, then the body
 * is the buffer the reads filled. */
static int nb_end_ext(struct stor_get_nb *nb)
{
    struct stor_get *g = nb->g;
    const struct obj_ent *e = g->e;

    if (nb->zc)
        return nb_end_zc(nb);
    for (size_t i = 0; i < nb->n; i++) {
        const struct stor_nb_read *rd = &nb->rd[i];
        int j = nb->shard[i];

        if (rd->res != (ssize_t)(OBJ_EXT_HDR + nb->L) ||
            obj_ext_verify(nb->xhdr[i], e->id, e->version, j, nb->L, rd->buf) <
                0)
            return -EAGAIN;
        obj_drive_count(g->s, obj_shard_drive(g->s, &g->pl, j), false,
                        (uint64_t)rd->res);
    }
    g->data = nb->xdata; /* shards 0..k-1 are the body, in order */
    nb->xdata = NULL;
    return 0;
}

/* Contract in obj_nb.h. DESIGN: no lock is held while the metas are read:
 * every meta read must carry the index's version, so a concurrent
 * overwrite or delete makes end() answer -EAGAIN (and the regular path
 * decides), never mixes versions. */
int stor_get_nb_begin(struct stor_store *s, const char *bucket, const char *key,
                      size_t key_len, struct stor_get_nb **out,
                      struct stor_nb_read **reads, size_t *n)
{
    struct stor_get_nb *nb;
    struct stor_get *g;
    struct stor_meta tmpl = {0};
    char path[PATH_MAX], pbuf[4 * PATH_MAX];
    size_t plen[OBJ_MAX_SHARDS], total = 0, off = 0;
    const struct obj_ent *e;

    if (!obj_valid_key(key, key_len) || strlen(bucket) >= sizeof(g->bucket))
        return -EAGAIN;
    nb = nb_alloc();
    g = calloc(1, sizeof(*g));
    if (nb == NULL || g == NULL) {
        if (nb != NULL)
            nb_release(nb);
        free(g);
        return -EAGAIN;
    }
    nb->g = g;
    for (int j = 0; j < OBJ_MAX_SHARDS; j++)
        g->fd[j] = -1;
    g->s = s;
    g->cur_part = SIZE_MAX;
    memcpy(g->bucket, bucket, strlen(bucket) + 1);
    if (nb_lookup(g, bucket, key, key_len, &nb->body) < 0)
        goto fail;
    e = g->e;
    if (nb->body) { /* the index holds the bytes: nothing to read */
        *out = nb;
        *reads = nb->rd;
        *n = 0;
        return 0;
    }
    obj_place(s, bucket, key, key_len, &g->pl);
    nb->L = (size_t)((e->size + (uint64_t)e->k - 1) / (uint64_t)e->k);
    if (e->ext) {
        if (nb_begin_ext(nb) < 0)
            goto fail;
        *out = nb;
        *reads = nb->rd;
        *n = nb->n;
        return 0;
    }
    inline_meta_tmpl(e, nb->L, &tmpl);
    nb->mlen = stor_meta_encoded_size(&tmpl);
    nb->n = (size_t)e->k;
    /* the data shards only, all on drives believed online; each path is
     * formatted once, into one allocation */
    for (int j = 0; j < e->k; j++) {
        size_t d = obj_shard_drive(s, &g->pl, j);

        if (!obj_drive_online(s, d) ||
            obj_path_meta(path, sizeof(path), s->drives[d].path, bucket,
                          e->id) < 0)
            goto fail;
        plen[j] = strlen(path) + 1;
        if (total + plen[j] > sizeof(pbuf))
            goto fail;
        memcpy(pbuf + total, path, plen[j]);
        total += plen[j];
    }
    nb->paths = malloc(total + nb->n * (nb->mlen + 1));
    if (nb->paths == NULL)
        goto fail;
    memcpy(nb->paths, pbuf, total);
    nb->raw = (uint8_t *)nb->paths + total;
    for (int j = 0; j < e->k; j++) {
        nb->shard[j] = j;
        nb->rd[j] = (struct stor_nb_read){
            .path = nb->paths + off,
            .buf = nb->raw + (size_t)j * (nb->mlen + 1),
            .len = nb->mlen + 1, /* one more: a longer file is not ours */
            .res = -EINVAL,
            .fd = -1,
            .pipe = -1};
        off += plen[j];
    }
    *out = nb;
    *reads = nb->rd;
    *n = nb->n;
    return 0;
fail:
    stor_get_nb_free(nb);
    return -EAGAIN;
}

/* Fills @info (may be NULL) for a finished nonblocking GET, moving the
 * stored headers out of g's private entry copy instead of copying them
 * again (an inline reader never needs them: one malloc'd copy per GET
 * fewer). Inline objects are never multipart: no part sizes. */
static void nb_info_move(struct stor_get *g, struct stor_obj_info *info)
{
    if (info == NULL)
        return;
    obj_info_fill(g->e, info, false);
    info->hdrs = g->e->hdrs;
    info->nhdrs = g->e->nhdrs;
    g->e->hdrs = NULL;
    g->e->nhdrs = 0;
}

/* Contract in obj_nb.h. */
void stor_get_nb_ident(const struct stor_get_nb *nb, uint8_t id[16],
                       uint64_t *version, uint64_t *size)
{
    memcpy(id, nb->g->e->id, 16);
    *version = nb->g->e->version;
    *size = nb->g->e->size;
}

/* Contract in obj_nb.h. */
int stor_get_nb_end_with(struct stor_get_nb *nb, const void *body, size_t len,
                         struct stor_obj_info *info, struct stor_get **out)
{
    struct stor_get *g = nb->g;
    uint8_t *data;

    if (len != g->e->size || (data = malloc(len ? len : 1)) == NULL) {
        stor_get_nb_free(nb);
        return -EAGAIN;
    }
    memcpy(data, body, len);
    g->data = data;
    nb->g = NULL;
    stor_get_nb_free(nb);
    nb_info_move(g, info);
    *out = g;
    return 0;
}

/* Contract in obj_nb.h. */
int stor_get_nb_end_zc_held(struct stor_get_nb *nb, size_t len,
                            struct stor_obj_info *info, struct stor_get **out)
{
    struct stor_get *g = nb->g;

    if (len != g->e->size || len == 0) {
        stor_get_nb_free(nb);
        return -EAGAIN;
    }
    g->zc = len;
    g->zc_first = len;
    nb->g = NULL;
    stor_get_nb_free(nb);
    nb_info_move(g, info);
    *out = g;
    return 0;
}

/* Contract in object.h. */
bool stor_get_index_body(const struct stor_get *g)
{
    return g != NULL && g->index_body;
}

/* Contract in obj_nb.h. */
const void *stor_get_inline_body(const struct stor_get *g)
{
    return g->e->inl ? g->data : NULL;
}

/* Contract in obj_nb.h. */
void *stor_get_inline_take(struct stor_get *g)
{
    void *body;

    if (!g->e->inl)
        return NULL;
    body = g->data;
    g->data = NULL;
    return body;
}

/* Contract in obj_nb.h. */
int stor_get_nb_end(struct stor_get_nb *nb, struct stor_obj_info *info,
                    struct stor_get **out)
{
    struct stor_get *g = nb->g;
    const struct obj_ent *e = g->e;
    uint8_t *shards;
    int ret = 0;

    if (nb->body) { /* begin() found it in the index (CRC checked there) */
        g->data = nb->body;
        nb->body = NULL;
        nb->g = NULL;
        stor_get_nb_free(nb);
        nb_info_move(g, info);
        *out = g;
        return 0;
    }
    if (nb->xhdr) { /* an extent object */
        ret = nb_end_ext(nb);
        if (ret < 0) {
            stor_get_nb_free(nb);
            return ret;
        }
        nb->g = NULL;
        stor_get_nb_free(nb);
        nb_info_move(g, info);
        *out = g;
        return 0;
    }
    shards = malloc(nb->n * (nb->L ? nb->L : 1));
    if (shards == NULL) {
        stor_get_nb_free(nb);
        return -EAGAIN;
    }
    for (size_t i = 0; i < nb->n && ret == 0; i++) {
        const struct stor_nb_read *rd = &nb->rd[i];
        int j = nb->shard[i];
        struct stor_meta m;

        if (rd->res != (ssize_t)nb->mlen ||
            stor_meta_decode_view(rd->buf, nb->mlen, &m) < 0) {
            ret = -EAGAIN;
            break;
        }
        obj_drive_count(g->s, obj_shard_drive(g->s, &g->pl, j), false,
                        (uint64_t)rd->res);
        if (m.version == e->version && m.shard == j && m.has_inline &&
            !m.has_xref && m.inl_len == nb->L && m.type == STOR_META_OBJECT) {
            if (nb->L)
                memcpy(shards + (size_t)j * nb->L, m.inl_ref, nb->L);
        } else {
            ret = -EAGAIN;
        }
        stor_meta_fini(&m);
    }
    if (ret < 0) {
        free(shards);
        stor_get_nb_free(nb);
        return ret;
    }
    g->data = shards; /* shards 0..k-1 are the body, in order */
    nb->g = NULL;
    stor_get_nb_free(nb);
    nb_info_move(g, info);
    *out = g;
    return 0;
}

/* Contract in object.h: one full stripe. */
size_t stor_get_preferred_chunk(const struct stor_get *g)
{
    if (g->e->inl)
        return g->e->size ? (size_t)g->e->size : 4096;
    return (size_t)g->e->k * g->e->block;
}

/* Opens shard @j of the current part (once). Drives marked offline are
 * tried only with @force (the last resort: one may be back already). */
static int get_fd(struct stor_get *g, int j, bool force)
{
    struct stor_store *s = g->s;
    size_t d = obj_shard_drive(s, &g->pl, j);
    char path[PATH_MAX];

    if (g->fd_tried[j])
        return g->fd[j];
    if (!force && !obj_drive_online(s, d))
        return -1;
    g->fd_tried[j] = true;
    if (obj_path_shard(path, sizeof(path), s->drives[d].path, g->bucket,
                       g->e->id, g->e->parts[g->cur_part].dataid) < 0)
        return -1;
    g->fd[j] = open(path, O_RDONLY | O_CLOEXEC);
    if (g->fd[j] < 0 && errno != ENOENT)
        obj_drive_fail(s, d, errno);
    return g->fd[j];
}

/* Reads stripes [s0, s0 + ns) of part @p into g->sbuf, verified and
 * rebuilt. @need[j] marks data shards the caller will copy from. */
static int get_stripes(struct stor_get *g, size_t p, uint64_t s0, int ns,
                       const bool *need)
{
    struct stor_store *s = g->s;
    const struct obj_ent *e = g->e;
    struct obj_geom gm;
    int n = e->k + e->m, good = 0;
    bool tried[OBJ_MAX_SHARDS] = {0}, present[OBJ_MAX_SHARDS] = {0};
    uint64_t off0 = s0 * (uint64_t)(e->block + OBJ_CRC_LEN);
    size_t span = 0;

    obj_geom_init(&gm, e->k, e->m, e->block, e->parts[p].size);
    for (int i = 0; i < ns; i++)
        span += obj_geom_slen(&gm, s0 + (uint64_t)i) + OBJ_CRC_LEN;
    for (int round = 0; round <= n + 1; round++) {
        struct stor_io io[OBJ_MAX_SHARDS];
        int map[OBJ_MAX_SHARDS], nio = 0, want_more = e->k - good;
        int attempted = 0;
        bool missing = false;

        /* round 0: the needed data shards; then, each round, as many
         * untried shards as decoding still needs; from round 2 on also on
         * drives marked offline (one may be back already) */
        for (int j = 0; j < n && (round == 0 || want_more > 0); j++) {
            int fd;

            if (tried[j])
                continue;
            if (round == 0 && !(j < e->k && need[j]))
                continue;
            attempted++;
            fd = get_fd(g, j, round >= 2);
            if (fd < 0) {
                if (g->fd_tried[j])
                    tried[j] = true; /* opened and failed: lost */
                continue;
            }
            tried[j] = true;
            want_more--;
            map[nio] = j;
            io[nio++] =
                (struct stor_io){.fd = fd,
                                 .op = 'r',
                                 .buf = g->sbuf + (size_t)j * g->sbuf_stride,
                                 .len = span,
                                 .off = off0};
        }
        stor_io_run(io, (size_t)nio);
        for (int i = 0; i < nio; i++) {
            int j = map[i];
            uint8_t *b = g->sbuf + (size_t)j * g->sbuf_stride;
            bool ok = io[i].res == (ssize_t)span;

            obj_drive_count(s, obj_shard_drive(s, &g->pl, j), false,
                            io[i].res > 0 ? (uint64_t)io[i].res : 0);
            if (io[i].res < 0)
                obj_drive_fail(s, obj_shard_drive(s, &g->pl, j),
                               (int)-io[i].res);
            for (int t = 0; t < ns && ok; t++) {
                uint32_t sl = obj_geom_slen(&gm, s0 + (uint64_t)t);
                uint64_t want = 0, got;

                for (int q = 0; q < OBJ_CRC_LEN; q++)
                    want |= (uint64_t)b[q] << (8 * q);
                got = stor_crc64(
                    obj_block_seed(e->parts[p].dataid, j, s0 + (uint64_t)t),
                    b + OBJ_CRC_LEN, sl);
                if (got != want) {
                    ok = false;
                    __atomic_add_fetch(&s->corrupt_found, 1, __ATOMIC_RELAXED);
                }
                b += sl + OBJ_CRC_LEN;
            }
            present[j] = ok;
            good += ok;
        }
        for (int j = 0; j < e->k; j++)
            if (need[j] && !present[j])
                missing = true;
        if (round == 0 && !missing)
            return 0;
        if (round == 0)
            note_degraded(g);
        if (good >= e->k || (round >= 2 && attempted == 0))
            break;
    }
    if (good < e->k)
        return -STOR_EDATA;
    /* rebuild the needed data shards, stripe by stripe */
    {
        size_t boff = 0;
        bool want[OBJ_MAX_SHARDS] = {0};

        for (int j = 0; j < e->k; j++)
            want[j] = need[j] && !present[j];
        for (int t = 0; t < ns; t++) {
            uint32_t sl = obj_geom_slen(&gm, s0 + (uint64_t)t);
            uint8_t *sh[OBJ_MAX_SHARDS];
            int ret;

            for (int j = 0; j < n; j++)
                sh[j] =
                    g->sbuf + (size_t)j * g->sbuf_stride + boff + OBJ_CRC_LEN;
            ret = stor_ec_reconstruct(stor_ec_get(e->k, e->m), sl, sh, present,
                                      want);
            if (ret < 0)
                return ret;
            boff += sl + OBJ_CRC_LEN;
        }
    }
    return 0;
}

/* Reads whole, full-width stripes [s0, s0 + ns) of part @p straight into
 * @buf, which receives exactly their data bytes in order: each block goes
 * where the caller wants it and its CRC beside it, checked on @buf, so no
 * staging copy is made (big GETs are bound by copies). 0, or -EAGAIN when
 * a data shard is offline, missing, short or corrupt: the caller then uses
 * get_stripes(), which reads parity and rebuilds (and counts the
 * corruption). */
static int get_stripes_direct(struct stor_get *g, size_t p, uint64_t s0, int ns,
                              uint8_t *buf)
{
    struct stor_store *s = g->s;
    const struct obj_ent *e = g->e;
    uint64_t dataid = e->parts[p].dataid;
    size_t blk = e->block, sdata = (size_t)e->k * blk;
    uint8_t crc[OBJ_MAX_SHARDS][GET_DIRECT_BATCH][OBJ_CRC_LEN];
    struct stor_io io[2 * OBJ_MAX_SHARDS * GET_DIRECT_BATCH];
    size_t nio = 0;

    assert(ns > 0 && ns <= GET_DIRECT_BATCH);
    for (int j = 0; j < e->k; j++) {
        int fd = get_fd(g, j, false);

        if (fd < 0)
            return -EAGAIN;
        for (int t = 0; t < ns; t++) {
            uint64_t off = (s0 + (uint64_t)t) * (uint64_t)(blk + OBJ_CRC_LEN);

            io[nio++] = (struct stor_io){.fd = fd,
                                         .op = 'r',
                                         .buf = crc[j][t],
                                         .len = OBJ_CRC_LEN,
                                         .off = off};
            io[nio++] =
                (struct stor_io){.fd = fd,
                                 .op = 'r',
                                 .buf = buf + (size_t)t * sdata + j * blk,
                                 .len = blk,
                                 .off = off + OBJ_CRC_LEN};
        }
    }
    stor_io_run(io, nio);
    for (size_t i = 0; i < nio; i++)
        if (io[i].res != (ssize_t)io[i].len)
            return -EAGAIN;
    for (int j = 0; j < e->k; j++) {
        obj_drive_count(s, obj_shard_drive(s, &g->pl, j), false,
                        (uint64_t)ns * (blk + OBJ_CRC_LEN));
        for (int t = 0; t < ns; t++) {
            uint64_t want = 0;

            for (int q = 0; q < OBJ_CRC_LEN; q++)
                want |= (uint64_t)crc[j][t][q] << (8 * q);
            if (stor_crc64(obj_block_seed(dataid, j, s0 + (uint64_t)t),
                           buf + (size_t)t * sdata + j * blk, blk) != want)
                return -EAGAIN;
        }
    }
    return 0;
}

/* Reads from part @p at part offset @poff into @buf, at most the stripes
 * of one batch; returns bytes copied or -errno. */
static ssize_t get_part_read(struct stor_get *g, size_t p, uint64_t poff,
                             uint8_t *buf, size_t len)
{
    const struct obj_ent *e = g->e;
    struct obj_geom gm;
    uint64_t s0, s1, end;
    bool need[OBJ_MAX_SHARDS] = {0};
    size_t done = 0, boff = 0;
    int ns, ret;

    obj_geom_init(&gm, e->k, e->m, e->block, e->parts[p].size);
    end = CM_MIN(poff + len, gm.size);
    s0 = poff / gm.sdata;
    s1 = (end - 1) / gm.sdata;
    if (s1 - s0 + 1 > GET_BATCH)
        s1 = s0 + GET_BATCH - 1;
    ns = (int)(s1 - s0 + 1);
    if (g->cur_part != p) {
        get_close_fds(g);
        g->cur_part = p;
    }
    /* whole full-width stripes from a stripe boundary: straight into
     * @buf when every data shard reads back clean */
    if (poff % gm.sdata == 0 && (end - poff) / gm.sdata > 0) {
        uint64_t nfull = (end - poff) / gm.sdata;
        int nd = (int)CM_MIN(nfull, (uint64_t)GET_DIRECT_BATCH);

        if (get_stripes_direct(g, p, s0, nd, buf) == 0)
            return (ssize_t)((uint64_t)nd * gm.sdata);
    }
    if (g->sbuf == NULL) {
        g->sbuf_stride = GET_BATCH * (size_t)(e->block + OBJ_CRC_LEN);
        g->sbuf = malloc((size_t)(e->k + e->m) * g->sbuf_stride);
        if (g->sbuf == NULL)
            return -ENOMEM;
    }
    /* which data shards hold the requested bytes */
    for (uint64_t st = s0; st <= s1; st++) {
        uint32_t sl = obj_geom_slen(&gm, st);
        uint64_t a = CM_MAX(poff, st * gm.sdata) - st * gm.sdata;
        uint64_t z =
            CM_MIN(end, st * gm.sdata + (uint64_t)sl * e->k) - st * gm.sdata;

        if (z > (uint64_t)sl * e->k)
            z = (uint64_t)sl * e->k;
        for (uint64_t j = a / sl; j <= (z - 1) / sl && j < (uint64_t)e->k; j++)
            need[j] = true;
    }
    ret = get_stripes(g, p, s0, ns, need);
    if (ret < 0)
        return ret;
    for (uint64_t st = s0; st <= s1; st++) {
        uint32_t sl = obj_geom_slen(&gm, st);
        uint64_t sbase = st * gm.sdata;
        uint64_t a = CM_MAX(poff, sbase), z = CM_MIN(end, sbase + gm.sdata);

        while (a < z) {
            uint64_t o = a - sbase;
            uint64_t j = o / sl, w = o % sl;
            uint64_t n = CM_MIN(z - a, (uint64_t)sl - w);

            memcpy(buf + done,
                   g->sbuf + (size_t)j * g->sbuf_stride + boff + OBJ_CRC_LEN +
                       w,
                   (size_t)n);
            done += (size_t)n;
            a += n;
        }
        boff += sl + OBJ_CRC_LEN;
    }
    return (ssize_t)done;
}

/* Contract in object.h: loops over parts and stripe batches. */
ssize_t stor_get_read(struct stor_get *g, uint64_t off, void *buf, size_t len)
{
    const struct obj_ent *e = g->e;
    size_t done = 0;

    if (off >= e->size || len == 0)
        return 0;
    if (len > e->size - off)
        len = (size_t)(e->size - off);
    if (e->inl) {
        if (CM_NEVER(g->data == NULL)) /* taken by stor_get_inline_take() */
            return -EINVAL;
        memcpy(buf, g->data + off, len);
        return (ssize_t)len;
    }
    while (done < len) {
        uint64_t at = off + done;
        size_t lo = 0, hi = e->nparts;
        ssize_t r;

        while (hi - lo > 1) { /* last part whose start <= at */
            size_t mid = (lo + hi) / 2;

            if (g->cum[mid] <= at)
                lo = mid;
            else
                hi = mid;
        }
        while (lo < e->nparts && g->cum[lo + 1] <= at)
            lo++; /* skip empty parts */
        if (lo >= e->nparts)
            break;
        r = get_part_read(g, lo, at - g->cum[lo], (uint8_t *)buf + done,
                          len - done);
        if (r < 0)
            return done > 0 ? (ssize_t)done : r;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

/* Contract in object.h: from the index, no I/O. */
int stor_obj_stat(struct stor_store *s, const char *bucket, const char *key,
                  size_t key_len, struct stor_obj_info *out)
{
    struct obj_ent *e;
    int ret;

    if (!obj_valid_key(key, key_len))
        return -STOR_EINVAL;
    ret = obj_cur_lookup(s, bucket, key, key_len, &e);
    if (ret == 0 && out)
        obj_info_fill(e, out, true);
    obj_ent_free(e);
    return ret;
}

/* Contract in obj_nb.h. */
int stor_obj_stat_nb(struct stor_store *s, const char *bucket, const char *key,
                     size_t key_len, struct stor_obj_info *out)
{
    struct obj_ent *e;
    int ret;

    if (!obj_valid_key(key, key_len))
        return -EAGAIN; /* the worker's stor_obj_stat answers it */
    ret = obj_cur_lookup_nb(s, bucket, key, key_len, &e);
    if (ret == 0)
        obj_info_fill(e, out, true);
    obj_ent_free(e);
    return ret == 0 ? 0 : -EAGAIN;
}

/* ---- DELETE ---- */

/* Writes tombstones on the online drives of @e's placement so a drive that
 * missed the delete cannot bring the object back at the next start. */
static void write_tombstones(struct stor_store *s, const char *bucket,
                             const struct obj_ent *e,
                             const struct stor_place *pl)
{
    struct obj_ent t = *e;
    struct cm_buf metas[OBJ_MAX_SHARDS];
    bool ok[OBJ_MAX_SHARDS] = {0};
    int fds[OBJ_MAX_SHARDS], n = e->k + e->m;
    uint64_t uniq = obj_next_version(s);

    new_dirs_begin();
    t.version = obj_next_version(s);
    t.inl = false;
    t.ext = false;
    t.xref = NULL;
    t.nparts = 0;
    for (int j = 0; j < n; j++)
        ok[j] = obj_drive_online(s, obj_shard_drive(s, pl, j));
    if (build_metas(&t, STOR_META_TOMBSTONE, NULL, 0, metas, ok, NULL) == 0 &&
        write_tmp_metas(s, bucket, e->id, pl, uniq, metas, n, ok, fds, NULL,
                        sync_mark(s, pl, n, ok), NULL, NULL, WM_SYNC) > 0) {
        uint64_t mark = sync_mark(s, pl, n, ok);

        for (int j = 0; j < n; j++) {
            char from[PATH_MAX], to[PATH_MAX];
            size_t d = obj_shard_drive(s, pl, j);

            if (!ok[j])
                continue;
            if (obj_path_tmp(from, sizeof(from), s->drives[d].path, uniq,
                             100 + j) == 0 &&
                obj_path_meta(to, sizeof(to), s->drives[d].path, bucket,
                              e->id) == 0 &&
                rename_mk(from, to, d) < 0) {
                unlink(from);
                ok[j] = false;
            }
        }
        (void)sync_barrier(s, bucket, e->id, pl, n, ok, mark, NULL, ok, NULL,
                           NULL);
        jnl_after(s, bucket, e->id, t.version, pl, n, ok, metas);
    }
    for (int j = 0; j < n; j++)
        cm_buf_fini(&metas[j]);
}

/* ---- versioned DELETEs settled in the background (FORMAT.md "Versions") ----
 *
 * DESIGN: a DELETE over a version kept in place used to wait for one
 * barrier (its journal records durable) before it unlinked the key's
 * metas: 70 % of a worker's time. Where every drive of the key journals,
 * it now answers after the links, their journal records, the marker and
 * the index transaction, and leaves the key's metas HEX.m in place (the
 * key stays pending in the index); this queue unlinks them after a
 * barrier that starts after those records were written, shared by every
 * DELETE queued meanwhile. Until then HEX.m and the links name the same
 * inode, so a power cut can never take both: a start that finds HEX.m
 * beside a DELETE's link of the same version (SINCE odd) keeps the
 * version and makes no current one of it (obj_load.c). Any writer of the
 * key's HEX.m (a commit, the delete of that kept version) settles the
 * key first (obj_vdel_settle), so nothing replaces HEX.m before the links
 * are durable. */

struct vdel_item {
    struct vdel_key {
        uint8_t id[16];
        char bucket[64];
    } k;                  /* the hash key */
    UT_hash_handle hh;    /* by k, in v->all */
    struct cm_list qnode; /* on v->queue, while not busy */
    struct obj_ent *cur;  /* owned: the version kept */
    struct stor_place pl;
    bool ok[OBJ_MAX_SHARDS]; /* linked, its record in that drive's journal */
    uint64_t mark;
    bool busy; /* a settler has it: others wait on v->done */
};

struct obj_vdel {
    int delay_ms; /* STORAGED_TEST_VDEL_MS: tests only (a wait per batch) */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    struct vdel_item *all; /* every item not settled yet */
    struct cm_list queue;  /* of qnode: not busy, oldest first */
    size_t n;              /* atomic reads: items in all */
    bool stop;
    pthread_t th;
};

static pthread_mutex_t vdel_init_mu = PTHREAD_MUTEX_INITIALIZER;

/* The barrier over @m items' journals (one shared fsync per drive), then
 * each item's metas go: unlinked (tombstones where a drive of the set is
 * offline), or left where fewer than k links are known durable; then the
 * key's pending record is cleared. No key lock: every writer of these
 * keys' metas waits for the items (busy) first. */
static void vdel_finish(struct stor_store *s, struct vdel_item **its, size_t m)
{
    struct stor_sync_item *it = calloc(s->ndrives, sizeof(*it));
    int *slot = malloc(s->ndrives * sizeof(*slot));
    uint64_t mark = UINT64_MAX;
    size_t ni = 0;

    if (it && slot) {
        for (size_t d = 0; d < s->ndrives; d++)
            slot[d] = -1;
        for (size_t i = 0; i < m; i++) {
            if (its[i]->mark < mark)
                mark = its[i]->mark;
            for (int j = 0; j < its[i]->cur->k + its[i]->cur->m; j++) {
                size_t d = obj_shard_drive(s, &its[i]->pl, j);

                if (its[i]->ok[j] && slot[d] < 0) {
                    slot[d] = (int)ni;
                    obj_jnl_item(s, d, &it[ni++]);
                }
            }
        }
        stor_gsync_barrier(s->gs, mark, it, ni);
        for (size_t d = 0; d < s->ndrives; d++)
            if (slot[d] >= 0 && it[slot[d]].res < 0)
                obj_drive_fail(s, d, -it[slot[d]].res);
    }
    for (size_t i = 0; i < m; i++) {
        struct vdel_item *x = its[i];
        int n = x->cur->k + x->cur->m, nok = 0;
        bool all = true;

        for (int j = 0; j < n; j++) {
            size_t d = obj_shard_drive(s, &x->pl, j);

            if (x->ok[j] && it && slot && slot[d] >= 0 && it[slot[d]].res == 0)
                nok++;
            if (!obj_drive_online(s, d))
                all = false;
        }
        if (nok < x->cur->k) {
            /* the version stays current on the drives too: a start may
             * show it current again (as a power cut may undo a DELETE) */
            cm_log(CM_LOG_WARN, 0,
                   "bucket %s: a versioned DELETE's kept version is durable "
                   "on %d drive(s) only; its metas stay",
                   x->k.bucket, nok);
        } else if (!all ||
                   !remove_metas(s, x->k.bucket, x->cur, &x->pl, NULL)) {
            /* as a delete: a drive that may miss it gets tombstones on the
             * others (a rename over HEX.m: the link keeps the old inode) */
            write_tombstones(s, x->k.bucket, x->cur, &x->pl);
        }
        obj_cur_settled(s, x->k.bucket, x->cur->id);
    }
    free(it);
    free(slot);
}

/* Removes settled items @its from the table, wakes their waiters. */
static void vdel_done(struct stor_store *s, struct vdel_item **its, size_t m)
{
    struct obj_vdel *v = s->vdel;

    pthread_mutex_lock(&v->mu);
    for (size_t i = 0; i < m; i++) {
        HASH_DEL(v->all, its[i]);
        __atomic_store_n(&v->n, v->n - 1, __ATOMIC_RELAXED);
    }
    pthread_cond_broadcast(&v->done);
    pthread_mutex_unlock(&v->mu);
    for (size_t i = 0; i < m; i++) {
        obj_ent_free(its[i]->cur);
        free(its[i]);
    }
}

#define VDEL_BATCH 512

/* Thread: settles the queue in batches, one barrier each; at the stop,
 * everything still queued. */
static void *vdel_main(void *arg)
{
    struct stor_store *s = arg;
    struct obj_vdel *v = s->vdel;
    struct vdel_item *b[VDEL_BATCH];

    (void)pthread_setname_np(pthread_self(), "stor-vdel");
    pthread_mutex_lock(&v->mu);
    for (;;) {
        size_t m = 0;

        while (cm_list_empty(&v->queue) && !v->stop)
            pthread_cond_wait(&v->work, &v->mu);
        if (cm_list_empty(&v->queue) && v->stop)
            break;
        while (!cm_list_empty(&v->queue) && m < VDEL_BATCH) {
            struct vdel_item *x =
                CM_LIST_ENTRY(v->queue.next, struct vdel_item, qnode);

            cm_list_del(&x->qnode);
            x->busy = true;
            b[m++] = x;
        }
        pthread_mutex_unlock(&v->mu);
        if (v->delay_ms > 0) {
            struct timespec ts = {v->delay_ms / 1000,
                                  (long)(v->delay_ms % 1000) * 1000000L};

            nanosleep(&ts, NULL);
        }
        vdel_finish(s, b, m);
        vdel_done(s, b, m);
        pthread_mutex_lock(&v->mu);
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

/* The queue, started at the first use; NULL where DELETEs settle inline
 * (no background threads, `storaged index`, or out of memory). */
static struct obj_vdel *vdel_get(struct stor_store *s)
{
    struct obj_vdel *v = __atomic_load_n(&s->vdel, __ATOMIC_ACQUIRE);

    if (v || !__atomic_load_n(&s->threads_started, __ATOMIC_ACQUIRE) ||
        s->offline)
        return v;
    pthread_mutex_lock(&vdel_init_mu);
    v = s->vdel;
    if (v == NULL && (v = calloc(1, sizeof(*v))) != NULL) {
        const char *ms = getenv("STORAGED_TEST_VDEL_MS");

        v->delay_ms = ms ? (int)strtol(ms, NULL, 10) : 0;
        cm_list_init(&v->queue);
        pthread_mutex_init(&v->mu, NULL);
        pthread_cond_init(&v->work, NULL);
        pthread_cond_init(&v->done, NULL);
        __atomic_store_n(&s->vdel, v, __ATOMIC_RELEASE);
        if (pthread_create(&v->th, NULL, vdel_main, s) != 0) {
            __atomic_store_n(&s->vdel, NULL, __ATOMIC_RELEASE);
            pthread_mutex_destroy(&v->mu);
            pthread_cond_destroy(&v->work);
            pthread_cond_destroy(&v->done);
            free(v);
            v = NULL;
        }
    }
    pthread_mutex_unlock(&vdel_init_mu);
    return v;
}

/* Queues the unlink of @cur's metas (taken), linked and journaled on the
 * positions in @ok. Caller holds the key's write lock. */
static void vdel_queue(struct stor_store *s, const char *bucket,
                       struct obj_ent *cur, const struct stor_place *pl,
                       const bool *ok, uint64_t mark)
{
    struct obj_vdel *v = s->vdel;
    struct vdel_item *x = calloc(1, sizeof(*x));

    if (x == NULL) { /* settle it now, as before the queue */
        struct vdel_item tmp = {.cur = cur, .pl = *pl, .mark = mark};
        struct vdel_item *one = &tmp;

        snprintf(tmp.k.bucket, sizeof(tmp.k.bucket), "%s", bucket);
        memcpy(tmp.ok, ok, sizeof(tmp.ok));
        vdel_finish(s, &one, 1);
        obj_ent_free(cur);
        return;
    }
    memcpy(x->k.id, cur->id, 16);
    snprintf(x->k.bucket, sizeof(x->k.bucket), "%s", bucket);
    x->cur = cur;
    x->pl = *pl;
    memcpy(x->ok, ok, sizeof(x->ok));
    x->mark = mark;
    pthread_mutex_lock(&v->mu);
    HASH_ADD(hh, v->all, k, sizeof(x->k), x);
    __atomic_store_n(&v->n, v->n + 1, __ATOMIC_RELAXED);
    cm_list_push_back(&v->queue, &x->qnode);
    pthread_cond_signal(&v->work);
    pthread_mutex_unlock(&v->mu);
}

/* Contract in obj_i.h. */
void obj_vdel_settle(struct stor_store *s, const char *bucket,
                     const uint8_t id[16])
{
    struct obj_vdel *v = __atomic_load_n(&s->vdel, __ATOMIC_ACQUIRE);
    struct vdel_item *x;
    struct vdel_key k;

    if (v == NULL || __atomic_load_n(&v->n, __ATOMIC_RELAXED) == 0)
        return;
    memset(&k, 0, sizeof(k));
    memcpy(k.id, id, 16);
    snprintf(k.bucket, sizeof(k.bucket), "%s", bucket);
    pthread_mutex_lock(&v->mu);
    for (;;) {
        HASH_FIND(hh, v->all, &k, sizeof(k), x);
        if (x == NULL || !x->busy)
            break;
        pthread_cond_wait(&v->done, &v->mu);
    }
    if (x)
        cm_list_del(&x->qnode);
    if (x)
        x->busy = true;
    pthread_mutex_unlock(&v->mu);
    if (x) {
        vdel_finish(s, &x, 1);
        vdel_done(s, &x, 1);
    }
}

/* Contract in obj_i.h. */
void obj_vdel_stop(struct stor_store *s)
{
    struct obj_vdel *v = s->vdel;

    if (v == NULL)
        return;
    pthread_mutex_lock(&v->mu);
    v->stop = true;
    pthread_cond_signal(&v->work);
    pthread_mutex_unlock(&v->mu);
    pthread_join(v->th, NULL);
    s->vdel = NULL;
    pthread_mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->work);
    pthread_cond_destroy(&v->done);
    free(v);
}

/* Was a drive of @set offline when the index in use was rebuilt? Then a
 * key it does not have may still have copies there (FORMAT.md "Rebuilt
 * with drives away"). */
static bool set_away_at_rebuild(const struct stor_store *s, int set)
{
    for (int i = 0; s->idx_away && i < s->set_size; i++)
        if (__atomic_load_n(&s->idx_away[(size_t)set * s->set_size + i],
                            __ATOMIC_RELAXED))
            return true;
    return false;
}

/* A DELETE of key @key, which the index does not have, in a set that had
 * drives away when the index was rebuilt: tombstones on every online
 * drive of the set, so the rebuild of a start with them back does not
 * bring back copies they may hold (it would have been deleted). */
static void tombstones_absent(struct stor_store *s, const char *bucket,
                              const char *key, size_t key_len,
                              const uint8_t id[16], const struct stor_place *pl)
{
    struct obj_ent t = {0};

    t.key = obj_memdup0(key, key_len);
    if (t.key == NULL)
        return;
    t.key_len = key_len;
    memcpy(t.id, id, 16);
    t.mtime_ns = obj_now_ns();
    t.k = s->K; /* K + M shards: every position of the set */
    t.m = s->M;
    write_tombstones(s, bucket, &t, pl);
    free(t.key);
}

/* Contract in object.h. */
int stor_obj_delete(struct stor_store *s, const char *bucket, const char *key,
                    size_t key_len)
{
    return stor_obj_delete_if(s, bucket, key, key_len, NULL);
}

/* Under the key's lock: -STOR_ENOKEY / -STOR_EPRECOND when the current
 * object is missing or does not meet @c, else 0 (vers, issue 18). */
static int delete_cond_check(struct stor_store *s, const char *bucket,
                             const char *key, size_t key_len,
                             const struct stor_del_cond *c)
{
    struct obj_ent *cur = NULL;
    int ret;

    if (!stor_del_cond_any(c))
        return 0;
    ret = obj_cur_lookup(s, bucket, key, key_len, &cur);
    if (ret == 0 && cur == NULL)
        ret = -STOR_ENOKEY;
    if (ret == 0 &&
        !stor_del_cond_match(c, cur->etag, (time_t)(cur->mtime_ns / 1000000000),
                             cur->size))
        ret = -STOR_EPRECOND;
    obj_ent_free(cur);
    return ret;
}

/* Contract in object.h. */
int stor_obj_delete_if(struct stor_store *s, const char *bucket,
                       const char *key, size_t key_len,
                       const struct stor_del_cond *c)
{
    struct obj_ent *e = NULL;
    struct stor_place pl;
    pthread_rwlock_t *kl;
    uint8_t id[16];
    int ret = 0;
    bool all = true;

    if (!obj_valid_key(key, key_len))
        return -STOR_EINVAL;
    obj_key_id(s, key, key_len, id);
    obj_place(s, bucket, key, key_len, &pl);
    kl = obj_klock(s, id);
    pthread_rwlock_wrlock(kl);
    obj_vdel_settle(s, bucket, id);
    ret = delete_cond_check(s, bucket, key, key_len, c);
    if (ret < 0) {
        pthread_rwlock_unlock(kl);
        return ret;
    }
    /* in flight until the files are gone (the truth): a start after a
     * crash reconciles this key from whatever metas are left */
    if (obj_cur_pending(s, bucket, id, key, key_len) < 0) {
        pthread_rwlock_unlock(kl);
        return -STOR_EDATA;
    }
    ret = obj_cur_remove(s, bucket, key, key_len, &e);
    if (ret < 0 && ret != -STOR_ENOBUCKET && ret != -STOR_ENOKEY)
        ret = -STOR_EDATA;
    if (e && e->at_bucket) {
        uint8_t bid[16];

        /* the DELETE that kept it unlinks its base's HEX.m first: else a
         * start would see that meta without the link, as the current one */
        obj_key_id(s, e->at_key, e->at_key_len, bid);
        obj_vdel_settle(s, e->at_bucket, bid);
        obj_ver_remove_kept(s, e); /* a version kept at its base's files */
        obj_ent_free(e);
    } else if (e) {
        ext_refs_load(s, bucket, e, &pl); /* to punch them */
        for (int j = 0; j < e->k + e->m; j++)
            if (!obj_drive_online(s, obj_shard_drive(s, &pl, j)))
                all = false;
        /* a drive that may have missed the delete gets tombstones on the
         * others, so it cannot bring the object back at the next start */
        if (!all || !remove_metas(s, bucket, e, &pl, NULL))
            write_tombstones(s, bucket, e, &pl);
        retire_shards(s, bucket, e, &pl, true); /* a delete: gone at once */
    } else if (ret == -STOR_ENOKEY && set_away_at_rebuild(s, pl.set)) {
        tombstones_absent(s, bucket, key, key_len, id, &pl);
    }
    obj_cur_settled(s, bucket, id);
    pthread_rwlock_unlock(kl);
    return ret;
}

/* The delete marker @dm as an entry to commit: an empty inline object
 * with the set's geometry for 0 bytes; the caller sets its version and
 * time. *out malloc'd. 0 or -ENOMEM. */
static int marker_ent(struct stor_store *s, const struct stor_marker *dm,
                      struct obj_ent **out)
{
    struct obj_ent *e = calloc(1, sizeof(*e));

    *out = NULL;
    if (e == NULL)
        return -ENOMEM;
    e->key = obj_memdup0(dm->key, dm->key_len);
    if (e->key == NULL || obj_hdrs_copy(dm->hdrs, dm->nhdrs, &e->hdrs) < 0) {
        obj_ent_free(e);
        return -ENOMEM;
    }
    e->key_len = dm->key_len;
    e->nhdrs = dm->nhdrs;
    obj_key_id(s, e->key, e->key_len, e->id);
    snprintf(e->etag, sizeof(e->etag), "%s",
             "d41d8cd98f00b204e9800998ecf8427e"); /* MD5 of no bytes */
    e->k = stor_small_k(s->K, 0);
    e->m = s->M;
    e->inl = true;
    *out = e;
    return 0;
}

/* Bytes read_meta asks for first (a 4 KiB object's meta is ~4.2 KiB). */
#define META_READ_FIRST (16384u - 1) /* + cm_buf's NUL: 16 KiB */

/* Reads the current meta file of @bucket/@id on drive @d into @out
 * (initialised here). 0 or -errno. */
static int read_meta(struct stor_store *s, size_t d, const char *bucket,
                     const uint8_t id[16], struct cm_buf *out)
{
    char path[PATH_MAX];
    struct stat st;
    int fd, ret = 0;

    cm_buf_init(out, STOR_META_MAX);
    if (obj_path_meta(path, sizeof(path), s->drives[d].path, bucket, id) < 0)
        return -ENAMETOOLONG;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* a small object's meta fits the first read: a short read is the
     * whole file (no fstat: one syscall less per kept copy) */
    if ((ret = cm_buf_reserve(out, META_READ_FIRST)) == 0) {
        ssize_t r = pread(fd, out->data, META_READ_FIRST, 0);

        if (r > 0 && (size_t)r < META_READ_FIRST)
            out->len = (size_t)r;
        else if (r <= 0 || fstat(fd, &st) < 0 || st.st_size <= 0 ||
                 st.st_size > STOR_META_MAX)
            ret = -EIO;
        else if ((ret = cm_buf_reserve(out, (size_t)st.st_size)) == 0) {
            if (pread(fd, out->data, (size_t)st.st_size, 0) != st.st_size)
                ret = -EIO;
            else
                out->len = (size_t)st.st_size;
        }
    }
    close(fd);
    return ret;
}

/* Write-locks the key locks @a and @b (the same stripe once), in address
 * order, so two such callers never wait on each other. */
static void klock_pair(pthread_rwlock_t *a, pthread_rwlock_t *b)
{
    if (a > b) {
        pthread_rwlock_t *t = a;

        a = b;
        b = t;
    }
    pthread_rwlock_wrlock(a);
    if (b != a)
        pthread_rwlock_wrlock(b);
}

static void kunlock_pair(pthread_rwlock_t *a, pthread_rwlock_t *b)
{
    pthread_rwlock_unlock(a);
    if (b != a)
        pthread_rwlock_unlock(b);
}

/* Contract in object.h. One operation under both keys' locks (FORMAT.md
 * "Versions"): the marker's write quorum is checked first (nothing is done
 * when its drives are not there); both keys are marked pending in one
 * transaction; the links of the kept version; ONE barrier, which makes
 * them durable before any meta of the base goes; the base's metas go
 * (tombstones where a drive may miss it); the marker's metas are created
 * at their final names (a brand-new name: O_EXCL, write_tmp_metas without
 * sync); ONE index transaction removes the key, adds the kept version and
 * the marker and clears both pending records. The drives are the truth at
 * every step: a crash before the base's metas go leaves the version
 * current (the start drops the links) and no marker; after, the version
 * is kept (the start makes its record from the links) with the marker's
 * metas whole, torn (a lost shard) or not there. The marker is as durable
 * as the delete itself: the unlinks and its metas are not synced (an
 * unversioned DELETE's unlinks are not either). */
int stor_obj_delete_keep(struct stor_store *s, const char *bucket,
                         const char *key, size_t key_len, uint64_t version,
                         const struct stor_marker *dm)
{
    struct obj_ent *cur = NULL, *old = NULL, *me = NULL, probe;
    struct obj_retire *rt = NULL;
    struct cm_buf metas[OBJ_MAX_SHARDS];
    bool ok[OBJ_MAX_SHARDS] = {0}, mok[OBJ_MAX_SHARDS] = {0};
    bool all = true, pending = false;
    int fds[OBJ_MAX_SHARDS], ret, n, mn, nok = 0;
    bool jk[OBJ_MAX_SHARDS] = {0}, kin = false, defer = false;
    struct cm_buf km[OBJ_MAX_SHARDS];
    struct stor_place pl, mpl;
    pthread_rwlock_t *kl, *mkl;
    uint8_t id[16], none = 0, *inl[OBJ_MAX_SHARDS];
    uint64_t mark, msnum[OBJ_MAX_SHARDS]; /* the marker's spares */
    struct obj_idx_body mb;

    memset(metas, 0, sizeof(metas));
    memset(km, 0, sizeof(km));
    if (!obj_valid_key(key, key_len) || !obj_valid_key(dm->key, dm->key_len))
        return -STOR_EINVAL;
    ret = marker_ent(s, dm, &me);
    if (ret < 0)
        return ret;
    mn = me->k + me->m;
    obj_key_id(s, key, key_len, id);
    obj_place(s, bucket, key, key_len, &pl);
    obj_place(s, dm->bucket, me->key, me->key_len, &mpl);
    kl = obj_klock(s, id);
    mkl = obj_klock(s, me->id);
    klock_pair(kl, mkl);
    obj_vdel_settle(s, bucket, id);
    ret = obj_cur_lookup(s, bucket, key, key_len, &cur);
    if (ret == 0 && (!obj_ver_keepable(cur) || cur->version != version))
        ret = -EAGAIN;
    if (ret < 0)
        goto out;
    n = cur->k + cur->m;
    for (int j = 0; j < mn; j++) {
        mok[j] = obj_drive_online(s, obj_shard_drive(s, &mpl, j));
        nok += mok[j];
        inl[j] = &none; /* no bytes */
    }
    if (nok < obj_write_quorum(s, me->k, me->m)) {
        ret = -STOR_EQUORUM; /* the marker could not be written */
        goto out;
    }
    me->version = obj_next_version(s);
    /* also when the kept one stopped being current: odd, as a DELETE's
     * links' SINCE (obj_ver_retire_begin) */
    me->mtime_ns = obj_now_ns() | 1;
    ret = build_metas(me, STOR_META_OBJECT, inl, 0, metas, mok, NULL);
    if (ret < 0)
        goto out;
    if (obj_cur_pending_pair(s, bucket, id, key, key_len, dm->bucket, me->id,
                             me->key, me->key_len) < 0) {
        ret = -STOR_EDATA;
        goto out;
    }
    pending = true;
    for (int j = 0; j < n; j++)
        ok[j] = true;
    mark = sync_mark(s, &pl, n, ok);
    memset(&probe, 0, sizeof(probe));
    probe.key = cur->key; /* the same bytes as @key */
    probe.key_len = cur->key_len;
    probe.mtime_ns = me->mtime_ns;
    ret = obj_ver_retire_begin(s, bucket, &probe, version, true, &pl, &rt);
    if (ret < 0)
        goto out;
    for (int j = 0; j < n; j++)
        ok[j] = (rt->linked >> j) & 1;
    if (s->fsync && s->jnl) {
        /* where the drive journals, a record of the kept version (its
         * meta and its name) stands for the link: a replay after a power
         * cut puts it back (FORMAT.md "The meta journal") */
        obj_jnl_enter(s);
        kin = true;
        for (int j = 0; j < n; j++) {
            size_t d = obj_shard_drive(s, &pl, j);

            jk[j] = ok[j] && obj_jnl_use(s, d);
            if (jk[j] && read_meta(s, d, bucket, id, &km[j]) < 0)
                ok[j] = false; /* not kept there */
        }
        (void)jnl_append(s, bucket, id, rt->version, rt->ve->mtime_ns, true,
                         &pl, n, ok, jk, km, 0, NULL);
        /* every link journaled: its barrier and the unlinks of the base's
         * metas are the queue's, after the answer (vdel_finish) */
        defer = vdel_get(s) != NULL;
        for (int j = 0; j < n; j++)
            if (ok[j] && !jk[j])
                defer = false;
    }
    if (CM_NEVER(strcmp(rt->vbucket, dm->bucket) != 0)) {
        nok = 0;
    } else if (defer) {
        nok = 0;
        for (int j = 0; j < n; j++)
            nok += ok[j];
    } else {
        /* the links durable before any meta of the base goes */
        nok = sync_barrier_j(s, bucket, id, &pl, n, ok, mark, NULL, ok, NULL,
                             NULL, kin ? jk : NULL);
    }
    if (kin)
        obj_jnl_leave(s);
    if (nok < cur->k) {
        obj_ver_unlink_kept(s, bucket, rt->id, rt->version, rt->ve->mtime_ns,
                            &pl, n, rt->linked);
        ret = -STOR_EQUORUM;
        goto out;
    }
    for (int j = 0; j < n; j++)
        if (!obj_drive_online(s, obj_shard_drive(s, &pl, j)))
            all = false;
    /* as a delete: a drive that may miss it gets tombstones on the others
     * (a rename over HEX.m: the kept link keeps the old inode); deferred:
     * the base's metas stay until the queue's barrier */
    if (!defer && (!all || !remove_metas(s, bucket, cur, &pl, NULL)))
        write_tombstones(s, bucket, cur, &pl);
    /* the marker, created in place now that the version is not current
     * (deferred: its HEX.m is older than the marker, and a DELETE's link
     * of the same version beside it says so to a start: obj_load.c) */
    nok = write_tmp_metas(s, dm->bucket, me->id, &mpl, 0, metas, mn, mok, fds,
                          msnum, 0, NULL, NULL, WM_PLACE);
    for (int j = 0; j < mn; j++)
        if (fds[j] >= 0)
            close(fds[j]);
    if (nok < mn)
        obj_heal_queue(s, dm->bucket, me->key, me->key_len);
    mb = (struct obj_idx_body){
        .shard = (const uint8_t *const *)inl, .shard_len = 0, .k = me->k};
    ret = obj_cur_remove_pair(s, bucket, key, key_len, rt, nok ? me : NULL,
                              nok ? &mb : NULL, defer, &old);
    if (defer) {
        /* the key stays pending until the queue has unlinked its metas */
        vdel_queue(s, bucket, cur, &pl, ok, mark);
        cur = NULL;
        if (ret == 0 && nok == 0)
            obj_cur_settled(s, dm->bucket, me->id);
        pending = false;
    }
    if (ret == 0 && nok > 0)
        pending = false; /* cleared in that transaction */
    if (ret == 0 && nok == 0)
        ret = -STOR_EDATA; /* kept, but no copy of the marker was made */
    else if (ret < 0 && ret != -STOR_ENOBUCKET && ret != -STOR_ENOKEY)
        ret = -STOR_EDATA; /* the drives have it: the next start's index */
out:
    if (pending) {
        obj_cur_settled(s, bucket, id);
        obj_cur_settled(s, dm->bucket, me->id);
    }
    kunlock_pair(kl, mkl);
    for (int j = 0; j < OBJ_MAX_SHARDS; j++) {
        cm_buf_fini(&metas[j]);
        cm_buf_fini(&km[j]);
    }
    obj_ver_retire_free(rt);
    obj_ent_free(old);
    obj_ent_free(cur);
    obj_ent_free(me);
    return ret;
}

/* fuse/pack.c - the pack index (encode, decode, tree) and tar headers.
 * Layout and rules: fuse/PACK.md. */
#include "fuse/pack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <uthash.h>

#include "common/hash.h"

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void *fc_pack_encode(uint64_t pack_id, int64_t created, uint32_t first_shard,
                     const struct fc_pshard *shards, uint32_t nshards,
                     const struct fc_pmember *members, uint64_t nmembers,
                     const char *paths, uint64_t paths_len, size_t *len)
{
    size_t n = FC_PACK_HDR_SIZE + (size_t)nshards * FC_PACK_SHARD_SIZE +
               (size_t)nmembers * FC_PACK_MEMBER_SIZE + (size_t)paths_len;
    unsigned char *buf = calloc(1, n), *p;

    if (buf == NULL)
        return NULL;
    memcpy(buf, FC_PACK_MAGIC, 8);
    put32(buf + 8, FC_PACK_VERSION);
    put32(buf + 12, nshards);
    put64(buf + 16, nmembers);
    put64(buf + 24, paths_len);
    put64(buf + 32, pack_id);
    put64(buf + 40, (uint64_t)created);
    put32(buf + 48, first_shard);
    p = buf + FC_PACK_HDR_SIZE;
    for (uint32_t i = 0; i < nshards; i++, p += FC_PACK_SHARD_SIZE) {
        put64(p, shards[i].size);
        memcpy(p + 8, shards[i].etag,
               strnlen(shards[i].etag, FC_PACK_ETAG_MAX - 1));
    }
    for (uint64_t i = 0; i < nmembers; i++, p += FC_PACK_MEMBER_SIZE) {
        const struct fc_pmember *m = &members[i];
        put64(p, m->path_off);
        put64(p + 8, m->size);
        put64(p + 16, m->offset);
        put64(p + 24, (uint64_t)m->mtime_ns);
        put32(p + 32, m->shard);
        put32(p + 36, m->mode);
        put32(p + 40, m->crc);
        put32(p + 44, m->path_len);
    }
    memcpy(p, paths, paths_len);
    put32(buf + 52, cm_crc32c(0, buf + FC_PACK_HDR_SIZE, n - FC_PACK_HDR_SIZE));
    put32(buf + 56, cm_crc32c(0, buf, 56));
    *len = n;
    return buf;
}

/* Whether @p[0..n) is a clean relative path: no empty, "." or ".."
 * component, none over FC_PACK_NAME_MAX, no NUL. */
static bool path_ok(const char *p, size_t n)
{
    size_t start = 0;

    if (n == 0 || n > FC_PACK_PATH_MAX || memchr(p, '\0', n) != NULL)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        size_t c = i - start;
        if (c == 0 || c > FC_PACK_NAME_MAX || (c == 1 && p[start] == '.') ||
            (c == 2 && p[start] == '.' && p[start + 1] == '.'))
            return false;
        start = i + 1;
    }
    return true;
}

/* Build-time directory hash: path -> directory index. */
struct tdir {
    const char *k;
    uint32_t len;
    uint32_t idx;
    UT_hash_handle hh;
};

struct build {
    struct fc_pack *p;
    struct tdir *hash;
    uint32_t *dparent; /* parent of each directory */
    size_t cap;
};

/* Directory index of the path @k[0..len) (created with its parents when
 * new), or -1 on ENOMEM. */
static int64_t get_dir(struct build *b, const char *k, uint32_t len)
{
    struct fc_pack *p = b->p;
    struct tdir *t;
    int64_t parent;
    const char *slash;

    if (len == 0)
        return 0;
    HASH_FIND(hh, b->hash, k, len, t);
    if (t)
        return t->idx;
    slash = memrchr(k, '/', len);
    parent = get_dir(b, k, slash ? (uint32_t)(slash - k) : 0);
    if (parent < 0)
        return -1;
    if (p->ndirs + p->nmembers >= UINT32_MAX) /* node ids are 32-bit */
        return -1;
    if (p->ndirs == b->cap) {
        size_t nc = b->cap * 2;
        void *nd = realloc(p->dirs, nc * sizeof(*p->dirs));
        if (nd == NULL)
            return -1;
        p->dirs = nd;
        nd = realloc(b->dparent, nc * sizeof(*b->dparent));
        if (nd == NULL)
            return -1;
        b->dparent = nd;
        b->cap = nc;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -1;
    t->k = k;
    t->len = len;
    t->idx = (uint32_t)p->ndirs;
    p->dirs[p->ndirs] = (struct fc_pdir){
        .path_off = (uint64_t)(k - p->paths),
        .path_len = len,
        .member = UINT32_MAX,
    };
    b->dparent[p->ndirs] = (uint32_t)parent;
    p->ndirs++;
    HASH_ADD_KEYPTR(hh, b->hash, t->k, t->len, t);
    return t->idx;
}

const char *fc_pack_node_name(const struct fc_pack *p, uint64_t id, size_t *len)
{
    const char *s, *slash;
    size_t n;

    if (id < p->nmembers) {
        s = p->paths + p->members[id].path_off;
        n = p->members[id].path_len;
    } else {
        const struct fc_pdir *d = &p->dirs[id - p->nmembers];
        s = p->paths + d->path_off;
        n = d->path_len;
    }
    slash = memrchr(s, '/', n);
    if (slash) {
        n -= (size_t)(slash + 1 - s);
        s = slash + 1;
    }
    *len = n;
    return s;
}

static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c)
        return c;
    return an < bn ? -1 : an > bn;
}

static int kid_cmp(const void *x, const void *y, void *arg)
{
    const struct fc_pack *p = arg;
    size_t an, bn;
    const char *a = fc_pack_node_name(p, *(const uint32_t *)x, &an);
    const char *b = fc_pack_node_name(p, *(const uint32_t *)y, &bn);
    return name_cmp(a, an, b, bn);
}

uint64_t fc_pack_lookup(const struct fc_pack *p, uint64_t dir, const char *name)
{
    const struct fc_pdir *d = &p->dirs[dir];
    size_t nn = strlen(name), lo = 0, hi = d->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, kn;
        uint32_t id = p->kids[d->first + mid];
        const char *k = fc_pack_node_name(p, id, &kn);
        int c = name_cmp(name, nn, k, kn);
        if (c == 0)
            return id;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return UINT64_MAX;
}

bool fc_pack_is_dir(const struct fc_pack *p, uint64_t id, uint64_t *d)
{
    if (id < p->nmembers)
        return false;
    *d = id - p->nmembers;
    return true;
}

/* Releases the index bytes of @p as its owner says. */
static void free_bytes(struct fc_pack *p)
{
    if (p->own == FC_PACK_FREE)
        free(p->buf);
    else if (p->own == FC_PACK_MUNMAP && p->buf != NULL)
        munmap(p->buf, p->index_bytes ? p->index_bytes : 1);
    p->buf = NULL;
}

void fc_pack_free(struct fc_pack *p)
{
    if (p == NULL)
        return;
    free(p->shards);
    free_bytes(p);
    free(p->dirs);
    free(p->kids);
    free(p->checked);
    free(p);
}

/* Decodes and checks the tables into @p (no tree yet). */
static int decode_tables(struct fc_pack *p, const unsigned char *b, size_t len,
                         const char **why)
{
    const unsigned char *q;
    uint64_t want;

    if (len < FC_PACK_HDR_SIZE || memcmp(b, FC_PACK_MAGIC, 8) != 0) {
        *why = "not a pack index (bad magic)";
        return -EINVAL;
    }
    if (get32(b + 56) != cm_crc32c(0, b, 56)) {
        *why = "index header CRC mismatch";
        return -EINVAL;
    }
    if (get32(b + 60) != 0) {
        *why = "index header reserved field is not zero";
        return -EINVAL;
    }
    if (get32(b + 8) != FC_PACK_VERSION) {
        *why = "index version not supported by this ecfs";
        return -ENOTSUP;
    }
    p->nshards = get32(b + 12);
    p->nmembers = get64(b + 16);
    p->paths_len = get64(b + 24);
    p->pack_id = get64(b + 32);
    p->created = (int64_t)get64(b + 40);
    p->first_shard = get32(b + 48);
    if (((uintptr_t)b & 7) != 0) {
        *why = "index buffer not 8-byte aligned";
        return -EINVAL;
    }
    if (p->nmembers >= UINT32_MAX / 2 || p->paths_len > (1ull << 40)) {
        *why = "index too large";
        return -EINVAL;
    }
    want = FC_PACK_HDR_SIZE + (uint64_t)p->nshards * FC_PACK_SHARD_SIZE +
           p->nmembers * FC_PACK_MEMBER_SIZE + p->paths_len;
    if (want != len) {
        *why = "index size does not match its header";
        return -EINVAL;
    }
    if (get32(b + 52) !=
        cm_crc32c(0, b + FC_PACK_HDR_SIZE, len - FC_PACK_HDR_SIZE)) {
        *why = "index CRC mismatch";
        return -EINVAL;
    }
    p->shards = calloc(p->nshards ? p->nshards : 1, sizeof(*p->shards));
    p->checked = calloc(p->nmembers ? p->nmembers : 1, 1);
    if (!p->shards || !p->checked)
        return -ENOMEM;
    q = b + FC_PACK_HDR_SIZE;
    for (uint32_t i = 0; i < p->nshards; i++, q += FC_PACK_SHARD_SIZE) {
        p->shards[i].size = get64(q);
        p->shard_bytes += p->shards[i].size;
        memcpy(p->shards[i].etag, q + 8, FC_PACK_ETAG_MAX);
        p->shards[i].etag[FC_PACK_ETAG_MAX - 1] = '\0';
    }
    /* the member table and the path blob are used in place */
    p->members = (const struct fc_pmember *)(const void *)q;
    p->paths = (const char *)q + p->nmembers * FC_PACK_MEMBER_SIZE;
    for (uint64_t i = 0; i < p->nmembers; i++) {
        const struct fc_pmember *m = &p->members[i];
        if (m->path_off >= p->paths_len ||
            m->path_len >= p->paths_len - m->path_off ||
            p->paths[m->path_off + m->path_len] != '\0' ||
            !path_ok(p->paths + m->path_off, m->path_len)) {
            *why = "bad member path";
            return -EINVAL;
        }
        if (S_ISREG(m->mode)) {
            if (m->shard >= p->nshards ||
                m->offset > p->shards[m->shard].size ||
                m->size > p->shards[m->shard].size - m->offset) {
                *why = "member outside its shard";
                return -EINVAL;
            }
        } else if (!S_ISDIR(m->mode)) {
            *why = "member neither file nor directory";
            return -EINVAL;
        }
        if (i > 0) {
            const struct fc_pmember *o = &p->members[i - 1];
            if (name_cmp(p->paths + o->path_off, o->path_len,
                         p->paths + m->path_off, m->path_len) >= 0) {
                *why = "member paths not sorted or not unique";
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* Builds dirs and kids from the decoded members. */
static int build_tree(struct fc_pack *p, const char **why)
{
    struct build b = {.p = p, .cap = 64};
    uint32_t *mparent = NULL, *fill = NULL;
    struct tdir *t, *tmp;
    uint64_t total = 0;
    int ret = -ENOMEM;

    p->dirs = calloc(b.cap, sizeof(*p->dirs));
    b.dparent = calloc(b.cap, sizeof(*b.dparent));
    mparent = calloc(p->nmembers ? p->nmembers : 1, sizeof(*mparent));
    if (!p->dirs || !b.dparent || !mparent)
        goto out;
    p->dirs[0] = (struct fc_pdir){.member = UINT32_MAX};
    p->ndirs = 1;
    for (uint64_t i = 0; i < p->nmembers; i++) {
        const struct fc_pmember *m = &p->members[i];
        const char *s = p->paths + m->path_off;
        const char *slash = memrchr(s, '/', m->path_len);
        int64_t d = get_dir(&b, s, slash ? (uint32_t)(slash - s) : 0);
        if (d < 0)
            goto out;
        mparent[i] = (uint32_t)d;
        if (S_ISDIR(m->mode)) {
            d = get_dir(&b, s, m->path_len);
            if (d < 0)
                goto out;
            p->dirs[d].member = (uint32_t)i;
        }
    }
    for (uint64_t i = 0; i < p->nmembers; i++) {
        const struct fc_pmember *m = &p->members[i];
        if (!S_ISREG(m->mode))
            continue;
        HASH_FIND(hh, b.hash, p->paths + m->path_off, m->path_len, t);
        if (t) {
            *why = "a member is both a file and a directory";
            ret = -EINVAL;
            goto out;
        }
    }
    /* count, place, sort the children of every directory */
    for (uint64_t i = 0; i < p->nmembers; i++)
        if (S_ISREG(p->members[i].mode))
            p->dirs[mparent[i]].n++;
    for (uint64_t d = 1; d < p->ndirs; d++)
        p->dirs[b.dparent[d]].n++;
    for (uint64_t d = 0; d < p->ndirs; d++) {
        p->dirs[d].first = (uint32_t)total;
        total += p->dirs[d].n;
    }
    p->kids = calloc(total ? total : 1, sizeof(*p->kids));
    fill = calloc(p->ndirs, sizeof(*fill));
    if (!p->kids || !fill)
        goto out;
    for (uint64_t i = 0; i < p->nmembers; i++) {
        if (!S_ISREG(p->members[i].mode))
            continue;
        struct fc_pdir *d = &p->dirs[mparent[i]];
        p->kids[d->first + fill[mparent[i]]++] = (uint32_t)i;
    }
    for (uint64_t d = 1; d < p->ndirs; d++) {
        struct fc_pdir *pd = &p->dirs[b.dparent[d]];
        p->kids[pd->first + fill[b.dparent[d]]++] = (uint32_t)(p->nmembers + d);
    }
    for (uint64_t d = 0; d < p->ndirs; d++) {
        uint32_t *k = p->kids + p->dirs[d].first, n = p->dirs[d].n, i = 1;
        /* usually sorted already: files come in path order, and a folder
         * of files has no subfolder after them */
        while (i < n && kid_cmp(&k[i - 1], &k[i], p) < 0)
            i++;
        if (i < n)
            qsort_r(k, n, sizeof(uint32_t), kid_cmp, p);
    }
    ret = 0;
out:
    HASH_ITER(hh, b.hash, t, tmp)
    {
        HASH_DEL(b.hash, t);
        free(t);
    }
    free(b.dparent);
    free(mparent);
    free(fill);
    return ret;
}

int fc_pack_decode(void *buf, size_t len, enum fc_pack_own own,
                   struct fc_pack **out, const char **why)
{
    struct fc_pack *p = calloc(1, sizeof(*p));
    int ret;

    *why = "out of memory";
    if (p == NULL) {
        struct fc_pack tmp = {.buf = buf, .index_bytes = len, .own = own};
        free_bytes(&tmp);
        return -ENOMEM;
    }
    p->buf = buf;
    p->index_bytes = len;
    p->own = own;
    ret = decode_tables(p, buf, len, why);
    if (ret == 0)
        ret = build_tree(p, why);
    if (ret < 0) {
        fc_pack_free(p);
        return ret;
    }
    *out = p;
    return 0;
}

/* ---- tar headers ---- */

static void octal(char *field, size_t width, uint64_t v)
{
    /* width includes the terminating NUL */
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%0*llo", (int)width - 1,
                     (unsigned long long)v);

    if (n < 0 || (size_t)n >= width) /* callers keep v in range */
        n = (int)width - 1;
    memcpy(field, tmp + ((size_t)strlen(tmp) - (size_t)n), (size_t)n);
    field[n] = '\0';
}

static void tar_checksum(char *h)
{
    unsigned sum = 0;

    memset(h + 148, ' ', 8);
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static void ustar(char *h, const char *name, size_t name_len, uint32_t mode,
                  uint64_t size, int64_t mtime, char type)
{
    memset(h, 0, 512);
    memcpy(h, name, name_len > 100 ? 100 : name_len);
    octal(h + 100, 8, mode & 07777);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, (uint64_t)(mtime < 0 ? 0 : mtime));
    h[156] = type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    tar_checksum(h);
}

/* Appends one pax record "LEN key=value\n" at @out; returns its length. */
static size_t pax_record(char *out, const char *key, const char *val,
                         size_t vlen)
{
    size_t body = 1 + strlen(key) + 1 + vlen + 1; /* ' ' k '=' v '\n' */
    size_t n = body + 1, digits;
    char num[24];

    for (;;) {
        digits = (size_t)snprintf(num, sizeof(num), "%zu", n);
        if (body + digits == n)
            break;
        n = body + digits;
    }
    memcpy(out, num, digits);
    out[digits] = ' ';
    memcpy(out + digits + 1, key, strlen(key));
    out[digits + 1 + strlen(key)] = '=';
    memcpy(out + digits + 2 + strlen(key), val, vlen);
    out[n - 1] = '\n';
    return n;
}

#define TAR_SIZE_MAX 077777777777ull /* 11 octal digits */

size_t fc_tar_header(char *out, const char *path, size_t path_len,
                     uint32_t mode, uint64_t size, int64_t mtime_s, bool is_dir)
{
    char name[FC_PACK_PATH_MAX + 2];
    size_t nlen = path_len, pos = 0;
    char pax[FC_PACK_PATH_MAX + 128];
    size_t plen = 0;

    memcpy(name, path, path_len);
    if (is_dir)
        name[nlen++] = '/';
    if (nlen > 100)
        plen += pax_record(pax + plen, "path", name, nlen);
    if (!is_dir && size > TAR_SIZE_MAX) {
        char v[24];
        int n = snprintf(v, sizeof(v), "%llu", (unsigned long long)size);
        plen += pax_record(pax + plen, "size", v, (size_t)n);
    }
    if (plen > 0) {
        ustar(out, "././@PaxHeader", 14, 0644, plen, mtime_s, 'x');
        memset(out + 512, 0, (plen + 511) / 512 * 512);
        memcpy(out + 512, pax, plen);
        pos = 512 + (plen + 511) / 512 * 512;
    }
    ustar(out + pos, name, nlen, mode,
          is_dir                ? 0
          : size > TAR_SIZE_MAX ? 0
                                : size,
          mtime_s, is_dir ? '5' : '0');
    return pos + 512;
}

/* fuse/pack_tool.c - bin/ecfs pack SRC BUCKET[:PREFIX]: packs a local tree
 * or the objects under BUCKET[:PREFIX] into tar shards
 * PREFIX.ecfs-pack/shard-NNNNNN.tar (streamed up as multipart uploads) and
 * then writes the index PREFIX.ecfs-pack/index (fuse/PACK.md).
 *
 * DESIGN: the whole source is walked and checked first (every file opened
 * once, names checked, the index built and decoded as a dry run), so bad
 * input fails before any byte is uploaded. The index is the last object
 * written, in one PUT: until then no pack is visible, and a re-pack
 * (--replace) numbers its shards after the old pack's, so readers of the
 * old index never see its shards overwritten; once the new index is in
 * place the shards of the pack before the replaced one are deleted (the
 * replaced pack's stay for mounts still holding its index). A failure
 * deletes this run's shards, unless a --resume checkpoint keeps them. */
#include "fuse/pack_tool.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "fuse/creds.h"
#include "fuse/listxml.h"
#include "fuse/pack.h"
#include "fuse/pack_ops.h"
#include "fuse/s3.h"

#define PART_SIZE    (16u << 20)
#define MAX_PARTS    10000u /* S3's limit: 156 GiB shards at 16 MiB */
#define MAX_INFLIGHT 8u

struct packer;

/* One part uploading in a thread of its own (at most MAX_INFLIGHT). */
struct part_job {
    struct packer *k;
    char *buf; /* owned */
    size_t len;
    unsigned partno;
    int ret;
    pthread_t th;
};

struct entry {
    char *path; /* relative, no leading or trailing '/' */
    size_t len;
    uint32_t mode;
    uint64_t size;
    int64_t mtime_ns;
    char *etag;      /* bucket sources: the listed ETag */
    uint64_t member; /* index in the sorted member table */
};

struct packer {
    /* options */
    const char *src, *dest;
    char *endpoint, *region, *profile, *passwd_file, *ca_file;
    bool insecure; /* -o insecure_skip_tls_verify_testing_only */
    unsigned max_conns, retries;
    uint64_t shard_size;
    bool shuffled, replace, resume, quiet;
    int64_t keep_replaced; /* seconds a replaced pack's shards stay */
    uint64_t seed;
    /* source */
    bool src_local;
    char *src_bucket, *src_prefix;
    struct fc_s3 *src_s3;
    /* destination */
    char *bucket, *prefix;
    struct fc_s3 *s3;
    /* entries */
    struct entry *ents;
    size_t n, cap;
    uint64_t total_bytes, nfiles;
    /* shard writer */
    char *buf; /* PART_SIZE + header room */
    size_t buf_len;
    uint64_t shard_off;
    uint32_t shard_no; /* absolute number */
    char shard_key[1024];
    char *upload_id;
    char *etags; /* MAX_PARTS x FC_ETAG_MAX, by part number - 1 */
    unsigned nparts;
    struct part_job *jobs[MAX_INFLIGHT]; /* in flight, oldest first */
    unsigned njobs, inflight_max;
    struct fc_pshard *shards;
    uint32_t nshards, first_shard;
    /* --resume: PREFIX.ecfs-pack/resume after every completed shard */
    unsigned char *done; /* per member: written into a completed shard */
    bool checkpointed;   /* a checkpoint of this pack is in the bucket */
    int64_t opt_hash;    /* of the options that decide the shard layout */
    /* progress */
    uint64_t done_files, done_bytes;
    double t0, last_draw;
    bool tty;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(
        f, "usage: ecfs pack SRC BUCKET[:PREFIX] -o endpoint=URL[,options]\n"
           "                 [--shard-size 256M] [--order sorted|shuffled]\n"
           "                 [--seed N] [--replace [--keep-replaced 1h]]\n"
           "\n"
           "Packs SRC (a local directory, or BUCKET[:PREFIX] on the endpoint,\n"
           "streamed) into plain POSIX tar shards PREFIX/.ecfs-pack/shard-"
           "NNNNNN.tar\n"
           "and an index PREFIX/.ecfs-pack/index (fuse/PACK.md). A mount of\n"
           "BUCKET:PREFIX then shows the original tree, read with range GETs.\n"
           "The pack is visible only once its index is written.\n"
           "\n"
           "    -o endpoint=URL     S3 endpoint (or AWS_ENDPOINT_URL)\n"
           "    -o region=R         SigV4 region (us-east-1)\n"
           "    -o profile=NAME     ~/.aws/credentials profile\n"
           "    -o passwd_file=F    s3fs-style credentials file\n"
           "    -o ca_file=PATH     PEM CA certificates for an https:// "
           "endpoint\n"
           "    -o insecure_skip_tls_verify_testing_only  no TLS "
           "verification (tests)\n"
           "    -o max_conns=N      parallel requests (4)\n"
           "    -o retries=N        retries of a failed request (8)\n"
           "    --shard-size SIZE   start a new shard past this size (256M;\n"
           "                        a larger file makes a larger shard)\n"
           "    --order sorted|shuffled  member order in the shards (sorted)\n"
           "    --seed N            seed of --order shuffled (0)\n"
           "    --replace           replace a pack already at the "
           "destination\n"
           "    --keep-replaced T   keep a replaced pack's shards for T (1h;\n"
           "                        0, 90s, 30m, 2d): mounts that still hold\n"
           "                        its index read them; a later --replace\n"
           "                        deletes them\n"
           "    -q                  no progress line\n"
           "Credentials as for the mount: passwd_file, profile, "
           "AWS_ACCESS_KEY_ID/\n"
           "AWS_SECRET_ACCESS_KEY, the [default] profile.\n"
           "Exit status 0 on success, 1 on any error (no pack is then "
           "visible,\n"
           "an earlier one stays as it was).\n");
}

/* "N" or "N" + s/m/h/d: seconds. */
static int parse_duration(const char *s, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -EINVAL;
    switch (*end) {
    case 'd':
        v *= 24;
        /* fall through */
    case 'h':
        v *= 60;
        /* fall through */
    case 'm':
        v *= 60;
        /* fall through */
    case 's':
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0' || v > (1ll << 40))
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -EINVAL;
    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i' || *end == 'B')
        end++;
    if (*end != '\0' || v == 0)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Parses one -o list. */
static int parse_o(struct packer *k, char *list)
{
    char *save = NULL;

    for (char *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char **dst = NULL;
        const char *v = strchr(tok, '=');
        if (strcmp(tok, "insecure_skip_tls_verify_testing_only") == 0) {
            k->insecure = true;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "ecfs pack: unknown option -o %s\n", tok);
            return -EINVAL;
        }
        v++;
        if (strncmp(tok, "endpoint=", 9) == 0 || strncmp(tok, "url=", 4) == 0)
            dst = &k->endpoint;
        else if (strncmp(tok, "region=", 7) == 0)
            dst = &k->region;
        else if (strncmp(tok, "profile=", 8) == 0)
            dst = &k->profile;
        else if (strncmp(tok, "passwd_file=", 12) == 0)
            dst = &k->passwd_file;
        else if (strncmp(tok, "ca_file=", 8) == 0)
            dst = &k->ca_file;
        else if (strncmp(tok, "max_conns=", 10) == 0)
            k->max_conns = (unsigned)strtoul(v, NULL, 10);
        else if (strncmp(tok, "retries=", 8) == 0)
            k->retries = (unsigned)strtoul(v, NULL, 10);
        else {
            fprintf(stderr, "ecfs pack: unknown option -o %s\n", tok);
            return -EINVAL;
        }
        if (dst) {
            free(*dst);
            *dst = strdup(v);
            if (*dst == NULL)
                return -ENOMEM;
        }
    }
    return 0;
}

/* Splits BUCKET[:PREFIX] into a bucket and "" or "prefix/". */
static int split_dest(const char *s, char **bucket, char **prefix)
{
    const char *colon = strchr(s, ':');
    size_t bl = colon ? (size_t)(colon - s) : strlen(s);
    const char *p = colon ? colon + 1 : "";
    size_t n;

    if (bl == 0)
        return -EINVAL;
    while (*p == '/')
        p++;
    n = strlen(p);
    while (n > 0 && p[n - 1] == '/')
        n--;
    *bucket = strndup(s, bl);
    if (n > 0) {
        if (asprintf(prefix, "%.*s/", (int)n, p) < 0)
            *prefix = NULL;
    } else {
        *prefix = strdup("");
    }
    return (*bucket && *prefix) ? 0 : -ENOMEM;
}

static int add_entry(struct packer *k, const char *path, size_t len,
                     uint32_t mode, uint64_t size, int64_t mtime_ns,
                     const char *etag)
{
    struct entry *e;

    if (len > FC_PACK_PATH_MAX) {
        fprintf(stderr,
                "ecfs pack: %.80s...: path of %zu bytes is over the 4 KiB "
                "limit\n",
                path, len);
        return -ENAMETOOLONG;
    }
    if (k->n == k->cap) {
        size_t nc = k->cap ? k->cap * 2 : 1024;
        void *ne = realloc(k->ents, nc * sizeof(*k->ents));
        if (ne == NULL)
            return -ENOMEM;
        k->ents = ne;
        k->cap = nc;
    }
    e = &k->ents[k->n];
    memset(e, 0, sizeof(*e));
    e->path = strndup(path, len);
    e->etag = etag ? strdup(etag) : NULL;
    if (e->path == NULL || (etag && e->etag == NULL))
        return -ENOMEM;
    e->len = len;
    e->mode = mode;
    e->size = size;
    e->mtime_ns = mtime_ns;
    k->n++;
    if (S_ISREG(mode)) {
        k->nfiles++;
        k->total_bytes += size;
    }
    return 0;
}

/* Opens @rel (relative to the source directory) component by component,
 * so paths longer than PATH_MAX work too. An fd or -errno. */
static int open_rel(const char *root, const char *rel, int flags)
{
    int dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
    char *dup, *save = NULL, *c, *next;

    if (dfd < 0)
        return -errno;
    if (rel[0] == '\0')
        return dfd;
    dup = strdup(rel);
    if (dup == NULL) {
        close(dfd);
        return -ENOMEM;
    }
    c = strtok_r(dup, "/", &save);
    while (c) {
        next = strtok_r(NULL, "/", &save);
        fd = openat(dfd, c,
                    (next ? O_RDONLY | O_DIRECTORY : flags) | O_NOFOLLOW |
                        O_CLOEXEC);
        close(dfd);
        if (fd < 0) {
            free(dup);
            return -errno;
        }
        dfd = fd;
        c = next;
    }
    free(dup);
    return dfd;
}

/* readdir with errno cleared first, so a NULL that ends the directory can
 * be told from one that is an error. */
static struct dirent *readdir_clear(DIR *d)
{
    errno = 0;
    return readdir(d);
}

/* Walks the source directory @dfd (relative path @rel, "" at the top);
 * takes @dfd. */
static int walk_local(struct packer *k, int dfd, const char *rel)
{
    DIR *d = fdopendir(dfd);
    struct dirent *de;
    int ret = 0;

    if (d == NULL) {
        fprintf(stderr, "ecfs pack: cannot read directory %s/%s: %s\n", k->src,
                rel, strerror(errno));
        close(dfd);
        return -EIO;
    }
    while (ret == 0 && (de = readdir_clear(d)) != NULL) {
        char *r = NULL;
        struct stat st;
        int fd;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (asprintf(&r, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) < 0) {
            ret = -ENOMEM;
            break;
        }
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            fprintf(stderr, "ecfs pack: cannot stat %s/%s: %s\n", k->src, r,
                    strerror(errno));
            ret = -EIO;
        } else if (S_ISDIR(st.st_mode)) {
            ret = add_entry(k, r, strlen(r), (uint32_t)st.st_mode, 0,
                            (int64_t)st.st_mtim.tv_sec * 1000000000ll +
                                st.st_mtim.tv_nsec,
                            NULL);
            if (ret == 0) {
                fd = openat(dirfd(d), de->d_name,
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0) {
                    fprintf(stderr,
                            "ecfs pack: cannot read directory "
                            "%s/%s: %s\n",
                            k->src, r, strerror(errno));
                    ret = -EACCES;
                } else {
                    ret = walk_local(k, fd, r);
                }
            }
        } else if (S_ISREG(st.st_mode)) {
            fd =
                openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                fprintf(stderr, "ecfs pack: cannot read %s/%s: %s\n", k->src, r,
                        strerror(errno));
                ret = -EACCES;
            } else {
                close(fd);
                ret = add_entry(k, r, strlen(r), (uint32_t)st.st_mode,
                                (uint64_t)st.st_size,
                                (int64_t)st.st_mtim.tv_sec * 1000000000ll +
                                    st.st_mtim.tv_nsec,
                                NULL);
            }
        } else {
            fprintf(stderr,
                    "ecfs pack: warning: %s/%s is not a regular file or "
                    "directory: skipped\n",
                    k->src, r);
        }
        free(r);
    }
    if (ret == 0 && errno != 0) {
        fprintf(stderr, "ecfs pack: cannot read directory %s/%s: %s\n", k->src,
                rel, strerror(errno));
        ret = -EIO;
    }
    closedir(d);
    return ret;
}

/* Lists every object under the source prefix (no delimiter). */
static int walk_bucket(struct packer *k)
{
    char *token = NULL;
    size_t plen = strlen(k->src_prefix);
    int ret;

    do {
        struct fc_listpage pg;
        fc_listpage_init(&pg);
        ret = fc_s3_list_flat(k->src_s3, k->src_prefix, token, 1000, &pg);
        free(token);
        token = NULL;
        if (ret < 0) {
            fprintf(stderr, "ecfs pack: cannot list s3://%s/%s: %s\n",
                    k->src_bucket, k->src_prefix, strerror(-ret));
            fc_listpage_fini(&pg);
            return ret;
        }
        for (size_t i = 0; ret == 0 && i < pg.nobjs; i++) {
            const struct fc_listobj *o = &pg.objs[i];
            const char *rel = o->key + plen;
            size_t len = strlen(rel);
            if (strncmp(o->key, k->src_prefix, plen) != 0 || len == 0)
                continue;
            if (strncmp(rel, FC_PACK_DIR, strlen(FC_PACK_DIR)) == 0 ||
                strcmp(rel, ".ecfs-stats") == 0)
                continue;
            if (rel[len - 1] == '/') /* directory marker */
                ret = add_entry(k, rel, len - 1, S_IFDIR | 0755, 0,
                                (int64_t)o->mtime * 1000000000ll, NULL);
            else
                ret = add_entry(k, rel, len, S_IFREG | 0644, o->size,
                                (int64_t)o->mtime * 1000000000ll, o->etag);
        }
        if (ret == 0 && pg.truncated && pg.next_token) {
            token = strdup(pg.next_token);
            if (token == NULL)
                ret = -ENOMEM;
        }
        fc_listpage_fini(&pg);
    } while (ret == 0 && token);
    return ret;
}

static int ent_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = memcmp(x->path, y->path, x->len < y->len ? x->len : y->len);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* ---- the shard writer ---- */

static void *part_run(void *arg)
{
    struct part_job *j = arg;
    struct packer *k = j->k;
    struct fc_s3_body b = {.data = j->buf, .fd = -1, .len = j->len};

    j->ret = fc_s3_mpu_part(k->s3, k->shard_key, k->upload_id, j->partno, &b,
                            k->etags + (size_t)(j->partno - 1) * FC_ETAG_MAX);
    return NULL;
}

/* Waits for the oldest part in flight; its result. */
static int join_oldest(struct packer *k)
{
    struct part_job *j = k->jobs[0];
    int ret;

    pthread_join(j->th, NULL);
    ret = j->ret;
    free(j->buf);
    free(j);
    memmove(k->jobs, k->jobs + 1, (k->njobs - 1) * sizeof(k->jobs[0]));
    k->njobs--;
    return ret;
}

/* Waits for every part in flight; the first error. */
static int join_all(struct packer *k)
{
    int ret = 0;

    while (k->njobs > 0) {
        int r = join_oldest(k);
        if (ret == 0)
            ret = r;
    }
    return ret;
}

/* Sends the part buffer as the next part, in a thread of its own (the
 * caller goes on filling a fresh buffer). */
static int flush_part(struct packer *k)
{
    struct part_job *j;
    char *nb;
    int ret;

    if (k->upload_id == NULL) {
        ret = fc_s3_mpu_create(k->s3, k->shard_key, &k->upload_id);
        if (ret < 0)
            return ret;
    }
    if (k->etags == NULL) {
        k->etags = calloc(MAX_PARTS, FC_ETAG_MAX);
        if (k->etags == NULL)
            return -ENOMEM;
    }
    if (k->nparts == MAX_PARTS) {
        fprintf(stderr,
                "ecfs pack: a shard of more than %u parts: use a "
                "smaller --shard-size\n",
                MAX_PARTS);
        return -EFBIG;
    }
    if (k->njobs == k->inflight_max) {
        ret = join_oldest(k);
        if (ret < 0)
            return ret;
    }
    j = calloc(1, sizeof(*j));
    nb = malloc(PART_SIZE);
    if (j == NULL || nb == NULL) {
        free(j);
        free(nb);
        return -ENOMEM;
    }
    j->k = k;
    j->buf = k->buf;
    j->len = k->buf_len;
    j->partno = ++k->nparts;
    k->buf = nb;
    k->buf_len = 0;
    if (pthread_create(&j->th, NULL, part_run, j) != 0) {
        part_run(j);
        ret = j->ret;
        free(j->buf);
        free(j);
        return ret;
    }
    k->jobs[k->njobs++] = j;
    return 0;
}

/* Appends @n bytes (NULL: zeros) to the current shard. */
static int shard_write(struct packer *k, const void *p, size_t n)
{
    while (n > 0) {
        size_t room = PART_SIZE - k->buf_len, c = n < room ? n : room;
        if (p) {
            memcpy(k->buf + k->buf_len, p, c);
            p = (const char *)p + c;
        } else {
            memset(k->buf + k->buf_len, 0, c);
        }
        k->buf_len += c;
        k->shard_off += c;
        n -= c;
        if (k->buf_len == PART_SIZE) {
            int ret = flush_part(k);
            if (ret < 0)
                return ret;
        }
    }
    return 0;
}

static void shard_key_of(const struct packer *k, uint32_t no, char *out,
                         size_t cap)
{
    snprintf(out, cap, "%s" FC_PACK_DIR "shard-%06u.tar", k->prefix, no);
}

static int shard_open(struct packer *k)
{
    void *ns = realloc(k->shards, (k->nshards + 1) * sizeof(*k->shards));

    if (ns == NULL)
        return -ENOMEM;
    k->shards = ns;
    memset(&k->shards[k->nshards], 0, sizeof(*k->shards));
    k->shard_no = k->first_shard + k->nshards;
    k->nshards++;
    shard_key_of(k, k->shard_no, k->shard_key, sizeof(k->shard_key));
    k->shard_off = 0;
    k->buf_len = 0;
    k->nparts = 0;
    return 0;
}

/* Ends the tar archive and completes the shard object. */
static int shard_close(struct packer *k)
{
    struct fc_pshard *sh = &k->shards[k->nshards - 1];
    char etag[FC_ETAG_MAX] = "";
    int ret = shard_write(k, NULL, 1024);

    if (ret < 0)
        return ret;
    if (k->upload_id == NULL) {
        struct fc_s3_body b = {.data = k->buf, .fd = -1, .len = k->buf_len};
        ret = fc_s3_put(k->s3, k->shard_key, &b, etag);
    } else {
        if (k->buf_len > 0)
            ret = flush_part(k);
        {
            int r = join_all(k);
            if (ret == 0)
                ret = r;
        }
        if (ret == 0)
            ret = fc_s3_mpu_complete(k->s3, k->shard_key, k->upload_id,
                                     k->etags, k->nparts, etag);
        if (ret == 0) {
            free(k->upload_id);
            k->upload_id = NULL;
        }
    }
    if (ret < 0)
        return ret;
    if (etag[0] == '\0') { /* RGW's empty Complete ETag: ask */
        struct fc_s3_obj o;
        if (fc_s3_head(k->s3, k->shard_key, &o) == 0)
            memcpy(etag, o.etag, sizeof(etag));
    }
    sh->size = k->shard_off;
    if (strlen(etag) < FC_PACK_ETAG_MAX)
        memcpy(sh->etag, etag, strlen(etag) + 1);
    k->buf_len = 0;
    return 0;
}

static void progress(struct packer *k, bool final)
{
    double t = now_s(), el = t - k->t0;
    double rate, eta;

    if (!k->tty || k->quiet || (!final && t - k->last_draw < 0.25))
        return;
    k->last_draw = t;
    rate = el > 0 ? (double)k->done_bytes / el : 0;
    eta = rate > 0 ? (double)(k->total_bytes - k->done_bytes) / rate : 0;
    fprintf(stderr,
            "\r%llu/%llu files  %.1f/%.1f MiB  %.1f MiB/s  ETA %.0f s   ",
            (unsigned long long)k->done_files, (unsigned long long)k->nfiles,
            (double)k->done_bytes / 1048576.0,
            (double)k->total_bytes / 1048576.0, rate / 1048576.0, eta);
    if (final)
        fputc('\n', stderr);
}

/* Copies the bytes of entry @e into the shard, computing its CRC. */
static int copy_member(struct packer *k, const struct entry *e, uint32_t *crc)
{
    uint64_t left = e->size, off = 0;
    int fd = -1, ret = 0;
    char *abs = NULL;

    *crc = 0;
    if (k->src_local) {
        if (asprintf(&abs, "%s/%s", k->src, e->path) < 0)
            return -ENOMEM;
        fd = open_rel(k->src, e->path, O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "ecfs pack: cannot read %s: %s\n", abs,
                    strerror(-fd));
            free(abs);
            return -EACCES;
        }
    }
    while (left > 0 && ret == 0) {
        size_t room = PART_SIZE - k->buf_len;
        size_t want = left < room ? (size_t)left : room;
        ssize_t got;
        if (k->src_local) {
            got = read(fd, k->buf + k->buf_len, want);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                got = -errno;
        } else {
            char key[FC_PACK_PATH_MAX + 1100];
            snprintf(key, sizeof(key), "%s%s", k->src_prefix, e->path);
            got = fc_s3_get(k->src_s3, key, off, want, want,
                            e->etag ? e->etag : "", k->buf + k->buf_len, NULL);
        }
        if (got <= 0) {
            fprintf(stderr, "ecfs pack: %s: %s\n", e->path,
                    got == 0 ? "file shrank while packing"
                             : strerror((int)-got));
            ret = got == 0 ? -EIO : (int)got;
            break;
        }
        *crc = cm_crc32c(*crc, k->buf + k->buf_len, (size_t)got);
        k->buf_len += (size_t)got;
        k->shard_off += (uint64_t)got;
        left -= (uint64_t)got;
        off += (uint64_t)got;
        k->done_bytes += (uint64_t)got;
        if (k->buf_len == PART_SIZE)
            ret = flush_part(k);
        progress(k, false);
    }
    if (ret == 0 && k->src_local) {
        char c;
        if (read(fd, &c, 1) > 0) {
            fprintf(stderr, "ecfs pack: %s: file grew while packing\n",
                    e->path);
            ret = -EIO;
        }
    }
    if (fd >= 0)
        close(fd);
    free(abs);
    return ret;
}

/* The sorted member table of the entries (shards/offsets/CRCs filled in
 * by the caller as the shards are written). */
static int make_members(struct packer *k, struct fc_pmember **mem, char **paths,
                        uint64_t *plen)
{
    uint64_t total = 0, off = 0;

    for (size_t i = 0; i < k->n; i++)
        total += k->ents[i].len + 1;
    *mem = calloc(k->n ? k->n : 1, sizeof(**mem));
    *paths = malloc(total ? total : 1);
    if (*mem == NULL || *paths == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < k->n; i++) {
        struct entry *e = &k->ents[i];
        struct fc_pmember *m = &(*mem)[i];
        memcpy(*paths + off, e->path, e->len + 1);
        m->path_off = off;
        m->path_len = (uint32_t)e->len;
        m->size = e->size;
        m->mtime_ns = e->mtime_ns;
        m->mode = e->mode;
        e->member = i;
        off += e->len + 1;
    }
    *plen = total;
    return 0;
}

/* Checks the index the entries make (names, duplicates, a file that is also
 * a directory) before any upload. */
static int dry_run(struct packer *k, const struct fc_pmember *mem,
                   const char *paths, uint64_t plen)
{
    struct fc_pshard sh = {.size = UINT64_MAX / 2};
    struct fc_pmember *tmp = malloc((k->n ? k->n : 1) * sizeof(*tmp));
    struct fc_pack *p = NULL;
    const char *why = "";
    size_t len;
    void *idx;
    int ret;

    if (tmp == NULL)
        return -ENOMEM;
    memcpy(tmp, mem, k->n * sizeof(*tmp));
    for (size_t i = 0; i < k->n; i++)
        tmp[i].size = 0;
    idx = fc_pack_encode(0, 0, 0, &sh, 1, tmp, k->n, paths, plen, &len);
    free(tmp);
    if (idx == NULL)
        return -ENOMEM;
    ret = fc_pack_decode(idx, len, FC_PACK_FREE, &p, &why);
    if (ret < 0) {
        fprintf(stderr, "ecfs pack: the source cannot be packed: %s\n", why);
        return -EINVAL;
    }
    fc_pack_free(p);
    return 0;
}

/* Fetches the pack index at the destination: 0 and *@old, -ENOENT when
 * there is none, or another -errno. */
static int load_old(struct packer *k, struct fc_pack **old)
{
    char key[1200];
    const char *why = "";
    int ret;

    snprintf(key, sizeof(key), "%s" FC_PACK_INDEX, k->prefix);
    ret = fc_pack_fetch(k->s3, key, NULL, "", NULL, old, &why);
    if (ret < 0 && ret != -EINVAL)
        return ret;
    if (ret < 0) {
        fprintf(stderr, "ecfs pack: s3://%s/%s is not a valid index (%s)\n",
                k->bucket, key, why);
        return -EINVAL;
    }
    return 0;
}

static void delete_shards(struct packer *k, uint32_t first, uint32_t n)
{
    char key[1200];

    for (uint32_t i = 0; i < n; i++) {
        shard_key_of(k, first + i, key, sizeof(key));
        if (fc_s3_delete(k->s3, key) < 0)
            fprintf(stderr, "ecfs pack: warning: cannot delete %s\n", key);
    }
}

/* A replaced pack's marker: PREFIX.ecfs-pack/retired-FIRST-COUNT-UNIXTIME
 * (empty). Parses @name (after the prefix); false when it is not one. */
static bool parse_retired(const char *name, uint32_t *first, uint32_t *n,
                          int64_t *when)
{
    unsigned long f, c;
    long long t;
    int used = 0;

    if (sscanf(name, FC_PACK_RETIRED "%lu-%lu-%lld%n", &f, &c, &t, &used) !=
            3 ||
        name[used] != '\0' || f > UINT32_MAX || c > UINT32_MAX - f)
        return false;
    *first = (uint32_t)f;
    *n = (uint32_t)c;
    *when = t;
    return true;
}

/* The array @arr of *@cap elements of @size bytes, with room for one
 * more after @n (reallocated, *@cap grown, when full); NULL when out of
 * memory (@arr is then unchanged). */
static void *room(void *arr, size_t *cap, size_t n, size_t size)
{
    void *na;

    if (n < *cap)
        return arr;
    na = realloc(arr, (*cap * 2 + 16) * size);
    if (na != NULL)
        *cap = *cap * 2 + 16;
    return na;
}

/* After a --replace: marks the replaced pack's shards retired (now), then
 * deletes the shards of every pack retired at least --keep-replaced ago,
 * and any shard numbered below the new pack's that no marker keeps (packs
 * retired before markers existed). Mounts holding a replaced index (open
 * files, ro mounts) keep reading it for that long. */
static void retire_shards(struct packer *k, const struct fc_pack *old)
{
    struct ret_mark {
        uint32_t first, n;
        int64_t when;
        char *key;
    } *marks = NULL;
    size_t nmarks = 0, cap = 0;
    char prefix[1200], key[1200], *token = NULL;
    uint32_t *nos = NULL;
    size_t nnos = 0, capnos = 0, plen;
    int64_t now = (int64_t)time(NULL);
    int ret;

    snprintf(key, sizeof(key), "%s" FC_PACK_DIR FC_PACK_RETIRED "%u-%u-%lld",
             k->prefix, old->first_shard, old->nshards, (long long)now);
    {
        struct fc_s3_body b = {.data = "", .fd = -1, .len = 0};
        char etag[FC_ETAG_MAX];
        if (fc_s3_put(k->s3, key, &b, etag) < 0)
            fprintf(stderr,
                    "ecfs pack: warning: cannot write %s: the "
                    "replaced shards go at the next --replace\n",
                    key);
    }
    snprintf(prefix, sizeof(prefix), "%s" FC_PACK_DIR, k->prefix);
    plen = strlen(prefix);
    do {
        struct fc_listpage pg;
        fc_listpage_init(&pg);
        ret = fc_s3_list_flat(k->s3, prefix, token, 1000, &pg);
        free(token);
        token = NULL;
        for (size_t i = 0; ret == 0 && i < pg.nobjs; i++) {
            const char *name = pg.objs[i].key + plen;
            struct ret_mark m;
            char *end;
            unsigned long no;
            if (strncmp(pg.objs[i].key, prefix, plen) != 0)
                continue;
            if (parse_retired(name, &m.first, &m.n, &m.when)) {
                void *na = room(marks, &cap, nmarks, sizeof(*marks));
                m.key = na ? strdup(pg.objs[i].key) : NULL;
                if (na)
                    marks = na;
                if (m.key == NULL) {
                    ret = -ENOMEM;
                    break;
                }
                marks[nmarks++] = m;
                continue;
            }
            if (strncmp(name, "shard-", 6) != 0)
                continue;
            no = strtoul(name + 6, &end, 10);
            if (end == name + 6 || strcmp(end, ".tar") != 0 ||
                no >= k->first_shard)
                continue; /* the new pack's, or not a shard */
            void *nn = room(nos, &capnos, nnos, sizeof(*nos));
            if (nn == NULL) {
                ret = -ENOMEM;
                break;
            }
            nos = nn;
            nos[nnos++] = (uint32_t)no;
        }
        if (ret == 0 && pg.truncated && pg.next_token)
            token = strdup(pg.next_token);
        fc_listpage_fini(&pg);
    } while (token);
    if (ret < 0) {
        fprintf(stderr,
                "ecfs pack: warning: cannot list %s to delete "
                "replaced shards: %s\n",
                prefix, strerror(-ret));
        goto out;
    }
    for (size_t i = 0; i < nnos; i++) {
        bool keep = false;
        for (size_t j = 0; j < nmarks && !keep; j++)
            keep = nos[i] >= marks[j].first &&
                   nos[i] - marks[j].first < marks[j].n &&
                   now - marks[j].when < k->keep_replaced;
        if (keep)
            continue;
        shard_key_of(k, nos[i], key, sizeof(key));
        if (fc_s3_delete(k->s3, key) < 0)
            fprintf(stderr, "ecfs pack: warning: cannot delete %s\n", key);
    }
    for (size_t j = 0; j < nmarks; j++)
        if (now - marks[j].when >= k->keep_replaced &&
            fc_s3_delete(k->s3, marks[j].key) < 0)
            fprintf(stderr, "ecfs pack: warning: cannot delete %s\n",
                    marks[j].key);
out:
    for (size_t j = 0; j < nmarks; j++)
        free(marks[j].key);
    free(marks);
    free(nos);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define FC_PACK_RESUME ".ecfs-pack/resume"

/* Writes the checkpoint: an index (same format) of the members in completed
 * shards, with pack_id = entries done and created = the options' hash. */
static int checkpoint(struct packer *k, const struct fc_pmember *mem,
                      const char *paths, uint64_t plen, size_t entries)
{
    struct fc_pmember *sub = malloc((k->n ? k->n : 1) * sizeof(*sub));
    size_t ns = 0, len;
    char key[1200], etag[FC_ETAG_MAX];
    void *idx;
    int ret;

    if (sub == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < k->n; i++)
        if (k->done[i])
            sub[ns++] = mem[i];
    idx = fc_pack_encode(entries, k->opt_hash, k->first_shard, k->shards,
                         k->nshards - 1, sub, ns, paths, plen, &len);
    free(sub);
    if (idx == NULL)
        return -ENOMEM;
    snprintf(key, sizeof(key), "%s" FC_PACK_RESUME, k->prefix);
    {
        struct fc_s3_body b = {.data = idx, .fd = -1, .len = len};
        ret = fc_s3_put(k->s3, key, &b, etag);
    }
    free(idx);
    if (ret == 0)
        k->checkpointed = true;
    return ret;
}

/* --resume: takes over the members of the checkpoint's completed shards.
 * Returns the number of entries of @order already written (0 when there is
 * no checkpoint), or -errno when the checkpoint does not match the source
 * and options. */
static int64_t resume_load(struct packer *k, struct fc_pmember *mem,
                           const size_t *order, size_t norder)
{
    char key[1200];
    struct fc_pack *c = NULL;
    const char *why = "";
    size_t i = 0;
    uint64_t need;
    int ret;

    snprintf(key, sizeof(key), "%s" FC_PACK_RESUME, k->prefix);
    ret = fc_pack_fetch(k->s3, key, NULL, "", NULL, &c, &why);
    if (ret == -ENOENT) {
        fprintf(stderr,
                "ecfs pack: nothing to resume at s3://%s/%s: "
                "packing from the start\n",
                k->bucket, k->prefix);
        return 0;
    }
    if (ret < 0) {
        fprintf(stderr,
                "ecfs pack: cannot read the checkpoint s3://%s/%s: "
                "%s\n",
                k->bucket, key, why[0] ? why : strerror(-ret));
        return ret;
    }
    need = c->pack_id;
    if (c->created != k->opt_hash || need != c->nmembers || need > norder) {
        fprintf(stderr,
                "ecfs pack: the checkpoint at s3://%s/%s was made "
                "with other options or another source: run without "
                "--resume\n",
                k->bucket, key);
        fc_pack_free(c);
        return -EINVAL;
    }
    for (uint64_t j = 0; j < c->nmembers; j++) {
        const struct fc_pmember *cm = &c->members[j];
        const char *cp = c->paths + cm->path_off;
        while (i < k->n && (k->ents[i].len != cm->path_len ||
                            memcmp(k->ents[i].path, cp, cm->path_len) != 0))
            i++;
        if (i == k->n || mem[i].size != cm->size || mem[i].mode != cm->mode ||
            mem[i].mtime_ns != cm->mtime_ns) {
            fprintf(stderr,
                    "ecfs pack: %s changed since the interrupted "
                    "pack: run without --resume\n",
                    cp);
            fc_pack_free(c);
            return -EINVAL;
        }
        mem[i].shard = cm->shard;
        mem[i].offset = cm->offset;
        mem[i].crc = cm->crc;
        k->done[i] = 1;
    }
    for (size_t oi = 0; oi < need; oi++) {
        if (!k->done[k->ents[order[oi]].member]) {
            fprintf(stderr, "ecfs pack: the checkpoint does not match the "
                            "member order: run without --resume\n");
            fc_pack_free(c);
            return -EINVAL;
        }
        if (S_ISREG(k->ents[order[oi]].mode)) {
            k->done_files++;
            k->done_bytes += k->ents[order[oi]].size;
        }
    }
    k->shards = calloc(c->nshards + 1, sizeof(*k->shards));
    if (k->shards == NULL) {
        fc_pack_free(c);
        return -ENOMEM;
    }
    memcpy(k->shards, c->shards, c->nshards * sizeof(*k->shards));
    k->nshards = c->nshards;
    k->first_shard = c->first_shard;
    k->checkpointed = true;
    fprintf(stderr,
            "ecfs pack: resuming after shard-%06u (%llu of %zu "
            "entries already packed)\n",
            c->first_shard + c->nshards - 1, (unsigned long long)need, norder);
    fc_pack_free(c);
    return (int64_t)need;
}

/* Writes the shards in the chosen order, then the index. */
static int write_pack(struct packer *k)
{
    struct fc_pmember *mem = NULL;
    struct fc_pack *old = NULL;
    char *paths = NULL, *idx = NULL;
    uint64_t plen = 0, pack_id = 0;
    size_t *order = NULL, norder = 0, idx_len = 0, nd, first_oi = 0;
    char key[1200], etag[FC_ETAG_MAX];
    int ret;

    qsort(k->ents, k->n, sizeof(*k->ents), ent_cmp);
    ret = make_members(k, &mem, &paths, &plen);
    if (ret == 0)
        ret = dry_run(k, mem, paths, plen);
    if (ret < 0)
        goto out;
    ret = load_old(k, &old);
    if (ret == 0 && !k->replace) {
        fprintf(stderr,
                "ecfs pack: s3://%s/%s already holds a pack (%llu members, "
                "%u shards): use --replace to replace it\n",
                k->bucket, k->prefix, (unsigned long long)old->nmembers,
                old->nshards);
        ret = -EEXIST;
        goto out;
    }
    if (ret < 0 && ret != -ENOENT) {
        if (ret != -EINVAL)
            fprintf(stderr, "ecfs pack: cannot read s3://%s/%s%s: %s\n",
                    k->bucket, k->prefix, FC_PACK_INDEX, strerror(-ret));
        goto out;
    }
    k->first_shard = old ? old->first_shard + old->nshards : 0;
    /* directories first (sorted), then the files in the chosen order */
    order = malloc((k->n ? k->n : 1) * sizeof(*order));
    k->buf = malloc(PART_SIZE);
    if (order == NULL || k->buf == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < k->n; i++)
        if (S_ISDIR(k->ents[i].mode))
            order[norder++] = i;
    nd = norder;
    for (size_t i = 0; i < k->n; i++)
        if (!S_ISDIR(k->ents[i].mode))
            order[norder++] = i;
    if (k->shuffled) {
        uint64_t s = k->seed;
        for (size_t i = norder - 1; i > nd && i < norder; i--) {
            size_t j = nd + (size_t)(splitmix(&s) % (i - nd + 1));
            size_t t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    }
    k->done = calloc(k->n ? k->n : 1, 1);
    if (k->done == NULL) {
        ret = -ENOMEM;
        goto out;
    }
    {
        char opts[128];
        int n = snprintf(opts, sizeof(opts), "%llu %d %llu",
                         (unsigned long long)k->shard_size, (int)k->shuffled,
                         (unsigned long long)k->seed);
        k->opt_hash = (int64_t)cm_crc32c(0, opts, (size_t)n);
    }
    if (k->resume) {
        int64_t r = resume_load(k, mem, order, norder);
        if (r < 0) {
            ret = (int)r;
            goto out;
        }
        first_oi = (size_t)r;
    }
    k->t0 = now_s();
    ret = shard_open(k);
    for (size_t oi = first_oi; ret == 0 && oi < norder; oi++) {
        const struct entry *e = &k->ents[order[oi]];
        struct fc_pmember *m = &mem[e->member];
        char hdr[FC_TAR_HDR_MAX];
        bool dir = S_ISDIR(e->mode);
        size_t hl;
        uint32_t crc = 0;

        if (!dir && k->shard_off >= k->shard_size) {
            ret = shard_close(k);
            if (ret == 0)
                ret = shard_open(k);
            if (ret == 0)
                ret = checkpoint(k, mem, paths, plen, oi);
            if (ret < 0)
                break;
        }
        hl = fc_tar_header(hdr, e->path, e->len, e->mode, e->size,
                           e->mtime_ns / 1000000000ll, dir);
        ret = shard_write(k, hdr, hl);
        if (ret < 0)
            break;
        m->shard = k->nshards - 1;
        m->offset = k->shard_off;
        if (!dir) {
            ret = copy_member(k, e, &crc);
            if (ret == 0 && e->size % 512)
                ret = shard_write(k, NULL, 512 - e->size % 512);
            k->done_files++;
        }
        m->crc = crc;
        if (ret == 0)
            k->done[e->member] = 1;
    }
    if (ret == 0)
        ret = shard_close(k);
    if (ret < 0)
        goto fail;
    if (getrandom(&pack_id, sizeof(pack_id), 0) != sizeof(pack_id))
        pack_id = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    idx =
        fc_pack_encode(pack_id, (int64_t)time(NULL), k->first_shard, k->shards,
                       k->nshards, mem, k->n, paths, plen, &idx_len);
    if (idx == NULL) {
        ret = -ENOMEM;
        goto fail;
    }
    snprintf(key, sizeof(key), "%s" FC_PACK_INDEX, k->prefix);
    {
        struct fc_s3_body b = {.data = idx, .fd = -1, .len = idx_len};
        ret = fc_s3_put(k->s3, key, &b, etag);
    }
    if (ret < 0)
        goto fail;
    progress(k, true);
    if (old)
        retire_shards(k, old);
    if (k->checkpointed) {
        snprintf(key, sizeof(key), "%s" FC_PACK_RESUME, k->prefix);
        if (fc_s3_delete(k->s3, key) < 0)
            fprintf(stderr, "ecfs pack: warning: cannot delete %s\n", key);
        snprintf(key, sizeof(key), "%s" FC_PACK_INDEX, k->prefix);
    }
    {
        double el = now_s() - k->t0;
        printf("ecfs pack: %llu files, %zu directories, %.1f MiB into %u "
               "shard%s (shard-%06u..%06u) in %.1f s (%.1f MiB/s); index "
               "s3://%s/%s (%zu bytes)%s\n",
               (unsigned long long)k->nfiles, nd,
               (double)k->total_bytes / 1048576.0, k->nshards,
               k->nshards == 1 ? "" : "s", k->first_shard,
               k->first_shard + k->nshards - 1, el,
               el > 0 ? (double)k->total_bytes / 1048576.0 / el : 0.0,
               k->bucket, key, idx_len, old ? ", old pack replaced" : "");
    }
    goto out;
fail:
    if (k->tty && !k->quiet)
        fputc('\n', stderr);
    fprintf(stderr, "ecfs pack: failed (%s): no new pack is visible%s\n",
            strerror(-ret), old ? "; the old pack is unchanged" : "");
    (void)join_all(k);
    if (k->upload_id) {
        if (fc_s3_mpu_abort(k->s3, k->shard_key, k->upload_id) < 0)
            fprintf(stderr,
                    "ecfs pack: warning: cannot abort the upload "
                    "of %s\n",
                    k->shard_key);
        free(k->upload_id);
        k->upload_id = NULL;
    }
    if (k->checkpointed) {
        /* the completed shards stay for --resume */
        fprintf(stderr,
                "ecfs pack: the shards up to shard-%06u are kept: run the "
                "same command with --resume to continue from there\n",
                k->first_shard + k->nshards - 2);
    } else {
        /* the shards finished before the failure (the current one never
         * completed, deleting it is harmless) */
        delete_shards(k, k->first_shard, k->nshards);
    }
out:
    fc_pack_free(old);
    free(order);
    free(mem);
    free(paths);
    free(idx);
    return ret;
}

static struct fc_s3 *make_client(const struct packer *k, const char *bucket,
                                 const struct fc_creds *cr)
{
    struct fc_s3_conf sc;
    struct fc_s3 *s = NULL;

    memset(&sc, 0, sizeof(sc));
    sc.endpoint = k->endpoint;
    sc.bucket = bucket;
    sc.region = k->region;
    sc.access_key = cr->access_key;
    sc.secret_key = cr->secret_key;
    sc.session_token = cr->session_token;
    sc.max_conns = k->max_conns;
    sc.retries = k->retries;
    sc.connect_timeout_ms = 5000;
    sc.stall_timeout_s = 30;
    sc.ca_file = k->ca_file;
    sc.insecure = k->insecure;
    if (fc_s3_create(&sc, &s) < 0) {
        fprintf(stderr, "ecfs pack: bad endpoint %s\n", k->endpoint);
        return NULL;
    }
    return s;
}

int fc_pack_main(int argc, char **argv)
{
    struct packer k;
    struct fc_creds cr;
    struct stat st;
    int ret = 1, nargs = 0;
    const char *args[2] = {NULL, NULL};

    memset(&k, 0, sizeof(k));
    memset(&cr, 0, sizeof(cr));
    k.shard_size = 256ull << 20;
    k.keep_replaced = 3600;
    k.max_conns = 4;
    k.inflight_max = 4;
    k.retries = 8;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            ret = 0;
            goto out;
        } else if (strcmp(a, "-o") == 0 && v) {
            char *dup = strdup(v);
            int r = dup ? parse_o(&k, dup) : -ENOMEM;
            free(dup);
            if (r < 0)
                goto out;
            i++;
        } else if (strncmp(a, "-o", 2) == 0 && a[2]) {
            char *dup = strdup(a + 2);
            int r = dup ? parse_o(&k, dup) : -ENOMEM;
            free(dup);
            if (r < 0)
                goto out;
        } else if (strcmp(a, "--shard-size") == 0 && v) {
            if (parse_size(v, &k.shard_size) < 0) {
                fprintf(stderr, "ecfs pack: bad --shard-size %s\n", v);
                goto out;
            }
            i++;
        } else if (strcmp(a, "--order") == 0 && v) {
            if (strcmp(v, "sorted") == 0)
                k.shuffled = false;
            else if (strcmp(v, "shuffled") == 0)
                k.shuffled = true;
            else {
                fprintf(stderr, "ecfs pack: --order is sorted or shuffled\n");
                goto out;
            }
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            k.seed = strtoull(v, NULL, 10);
            i++;
        } else if (strcmp(a, "--replace") == 0) {
            k.replace = true;
        } else if (strcmp(a, "--keep-replaced") == 0 && v) {
            if (parse_duration(v, &k.keep_replaced) < 0) {
                fprintf(stderr,
                        "ecfs pack: bad --keep-replaced %s (e.g. 0, "
                        "90s, 30m, 1h, 2d)\n",
                        v);
                goto out;
            }
            i++;
        } else if (strcmp(a, "--resume") == 0) {
            k.resume = true;
        } else if (strcmp(a, "-q") == 0) {
            k.quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "ecfs pack: unknown option %s (see --help)\n", a);
            goto out;
        } else if (nargs < 2) {
            args[nargs++] = a;
        } else {
            fprintf(stderr, "ecfs pack: too many arguments (see --help)\n");
            goto out;
        }
    }
    if (nargs != 2) {
        usage(stderr);
        goto out;
    }
    k.src = args[0];
    k.dest = args[1];
    if (k.endpoint == NULL) {
        const char *e = getenv("AWS_ENDPOINT_URL_S3");
        if (e == NULL)
            e = getenv("AWS_ENDPOINT_URL");
        if (e == NULL) {
            fprintf(stderr, "ecfs pack: -o endpoint=URL is required\n");
            goto out;
        }
        k.endpoint = strdup(e);
    }
    if (k.region == NULL)
        k.region =
            strdup(getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1");
    if (k.ca_file) {
        int e = k.ca_file[0] ? fc_s3_check_ca_file(k.ca_file) : -ENOENT;
        if (e < 0) {
            fprintf(stderr, "ecfs pack: cannot read ca_file=%s: %s\n",
                    k.ca_file,
                    e == -EINVAL ? "not a regular file" : strerror(-e));
            goto out;
        }
        if (k.insecure) {
            fprintf(stderr, "ecfs pack: ca_file= and "
                            "insecure_skip_tls_verify_testing_only exclude "
                            "each other\n");
            goto out;
        }
    }
    if (k.insecure)
        fprintf(stderr,
                "ecfs pack: WARNING: TLS certificate verification "
                "is OFF for %s (insecure_skip_tls_verify_testing_only):"
                " for tests only\n",
                k.endpoint);
    if (k.max_conns == 0)
        k.max_conns = 4;
    k.inflight_max = CM_MAX(1u, CM_MIN(k.max_conns, MAX_INFLIGHT));
    if (split_dest(k.dest, &k.bucket, &k.prefix) < 0) {
        fprintf(stderr, "ecfs pack: bad destination %s (BUCKET[:PREFIX])\n",
                k.dest);
        goto out;
    }
    k.src_local = stat(k.src, &st) == 0 && S_ISDIR(st.st_mode);
    if (!k.src_local) {
        if (strchr(k.src, '/') && !strchr(k.src, ':')) {
            fprintf(stderr, "ecfs pack: %s: not a directory\n", k.src);
            goto out;
        }
        if (split_dest(k.src, &k.src_bucket, &k.src_prefix) < 0) {
            fprintf(stderr, "ecfs pack: bad source %s\n", k.src);
            goto out;
        }
        if (strcmp(k.src_bucket, k.bucket) == 0 &&
            strcmp(k.src_prefix, k.prefix) == 0) {
            /* packing a prefix in place: its own .ecfs-pack/ is skipped */
        }
    }
    if (fc_creds_load(k.passwd_file, k.profile, k.bucket, &cr) < 0)
        goto out;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "ecfs pack: libcurl init failed\n");
        goto out;
    }
    k.s3 = make_client(&k, k.bucket, &cr);
    if (k.s3 && !k.src_local)
        k.src_s3 = make_client(&k, k.src_bucket, &cr);
    if (k.s3 == NULL || (!k.src_local && k.src_s3 == NULL))
        goto out_curl;
    {
        struct fc_listpage pg;
        int r;
        fc_listpage_init(&pg);
        r = fc_s3_list(k.s3, k.prefix, NULL, 1, &pg);
        fc_listpage_fini(&pg);
        if (r < 0) {
            fprintf(stderr, "ecfs pack: cannot list s3://%s/%s at %s: %s\n",
                    k.bucket, k.prefix, k.endpoint,
                    r == -ENOENT ? "no such bucket" : strerror(-r));
            goto out_curl;
        }
    }
    k.tty = isatty(2);
    if (k.src_local) {
        int fd = open_rel(k.src, "", O_RDONLY);
        if (fd < 0)
            fprintf(stderr, "ecfs pack: cannot read directory %s: %s\n", k.src,
                    strerror(-fd));
        ret = fd < 0 ? fd : walk_local(&k, fd, "");
    } else
        ret = walk_bucket(&k);
    if (ret == 0)
        ret = write_pack(&k);
    ret = ret < 0 ? 1 : 0;
out_curl:
    fc_s3_destroy(k.s3);
    fc_s3_destroy(k.src_s3);
    curl_global_cleanup();
out:
    for (size_t i = 0; i < k.n; i++) {
        free(k.ents[i].path);
        free(k.ents[i].etag);
    }
    free(k.ents);
    free(k.buf);
    free(k.etags);
    free(k.shards);
    free(k.done);
    free(k.upload_id);
    free(k.endpoint);
    free(k.region);
    free(k.profile);
    free(k.passwd_file);
    free(k.ca_file);
    free(k.bucket);
    free(k.prefix);
    free(k.src_bucket);
    free(k.src_prefix);
    fc_creds_fini(&cr);
    return ret;
}

/* tests/unit/obj_idx_test.c - the LMDB object index (storaged/store/obj_idx.c)
 * against a real LMDB environment in a temp directory: one case per
 * function, plus the record codec, long keys that share their first
 * OBJ_IDX_KEYPFX bytes, and reopening. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storaged/store/drive.h"
#include "storaged/store/obj_i.h"
#include "storaged/store/obj_idx.h"

static char dir[256];

static int setup(void **st)
{
    (void)st;
    snprintf(dir, sizeof(dir), "/tmp/obj_idx_test.XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    assert_int_equal(stor_rmtree(dir), 0);
    return 0;
}

static struct obj_idx *idx_open(void)
{
    struct obj_idx *x;

    assert_int_equal(obj_idx_open(dir, true, &x), 0);
    return x;
}

/* An entry with @nh headers and @np parts; key is copied. */
static struct obj_ent *mk(const char *key, size_t kl, uint64_t version, int nh,
                          int np)
{
    struct obj_ent *e = calloc(1, sizeof(*e));

    assert_non_null(e);
    e->key = malloc(kl + 1);
    memcpy(e->key, key, kl);
    e->key[kl] = 0;
    e->key_len = kl;
    for (int i = 0; i < 16; i++)
        e->id[i] = (uint8_t)(i * 7 + version);
    e->version = version;
    e->mtime_ns = 1700000000123456789LL;
    e->size = 4096 + version;
    snprintf(e->etag, sizeof(e->etag), "%032llx", (unsigned long long)version);
    e->k = 1;
    e->m = 4;
    e->block = np ? 65536 : 0;
    e->inl = np == 0;
    e->multipart = np > 1;
    e->nhdrs = (size_t)nh;
    e->hdrs = nh ? calloc((size_t)nh, sizeof(*e->hdrs)) : NULL;
    for (int i = 0; i < nh; i++) {
        char n[32], v[32];

        snprintf(n, sizeof(n), "x-amz-meta-h%d", i);
        snprintf(v, sizeof(v), "value %d", i);
        e->hdrs[i].name = strdup(n);
        e->hdrs[i].value = strdup(v);
    }
    e->nparts = (size_t)np;
    e->parts = np ? calloc((size_t)np, sizeof(*e->parts)) : NULL;
    for (int i = 0; i < np; i++) {
        e->parts[i].number = np > 1 ? i + 1 : 0;
        e->parts[i].size = 5u << 20;
        e->parts[i].dataid = 1000 + (uint64_t)i;
        snprintf(e->parts[i].etag, sizeof(e->parts[i].etag), "p%d", i);
    }
    return e;
}

static void ent_equal(const struct obj_ent *a, const struct obj_ent *b)
{
    assert_int_equal(a->key_len, b->key_len);
    assert_memory_equal(a->key, b->key, a->key_len);
    assert_memory_equal(a->id, b->id, 16);
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->mtime_ns, b->mtime_ns);
    assert_int_equal(a->size, b->size);
    assert_string_equal(a->etag, b->etag);
    assert_int_equal(a->k, b->k);
    assert_int_equal(a->m, b->m);
    assert_int_equal(a->block, b->block);
    assert_int_equal(a->inl, b->inl);
    assert_int_equal(a->ext, b->ext);
    assert_int_equal(a->xref == NULL, b->xref == NULL);
    for (int j = 0; a->xref && j < a->k + a->m; j++) {
        assert_int_equal(a->xref[j].file, b->xref[j].file);
        assert_int_equal(a->xref[j].off, b->xref[j].off);
    }
    assert_int_equal(a->multipart, b->multipart);
    assert_int_equal(a->at_bucket == NULL, b->at_bucket == NULL);
    if (a->at_bucket) {
        assert_string_equal(a->at_bucket, b->at_bucket);
        assert_int_equal(a->at_key_len, b->at_key_len);
        assert_memory_equal(a->at_key, b->at_key, a->at_key_len);
    }
    assert_int_equal(a->nhdrs, b->nhdrs);
    for (size_t i = 0; i < a->nhdrs; i++) {
        assert_string_equal(a->hdrs[i].name, b->hdrs[i].name);
        assert_string_equal(a->hdrs[i].value, b->hdrs[i].value);
    }
    assert_int_equal(a->nparts, b->nparts);
    for (size_t i = 0; i < a->nparts; i++) {
        assert_int_equal(a->parts[i].number, b->parts[i].number);
        assert_int_equal(a->parts[i].size, b->parts[i].size);
        assert_int_equal(a->parts[i].dataid, b->parts[i].dataid);
        assert_string_equal(a->parts[i].etag, b->parts[i].etag);
    }
}

static void test_rec_roundtrip(void **st)
{
    struct obj_ent *e = mk("a/b\xff\x01 c", 8, 7, 3, 2), *d = NULL;
    struct obj_idx_view v;
    struct cm_buf b;

    (void)st;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(obj_idx_rec_encode(e, &b), 0);
    assert_int_equal(b.data[0], OBJ_IDX_REC_VER); /* version first */
    assert_int_equal(obj_idx_rec_view(b.data, b.len, &v), (ssize_t)b.len);
    assert_int_equal(v.key_len, 8);
    assert_int_equal(v.version, 7);
    assert_int_equal(v.size, e->size);
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), 0);
    ent_equal(e, d);
    /* every truncation is refused, never misread */
    for (size_t n = 0; n < b.len; n++) {
        struct obj_ent *t = NULL;

        assert_int_equal(obj_idx_rec_decode(b.data, n, &t), -EBADMSG);
        assert_null(t);
    }
    b.data[0] = 9; /* an unknown record version */
    assert_int_equal(obj_idx_rec_view(b.data, b.len, &v), -EBADMSG);
    cm_buf_fini(&b);
    obj_ent_free(e);
    obj_ent_free(d);
}

/* An extent object's record carries where each shard is (extension tag
 * 1); one without the refs (rebuilt) decodes without them; a tag 1 of the
 * wrong length is refused, never misread. */
/* Every cut of the encoded record @b is refused. */
static void cuts_refused(const struct cm_buf *b)
{
    for (size_t n = 0; n < b->len; n++) {
        struct obj_ent *t = NULL;

        assert_int_equal(obj_idx_rec_decode(b->data, n, &t), -EBADMSG);
        assert_null(t);
    }
}

static void test_rec_extent_refs(void **st)
{
    struct obj_ent *e = mk("ext", 3, 9, 0, 0), *d = NULL;
    struct cm_buf b;

    (void)st;
    e->k = 12;
    e->m = 4;
    e->ext = true;
    e->xref = calloc(16, sizeof(*e->xref));
    assert_non_null(e->xref);
    for (int j = 0; j < 16; j++)
        e->xref[j] = (struct obj_xref){.file = j == 5 ? 0 : 1 + (uint32_t)j,
                                       .off = 4096ull * (1000 + j) << 20};
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(obj_idx_rec_encode(e, &b), 0);
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), 0);
    ent_equal(e, d);
    obj_ent_free(d);
    d = NULL;
    cuts_refused(&b);
    /* the tag's count byte (the first of its value) says 15: refused */
    b.data[b.len - 16 * 12 - 1] = 15;
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), -EBADMSG);
    assert_null(d);
    cm_buf_fini(&b);
    free(e->xref);
    e->xref = NULL; /* rebuilt from the metas: no refs, still an extent */
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(obj_idx_rec_encode(e, &b), 0);
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), 0);
    assert_true(d->ext && d->inl && d->xref == NULL);
    cm_buf_fini(&b);
    obj_ent_free(e);
    obj_ent_free(d);
}

/* A version kept at its base's files (tag 3): its base bucket and key
 * round-trip, with extent refs beside it or not; cut records and bad
 * lengths are refused; obj_ent_dup copies them. */
static void test_rec_kept_at_base(void **st)
{
    struct obj_ent *e = mk("k\001e712c3ae6e34cb2bo", 19, 7, 2, 0), *d = NULL;
    struct cm_buf b;

    (void)st;
    e->inl = true;
    e->at_bucket = strdup("photos");
    e->at_key = strdup("k");
    e->at_key_len = 1;
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(obj_idx_rec_encode(e, &b), 0);
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), 0);
    ent_equal(e, d);
    obj_ent_free(d);
    d = obj_ent_dup(e);
    assert_non_null(d);
    ent_equal(e, d);
    obj_ent_free(d);
    d = NULL;
    cuts_refused(&b);
    /* the tag's key length (its last 2 + 1 bytes before the key) says 2 */
    b.data[b.len - 1 - 2] = 2;
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), -EBADMSG);
    assert_null(d);
    cm_buf_fini(&b);
    /* with tag 1 too (an extent object is never kept, but the record
     * format carries both) */
    e->ext = true;
    e->k = 1;
    e->m = 2;
    e->xref = calloc(3, sizeof(*e->xref));
    assert_non_null(e->xref);
    e->xref[1] = (struct obj_xref){.file = 3, .off = 8192};
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    assert_int_equal(obj_idx_rec_encode(e, &b), 0);
    assert_int_equal(obj_idx_rec_decode(b.data, b.len, &d), 0);
    ent_equal(e, d);
    obj_ent_free(d);
    cm_buf_fini(&b);
    obj_ent_free(e);
}

/* obj_idx_put_pair: the new current record (with its body) and the kept
 * version's record in another bucket land in one transaction, each
 * bucket's count and sum kept as a put keeps them (obj_idx_verify). */
static void test_put_pair(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *a1 = mk("k", 1, 1, 1, 0), *a2 = mk("k", 1, 2, 0, 0);
    struct obj_ent *v1 = mk("k\001e712c3ae6e34cb2bo", 19, 1, 3, 0);
    struct obj_ent *got = NULL, *old = NULL;
    uint8_t body[5] = "fresh", oldb[3] = "old";
    const uint8_t *sh[1] = {body}, *osh[1] = {oldb};
    struct obj_idx_body ob = {.shard = sh, .shard_len = 5, .k = 1, .size = 5};
    struct obj_idx_body obo = {.shard = osh, .shard_len = 3, .k = 1, .size = 3};
    uint64_t n;
    void *bb = NULL;

    (void)st;
    a1->size = 3;
    v1->size = 3; /* the kept version of a1: same version and size */
    a2->inl = true;
    a2->size = 5;
    v1->at_bucket = strdup("bk");
    v1->at_key = strdup("k");
    v1->at_key_len = 1;
    assert_int_equal(obj_idx_bucket_set(x, "bk", 1), 0);
    assert_int_equal(obj_idx_bucket_set(x, "bk..v", 1), 0);
    assert_int_equal(obj_idx_put_body(x, "bk", a1, &obo, NULL), 0);
    assert_int_equal(obj_idx_put_pair(x, "bk", a2, &ob, "bk..v", v1, &old), 0);
    assert_non_null(old);
    ent_equal(a1, old);
    obj_ent_free(old);
    assert_int_equal(obj_idx_lookup(x, "bk", "k", 1, &got), 0);
    ent_equal(a2, got);
    obj_ent_free(got);
    assert_int_equal(obj_idx_lookup_body_nb(x, "bk", "k", 1, &got, &bb), 0);
    assert_memory_equal(bb, "fresh", 5);
    free(bb);
    obj_ent_free(got);
    assert_int_equal(obj_idx_lookup(x, "bk..v", v1->key, v1->key_len, &got), 0);
    ent_equal(v1, got);
    obj_ent_free(got);
    /* the replaced version's body moved with it */
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bk..v", v1->key, v1->key_len, &got, &bb), 0);
    assert_memory_equal(bb, "old", 3);
    free(bb);
    obj_ent_free(got);
    assert_int_equal(obj_idx_bucket_get(x, "bk", NULL, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(obj_idx_bucket_get(x, "bk..v", NULL, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(obj_idx_verify(x, "bk", NULL, &n), 0);
    assert_int_equal(obj_idx_verify(x, "bk..v", NULL, &n), 0);
    /* a body whose size is not the entry's: refused, nothing written */
    ob.size = 4;
    assert_int_equal(obj_idx_put_pair(x, "bk", a2, &ob, "bk..v", v1, NULL),
                     -EINVAL);
    obj_idx_close(x, true);
    obj_ent_free(a1);
    obj_ent_free(a2);
    obj_ent_free(v1);
}

static int pend_cb(void *arg, const char *bucket, const uint8_t id[16],
                   const char *key, size_t key_len)
{
    char *seen = arg;
    size_t n = strlen(seen);

    snprintf(seen + n, 256 - n, "%s:%d:%.*s,", bucket, id[0], (int)key_len,
             key);
    return 0;
}

/* obj_idx_remove_pair: the key leaves its bucket and its kept version
 * and the delete marker over it enter the companion in one transaction,
 * the body moving with the version, both keys' pending records cleared;
 * a missing key changes nothing. */
static void test_remove_pair(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *a1 = mk("k", 1, 1, 1, 0);
    struct obj_ent *v1 = mk("k\001e712c3ae6e34cb2bo", 19, 1, 3, 0);
    struct obj_ent *dm = mk("k\001e712c3ae6e34cb2ad", 19, 5, 1, 0);
    struct obj_ent *got = NULL, *old = NULL;
    uint8_t oldb[3] = "old", none = 0;
    const uint8_t *osh[1] = {oldb}, *dsh[1] = {&none};
    struct obj_idx_body obo = {.shard = osh, .shard_len = 3, .k = 1, .size = 3};
    struct obj_idx_body dmb = {.shard = dsh, .shard_len = 0, .k = 1};
    char seen[256] = "";
    uint64_t n;
    void *bb = NULL;

    (void)st;
    a1->size = 3;
    v1->size = 3;
    dm->size = 0;
    v1->at_bucket = strdup("bk");
    v1->at_key = strdup("k");
    v1->at_key_len = 1;
    assert_int_equal(obj_idx_bucket_set(x, "bk", 1), 0);
    assert_int_equal(obj_idx_bucket_set(x, "bk..v", 1), 0);
    assert_int_equal(obj_idx_put_body(x, "bk", a1, &obo, NULL), 0);
    assert_int_equal(obj_idx_pend_add_pair(x, "bk", a1->id, "k", 1, "bk..v",
                                           dm->id, dm->key, dm->key_len),
                     0);
    assert_int_equal(obj_idx_pend_each(x, pend_cb, seen), 0);
    assert_non_null(strstr(seen, "bk:"));
    assert_non_null(strstr(seen, "bk..v:"));
    /* a marker body that is not the marker's size: refused */
    dmb.size = 1;
    assert_int_equal(obj_idx_remove_pair(x, "bk", "k", 1, "bk..v", v1, dm, &dmb,
                                         false, NULL),
                     -EINVAL);
    dmb.size = 0;
    assert_int_equal(obj_idx_remove_pair(x, "bk", "k", 1, "bk..v", v1, dm, &dmb,
                                         false, &old),
                     0);
    seen[0] = 0;
    assert_int_equal(obj_idx_pend_each(x, pend_cb, seen), 0);
    assert_string_equal(seen, ""); /* both cleared in that transaction */
    assert_int_equal(obj_idx_lookup(x, "bk..v", dm->key, dm->key_len, &got), 0);
    ent_equal(dm, got);
    obj_ent_free(got);
    assert_non_null(old);
    ent_equal(a1, old);
    obj_ent_free(old);
    assert_int_equal(obj_idx_lookup(x, "bk", "k", 1, &got), -ENOENT);
    assert_null(got);
    assert_int_equal(obj_idx_lookup(x, "bk..v", v1->key, v1->key_len, &got), 0);
    ent_equal(v1, got);
    obj_ent_free(got);
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bk..v", v1->key, v1->key_len, &got, &bb), 0);
    assert_non_null(bb);
    assert_memory_equal(bb, "old", 3);
    free(bb);
    obj_ent_free(got);
    assert_int_equal(obj_idx_bucket_get(x, "bk", NULL, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(obj_idx_bucket_get(x, "bk..v", NULL, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(obj_idx_verify(x, "bk", NULL, &n), 0);
    assert_int_equal(obj_idx_verify(x, "bk..v", NULL, &n), 0);
    /* the key is gone now: refused, the companion unchanged */
    assert_int_equal(obj_idx_remove_pair(x, "bk", "k", 1, "bk..v", v1, NULL,
                                         NULL, false, NULL),
                     -ENOENT);
    assert_int_equal(obj_idx_bucket_get(x, "bk..v", NULL, &n), 0);
    assert_int_equal(n, 2);
    obj_idx_close(x, true);
    obj_ent_free(a1);
    obj_ent_free(v1);
    obj_ent_free(dm);
}

static void test_open_missing_and_garbage(void **st)
{
    struct obj_idx *x = NULL;
    char sub[300], path[400];
    int fd;

    (void)st;
    snprintf(sub, sizeof(sub), "%s/none", dir);
    assert_int_equal(obj_idx_open(sub, false, &x), -ENOENT);
    assert_null(x);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(path, sizeof(path), "%s/data.mdb", sub);
    fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    for (int i = 0; i < 64; i++)
        assert_int_equal(write(fd, "not an lmdb file", 16), 16);
    close(fd);
    assert_int_equal(obj_idx_open(sub, false, &x), -EBADMSG);
    assert_null(x);
}

static void test_state(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_idx_state s = {0}, r;

    (void)st;
    assert_int_equal(obj_idx_state_get(x, &r), -ENOENT);
    s.format = OBJ_IDX_FORMAT;
    memcpy(s.deployment, "0123456789abcdef0123456789abcdef", 33);
    s.gen = 42;
    s.last_version = 1234567890123ULL;
    assert_int_equal(obj_idx_state_set(x, &s), 0);
    obj_idx_close(x, true);
    x = idx_open(); /* it is durable */
    assert_int_equal(obj_idx_state_get(x, &r), 0);
    assert_int_equal(r.format, OBJ_IDX_FORMAT);
    assert_string_equal(r.deployment, s.deployment);
    assert_int_equal(r.gen, 42);
    assert_int_equal(r.last_version, s.last_version);
    assert_int_equal(obj_idx_sync(x), 0);
    assert_non_null(strstr(obj_idx_data_path(x), "data.mdb"));
    obj_idx_close(x, false);
}

static int count_cb(void *arg, const char *bucket, int64_t created,
                    uint64_t count)
{
    char *seen = arg;
    size_t n = strlen(seen);

    (void)count;
    snprintf(seen + n, 128 - n, "%s%s", bucket, created == 5 ? "5," : "?,");
    return 0;
}

static void test_buckets(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *e = mk("k", 1, 1, 0, 0), *got = NULL;
    int64_t c;
    uint64_t n;
    char seen[128] = "";

    (void)st;
    assert_int_equal(obj_idx_bucket_get(x, "b1", &c, &n), -ENOENT);
    assert_int_equal(obj_idx_bucket_set(x, "b1", 5), 0);
    assert_int_equal(obj_idx_bucket_set(x, "a0", 5), 0);
    assert_int_equal(obj_idx_bucket_get(x, "b1", &c, &n), 0);
    assert_int_equal(c, 5);
    assert_int_equal(n, 0);
    assert_int_equal(obj_idx_put(x, "b1", e, NULL), 0);
    assert_int_equal(obj_idx_put(x, "a0", e, NULL), 0);
    assert_int_equal(obj_idx_bucket_get(x, "b1", &c, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(obj_idx_bucket_set(x, "b1", 5), 0); /* count kept */
    assert_int_equal(obj_idx_bucket_get(x, "b1", NULL, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(obj_idx_bucket_each(x, count_cb, seen), 0);
    assert_string_equal(seen, "a05,b15,");
    assert_int_equal(obj_idx_bucket_drop(x, "b1"), 0);
    assert_int_equal(obj_idx_bucket_get(x, "b1", &c, &n), -ENOENT);
    assert_int_equal(obj_idx_lookup(x, "b1", "k", 1, &got), -ENOENT);
    /* the other bucket keeps its object */
    assert_int_equal(obj_idx_lookup(x, "a0", "k", 1, &got), 0);
    obj_ent_free(got);
    obj_ent_free(e);
    obj_idx_close(x, false);
}

static void test_put_lookup_remove(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *a = mk("dir/a", 5, 1, 2, 0), *a2 = mk("dir/a", 5, 2, 0, 3);
    struct obj_ent *got = NULL, *old = NULL;
    uint64_t n;

    (void)st;
    assert_int_equal(obj_idx_bucket_set(x, "bk", 1), 0);
    assert_int_equal(obj_idx_lookup(x, "bk", "dir/a", 5, &got), -ENOENT);
    assert_int_equal(obj_idx_put(x, "bk", a, &old), 0);
    assert_null(old);
    assert_int_equal(obj_idx_lookup(x, "bk", "dir/a", 5, &got), 0);
    ent_equal(a, got);
    obj_ent_free(got);
    assert_int_equal(obj_idx_lookup_nb(x, "bk", "dir/a", 5, &got), 0);
    ent_equal(a, got);
    obj_ent_free(got);
    /* a prefix or an extension of the key is another key */
    assert_int_equal(obj_idx_lookup(x, "bk", "dir/", 4, &got), -ENOENT);
    assert_int_equal(obj_idx_lookup(x, "bk", "dir/ab", 6, &got), -ENOENT);
    assert_int_equal(obj_idx_lookup(x, "bk2", "dir/a", 5, &got), -ENOENT);
    /* replace: the old entry comes back, the count stays */
    assert_int_equal(obj_idx_put(x, "bk", a2, &old), 0);
    assert_non_null(old);
    ent_equal(a, old);
    obj_ent_free(old);
    assert_int_equal(obj_idx_bucket_get(x, "bk", NULL, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(obj_idx_lookup(x, "bk", "dir/a", 5, &got), 0);
    ent_equal(a2, got);
    obj_ent_free(got);
    assert_int_equal(obj_idx_remove(x, "bk", "dir/a", 5, &old), 0);
    ent_equal(a2, old);
    obj_ent_free(old);
    assert_int_equal(obj_idx_remove(x, "bk", "dir/a", 5, NULL), -ENOENT);
    assert_int_equal(obj_idx_bucket_get(x, "bk", NULL, &n), 0);
    assert_int_equal(n, 0);
    obj_ent_free(a);
    obj_ent_free(a2);
    obj_idx_close(x, false);
}

/* Keys longer than OBJ_IDX_KEYPFX that share their first bytes live in one
 * group; they still come back exactly and in byte order. */
static void test_long_keys_order(void **st)
{
    struct obj_idx *x = idx_open();
    char base[1024];
    size_t lens[] = {OBJ_IDX_KEYPFX - 1, OBJ_IDX_KEYPFX, OBJ_IDX_KEYPFX + 1,
                     OBJ_IDX_KEYPFX + 5, 1024};
    struct obj_ent *es[10];
    size_t ne = 0;
    struct obj_idx_cur *c;
    struct obj_idx_view v;
    char prev[1100];
    size_t prev_len = 0, seen = 0;

    (void)st;
    memset(base, 'k', sizeof(base));
    /* insert out of order: the long ones, then the shorter */
    for (int pass = 1; pass >= 0; pass--) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            char key[1024];

            memcpy(key, base, lens[i]);
            key[lens[i] - 1] = pass ? 'z' : 'a';
            es[ne] = mk(key, lens[i], ne + 1, 0, 0);
            assert_int_equal(obj_idx_put(x, "b", es[ne], NULL), 0);
            ne++;
        }
    }
    for (size_t i = 0; i < ne; i++) {
        struct obj_ent *got;

        assert_int_equal(
            obj_idx_lookup(x, "b", es[i]->key, es[i]->key_len, &got), 0);
        ent_equal(es[i], got);
        obj_ent_free(got);
    }
    assert_int_equal(obj_idx_cur_open(x, "b", &c), 0);
    assert_int_equal(obj_idx_cur_seek(c, NULL, 0, false), 0);
    while (obj_idx_cur_next(c, &v) == 0) {
        if (seen)
            assert_true(obj_key_cmp(prev, prev_len, v.key, v.key_len) < 0);
        memcpy(prev, v.key, v.key_len);
        prev_len = v.key_len;
        seen++;
    }
    assert_int_equal(seen, ne);
    /* seek into the middle of a shared group, inclusive and exclusive */
    assert_int_equal(obj_idx_cur_seek(c, es[2]->key, es[2]->key_len, false), 0);
    assert_int_equal(obj_idx_cur_next(c, &v), 0);
    assert_int_equal(v.key_len, es[2]->key_len);
    assert_memory_equal(v.key, es[2]->key, v.key_len);
    assert_int_equal(obj_idx_cur_seek(c, es[2]->key, es[2]->key_len, true), 0);
    assert_int_equal(obj_idx_cur_next(c, &v), 0);
    assert_true(obj_key_cmp(v.key, v.key_len, es[2]->key, es[2]->key_len) > 0);
    obj_idx_cur_close(c);
    for (size_t i = 0; i < ne; i++) {
        assert_int_equal(
            obj_idx_remove(x, "b", es[i]->key, es[i]->key_len, NULL), 0);
        obj_ent_free(es[i]);
    }
    assert_int_equal(obj_idx_cur_open(x, "b", &c), 0);
    assert_int_equal(obj_idx_cur_seek(c, NULL, 0, false), 0);
    assert_int_equal(obj_idx_cur_next(c, &v), -ENOENT);
    obj_idx_cur_close(c);
    obj_idx_close(x, false);
}

/* A cursor stays inside its bucket and is a snapshot. */
static void test_cursor_bucket_bounds(void **st)
{
    struct obj_idx *x = idx_open();
    const char *keys[] = {"", "a", "a/b", "b"};
    struct obj_ent *es[4], *late = mk("c", 1, 99, 0, 0);
    struct obj_idx_cur *c;
    struct obj_idx_view v;
    size_t i = 0;

    (void)st;
    for (int j = 0; j < 4; j++) {
        es[j] = mk(keys[j], strlen(keys[j]), (uint64_t)j + 1, 0, 0);
        assert_int_equal(obj_idx_put(x, "m", es[j], NULL), 0);
        assert_int_equal(obj_idx_put(x, "l", es[j], NULL), 0);
        assert_int_equal(obj_idx_put(x, "mm", es[j], NULL), 0);
    }
    assert_int_equal(obj_idx_cur_open(x, "m", &c), 0);
    assert_int_equal(obj_idx_put(x, "m", late, NULL), 0); /* after open */
    assert_int_equal(obj_idx_cur_seek(c, NULL, 0, false), 0);
    while (obj_idx_cur_next(c, &v) == 0) {
        assert_true(i < 4);
        assert_int_equal(v.key_len, strlen(keys[i]));
        assert_memory_equal(v.key, keys[i], v.key_len);
        i++;
    }
    assert_int_equal(i, 4);
    assert_int_equal(obj_idx_cur_seek(c, "a", 1, true), 0);
    assert_int_equal(obj_idx_cur_next(c, &v), 0);
    assert_int_equal(v.key_len, 3);
    obj_idx_cur_close(c);
    for (int j = 0; j < 4; j++)
        obj_ent_free(es[j]);
    obj_ent_free(late);
    obj_idx_close(x, false);
}

static void test_put_many_and_reopen(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *es[300];
    uint64_t n;

    (void)st;
    for (int i = 0; i < 300; i++) {
        char k[32];

        snprintf(k, sizeof(k), "key%05d", (i * 7919) % 300);
        es[i] = mk(k, strlen(k), (uint64_t)i + 1, i % 3, i % 2);
    }
    assert_int_equal(obj_idx_put_many(x, "bulk", es, 300), 0);
    assert_int_equal(obj_idx_bucket_get(x, "bulk", NULL, &n), 0);
    assert_int_equal(n, 300);
    obj_idx_close(x, true);
    x = idx_open();
    for (int i = 0; i < 300; i++) {
        struct obj_ent *got;

        assert_int_equal(
            obj_idx_lookup(x, "bulk", es[i]->key, es[i]->key_len, &got), 0);
        ent_equal(es[i], got);
        obj_ent_free(got);
        obj_ent_free(es[i]);
    }
    obj_idx_close(x, false);
}

/* Flips one byte of the value of the first record of "obj" behind the
 * index's back (LMDB directly, the index closed), as bit rot would. */
static void damage_first_record(void)
{
    MDB_env *env;
    MDB_txn *t;
    MDB_dbi dbi;
    MDB_cursor *c;
    MDB_val k, v, nv;
    uint8_t buf[4096];

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 4), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 1u << 30), 0);
    assert_int_equal(mdb_env_open(env, dir, MDB_NOSYNC, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &t), 0);
    assert_int_equal(mdb_dbi_open(t, "obj", 0, &dbi), 0);
    assert_int_equal(mdb_cursor_open(t, dbi, &c), 0);
    assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_FIRST), 0);
    assert_true(v.mv_size <= sizeof(buf) && v.mv_size > 60);
    memcpy(buf, v.mv_data, v.mv_size);
    buf[v.mv_size - 10] ^= 0x20; /* inside the record, past its header */
    nv.mv_size = v.mv_size;
    nv.mv_data = buf;
    assert_int_equal(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
    mdb_cursor_close(c);
    assert_int_equal(mdb_txn_commit(t), 0);
    mdb_env_close(env);
}

/* obj_idx_verify: records against the bucket's count and content sum,
 * through puts, overwrites, removes and grouped long keys; damage found;
 * a bucket without a record; a stop. */
static void test_verify(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *es[5000];
    char longk[900];
    uint64_t n = 0;
    bool stop = false;

    (void)st;
    assert_int_equal(obj_idx_bucket_set(x, "vb", 1), 0);
    assert_int_equal(obj_idx_verify(x, "vb", NULL, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(obj_idx_verify(x, "nobucket", NULL, &n), -ENOENT);
    for (int i = 0; i < 5000; i++) {
        char k[32];

        snprintf(k, sizeof(k), "key%05d", (i * 7919) % 5000);
        es[i] = mk(k, strlen(k), (uint64_t)i + 1, i % 3, i % 2);
    }
    assert_int_equal(obj_idx_put_many(x, "vb", es, 5000), 0);
    for (int i = 0; i < 5000; i++)
        obj_ent_free(es[i]);
    memset(longk, 'L', sizeof(longk));
    for (int i = 0; i < 3; i++) { /* one group of three long keys */
        struct obj_ent *e;

        longk[sizeof(longk) - 1] = (char)('a' + i);
        e = mk(longk, sizeof(longk), 9000 + (uint64_t)i, 1, 0);
        assert_int_equal(obj_idx_put(x, "vb", e, NULL), 0);
        obj_ent_free(e);
    }
    {
        struct obj_ent *e = mk("key00007", 8, 77777, 2, 3); /* overwrite */

        assert_int_equal(obj_idx_put(x, "vb", e, NULL), 0);
        obj_ent_free(e);
    }
    assert_int_equal(obj_idx_remove(x, "vb", "key00011", 8, NULL), 0);
    longk[sizeof(longk) - 1] = 'b'; /* the middle of the group */
    assert_int_equal(obj_idx_remove(x, "vb", longk, sizeof(longk), NULL), 0);
    assert_int_equal(obj_idx_verify(x, "vb", NULL, &n), 0);
    assert_int_equal(n, 5000 + 3 - 2);
    stop = true;
    assert_int_equal(obj_idx_verify(x, "vb", &stop, &n), -ECANCELED);
    obj_idx_close(x, true);

    damage_first_record();
    x = idx_open();
    assert_int_equal(obj_idx_verify(x, "vb", NULL, &n), -EBADMSG);
    obj_idx_close(x, false);
}

/* The raw "body" table: with @flip, flips a byte of the only value's bytes
 * (past its header); returns the number of values it holds. */
static size_t raw_bodies(bool flip)
{
    MDB_env *env;
    MDB_txn *t;
    MDB_dbi dbi;
    MDB_cursor *c;
    MDB_val k, v, nv;
    uint8_t buf[16384];
    size_t n = 0;
    int rc;

    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 8), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 1u << 30), 0);
    assert_int_equal(mdb_env_open(env, dir, MDB_NOSYNC, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &t), 0);
    assert_int_equal(mdb_dbi_open(t, "body", 0, &dbi), 0);
    assert_int_equal(mdb_cursor_open(t, dbi, &c), 0);
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        n++;
        if (!flip)
            continue;
        assert_true(v.mv_size <= sizeof(buf) && v.mv_size > 30);
        memcpy(buf, v.mv_data, v.mv_size);
        buf[v.mv_size - 3] ^= 0x01;
        nv.mv_size = v.mv_size;
        nv.mv_data = buf;
        assert_int_equal(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_txn_commit(t), 0);
    mdb_env_close(env);
    return n;
}

/* Bodies kept beside the records: stored from k shards and handed out for
 * exactly the record's version; a record put without one (or by a writer
 * that left an older version's body) reads none; a damaged body is not
 * served and is counted; a remove and a bucket drop take them away. */
static void test_bodies(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *a = mk("pic/a.jpg", 9, 1, 1, 0), *got = NULL;
    struct obj_ent *a2 = mk("pic/a.jpg", 9, 2, 0, 0);
    uint8_t s0[2049], s1[2049], want[4097];
    const uint8_t *sh[2] = {s0, s1};
    struct obj_idx_body b = {.shard = sh, .shard_len = 2049, .k = 2};
    void *body = NULL;

    (void)st;
    for (size_t i = 0; i < sizeof(want); i++)
        want[i] = (uint8_t)(i * 31 + 7);
    memcpy(s0, want, 2049);
    memcpy(s1, want + 2049, 2048);
    s1[2048] = 0; /* padding past the size */
    a->k = 2;
    a2->k = 2;
    a2->size = 4097;
    assert_int_equal(a->size, 4097);
    b.size = 4097;
    assert_int_equal(obj_idx_bucket_set(x, "bb", 1), 0);
    assert_int_equal(obj_idx_put_body(x, "bb", a, &b, NULL), 0);
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bb", "pic/a.jpg", 9, &got, &body), 0);
    ent_equal(a, got);
    assert_non_null(body);
    assert_memory_equal(body, want, sizeof(want));
    obj_ent_free(got);
    free(body);
    /* a missing key: no entry, no body */
    assert_int_equal(obj_idx_lookup_body_nb(x, "bb", "pic/b", 5, &got, &body),
                     -ENOENT);
    assert_null(got);
    assert_null(body);
    /* another version's record (as put_many or an older binary writes it:
     * the body table untouched) is never answered with the old bytes */
    assert_int_equal(obj_idx_put_many(x, "bb", &a2, 1), 0);
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bb", "pic/a.jpg", 9, &got, &body), 0);
    assert_int_equal(got->version, 2);
    assert_null(body);
    obj_ent_free(got);
    /* an overwrite without a body removes the old one */
    assert_int_equal(obj_idx_put(x, "bb", a, NULL), 0);
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bb", "pic/a.jpg", 9, &got, &body), 0);
    assert_null(body);
    obj_ent_free(got);
    obj_idx_close(x, true);
    assert_int_equal(raw_bodies(false), 0);
    /* damage: the record still reads, the body is not served, counted */
    x = idx_open();
    assert_int_equal(obj_idx_put_body(x, "bb", a, &b, NULL), 0);
    obj_idx_close(x, true);
    assert_int_equal(raw_bodies(true), 1);
    x = idx_open();
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bb", "pic/a.jpg", 9, &got, &body), 0);
    assert_null(body);
    assert_int_equal(obj_idx_body_damaged(x), 1);
    obj_ent_free(got);
    {
        uint64_t n = 9, bad = 9;
        bool stop = false;

        /* the walk of the body table finds the damaged one */
        assert_int_equal(obj_idx_verify_bodies(x, &stop, &n, &bad), 0);
        assert_int_equal(n, 1);
        assert_int_equal(bad, 1);
        /* a good one beside it passes (mk() gives each version its own
         * id, so a2's body has a row of its own next to a's) */
        assert_int_equal(obj_idx_put_body(x, "bb", a2, &b, NULL), 0);
        assert_int_equal(obj_idx_verify_bodies(x, &stop, &n, &bad), 0);
        assert_int_equal(n, 2);
        assert_int_equal(bad, 1);
        /* a's good body replaces the damaged one */
        assert_int_equal(obj_idx_put_body(x, "bb", a, &b, NULL), 0);
        assert_int_equal(obj_idx_verify_bodies(x, &stop, &n, &bad), 0);
        assert_int_equal(n, 2);
        assert_int_equal(bad, 0);
        /* a stop already set ends the walk early at the 4096th body only:
         * with two it completes */
        stop = true;
        assert_int_equal(obj_idx_verify_bodies(x, &stop, &n, &bad), 0);
        assert_int_equal(n, 2);
        assert_int_equal(obj_idx_remove(x, "bb", "pic/a.jpg", 9, NULL), 0);
    }
    /* remove and bucket drop take bodies with them */
    assert_int_equal(obj_idx_put_body(x, "bb", a, &b, NULL), 0);
    assert_int_equal(obj_idx_remove(x, "bb", "pic/a.jpg", 9, NULL), 0);
    assert_int_equal(obj_idx_put_body(x, "bb", a2, &b, NULL), 0);
    assert_int_equal(obj_idx_bucket_set(x, "bb2", 1), 0);
    assert_int_equal(obj_idx_put_body(x, "bb2", a2, &b, NULL), 0);
    obj_idx_close(x, true);
    assert_int_equal(raw_bodies(false), 2);
    x = idx_open();
    assert_int_equal(obj_idx_bucket_drop(x, "bb"), 0);
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "bb2", "pic/a.jpg", 9, &got, &body), 0);
    assert_non_null(body);
    assert_memory_equal(body, want, sizeof(want));
    free(body);
    obj_ent_free(got);
    obj_idx_close(x, true);
    assert_int_equal(raw_bodies(false), 1);
    obj_ent_free(a);
    obj_ent_free(a2);
}

/* The read-ahead after a start is asked for (a small file fits a quarter
 * of any RAM): it was silently never asked while it used mdb_env_info's
 * me_mapaddr, which LMDB sets for MDB_FIXEDMAP maps only. */
static void test_prefetch(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *a = mk("k", 1, 1, 0, 0);

    (void)st;
    assert_int_equal(obj_idx_bucket_set(x, "bp", 1), 0);
    assert_int_equal(obj_idx_put(x, "bp", a, NULL), 0);
    assert_true(obj_idx_prefetch(x));
    obj_idx_close(x, true);
    obj_ent_free(a);
}

/* Puts 3000 records into bucket "br" (a file of ~100 pages, most of
 * which an open does not read) and "k" at version 1. */
static void fill_many(struct obj_idx *x)
{
    struct obj_ent *a = mk("k", 1, 1, 0, 0);

    assert_int_equal(obj_idx_bucket_set(x, "br", 1), 0);
    assert_int_equal(obj_idx_put(x, "br", a, NULL), 0);
    obj_ent_free(a);
    for (int i = 0; i < 3000; i++) {
        char k[32];
        int n = snprintf(k, sizeof(k), "many/%06d", i);

        a = mk(k, (size_t)n, 2, 0, 0);
        assert_int_equal(obj_idx_put(x, "br", a, NULL), 0);
        obj_ent_free(a);
    }
}

/* Drops @path from the page cache; true when mincore then shows none of
 * its pages (a tmpfs keeps them). */
static bool evict_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    bool none = false;

    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &sb), 0);
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    {
        size_t len = (size_t)sb.st_size, pages = (len + 4095) / 4096;
        unsigned char *vec = calloc(pages, 1);
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

        assert_non_null(vec);
        assert_true(m != MAP_FAILED);
        assert_int_equal(mincore(m, len, vec), 0);
        none = true;
        for (size_t i = 0; i < pages; i++)
            none = none && (vec[i] & 1) == 0;
        munmap(m, len);
        free(vec);
    }
    close(fd);
    return none;
}

/* Reads @path through, so all of it is in the page cache. */
static void load_file(const char *path)
{
    char buf[65536];
    int fd = open(path, O_RDONLY);

    assert_true(fd >= 0);
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    close(fd);
}

/* An index file that is not all in the page cache is never looked up on
 * the event loop (a page fault there would wait for the disk): the
 * loop-side lookups answer -EAGAIN and count it, the blocking ones work;
 * once the file is read in, the check lets the loop-side ones run. */
static void test_resident(void **st)
{
    char d2[256], path[300];
    const char *where = dir;
    struct obj_idx *x = idx_open();
    struct obj_ent *got;
    struct obj_idx_res_pass pass;
    void *body;
    uint64_t rewarmed;
    int steps;

    (void)st;
    assert_true(obj_idx_resident(x)); /* just written: in the cache */
    fill_many(x);
    obj_idx_close(x, true);
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    if (!evict_file(path)) { /* a tmpfs: try the build tree's disk */
        snprintf(d2, sizeof(d2), "build/obj_idx_test.XXXXXX");
        assert_non_null(mkdtemp(d2));
        snprintf(path, sizeof(path), "%s/data.mdb", d2);
        assert_int_equal(obj_idx_open(d2, true, &x), 0);
        fill_many(x);
        obj_idx_close(x, true);
        assert_true(evict_file(path));
        where = d2;
    }
    assert_int_equal(obj_idx_open(where, false, &x), 0);
    assert_false(obj_idx_resident(x));
    assert_int_equal(obj_idx_lookup_nb(x, "br", "k", 1, &got), -EAGAIN);
    assert_null(got);
    assert_int_equal(obj_idx_lookup_body_nb(x, "br", "k", 1, &got, &body),
                     -EAGAIN);
    assert_null(got);
    assert_null(body);
    assert_int_equal(obj_idx_cold_nb(x), 2);
    assert_int_equal(obj_idx_lookup(x, "br", "k", 1, &got), 0);
    obj_ent_free(got);
    assert_false(obj_idx_resident_check(x)); /* one lookup read few pages */
    load_file(path);
    assert_true(obj_idx_resident_check(x));
    assert_int_equal(obj_idx_lookup_nb(x, "br", "k", 1, &got), 0);
    assert_int_equal(got->version, 1);
    obj_ent_free(got);
    assert_int_equal(obj_idx_cold_nb(x), 2);
    /* the periodic check (a store thread's steps): the file evicted while
     * open (the pages this process's lookups mapped stay) turns the hint
     * false, so the loop stops looking up; read in again, true */
    (void)evict_file(path);
    assert_true(obj_idx_resident(x)); /* nothing checked yet */
    memset(&pass, 0, sizeof(pass));
    for (steps = 1; !obj_idx_resident_step(x, &pass, false); steps++)
        assert_true(steps < 100);
    assert_false(obj_idx_resident(x));
    assert_int_equal(obj_idx_resident_lost(x), 1);
    assert_int_equal(obj_idx_lookup_nb(x, "br", "k", 1, &got), -EAGAIN);
    assert_int_equal(obj_idx_cold_nb(x), 3);
    for (steps = 1; !obj_idx_resident_step(x, &pass, false); steps++)
        assert_true(steps < 100);
    assert_false(obj_idx_resident(x)); /* still out: stays false */
    assert_int_equal(obj_idx_resident_lost(x), 1);
    load_file(path);
    for (steps = 1; !obj_idx_resident_step(x, &pass, false); steps++)
        assert_true(steps < 100);
    assert_true(obj_idx_resident(x));
    assert_int_equal(obj_idx_lookup_nb(x, "br", "many/000100", 11, &got), 0);
    obj_ent_free(got);
    assert_int_equal(obj_idx_cold_nb(x), 3);
    /* re-warming (background reads allowed): evicted again, the pass that
     * finds it out asks its windows back in, and a later pass finds the
     * whole file in, with no lookup and no read by anyone else */
    (void)evict_file(path);
    rewarmed = obj_idx_rewarmed(x);
    for (steps = 1; !obj_idx_resident_step(x, &pass, true); steps++)
        assert_true(steps < 100);
    assert_false(obj_idx_resident(x));
    assert_int_equal(obj_idx_resident_lost(x), 2);
    assert_true(obj_idx_rewarmed(x) > rewarmed);
    for (int tries = 0; !obj_idx_resident(x); tries++) {
        assert_true(tries < 1000); /* 10 s for an asynchronous read-ahead */
        (void)usleep(10000);
        for (steps = 1; !obj_idx_resident_step(x, &pass, true); steps++)
            assert_true(steps < 100);
    }
    assert_int_equal(obj_idx_cold_nb(x), 3);
    obj_idx_close(x, false);
    if (where != dir)
        assert_int_equal(stor_rmtree(d2), 0);
}

/* Kilobytes of /proc/self/smaps field @field ("Rss:") of the largest
 * mapping of @path's inode at offset 0 (LMDB's map). */
static long map_kb(const char *path, const char *field)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    struct stat sb;
    unsigned long best = 0, cur = 0;
    long kb = -1;
    bool in = false;

    assert_non_null(f);
    assert_int_equal(stat(path, &sb), 0);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi, off, ino;

        if (sscanf(line, "%lx-%lx %*s %lx %*s %lu", &lo, &hi, &off, &ino) ==
            4) {
            in = off == 0 && ino == (unsigned long)sb.st_ino && hi - lo > best;
            cur = hi - lo;
            continue;
        }
        if (in && strncmp(line, field, strlen(field)) == 0) {
            char *end;

            errno = 0;
            kb = strtol(line + strlen(field), &end, 10);
            assert_true(errno == 0 && end != line + strlen(field));
            best = cur;
        }
    }
    fclose(f);
    return kb;
}

/* The read-ahead of a cold index reads all of a file bigger than the
 * device's read-ahead window (one WILLNEED of the whole file read 8 MiB of
 * it and dropped the rest), and maps every page of it, LMDB's free pages
 * too, so a write that takes a free page costs no reader a page fault. */
/* Puts @rounds x 500 entries PFX%06d (version i + 1, @nh headers) into
 * @bucket, each with a body of 3000 bytes of @shard, 500 per transaction. */
static void put_bodies(struct obj_idx *x, const char *bucket, const char *pfx,
                       int rounds, int nh, const uint8_t *shard)
{
    struct obj_ent *es[500];
    const uint8_t *sh[1] = {shard};
    struct obj_idx_body b = {
        .shard = sh, .shard_len = 3000, .k = 1, .size = 3000};
    const struct obj_idx_body *bs[500];

    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 500; i++) {
            char k[32];
            int n = snprintf(k, sizeof(k), "%s%06d", pfx, r * 500 + i);

            es[i] = mk(k, (size_t)n, (uint64_t)(r * 500 + i + 1), nh, 0);
            es[i]->size = 3000;
            memcpy(es[i]->id, &(uint32_t){(uint32_t)(r * 500 + i)}, 4);
            bs[i] = &b;
        }
        assert_int_equal(obj_idx_put_many_body(x, bucket, es, bs, 500), 0);
        for (int i = 0; i < 500; i++)
            obj_ent_free(es[i]);
    }
}

static void test_prefetch_whole(void **st)
{
    char d2[256], path[300];
    const char *where = dir;
    struct obj_idx *x = idx_open();
    struct obj_ent *got;
    static uint8_t shard[3000];
    struct stat sb;
    void *body;

    (void)st;
    obj_idx_close(x, true);
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    if (!evict_file(path)) { /* a tmpfs: the build tree's disk */
        snprintf(d2, sizeof(d2), "build/obj_idx_test.XXXXXX");
        assert_non_null(mkdtemp(d2));
        snprintf(path, sizeof(path), "%s/data.mdb", d2);
        where = d2;
    }
    assert_int_equal(obj_idx_open(where, true, &x), 0);
    assert_int_equal(obj_idx_bucket_set(x, "pw", 1), 0);
    /* 8000 bodies of 3000 bytes, one page each: a file of ~32 MiB */
    put_bodies(x, "pw", "w/", 16, 0, shard);
    /* free pages: the bodies of the first half replaced by none */
    for (int i = 0; i < 4000; i += 2) {
        char k[32];
        int n = snprintf(k, sizeof(k), "w/%06d", i);

        assert_int_equal(obj_idx_remove(x, "pw", k, (size_t)n, NULL), 0);
    }
    obj_idx_close(x, true);
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > (24 << 20));
    assert_true(evict_file(path));
    assert_int_equal(obj_idx_open(where, false, &x), 0);
    assert_false(obj_idx_resident(x));
    assert_true(obj_idx_prefetch(x));
    /* all of it in the page cache (MADV_POPULATE_READ waited for the
     * reads), and all of it mapped: the free pages as well */
    assert_true(obj_idx_resident_check(x));
    assert_true(map_kb(path, "Rss:") * 1024 >= (long)sb.st_size);
    assert_int_equal(
        obj_idx_lookup_body_nb(x, "pw", "w/007999", 8, &got, &body), 0);
    assert_int_equal(got->version, 8000);
    assert_non_null(body);
    obj_ent_free(got);
    free(body);
    obj_idx_close(x, false);
    if (where != dir)
        assert_int_equal(stor_rmtree(d2), 0);
}

/* obj_idx_space and obj_idx_compact_to: an index with many free pages (half
 * of its bodies removed) is copied compacted; the copy is smaller, has
 * (almost) no free pages, opens as an index with the same state, bucket
 * count and content sum (obj_idx_verify), records and bodies; the source
 * stays usable; a copy that cannot be written leaves no file. */
static void test_compact(void **st)
{
    char d2[300], path[320];
    struct obj_idx *x = idx_open(), *y;
    struct obj_ent *es[1], *got;
    static uint8_t shard[3000];
    struct obj_idx_state sa = {.format = OBJ_IDX_FORMAT,
                               .gen = 7,
                               .last_version = 99},
                         sb2;
    uint64_t nfree, size, nfree2, size2, n;
    void *body;
    struct stat sb;

    (void)st;
    memcpy(sa.deployment, "0123456789abcdef0123456789abcdef", 33);
    for (size_t i = 0; i < sizeof(shard); i++)
        shard[i] = (uint8_t)(i * 13);
    assert_int_equal(obj_idx_state_set(x, &sa), 0);
    assert_int_equal(obj_idx_bucket_set(x, "cp", 1), 0);
    put_bodies(x, "cp", "c/", 4, 1, shard);
    for (int i = 0; i < 2000; i += 2) { /* one transaction each */
        char k[32];
        int kn = snprintf(k, sizeof(k), "c/%06d", i);

        assert_int_equal(obj_idx_remove(x, "cp", k, (size_t)kn, NULL), 0);
    }
    assert_int_equal(obj_idx_space(x, &nfree, &size), 0);
    assert_true(nfree >= (2u << 20)); /* >= 1000 bodies' pages */
    assert_true(nfree < size);

    snprintf(d2, sizeof(d2), "%s/copy", dir);
    assert_int_equal(mkdir(d2, 0755), 0);
    snprintf(path, sizeof(path), "%s/data.mdb", d2);
    assert_int_equal(obj_idx_compact_to(x, path), 0);
    assert_int_equal(stat(path, &sb), 0);
    assert_true((uint64_t)sb.st_size + nfree / 2 <= size);

    /* the source still serves and writes (not part of the copy) */
    assert_int_equal(obj_idx_lookup(x, "cp", "c/000001", 8, &got), 0);
    assert_int_equal(got->version, 2);
    obj_ent_free(got);
    es[0] = mk("c/zzz", 5, 5000, 0, 0);
    assert_int_equal(obj_idx_put(x, "cp", es[0], NULL), 0);
    obj_ent_free(es[0]);
    obj_idx_close(x, true);

    assert_int_equal(obj_idx_open(d2, false, &y), 0);
    assert_int_equal(obj_idx_space(y, &nfree2, &size2), 0);
    assert_true(nfree2 <= 16 * 4096); /* LMDB's open may add a page or two */
    assert_true(size2 + nfree / 2 <= size);
    assert_int_equal(obj_idx_state_get(y, &sb2), 0);
    assert_int_equal(sb2.format, sa.format);
    assert_string_equal(sb2.deployment, sa.deployment);
    assert_int_equal(sb2.gen, 7);
    assert_int_equal(sb2.last_version, 99);
    assert_int_equal(obj_idx_verify(y, "cp", NULL, &n), 0);
    assert_int_equal(n, 1000);
    assert_int_equal(obj_idx_bucket_get(y, "cp", NULL, &n), 0);
    assert_int_equal(n, 1000);
    for (int i = 0; i < 2000; i++) {
        char k[32];
        int kn = snprintf(k, sizeof(k), "c/%06d", i);
        int rc = obj_idx_lookup_body(y, "cp", k, (size_t)kn, &got, &body);

        if (i % 2 == 0) {
            assert_int_equal(rc, -ENOENT);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(got->version, (uint64_t)i + 1);
        assert_int_equal(got->nhdrs, 1);
        assert_non_null(body);
        assert_memory_equal(body, shard, 3000);
        obj_ent_free(got);
        free(body);
    }
    assert_int_equal(obj_idx_lookup(y, "cp", "c/zzz", 5, &got), -ENOENT);
    /* a copy that cannot be written: an error, no file */
    snprintf(path, sizeof(path), "%s/none/data.mdb", d2);
    assert_int_equal(obj_idx_compact_to(y, path), -ENOENT);
    assert_int_equal(access(path, F_OK), -1);
    obj_idx_close(y, false);
}

/* The same, with every check by mmap + mincore (a kernel before 6.5, or
 * one that refuses cachestat(2)); the first run used cachestat where the
 * kernel has it. Last: the switch is for the whole process. */
static void test_resident_mincore(void **st)
{
    obj_idx_res_no_cachestat();
    test_resident(st);
}

/* More readers at once than the pool holds: the blocking path makes its
 * own transaction, the nonblocking one answers -EAGAIN. */
static void test_reader_pool_exhausted(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_idx_cur *c[70];
    struct obj_ent *e = mk("k", 1, 1, 0, 0), *got;
    int nb_again = 0;

    (void)st;
    assert_int_equal(obj_idx_put(x, "b", e, NULL), 0);
    for (int i = 0; i < 70; i++)
        assert_int_equal(obj_idx_cur_open(x, "b", &c[i]), 0);
    nb_again = obj_idx_lookup_nb(x, "b", "k", 1, &got) == -EAGAIN;
    assert_true(nb_again);
    assert_int_equal(obj_idx_lookup(x, "b", "k", 1, &got), 0);
    obj_ent_free(got);
    for (int i = 0; i < 70; i++)
        obj_idx_cur_close(c[i]);
    assert_int_equal(obj_idx_lookup_nb(x, "b", "k", 1, &got), 0);
    obj_ent_free(got);
    obj_ent_free(e);
    obj_idx_close(x, false);
}

/* Keys in flight: added, listed, cleared by a put of that object or by
 * pend_clear, dropped all at once; and the version lease. */
static void test_pend_and_lease(void **st)
{
    struct obj_idx *x = idx_open();
    struct obj_ent *e = mk("k2", 2, 3, 0, 0);
    uint8_t id1[16] = {1}, id2[16];
    char seen[256] = "";
    uint64_t lease = 0;

    (void)st;
    memcpy(id2, e->id, 16);
    assert_int_equal(obj_idx_pend_add(x, "b", id1, "k1", 2), 0);
    assert_int_equal(obj_idx_pend_add(x, "b", id2, "k2", 2), 0);
    assert_int_equal(obj_idx_pend_add(x, "c", id1, "k1", 2), 0);
    assert_int_equal(obj_idx_pend_each(x, pend_cb, seen), 0);
    assert_non_null(strstr(seen, "b:1:k1,"));
    assert_non_null(strstr(seen, "c:1:k1,"));
    assert_non_null(strstr(seen, ":k2,"));
    /* the commit's index write clears its key */
    assert_int_equal(obj_idx_put(x, "b", e, NULL), 0);
    seen[0] = 0;
    assert_int_equal(obj_idx_pend_each(x, pend_cb, seen), 0);
    assert_null(strstr(seen, ":k2,"));
    assert_int_equal(obj_idx_pend_clear(x, "c", id1), 0);
    assert_int_equal(obj_idx_pend_clear(x, "c", id1), 0); /* not there: ok */
    seen[0] = 0;
    assert_int_equal(obj_idx_pend_each(x, pend_cb, seen), 0);
    assert_string_equal(seen, "b:1:k1,");
    assert_int_equal(obj_idx_pend_drop_all(x), 0);
    seen[0] = 0;
    assert_int_equal(obj_idx_pend_each(x, pend_cb, seen), 0);
    assert_string_equal(seen, "");
    assert_int_equal(obj_idx_lease_get(x, &lease), -ENOENT);
    assert_int_equal(obj_idx_lease_set(x, 123456789012345ULL), 0);
    obj_idx_close(x, true);
    x = idx_open();
    assert_int_equal(obj_idx_lease_get(x, &lease), 0);
    assert_int_equal(lease, 123456789012345ULL);
    obj_ent_free(e);
    obj_idx_close(x, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rec_roundtrip),
        cmocka_unit_test(test_rec_extent_refs),
        cmocka_unit_test(test_rec_kept_at_base),
        cmocka_unit_test_setup_teardown(test_put_pair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_pair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_missing_and_garbage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buckets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_lookup_remove, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_long_keys_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cursor_bucket_bounds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_put_many_and_reopen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reader_pool_exhausted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pend_and_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resident, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefetch_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resident_mincore, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

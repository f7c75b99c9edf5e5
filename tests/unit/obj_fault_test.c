/* tests/unit/obj_fault_test.c - faults on real drive directories through
 * storaged/store/object.h: lost drives (renamed away), corrupt shard bytes,
 * too many losses (error, never wrong bytes), write quorum, stale drives
 * that missed overwrites and deletes (at run time and across a reopen),
 * and healing (rebuilt shards survive a further loss). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storaged/store/obj_i.h"
#include "storaged/store/obj_idx.h"

#include "tests/unit/obj_test_env.h"

/* A store over @n drives with default geometry and bucket "bkt". */
static struct env *fault_env(size_t n)
{
    struct env *e = env_new("objfault", n, 0, -1);

    assert_int_equal(stor_bucket_create(e->s, "bkt"), 0);
    return e;
}

/* Takes drive @i away (rename) or brings it back. */
static void drive_away(struct env *e, size_t i, bool away)
{
    char a[400];

    snprintf(a, sizeof(a), "%s.away", e->paths[i]);
    if (away)
        assert_int_equal(rename(e->paths[i], a), 0);
    else
        assert_int_equal(rename(a, e->paths[i]), 0);
}

static int put(struct stor_store *s, const char *k, const uint8_t *d, size_t n)
{
    struct stor_put *p;
    int ret = stor_put_begin(s, "bkt", k, strlen(k), (int64_t)n, NULL, 0, &p);

    if (ret < 0)
        return ret;
    ret = stor_put_write(p, d, n);
    if (ret < 0) {
        stor_put_abort(p);
        return ret;
    }
    return stor_put_commit(p, NULL, NULL);
}

/* 0 when the whole object reads back equal to @want; the error otherwise
 * (and then it must not have returned wrong bytes). */
static int get_cmp(struct stor_store *s, const char *k, const uint8_t *want,
                   size_t n)
{
    struct stor_get *g;
    uint8_t *buf = malloc(n + 1);
    ssize_t r;
    int ret = stor_get_open(s, "bkt", k, strlen(k), NULL, &g);

    if (ret < 0) {
        free(buf);
        return ret;
    }
    r = n ? stor_get_read(g, 0, buf, n) : 0;
    stor_get_close(g);
    if (r < 0) {
        free(buf);
        return (int)r;
    }
    assert_int_equal((size_t)r, n);
    assert_memory_equal(buf, want, n);
    free(buf);
    return 0;
}

/* Every file of @k on the drives: metas and shard files, in a list. */
static size_t obj_files(struct env *e, const char *k, char out[][PATH_MAX],
                        size_t max)
{
    uint8_t id[16];
    char hx[33];
    size_t n = 0;

    obj_key_id(e->s, k, strlen(k), id);
    obj_hex(id, 16, hx);
    for (size_t d = 0; d < e->n; d++) {
        char dir[PATH_MAX];
        DIR *dp;
        struct dirent *de;

        if (snprintf(dir, sizeof(dir), "%s/b/bkt/%.2s", e->paths[d], hx) >=
            (int)sizeof(dir))
            continue;
        dp = opendir(dir);
        if (dp == NULL)
            continue;
        while ((de = readdir(dp)) != NULL && n < max)
            if (strncmp(de->d_name, hx, 32) == 0 &&
                snprintf(out[n], PATH_MAX, "%s/%s", dir, de->d_name) < PATH_MAX)
                n++;
        closedir(dp);
    }
    return n;
}

/* Flips @nbytes random bytes of @path. */
static void corrupt(const char *path, int nbytes)
{
    struct stat st;
    int fd = open(path, O_RDWR);

    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    for (int i = 0; i < nbytes && st.st_size > 0; i++) {
        off_t off = (off_t)(xr() % (uint64_t)st.st_size);
        uint8_t c;

        assert_int_equal(pread(fd, &c, 1, off), 1);
        c ^= (uint8_t)(1 + xr() % 255);
        assert_int_equal(pwrite(fd, &c, 1, off), 1);
    }
    close(fd);
}

#define NOBJ 5
static const size_t sizes[NOBJ] = {0, 4096, 100 * 1024, 1536 * 1024 + 7,
                                   40 * 1024};

static void put_all(struct env *e, uint8_t **data)
{
    for (int i = 0; i < NOBJ; i++) {
        char k[32];

        snprintf(k, sizeof(k), "o%d", i);
        data[i] = malloc(sizes[i] + 1);
        fill(data[i], sizes[i], (uint64_t)i + 100);
        assert_int_equal(put(e->s, k, data[i], sizes[i]), 0);
    }
}

static void test_lose_any_four(void **st)
{
    struct env *e = fault_env(16);
    uint8_t *data[NOBJ];

    (void)st;
    put_all(e, data);
    for (int t = 0; t < 12; t++) {
        size_t lost[4];

        for (int i = 0; i < 4; i++) {
            bool dup;

            do {
                lost[i] = xr() % 16;
                dup = false;
                for (int j = 0; j < i; j++)
                    dup |= lost[j] == lost[i];
            } while (dup);
            drive_away(e, lost[i], true);
        }
        for (int i = 0; i < NOBJ; i++) {
            char k[32];

            snprintf(k, sizeof(k), "o%d", i);
            assert_int_equal(get_cmp(e->s, k, data[i], sizes[i]), 0);
        }
        for (int i = 0; i < 4; i++)
            drive_away(e, lost[i], false);
    }
    /* five lost drives: a full-width object must fail, never lie */
    for (size_t i = 0; i < 5; i++)
        drive_away(e, i, true);
    assert_int_equal(get_cmp(e->s, "o3", data[3], sizes[3]), -STOR_EDATA);
    assert_int_equal(get_cmp(e->s, "o2", data[2], sizes[2]), -STOR_EDATA);
    for (size_t i = 0; i < 5; i++)
        drive_away(e, i, false);
    for (int i = 0; i < NOBJ; i++)
        free(data[i]);
    env_free(e);
}

static void test_corrupt_and_heal(void **st)
{
    struct env *e = fault_env(16);
    uint8_t *data[NOBJ];
    char files[64][PATH_MAX];
    struct stor_store_stats ss;

    (void)st;
    put_all(e, data);
    for (int i = 1; i < NOBJ; i++) {
        char k[32];
        size_t n, pick[4];

        snprintf(k, sizeof(k), "o%d", i);
        n = obj_files(e, k, files, 64);
        assert_true(n >= 5);
        /* corrupt 4 distinct files (metas or shard files): at most 4
         * shards are bad, since a meta and a shard file on one drive are
         * the same shard */
        for (int c = 0; c < 4; c++) {
            bool dup;

            do {
                pick[c] = xr() % n;
                dup = false;
                for (int j = 0; j < c; j++)
                    dup |= pick[j] == pick[c];
            } while (dup);
        }
        for (int c = 0; c < 4; c++)
            corrupt(files[pick[c]], 3);
        assert_int_equal(get_cmp(e->s, k, data[i], sizes[i]), 0);
        /* heal, then lose four whole drives: still exact */
        assert_true(obj_heal_object(e->s, "bkt", k, strlen(k), true) >= 0);
        for (size_t d = 0; d < 4; d++)
            drive_away(e, (size_t)(xr() % 4) * 4 + d, true);
        assert_int_equal(get_cmp(e->s, k, data[i], sizes[i]), 0);
        for (size_t d = 0; d < 16; d++) {
            char a[400];
            struct stat sb;

            snprintf(a, sizeof(a), "%s.away", e->paths[d]);
            if (stat(a, &sb) == 0)
                drive_away(e, d, false);
        }
    }
    stor_store_get_stats(e->s, &ss);
    assert_true(ss.degraded_reads > 0);
    assert_true(ss.corrupt_found > 0);
    assert_true(ss.shards_healed > 0);
    /* five corrupt shards of a 12+4 object: an error, never wrong bytes */
    {
        size_t n = obj_files(e, "o3", files, 64);
        int done = 0;

        for (size_t f = 0; f < n && done < 5; f++) {
            size_t fl = strlen(files[f]);

            if (fl > 2 && strcmp(files[f] + fl - 2, ".m") != 0) {
                corrupt(files[f], 50);
                done++;
            }
        }
        assert_int_equal(done, 5);
        assert_int_equal(get_cmp(e->s, "o3", data[3], sizes[3]), -STOR_EDATA);
    }
    for (int i = 0; i < NOBJ; i++)
        free(data[i]);
    env_free(e);
}

static void test_write_quorum(void **st)
{
    struct env *e = fault_env(16);
    uint8_t d[200000];
    struct stor_put *p;

    (void)st;
    fill(d, sizeof(d), 5);
    for (size_t i = 0; i < 4; i++)
        drive_away(e, i * 3, true);
    obj_probe_drives(e->s);
    assert_int_equal(put(e->s, "w-small", d, 4096), 0);
    assert_int_equal(put(e->s, "w-mid", d, 100000), 0);
    assert_int_equal(put(e->s, "w-big", d, sizeof(d)), 0);
    drive_away(e, 1, true);
    obj_probe_drives(e->s);
    assert_int_equal(stor_put_begin(e->s, "bkt", "w-fail", 6, 10, NULL, 0, &p),
                     -STOR_EQUORUM);
    drive_away(e, 1, false);
    for (size_t i = 0; i < 4; i++)
        drive_away(e, i * 3, false);
    obj_probe_drives(e->s);
    assert_int_equal(get_cmp(e->s, "w-small", d, 4096), 0);
    assert_int_equal(get_cmp(e->s, "w-big", d, sizeof(d)), 0);
    /* heal the returned drives, then lose four others: still exact */
    assert_true(obj_heal_object(e->s, "bkt", "w-big", 5, true) > 0);
    assert_true(obj_heal_object(e->s, "bkt", "w-mid", 5, true) > 0);
    for (size_t i = 0; i < 4; i++)
        drive_away(e, i * 3 + 1, true);
    assert_int_equal(get_cmp(e->s, "w-big", d, sizeof(d)), 0);
    assert_int_equal(get_cmp(e->s, "w-mid", d, 100000), 0);
    for (size_t i = 0; i < 4; i++)
        drive_away(e, i * 3 + 1, false);
    env_free(e);
}

static void test_stale_drive(void **st)
{
    struct env *e = fault_env(4);
    uint8_t oldd[300000], newd[300000];
    struct stor_list_result r;
    const int nk = 24;

    (void)st;
    fill(oldd, sizeof(oldd), 1);
    fill(newd, sizeof(newd), 2);
    for (int i = 0; i < nk; i++) {
        char k[32];

        snprintf(k, sizeof(k), "k%02d", i);
        assert_int_equal(put(e->s, k, oldd, i % 3 == 0 ? 200000 : 5000), 0);
    }
    drive_away(e, 2, true);
    obj_probe_drives(e->s);
    for (int i = 0; i < nk; i++) {
        char k[32];

        snprintf(k, sizeof(k), "k%02d", i);
        if (i % 2)
            assert_int_equal(stor_obj_delete(e->s, "bkt", k, strlen(k)), 0);
        else
            assert_int_equal(put(e->s, k, newd, i % 3 == 0 ? 5000 : 200000), 0);
    }
    drive_away(e, 2, false);
    obj_probe_drives(e->s);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < nk; i++) {
            char k[32];

            snprintf(k, sizeof(k), "k%02d", i);
            if (i % 2)
                assert_int_equal(get_cmp(e->s, k, newd, 0), -STOR_ENOKEY);
            else
                assert_int_equal(
                    get_cmp(e->s, k, newd, i % 3 == 0 ? 5000 : 200000), 0);
        }
        assert_int_equal(stor_obj_list(e->s, "bkt", NULL, NULL, NULL, 100, &r),
                         0);
        assert_int_equal(r.nobjs, nk / 2);
        for (size_t i = 0; i < r.nobjs; i++)
            assert_int_equal(r.objs[i].size, (i * 2) % 3 == 0 ? 5000 : 200000);
        stor_list_result_fini(&r);
        /* reopen: the returned drive's old copies must not win */
        stor_store_close(e->s);
        env_open(e, 0, -1);
    }
    env_free(e);
}

static void test_drive_checks(void **st)
{
    struct env *e = fault_env(4), *other = fault_env(4);
    struct stor_store_opts o = {0};
    const char *dup[4];
    const char *mixed[4];
    struct stor_store *s2;
    char *err = NULL;

    (void)st;
    stor_store_close(e->s);
    e->s = NULL;
    dup[0] = e->paths[0];
    dup[1] = e->paths[1];
    dup[2] = e->paths[2];
    dup[3] = e->paths[2];
    o.drives = dup;
    o.ndrives = 4;
    o.ec_parity = -1;
    assert_true(stor_store_open(&o, &s2, &err) < 0);
    assert_non_null(strstr(err, "duplicated"));
    free(err);
    mixed[0] = e->paths[0];
    mixed[1] = e->paths[1];
    mixed[2] = e->paths[2];
    mixed[3] = other->paths[3];
    o.drives = mixed;
    assert_true(stor_store_open(&o, &s2, &err) < 0);
    assert_non_null(strstr(err, "another deployment"));
    free(err);
    env_open(e, 0, -1);
    env_free(e);
    env_free(other);
}

/* The same, but the deletes and overwrites happen before anything noticed
 * the drive was gone (no probe ran): still no resurrection at restart. */
static void test_stale_drive_unnoticed(void **st)
{
    struct env *e = fault_env(4);
    uint8_t oldd[5000], newd[5000];
    struct stor_list_result r;

    (void)st;
    fill(oldd, sizeof(oldd), 1);
    fill(newd, sizeof(newd), 2);
    for (int i = 0; i < 12; i++) {
        char k[32];

        snprintf(k, sizeof(k), "u%02d", i);
        assert_int_equal(put(e->s, k, oldd, sizeof(oldd)), 0);
    }
    drive_away(e, 0, true);
    /* deletes first: nothing has failed on drive 0 yet */
    for (int i = 1; i < 12; i += 2) {
        char k[32];

        snprintf(k, sizeof(k), "u%02d", i);
        assert_int_equal(stor_obj_delete(e->s, "bkt", k, strlen(k)), 0);
    }
    for (int i = 0; i < 12; i += 2) {
        char k[32];

        snprintf(k, sizeof(k), "u%02d", i);
        assert_int_equal(put(e->s, k, newd, sizeof(newd)), 0);
    }
    drive_away(e, 0, false);
    stor_store_close(e->s);
    env_open(e, 0, -1);
    assert_int_equal(stor_obj_list(e->s, "bkt", NULL, NULL, NULL, 100, &r), 0);
    assert_int_equal(r.nobjs, 6);
    stor_list_result_fini(&r);
    for (int i = 0; i < 12; i++) {
        char k[32];

        snprintf(k, sizeof(k), "u%02d", i);
        if (i % 2)
            assert_int_equal(get_cmp(e->s, k, newd, 0), -STOR_ENOKEY);
        else
            assert_int_equal(get_cmp(e->s, k, newd, sizeof(newd)), 0);
    }
    env_free(e);
}

/* A drive away while its bucket is deleted and re-created keeps the old
 * bucket's objects: they must not appear in the new bucket. */
static void test_stale_bucket(void **st)
{
    struct env *e = fault_env(4);
    uint8_t d[3000];
    struct stor_list_result r;

    (void)st;
    fill(d, sizeof(d), 4);
    for (int i = 0; i < 10; i++) {
        char k[32];

        snprintf(k, sizeof(k), "old%02d", i);
        assert_int_equal(put(e->s, k, d, sizeof(d)), 0);
    }
    drive_away(e, 1, true);
    obj_probe_drives(e->s);
    for (int i = 0; i < 10; i++) {
        char k[32];

        snprintf(k, sizeof(k), "old%02d", i);
        assert_int_equal(stor_obj_delete(e->s, "bkt", k, strlen(k)), 0);
    }
    assert_int_equal(stor_bucket_delete(e->s, "bkt"), 0);
    assert_int_equal(stor_bucket_create(e->s, "bkt"), 0);
    assert_int_equal(put(e->s, "new", d, sizeof(d)), 0);
    drive_away(e, 1, false);
    for (int round = 0; round < 2; round++) {
        stor_store_close(e->s);
        env_open(e, 0, -1);
        assert_int_equal(stor_obj_list(e->s, "bkt", NULL, NULL, NULL, 100, &r),
                         0);
        assert_int_equal(r.nobjs, 1);
        assert_string_equal(r.objs[0].key, "new");
        stor_list_result_fini(&r);
        assert_int_equal(get_cmp(e->s, "new", d, sizeof(d)), 0);
    }
    env_free(e);
}

/* Copies file @from to @to. */
static void copy_file(const char *from, const char *to)
{
    char buf[1 << 16];
    int a = open(from, O_RDONLY),
        b = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n;

    assert_true(a >= 0 && b >= 0);
    while ((n = read(a, buf, sizeof(buf))) > 0)
        assert_int_equal(write(b, buf, (size_t)n), n);
    close(a);
    close(b);
}

/* kill -9 in the middle of overwriting an inline 12+4 object: 8 drives
 * already have the new meta, 8 the old one, every drive the saved old
 * copy (HEX.p). Neither version has 12 metas of its own; the saved copies
 * bring the old one back whole, and the next start settles the files. */
static void test_interrupted_inline_overwrite(void **st)
{
    struct env *e = fault_env(16);
    uint8_t v1[100000], v2[100000];
    char files[64][PATH_MAX], saved[16][PATH_MAX];
    size_t n;

    (void)st;
    fill(v1, sizeof(v1), 1);
    fill(v2, sizeof(v2), 2);
    assert_int_equal(put(e->s, "ow", v1, sizeof(v1)), 0);
    n = obj_files(e, "ow", files, 64);
    assert_int_equal(n, 16); /* 12+4 inline: one meta per drive */
    for (size_t i = 0; i < n; i++) {
        snprintf(saved[i], PATH_MAX, "%s.saved", files[i]);
        copy_file(files[i], saved[i]);
    }
    assert_int_equal(put(e->s, "ow", v2, sizeof(v2)), 0);
    /* a kill -9 in the middle of the commit: the index is left dirty with
     * the key in flight, and the next start settles it from the metas */
    {
        uint8_t id[16];

        obj_key_id(e->s, "ow", 2, id);
        assert_int_equal(obj_idx_pend_add(e->s->idx, "bkt", id, "ow", 2), 0);
    }
    e->s->idx_ready = false;
    stor_store_close(e->s);
    for (size_t i = 0; i < n; i++) {
        char pv[PATH_MAX];

        snprintf(pv, sizeof(pv), "%s", files[i]);
        pv[strlen(pv) - 1] = 'p';
        copy_file(saved[i], pv);
        if (i % 2)
            copy_file(saved[i], files[i]); /* not yet renamed over */
        unlink(saved[i]);
    }
    env_open(e, 0, -1);
    assert_int_equal(get_cmp(e->s, "ow", v1, sizeof(v1)), 0);
    assert_int_equal(obj_files(e, "ow", files, 64), 16); /* .p gone */
    /* and it survives a loss of four drives: every .m is v1 again */
    for (size_t d = 0; d < 4; d++)
        drive_away(e, d, true);
    assert_int_equal(get_cmp(e->s, "ow", v1, sizeof(v1)), 0);
    for (size_t d = 0; d < 4; d++)
        drive_away(e, d, false);
    env_free(e);
}

/* A drive replaced by an empty directory is formatted into its slot at
 * open; healing rebuilds its shards, which then carry reads alone. */
static void test_replaced_drive(void **st)
{
    struct env *e = fault_env(16);
    uint8_t *data[NOBJ];

    (void)st;
    put_all(e, data);
    stor_store_close(e->s);
    assert_int_equal(stor_rmtree(e->paths[5]), 0);
    assert_int_equal(stor_mkdirs(e->paths[5]), 0);
    env_open(e, 0, -1);
    for (int i = 0; i < NOBJ; i++) {
        char k[32];

        snprintf(k, sizeof(k), "o%d", i);
        assert_true(obj_heal_object(e->s, "bkt", k, strlen(k), true) >= 0);
    }
    /* lose four drives other than the new one: every object still whole,
     * so the new drive's shards must be right */
    for (size_t d = 0; d < 4; d++)
        drive_away(e, d, true);
    for (int i = 0; i < NOBJ; i++) {
        char k[32];

        snprintf(k, sizeof(k), "o%d", i);
        assert_int_equal(get_cmp(e->s, k, data[i], sizes[i]), 0);
    }
    for (size_t d = 0; d < 4; d++)
        drive_away(e, d, false);
    for (int i = 0; i < NOBJ; i++)
        free(data[i]);
    env_free(e);
}

struct race {
    struct stor_store *s;
    int id;
    int *stop; /* atomic */
    int reads, mismatches, errors;
};

/* Object content for generation @g: its size and bytes both derive from
 * g, and the first 8 bytes carry g, so a reader can check any copy. */
static size_t gen_size(uint64_t g)
{
    static const size_t sz[] = {16, 4096, 20000, 130000, 800000};

    return sz[g % 5];
}

static void gen_fill(uint8_t *p, uint64_t g)
{
    size_t n = gen_size(g);

    fill(p, n, g);
    memcpy(p, &g, 8);
}

static void *race_writer(void *arg)
{
    struct race *r = arg;
    uint8_t *b = malloc(800000);
    uint64_t g = (uint64_t)r->id << 32;

    while (!__atomic_load_n(r->stop, __ATOMIC_RELAXED)) {
        char k[8];

        snprintf(k, sizeof(k), "r%d", (int)(g % 3));
        gen_fill(b, g);
        if (put(r->s, k, b, gen_size(g)) < 0)
            r->errors++;
        if (g % 7 == 0)
            if (stor_obj_delete(r->s, "bkt", k, strlen(k)) < 0)
                r->errors += 0; /* may race with another delete */
        g++;
    }
    free(b);
    return NULL;
}

static void *race_reader(void *arg)
{
    struct race *r = arg;
    uint8_t *b = malloc(800000), *want = malloc(800000);

    while (!__atomic_load_n(r->stop, __ATOMIC_RELAXED)) {
        struct stor_get *g;
        struct stor_obj_info info;
        char k[8];
        uint64_t gen;
        ssize_t n;

        snprintf(k, sizeof(k), "r%d", r->reads % 3);
        r->reads++;
        if (stor_get_open(r->s, "bkt", k, strlen(k), &info, &g) < 0)
            continue;
        /* read in two halves, letting writers race in between */
        n = stor_get_read(g, 0, b, (size_t)info.size / 2);
        if (n >= 0)
            n += stor_get_read(g, info.size / 2, b + info.size / 2,
                               (size_t)(info.size - info.size / 2));
        stor_get_close(g);
        if (n != (ssize_t)info.size) {
            r->errors++;
        } else {
            memcpy(&gen, b, 8);
            gen_fill(want, gen);
            if (gen_size(gen) != info.size || memcmp(b, want, info.size))
                r->mismatches++;
        }
        stor_obj_info_fini(&info);
    }
    free(b);
    free(want);
    return NULL;
}

/* Overwrites and deletes racing with reads: a reader gets one whole
 * version (whatever it opened), never a mix, never an error. */
static void test_atomic_overwrite(void **st)
{
    struct env *e = fault_env(4);
    pthread_t th[4];
    struct race r[4];
    int stop = 0;
    int reads = 0;

    (void)st;
    for (int i = 0; i < 4; i++) {
        r[i] = (struct race){.s = e->s, .id = i, .stop = &stop};
        pthread_create(&th[i], NULL, i < 2 ? race_writer : race_reader, &r[i]);
    }
    usleep(1500 * 1000);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].mismatches, 0);
        assert_int_equal(r[i].errors, 0);
        if (i >= 2)
            reads += r[i].reads;
    }
    assert_true(reads > 10);
    env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drive_checks),
        cmocka_unit_test(test_lose_any_four),
        cmocka_unit_test(test_corrupt_and_heal),
        cmocka_unit_test(test_write_quorum),
        cmocka_unit_test(test_stale_drive),
        cmocka_unit_test(test_stale_drive_unnoticed),
        cmocka_unit_test(test_stale_bucket),
        cmocka_unit_test(test_interrupted_inline_overwrite),
        cmocka_unit_test(test_replaced_drive),
        cmocka_unit_test(test_atomic_overwrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

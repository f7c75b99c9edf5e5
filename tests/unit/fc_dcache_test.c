/* tests/unit/fc_dcache_test.c - the on-disk block cache in a temporary
 * directory: a stored block reads back after a reopen; every part of the
 * identity (endpoint, bucket, key, ETag, block size, index) tells blocks
 * apart; a damaged file (flipped byte, truncation, someone else's block
 * under the name) is a miss and is unlinked; a second open is refused
 * while the first holds the lock; the bound is kept by eviction, oldest
 * atime first; blocks big enough to be read with O_DIRECT (sizes around
 * the 4 KiB alignment, short reads of a longer want) read back exactly
 * and are dropped when damaged. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fuse/cache.h"
#include "fuse/dcache.h"

static char g_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof(g_dir), "/tmp/fc_dcache_test.XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static struct fc_dcache *open_dc(const char *endpoint, uint64_t max)
{
    struct fc_dcache_conf c = {
        .dir = g_dir, .max_bytes = max, .endpoint = endpoint, .bucket = "b"};
    struct fc_dcache *dc = NULL;

    assert_int_equal(fc_dcache_open(&c, &dc), 0);
    return dc;
}

static bool has(struct fc_dcache *dc, const char *key, const char *etag,
                uint64_t idx, size_t bs, const char *want, size_t n)
{
    char *data;
    size_t len;
    bool ok;

    if (fc_dcache_get(dc, key, etag, idx, bs, 8192, &data, &len) < 0)
        return false;
    ok = len == n && (n == 0 || memcmp(data, want, n) == 0);
    fc_cache_buf_free(data);
    assert_true(ok);
    return true;
}

/* The only block file in the cache (there must be exactly one). */
static void only_file(char *out, size_t cap)
{
    char cmd[160];
    FILE *p;

    snprintf(cmd, sizeof(cmd), "find '%s/v1' -type f ! -name '.*'", g_dir);
    p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)cap, p));
    out[strcspn(out, "\n")] = '\0';
    assert_null(fgets(cmd, sizeof(cmd), p));
    pclose(p);
}

static void test_roundtrip_and_identity(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 1 << 30), *dc2;
    struct fc_dcache_conf c = {.dir = g_dir, .endpoint = "x", .bucket = "b"};
    (void)state;

    fc_dcache_put(dc, "k\nx", "\"e1\"", 3, 1 << 20, "hello", 5);
    fc_dcache_put(dc, "z", "\"e1\"", 0, 1 << 20, "", 0);
    assert_true(has(dc, "k\nx", "\"e1\"", 3, 1 << 20, "hello", 5));
    assert_true(has(dc, "z", "\"e1\"", 0, 1 << 20, "", 0));
    assert_false(has(dc, "k\nx", "\"e2\"", 3, 1 << 20, NULL, 0));
    assert_false(has(dc, "k\nx", "\"e1\"", 2, 1 << 20, NULL, 0));
    assert_false(has(dc, "k\nx", "\"e1\"", 3, 1 << 19, NULL, 0));
    assert_false(has(dc, "k", "\"e1\"", 3, 1 << 20, NULL, 0));
    assert_false(has(dc, "k\nx", "", 3, 1 << 20, NULL, 0));
    /* held: a second open is refused */
    assert_int_equal(fc_dcache_open(&c, &dc2), -EBUSY);
    fc_dcache_close(dc);
    /* another endpoint's blocks are not ours; ours are back after reopen */
    dc = open_dc("http://other", 1 << 30);
    assert_false(has(dc, "k\nx", "\"e1\"", 3, 1 << 20, NULL, 0));
    fc_dcache_close(dc);
    dc = open_dc("http://a", 1 << 30);
    assert_true(has(dc, "k\nx", "\"e1\"", 3, 1 << 20, "hello", 5));
    fc_dcache_drop(dc, "k\nx", "\"e1\"", 1 << 20, 4);
    assert_false(has(dc, "k\nx", "\"e1\"", 3, 1 << 20, NULL, 0));
    fc_dcache_close(dc);
}

static void damage(int how)
{
    char path[256];
    struct stat st;
    int fd;

    only_file(path, sizeof(path));
    assert_int_equal(stat(path, &st), 0);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    if (how == 0) {
        char b;
        assert_int_equal(pread(fd, &b, 1, st.st_size - 1), 1);
        b ^= 1;
        assert_int_equal(pwrite(fd, &b, 1, st.st_size - 1), 1);
    } else if (how == 1) {
        assert_int_equal(ftruncate(fd, st.st_size - 1), 0);
    } else if (how == 2) {
        assert_int_equal(ftruncate(fd, 0), 0);
    } else {
        assert_int_equal(pwrite(fd, "junk", 4, st.st_size), 4);
    }
    close(fd);
}

static void test_damaged_files_dropped(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 1 << 30);
    char big[4096];
    (void)state;

    memset(big, 'q', sizeof(big));
    for (int how = 0; how < 4; how++) {
        char path[256];
        fc_dcache_put(dc, "k", "\"e\"", 0, 4096, big, how == 3 ? 100 : 4096);
        damage(how);
        assert_false(has(dc, "k", "\"e\"", 0, 4096, NULL, 0));
        /* unlinked: nothing is left to serve */
        fc_dcache_put(dc, "other", "\"e\"", 0, 4096, "x", 1);
        only_file(path, sizeof(path));
        fc_dcache_drop(dc, "other", "\"e\"", 4096, 1);
    }
    fc_dcache_close(dc);
}

/* Reads @key's block with a want of @want; true when it is @n bytes of
 * @p. */
static bool has_big(struct fc_dcache *dc, const char *key, size_t want,
                    const char *p, size_t n)
{
    char *data;
    size_t len;
    bool ok;

    if (fc_dcache_get(dc, key, "\"e\"", 0, 1 << 20, want, &data, &len) < 0)
        return false;
    ok = len == n && memcmp(data, p, n) == 0;
    fc_cache_buf_free(data);
    return ok;
}

static void test_big_blocks_direct(void **state)
{
    static const size_t sizes[] = {128 << 10,        (128 << 10) + 1,
                                   (256 << 10) - 77, 256 << 10,
                                   (1 << 20) - 4096, 1 << 20};
    struct fc_dcache *dc = open_dc("http://a", 1 << 30);
    char *big = malloc((1 << 20) + 64); /* big + i, i < 64 */
    (void)state;

    assert_non_null(big);
    for (size_t i = 0; i < (1 << 20) + 64; i++)
        big[i] = (char)(i * 7 + i / 4096);
    for (size_t i = 0; i < CM_ARRAY_SIZE(sizes); i++) {
        char key[32];
        snprintf(key, sizeof(key), "big%zu", i);
        fc_dcache_put(dc, key, "\"e\"", 0, 1 << 20, big + i, sizes[i]);
        assert_true(has_big(dc, key, sizes[i], big + i, sizes[i]));
        /* a want past the stored length (the object's last block) */
        assert_true(has_big(dc, key, 1 << 20, big + i, sizes[i]));
        /* a want shorter than what is stored is a miss, not a cut */
        assert_false(has_big(dc, key, sizes[i] - 1, NULL, 0));
        fc_dcache_drop(dc, key, "\"e\"", 1 << 20, 1);
    }
    for (int how = 0; how < 4; how++) {
        char path[256];
        fc_dcache_put(dc, "k", "\"e\"", 0, 1 << 20, big,
                      how == 3 ? 200 << 10 : 300 << 10);
        damage(how);
        assert_false(has_big(dc, "k", 1 << 20, NULL, 0));
        fc_dcache_put(dc, "other", "\"e\"", 0, 4096, "x", 1);
        only_file(path, sizeof(path)); /* the damaged one is gone */
        fc_dcache_drop(dc, "other", "\"e\"", 4096, 1);
    }
    free(big);
    fc_dcache_close(dc);
}

static void test_eviction_oldest_first(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 64 << 10);
    char blk[8000], key[16];
    (void)state;

    memset(blk, 'b', sizeof(blk));
    assert_int_equal(fc_dcache_start(dc), 0);
    fc_dcache_put(dc, "hot", "\"e\"", 0, 0, blk, sizeof(blk));
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "cold%d", i);
        fc_dcache_put(dc, key, "\"e\"", 0, 0, blk, sizeof(blk));
        usleep(2000);
        assert_true(has(dc, "hot", "\"e\"", 0, 0, blk, sizeof(blk)));
    }
    usleep(300000); /* the eviction thread */
    assert_true(has(dc, "hot", "\"e\"", 0, 0, blk, sizeof(blk)));
    assert_false(has(dc, "cold0", "\"e\"", 0, 0, NULL, 0));
    assert_true(has(dc, "cold19", "\"e\"", 0, 0, blk, sizeof(blk)));
    fc_dcache_close(dc);
}

/* A store that replaces a block's file adds its size to the byte estimate
 * again (nothing is kept per block to subtract): an estimate far over
 * the bound with the files themselves under it must evict nothing (an
 * eviction pass frees only what its own scan finds over 90% of the
 * bound; before, the inflated need emptied the cache). */
static void test_inflated_estimate_evicts_nothing(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 64 << 10);
    char blk[8000], key[16], st[512];
    (void)state;

    memset(blk, 'r', sizeof(blk));
    assert_int_equal(fc_dcache_start(dc), 0);
    for (int i = 0; i < 3; i++) { /* 3 files of 12 KiB: 36 of 64 KiB */
        snprintf(key, sizeof(key), "k%d", i);
        fc_dcache_put(dc, key, "\"e\"", 0, 0, blk, sizeof(blk));
    }
    for (int i = 0; i < 12; i++) /* the estimate passes 64 KiB */
        fc_dcache_put(dc, "k0", "\"e\"", 0, 0, blk, sizeof(blk));
    usleep(300000); /* the eviction thread's pass */
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_true(has(dc, key, "\"e\"", 0, 0, blk, sizeof(blk)));
    }
    assert_true(fc_dcache_stats_format(dc, st, sizeof(st)) > 0);
    assert_non_null(strstr(st, " dcache_evicted=0 "));
    fc_dcache_close(dc);
}

static void count_done(void *ctx, void *arg)
{
    (*(int *)ctx)++;
    assert_string_equal((const char *)arg, "blk");
}

/* Queued stores are written by the writer thread (all of them by close),
 * and each calls its done callback once; without the thread nothing is
 * queued. */
static void test_async_stores(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 1 << 30);
    char key[16], arg[] = "blk";
    int done = 0;
    (void)state;

    assert_false(fc_dcache_put_async(dc, "k", "\"e\"", 0, 0, "x", 1, count_done,
                                     &done, arg));
    assert_int_equal(fc_dcache_start(dc), 0);
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "a%d", i);
        assert_true(fc_dcache_put_async(dc, key, "\"e\"", 0, 0, "data", 4,
                                        count_done, &done, arg));
    }
    fc_dcache_close(dc);
    assert_int_equal(done, 50);
    dc = open_dc("http://a", 1 << 30);
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "a%d", i);
        assert_true(has(dc, key, "\"e\"", 0, 0, "data", 4));
    }
    fc_dcache_close(dc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_and_identity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_big_blocks_direct, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_damaged_files_dropped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_eviction_oldest_first, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_async_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inflated_estimate_evicts_nothing,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/unit/fc_dcache_test.c - the on-disk block cache in a temporary
 * directory: a stored block reads back after a reopen; every part of the
 * identity (endpoint, bucket, key, ETag, block size, index) tells blocks
 * apart; a damaged record (flipped byte, cut, someone else's block under
 * the hash) is a miss and is dropped; a record cut off by a crash and a
 * torn index entry are dropped at the next open; a second open is refused
 * while the first holds the lock; the bound is kept by eviction, least
 * recently used first; blocks big enough to be read with O_DIRECT (sizes
 * around the 4 KiB alignment, short reads of a longer want) read back
 * exactly and are dropped when damaged; a cache of the old layout (v1) is
 * removed. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* The newest segment's record file (@ext "seg") or index ("idx"). */
static void newest(char *out, size_t cap, const char *ext)
{
    char cmd[160];
    FILE *p;

    snprintf(cmd, sizeof(cmd), "ls '%s/v2/'*.%s | sort | tail -n 1", g_dir,
             ext);
    p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)cap, p));
    out[strcspn(out, "\n")] = '\0';
    pclose(p);
}

/* The last index entry of the newest segment: the last block stored. */
struct ient {
    uint8_t h[16];
    uint64_t off;
    uint32_t datalen, idlen, flags, crc;
};

static void last_record(char *seg, size_t cap, struct ient *e)
{
    char idx[256];
    struct stat st;
    int fd;

    newest(seg, cap, "seg");
    newest(idx, sizeof(idx), "idx");
    fd = open(idx, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(st.st_size >= 40);
    assert_int_equal(pread(fd, e, 40, st.st_size - 40), 40);
    close(fd);
}

static unsigned long stat_of(struct fc_dcache *dc, const char *name)
{
    char st[512], pat[64], *p;

    assert_true(fc_dcache_stats_format(dc, st, sizeof(st)) > 0);
    snprintf(pat, sizeof(pat), " %s=", name);
    p = strstr(st, pat);
    assert_non_null(p);
    return strtoul(p + strlen(pat), NULL, 10);
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

/* Damages the last block stored: 0 flips a data byte, 1 cuts the record
 * in its trailer, 2 empties the segment, 3 flips a byte of the stored id
 * (someone else's block under the hash). */
static void damage(int how)
{
    char path[256], b;
    struct ient e;
    int fd;

    last_record(path, sizeof(path), &e);
    fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    if (how == 0 || how == 3) {
        off_t at =
            (off_t)(how == 0 ? e.off : e.off + e.datalen + 32 + e.idlen - 1);
        assert_int_equal(pread(fd, &b, 1, at), 1);
        b ^= 1;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
    } else if (how == 1) {
        assert_int_equal(ftruncate(fd, (off_t)(e.off + e.datalen + 10)), 0);
    } else {
        assert_int_equal(ftruncate(fd, 0), 0);
    }
    close(fd);
}

/* A damaged block is a miss, counted once: its record is dropped. */
static void damaged_is_dropped(struct fc_dcache *dc, const char *key, size_t bs,
                               size_t want)
{
    unsigned long c0 = stat_of(dc, "dcache_corrupt");
    char *data;
    size_t len;

    assert_int_equal(fc_dcache_get(dc, key, "\"e\"", 0, bs, want, &data, &len),
                     -ENOENT);
    assert_int_equal(stat_of(dc, "dcache_corrupt"), c0 + 1);
    assert_int_equal(fc_dcache_get(dc, key, "\"e\"", 0, bs, want, &data, &len),
                     -ENOENT);
    assert_int_equal(stat_of(dc, "dcache_corrupt"), c0 + 1);
}

static void test_damaged_files_dropped(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 1 << 30);
    char big[4096];
    (void)state;

    memset(big, 'q', sizeof(big));
    for (int how = 0; how < 4; how++) {
        fc_dcache_put(dc, "k", "\"e\"", 0, 4096, big, how == 3 ? 100 : 4096);
        assert_true(has(dc, "k", "\"e\"", 0, 4096, big, how == 3 ? 100 : 4096));
        damage(how);
        damaged_is_dropped(dc, "k", 4096, 8192);
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
        size_t n = how == 3 ? 200 << 10 : 300 << 10;
        fc_dcache_put(dc, "k", "\"e\"", 0, 1 << 20, big, n);
        assert_true(has_big(dc, "k", 1 << 20, big, n));
        damage(how);
        damaged_is_dropped(dc, "k", 1 << 20, 1 << 20);
    }
    free(big);
    fc_dcache_close(dc);
}

/* Pages of @path in the page cache. */
static size_t cached_pages(const char *path)
{
    unsigned char vec[1024];
    struct stat st;
    size_t n = 0, pages;
    void *m;
    int fd = open(path, O_RDONLY);

    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    pages = ((size_t)st.st_size + 4095) / 4096;
    assert_true(pages > 0 && pages <= sizeof(vec));
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(mincore(m, (size_t)st.st_size, vec), 0);
    for (size_t i = 0; i < pages; i++)
        n += vec[i] & 1;
    munmap(m, (size_t)st.st_size);
    close(fd);
    return n;
}

/* A big block buffer (page-aligned data) is written from where it is,
 * its whole pages in place and the rest copied, and reads back exactly
 * into a buffer of its own; where the file system takes O_DIRECT, none of
 * the segment is left in the page cache by the store or the reads. */
static void test_inplace_direct(void **state)
{
    static const size_t sizes[] = {512 << 10, (600 << 10) - 77, 256 << 10};
    struct fc_dcache *dc = open_dc("http://a", 1 << 30);
    char *buf = fc_cache_buf_alloc(600 << 10), seg[256], probe[128];
    bool dio;
    int fd;
    (void)state;

    assert_non_null(buf);
    assert_int_equal((uintptr_t)buf % FC_CACHE_BUF_ALIGN, 0);
    for (size_t i = 0; i < (600 << 10); i++)
        buf[i] = (char)(i * 13 + i / 4096);
    for (size_t i = 0; i < CM_ARRAY_SIZE(sizes); i++) {
        char key[16];
        snprintf(key, sizeof(key), "ip%zu", i);
        fc_dcache_put(dc, key, "\"e\"", 0, 1 << 20, buf, sizes[i]);
    }
    for (size_t i = 0; i < CM_ARRAY_SIZE(sizes); i++) {
        char key[16];
        snprintf(key, sizeof(key), "ip%zu", i);
        assert_true(has_big(dc, key, 1 << 20, buf, sizes[i]));
    }
    snprintf(probe, sizeof(probe), "%s/probe", g_dir);
    fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
    dio = fd >= 0;
    if (fd >= 0)
        close(fd);
    newest(seg, sizeof(seg), "seg");
    if (dio)
        assert_int_equal(cached_pages(seg), 0);
    fc_cache_buf_free(buf);
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

/* A block stored again (a race of two readers, or a re-read after the
 * block cache dropped it) is not appended again: the bytes of the same id
 * are the same. Stores of one block must not grow the cache past its
 * bound nor evict the others (the one-file-per-block layout evicted the
 * recently read blocks on such an estimate). */
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
    usleep(300000);
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

/* After a crash: a record cut off its segment's end and a torn index
 * entry are dropped at the next open (counted), the other blocks hit, and
 * the lost one is stored again; a dropped block stays dropped after a
 * reopen (its drop entry). */
static void test_reopen_after_crash(void **state)
{
    struct fc_dcache *dc = open_dc("http://a", 1 << 30);
    char blk[5000], seg[256], idx[256];
    struct ient e;
    struct stat st;
    int fd;
    (void)state;

    memset(blk, 'c', sizeof(blk));
    fc_dcache_put(dc, "a", "\"e\"", 0, 0, blk, sizeof(blk));
    fc_dcache_put(dc, "b", "\"e\"", 0, 0, blk, sizeof(blk));
    fc_dcache_put(dc, "gone", "\"e\"", 0, 0, blk, sizeof(blk));
    fc_dcache_put(dc, "c", "\"e\"", 0, 0, blk, 77);
    fc_dcache_drop(dc, "gone", "\"e\"", 0, 1);
    fc_dcache_close(dc);
    last_record(seg, sizeof(seg), &e); /* "gone"'s drop entry */
    assert_int_equal(e.flags, 1);
    /* "c" is the last record, 4 KiB: cut it */
    assert_int_equal(stat(seg, &st), 0);
    assert_int_equal(truncate(seg, st.st_size - 4096 + 50), 0);
    newest(idx, sizeof(idx), "idx");
    fd = open(idx, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "torn-entry-17byte", 17), 17);
    close(fd);

    dc = open_dc("http://a", 1 << 30);
    assert_true(stat_of(dc, "dcache_corrupt") >= 1);
    assert_true(has(dc, "a", "\"e\"", 0, 0, blk, sizeof(blk)));
    assert_true(has(dc, "b", "\"e\"", 0, 0, blk, sizeof(blk)));
    assert_false(has(dc, "gone", "\"e\"", 0, 0, NULL, 0));
    assert_false(has(dc, "c", "\"e\"", 0, 0, NULL, 0));
    fc_dcache_put(dc, "c", "\"e\"", 0, 0, blk, 77);
    fc_dcache_close(dc);
    dc = open_dc("http://a", 1 << 30);
    assert_true(has(dc, "c", "\"e\"", 0, 0, blk, 77));
    assert_int_equal(stat_of(dc, "dcache_files"), 3);
    fc_dcache_close(dc);
}

/* A cache of the one-file-per-block layout (DIR/v1) is removed by the
 * writer thread, never read. */
static void test_old_layout_removed(void **state)
{
    struct fc_dcache *dc;
    char path[128];
    struct stat st;
    FILE *f;
    (void)state;

    snprintf(path, sizeof(path), "%s/v1", g_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/v1/ab", g_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/v1/ab/0123456789abcdef", g_dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("ECFSDC1\n", f);
    fclose(f);
    dc = open_dc("http://a", 1 << 30);
    assert_int_equal(fc_dcache_start(dc), 0);
    fc_dcache_close(dc);
    snprintf(path, sizeof(path), "%s/v1", g_dir);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(errno, ENOENT);
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
        cmocka_unit_test_setup_teardown(test_inplace_direct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_oldest_first, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_async_stores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inflated_estimate_evicts_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_after_crash, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_old_layout_removed, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

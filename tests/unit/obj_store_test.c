/* tests/unit/obj_store_test.c - the object layer through
 * storaged/store/object.h on real temp drive directories: round trips of edge
 * sizes over several geometries with random ranges, overwrite, delete, listing
 * order and roll-ups, awkward keys, multipart, reopen (index reload), ellipsis.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storaged/store/drive.h"
#include "storaged/store/object.h"

#include "tests/unit/obj_test_env.h"

static int put(struct stor_store *s, const char *b, const char *k, size_t kl,
               const uint8_t *d, size_t n, bool known, size_t chunk)
{
    struct stor_put *p;
    struct stor_obj_info info;
    int ret = stor_put_begin(s, b, k, kl, known ? (int64_t)n : -1, NULL, 0, &p);

    if (ret < 0)
        return ret;
    for (size_t off = 0; off < n; off += chunk) {
        ret = stor_put_write(p, d + off, n - off < chunk ? n - off : chunk);
        if (ret < 0) {
            stor_put_abort(p);
            return ret;
        }
    }
    ret = stor_put_commit(p, NULL, &info);
    if (ret == 0)
        stor_obj_info_fini(&info);
    return ret;
}

/* Reads [off, off+len) and compares with @want. */
static void check_range(struct stor_store *s, const char *b, const char *k,
                        size_t kl, const uint8_t *want, size_t size,
                        uint64_t off, size_t len)
{
    struct stor_get *g;
    struct stor_obj_info info;
    uint8_t *buf = malloc(len + 1);
    ssize_t r;

    assert_int_equal(stor_get_open(s, b, k, kl, &info, &g), 0);
    assert_int_equal(info.size, size);
    stor_obj_info_fini(&info);
    r = stor_get_read(g, off, buf, len);
    assert_true(r >= 0);
    if (off >= size)
        assert_int_equal(r, 0);
    else
        assert_int_equal((size_t)r, CM_MIN(len, size - off));
    if (r > 0)
        assert_memory_equal(buf, want + off, (size_t)r);
    stor_get_close(g);
    free(buf);
}

static void roundtrip_geometry(size_t nd, int k, int m)
{
    struct env *e = env_new("objtest", nd, k, m);
    size_t K = k > 0 ? (size_t)k : 1;
    size_t sizes[] = {0,
                      1,
                      4095,
                      4096,
                      4097,
                      48 * 1024,
                      128 * 1024 - 1,
                      128 * 1024,
                      128 * 1024 + 1,
                      K * 65536 - 1,
                      K * 65536,
                      K * 65536 + 1,
                      3 * K * 65536 + 12345,
                      100u << 20};
    uint8_t *d = malloc((100u << 20) + 16);

    assert_int_equal(stor_bucket_create(e->s, "bkt"), 0);
    for (size_t i = 0; i < CM_ARRAY_SIZE(sizes); i++) {
        size_t n = sizes[i];
        char key[64];

        snprintf(key, sizeof(key), "obj/%zu", n);
        fill(d, n, n + 7);
        assert_int_equal(put(e->s, "bkt", key, strlen(key), d, n, i % 2,
                             i % 3 == 0 ? 1000 : 65536 * 3),
                         0);
        check_range(e->s, "bkt", key, strlen(key), d, n, 0, n + 10);
        for (int t = 0; t < 8 && n > 0; t++) {
            uint64_t off = xr() % n;
            size_t len = (size_t)(xr() % (n - off)) + 1;

            check_range(e->s, "bkt", key, strlen(key), d, n, off, len);
        }
    }
    /* reload from disk: everything still reads back */
    stor_store_close(e->s);
    env_open(e, 0, -1);
    for (size_t i = 0; i < CM_ARRAY_SIZE(sizes); i++) {
        size_t n = sizes[i];
        char key[64];

        snprintf(key, sizeof(key), "obj/%zu", n);
        fill(d, n, n + 7);
        check_range(e->s, "bkt", key, strlen(key), d, n, 0, n);
    }
    free(d);
    env_free(e);
}

static void test_rt_1_0(void **st)
{
    (void)st;
    roundtrip_geometry(1, 0, -1);
}
static void test_rt_2_2(void **st)
{
    (void)st;
    roundtrip_geometry(4, 2, 2);
}
static void test_rt_6_2(void **st)
{
    (void)st;
    roundtrip_geometry(8, 6, 2);
}
static void test_rt_12_4(void **st)
{
    (void)st;
    roundtrip_geometry(16, 12, 4);
}

static void test_overwrite_delete_list(void **st)
{
    struct env *e = env_new("objtest", 4, 0, -1);
    uint8_t a[300000], b[5000];
    struct stor_list_result r;
    const char *keys[] = {"a",     "a/b",   "a/b/c",
                          "a//b",  "a/./b", "a/../b",
                          "a/b.m", "z",     "\xc3\xa9t\xc3\xa9",
                          "a/b/"};
    char longkey[1025];
    struct stor_obj_info info;

    (void)st;
    assert_int_equal(stor_bucket_create(e->s, "bkt"), 0);
    assert_int_equal(stor_bucket_create(e->s, "bkt"), -STOR_EBUCKETEXISTS);
    assert_int_equal(stor_bucket_create(e->s, "BAD_name"), -STOR_EINVAL);
    fill(a, sizeof(a), 1);
    fill(b, sizeof(b), 2);
    /* overwrite large with small and back */
    assert_int_equal(put(e->s, "bkt", "x", 1, a, sizeof(a), true, 4096), 0);
    assert_int_equal(put(e->s, "bkt", "x", 1, b, sizeof(b), true, 4096), 0);
    check_range(e->s, "bkt", "x", 1, b, sizeof(b), 0, sizeof(b));
    assert_int_equal(put(e->s, "bkt", "x", 1, a, sizeof(a), false, 7777), 0);
    check_range(e->s, "bkt", "x", 1, a, sizeof(a), 0, sizeof(a));
    assert_int_equal(stor_obj_delete(e->s, "bkt", "x", 1), 0);
    assert_int_equal(stor_obj_delete(e->s, "bkt", "x", 1), -STOR_ENOKEY);
    assert_int_equal(stor_obj_stat(e->s, "bkt", "x", 1, &info), -STOR_ENOKEY);
    /* awkward keys */
    memset(longkey, 'k', 1024);
    longkey[300] = '/';
    longkey[1024] = 0;
    for (size_t i = 0; i < CM_ARRAY_SIZE(keys); i++)
        assert_int_equal(
            put(e->s, "bkt", keys[i], strlen(keys[i]), b, i * 100, true, 50),
            0);
    assert_int_equal(put(e->s, "bkt", longkey, 1024, b, 10, true, 10), 0);
    assert_int_equal(put(e->s, "bkt", longkey, 1025, b, 10, true, 10),
                     -STOR_EINVAL);
    for (size_t i = 0; i < CM_ARRAY_SIZE(keys); i++)
        check_range(e->s, "bkt", keys[i], strlen(keys[i]), b, i * 100, 0,
                    i * 100);
    /* full listing in byte order */
    assert_int_equal(stor_obj_list(e->s, "bkt", NULL, NULL, NULL, 1000, &r), 0);
    assert_int_equal(r.nobjs, CM_ARRAY_SIZE(keys) + 1);
    for (size_t i = 1; i < r.nobjs; i++)
        assert_true(strcmp(r.objs[i - 1].key, r.objs[i].key) < 0);
    stor_list_result_fini(&r);
    /* delimiter roll-up */
    assert_int_equal(stor_obj_list(e->s, "bkt", "a/", "/", NULL, 1000, &r), 0);
    /* a/ -> objects a/b, a/b.m; prefixes a/../, a/./, a//, a/b/
     * ('.' 0x2e sorts before '/' 0x2f) */
    assert_int_equal(r.nobjs, 2);
    assert_string_equal(r.objs[0].key, "a/b");
    assert_string_equal(r.objs[1].key, "a/b.m");
    assert_int_equal(r.nprefixes, 4);
    assert_string_equal(r.prefixes[0], "a/../");
    assert_string_equal(r.prefixes[1], "a/./");
    assert_string_equal(r.prefixes[2], "a//");
    assert_string_equal(r.prefixes[3], "a/b/");
    stor_list_result_fini(&r);
    /* paging with max and after */
    assert_int_equal(stor_obj_list(e->s, "bkt", "a/", "/", NULL, 3, &r), 0);
    assert_true(r.truncated);
    assert_string_equal(r.next_marker, "a//");
    stor_list_result_fini(&r);
    assert_int_equal(stor_obj_list(e->s, "bkt", "a/", "/", "a//", 3, &r), 0);
    assert_int_equal(r.nobjs + r.nprefixes, 3);
    assert_string_equal(r.objs[0].key, "a/b");
    assert_string_equal(r.prefixes[0], "a/b/");
    assert_false(r.truncated);
    stor_list_result_fini(&r);
    assert_int_equal(stor_bucket_delete(e->s, "bkt"), -STOR_ENOTEMPTY);
    assert_int_equal(stor_obj_list(e->s, "nope", NULL, NULL, NULL, 10, &r),
                     -STOR_ENOBUCKET);
    env_free(e);
}

static void test_multipart(void **st)
{
    struct env *e = env_new("objtest", 4, 0, -1);
    size_t psz = 5 * 1024 * 1024 + 17, last = 1000;
    uint8_t *d = malloc(2 * psz + last);
    char uid[STOR_UPLOAD_ID_MAX];
    struct stor_part parts[3];
    struct stor_obj_info info;
    struct stor_part *lp;
    size_t n;
    bool tr;

    (void)st;
    fill(d, 2 * psz + last, 9);
    assert_int_equal(stor_bucket_create(e->s, "bkt"), 0);
    assert_int_equal(stor_mpu_create(e->s, "bkt", "big", 3, NULL, 0, uid), 0);
    for (int i = 0; i < 3; i++) {
        struct stor_put *p;
        size_t off = (size_t)i * psz, len = i < 2 ? psz : last;

        assert_int_equal(stor_mpu_part_begin(e->s, "bkt", "big", 3, uid, i + 1,
                                             (int64_t)len, &p),
                         0);
        assert_int_equal(stor_put_write(p, d + off, len), 0);
        assert_int_equal(stor_put_commit(p, NULL, &info), 0);
        parts[i].number = i + 1;
        memcpy(parts[i].etag, info.etag, sizeof(info.etag));
        stor_obj_info_fini(&info);
    }
    assert_int_equal(stor_mpu_list_parts(e->s, "bkt", "big", 3, uid, 0, 10,
                                         NULL, &lp, &n, &tr),
                     0);
    assert_int_equal(n, 3);
    free(lp);
    /* wrong order and bad etag */
    {
        struct stor_part bad[2] = {parts[1], parts[0]};

        assert_int_equal(
            stor_mpu_complete(e->s, "bkt", "big", 3, uid, bad, 2, NULL),
            -STOR_EPARTORDER);
    }
    assert_int_equal(
        stor_mpu_complete(e->s, "bkt", "big", 3, uid, parts, 3, &info), 0);
    assert_int_equal(info.size, 2 * psz + last);
    assert_non_null(strstr(info.etag, "-3"));
    stor_obj_info_fini(&info);
    check_range(e->s, "bkt", "big", 3, d, 2 * psz + last, 0, 2 * psz + last);
    check_range(e->s, "bkt", "big", 3, d, 2 * psz + last, psz - 100, 300);
    assert_int_equal(stor_mpu_abort(e->s, "bkt", "big", 3, uid),
                     -STOR_ENOUPLOAD);
    free(d);
    env_free(e);
}

static void test_expand(void **st)
{
    char **v;
    size_t n;

    (void)st;
    assert_int_equal(stor_drives_expand("/srv/d{1...16}", &v, &n), 0);
    assert_int_equal(n, 16);
    assert_string_equal(v[0], "/srv/d1");
    assert_string_equal(v[15], "/srv/d16");
    stor_drives_free(v, n);
    assert_int_equal(stor_drives_expand("/m{1...2}/x{01...03}", &v, &n), 0);
    assert_int_equal(n, 6);
    assert_string_equal(v[1], "/m1/x02");
    stor_drives_free(v, n);
    assert_int_equal(stor_drives_expand("/srv/d{3...1}", &v, &n), -EINVAL);
    assert_int_equal(stor_drives_expand("/srv/d{1..3}", &v, &n), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_overwrite_delete_list),
        cmocka_unit_test(test_multipart),
        cmocka_unit_test(test_rt_1_0),
        cmocka_unit_test(test_rt_2_2),
        cmocka_unit_test(test_rt_6_2),
        cmocka_unit_test(test_rt_12_4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

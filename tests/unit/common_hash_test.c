/* tests/unit/common_hash_test.c - digests (FIPS 180 / RFC 1321 vectors),
 * HMAC (RFC 4231), incremental contexts, and the three CRCs against their
 * catalogue check values and a bitwise reference, split at every point. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/codec.h"
#include "common/hash.h"

static void hex_of(const uint8_t *p, size_t n, char *out)
{
    cm_hex_encode(p, n, out);
}

static void test_sha256(void **state)
{
    uint8_t md[CM_SHA256_LEN];
    char hex[65];

    (void)state;
    cm_sha256_hex("", 0, hex);
    assert_string_equal(
        hex,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cm_sha256_hex("abc", 3, hex);
    assert_string_equal(
        hex,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    cm_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
              md);
    hex_of(md, sizeof(md), hex);
    assert_string_equal(
        hex,
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_md5(void **state)
{
    uint8_t md[CM_MD5_LEN];
    char hex[33];

    (void)state;
    cm_md5("", 0, md);
    hex_of(md, sizeof(md), hex);
    assert_string_equal(hex, "d41d8cd98f00b204e9800998ecf8427e");
    cm_md5("abc", 3, md);
    hex_of(md, sizeof(md), hex);
    assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72");
}

static void test_hmac(void **state)
{
    uint8_t mac[CM_SHA256_LEN], key[131];
    char hex[65];

    (void)state;
    /* RFC 4231 test case 2 */
    cm_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
    hex_of(mac, sizeof(mac), hex);
    assert_string_equal(
        hex,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* RFC 4231 test case 6: key longer than the block size */
    memset(key, 0xaa, sizeof(key));
    cm_hmac_sha256(key, sizeof(key),
                   "Test Using Larger Than Block-Size Key - Hash Key First", 54,
                   mac);
    hex_of(mac, sizeof(mac), hex);
    assert_string_equal(
        hex,
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    /* empty key and message: HMAC-SHA256("", "") */
    cm_hmac_sha256("", 0, "", 0, mac);
    hex_of(mac, sizeof(mac), hex);
    assert_string_equal(
        hex,
        "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

/* A key prepared once (cm_hmac_sha256_key_init) MACs like cm_hmac_sha256:
 * RFC 4231 case 2, and keys of 0..131 bytes over messages of 0..200
 * bytes, the same key reused for several messages. */
static void test_hmac_pre(void **state)
{
    static const size_t klens[] = {0, 1, 4, 32, 63, 64, 65, 131};
    static const size_t mlens[] = {0, 1, 55, 56, 64, 119, 120, 200};
    struct cm_hmac_sha256_key hk;
    uint8_t mac[CM_SHA256_LEN], want[CM_SHA256_LEN], key[131], msg[200];
    char hex[65];
    size_t i, j;

    (void)state;
    cm_hmac_sha256_key_init(&hk, "Jefe", 4);
    cm_hmac_sha256_pre(&hk, "what do ya want for nothing?", 28, mac);
    hex_of(mac, sizeof(mac), hex);
    assert_string_equal(
        hex,
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    for (i = 0; i < sizeof(key); i++)
        key[i] = (uint8_t)(i * 7 + 1);
    for (i = 0; i < sizeof(msg); i++)
        msg[i] = (uint8_t)(i * 13 + 5);
    for (i = 0; i < sizeof(klens) / sizeof(klens[0]); i++) {
        cm_hmac_sha256_key_init(&hk, key, klens[i]);
        for (j = 0; j < sizeof(mlens) / sizeof(mlens[0]); j++) {
            cm_hmac_sha256(key, klens[i], msg, mlens[j], want);
            cm_hmac_sha256_pre(&hk, msg, mlens[j], mac);
            assert_memory_equal(mac, want, sizeof(mac));
        }
        cm_hmac_sha256_key_wipe(&hk);
    }
}

static void test_digest_incremental(void **state)
{
    static const enum cm_digest_kind kinds[] = {CM_DIGEST_MD5, CM_DIGEST_SHA1,
                                                CM_DIGEST_SHA256};
    static const char *const abc[] = {
        "900150983cd24fb0d6963f7d28e17f72",
        "a9993e364706816aba3e25717850c26c9cd0d89d",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"};
    static const size_t lens[] = {CM_MD5_LEN, CM_SHA1_LEN, CM_SHA256_LEN};
    uint8_t md[64];
    char hex[129];
    size_t k;

    (void)state;
    for (k = 0; k < 3; k++) {
        struct cm_digest *d = cm_digest_create(kinds[k]);
        assert_non_null(d);
        cm_digest_update(d, "a", 1);
        cm_digest_update(d, "", 0);
        cm_digest_update(d, "bc", 2);
        assert_int_equal(cm_digest_final(d, md), lens[k]);
        hex_of(md, lens[k], hex);
        assert_string_equal(hex, abc[k]);
        /* final resets: the context hashes a new message */
        cm_digest_update(d, "abc", 3);
        assert_int_equal(cm_digest_final(d, md), lens[k]);
        hex_of(md, lens[k], hex);
        assert_string_equal(hex, abc[k]);
        cm_digest_destroy(d);
    }
    cm_digest_destroy(NULL);
}

/* Bitwise reflected CRC references (the textbook loop). */
static uint64_t ref_crc(uint64_t poly_refl, int bits, const uint8_t *p,
                        size_t n)
{
    uint64_t mask = bits == 64 ? ~0ULL : ((1ULL << bits) - 1);
    uint64_t crc = mask;
    size_t i;
    int k;

    for (i = 0; i < n; i++) {
        crc ^= p[i];
        for (k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ poly_refl : crc >> 1;
    }
    return ~crc & mask;
}

static void test_crc_check_values(void **state)
{
    (void)state;
    assert_int_equal(cm_crc32(0, "123456789", 9), 0xcbf43926u);
    assert_int_equal(cm_crc32c(0, "123456789", 9), 0xe3069283u);
    assert_true(cm_crc64nvme(0, "123456789", 9) == 0xae8b14860a799888ULL);
    assert_int_equal(cm_crc32(0, "", 0), 0);
    assert_int_equal(cm_crc32c(0, "", 0), 0);
    assert_true(cm_crc64nvme(0, "", 0) == 0);
}

static void test_crc_reference_and_chaining(void **state)
{
    enum { N = 4099 };
    uint8_t *buf = malloc(N);
    size_t n, split;
    uint32_t seed = 12345;

    (void)state;
    assert_non_null(buf);
    for (n = 0; n < N; n++) {
        seed = seed * 1103515245u + 12345u;
        buf[n] = (uint8_t)(seed >> 16);
    }
    /* lengths around the 8-byte slicing and the SIMD folding widths */
    for (n = 0; n < N; n += (n < 300 ? 1 : 211)) {
        assert_int_equal(cm_crc32(0, buf, n),
                         (uint32_t)ref_crc(0xEDB88320u, 32, buf, n));
        assert_int_equal(cm_crc32c(0, buf, n),
                         (uint32_t)ref_crc(0x82F63B78u, 32, buf, n));
        assert_true(cm_crc64nvme(0, buf, n) ==
                    ref_crc(0x9A6C9329AC4BC9B5ULL, 64, buf, n));
    }
    /* continuing from a previous value equals one pass, at every split */
    for (split = 0; split <= 300; split++) {
        assert_int_equal(
            cm_crc32(cm_crc32(0, buf, split), buf + split, 300 - split),
            cm_crc32(0, buf, 300));
        assert_int_equal(
            cm_crc32c(cm_crc32c(0, buf, split), buf + split, 300 - split),
            cm_crc32c(0, buf, 300));
        assert_true(cm_crc64nvme(cm_crc64nvme(0, buf, split), buf + split,
                                 300 - split) == cm_crc64nvme(0, buf, 300));
    }
    free(buf);
}

/* Each thread hashes with its own cached context; results must match the
 * single-threaded ones, and contexts are freed when the threads exit. */
static void *hmac_worker(void *arg)
{
    uint8_t mac[CM_SHA256_LEN];
    char hex[65];
    int i;

    for (i = 0; i < 2000; i++) {
        cm_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
        cm_hex_encode(mac, sizeof(mac), hex);
        if (strcmp(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec"
                        "58b964ec3843") != 0)
            return arg; /* non-NULL: failure */
    }
    return NULL;
}

static void test_threads(void **state)
{
    pthread_t th[4];
    void *res;
    int i;

    (void)state;
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hmac_worker, th), 0);
    for (i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], &res), 0);
        assert_null(res);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_md5),
        cmocka_unit_test(test_hmac),
        cmocka_unit_test(test_hmac_pre),
        cmocka_unit_test(test_digest_incremental),
        cmocka_unit_test(test_crc_check_values),
        cmocka_unit_test(test_crc_reference_and_chaining),
        cmocka_unit_test(test_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

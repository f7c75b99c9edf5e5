/* storaged/store/placement.c - erasure-set rules and object placement.
 *
 * DESIGN: placement hashes "bucket/key" with SipHash-2-4 keyed by the
 * deployment id (RustFS and MinIO do the same), so an attacker cannot aim
 * keys at one set and every deployment spreads differently. The low half of
 * the hash picks the set, the high half the rotation of shard 0 inside it,
 * so small objects (fewer shards than drives) still spread over all drives. */
#include "storaged/store/placement.h"

#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                               \
    do {                                                                       \
        v0 += v1;                                                              \
        v1 = ROTL(v1, 13);                                                     \
        v1 ^= v0;                                                              \
        v0 = ROTL(v0, 32);                                                     \
        v2 += v3;                                                              \
        v3 = ROTL(v3, 16);                                                     \
        v3 ^= v2;                                                              \
        v0 += v3;                                                              \
        v3 = ROTL(v3, 21);                                                     \
        v3 ^= v0;                                                              \
        v2 += v1;                                                              \
        v1 = ROTL(v1, 17);                                                     \
        v1 ^= v2;                                                              \
        v2 = ROTL(v2, 32);                                                     \
    } while (0)

/* Little-endian 64-bit load. */
static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* SipHash-2-4 (Aumasson & Bernstein), written from the paper. */
uint64_t stor_siphash(const uint8_t key[16], const void *p, size_t n)
{
    const uint8_t *in = p;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = (uint64_t)n << 56, m;
    size_t i;

    for (i = 0; i + 8 <= n; i += 8) {
        m = le64(in + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t j = 0; i + j < n; j++)
        b |= (uint64_t)in[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* Contract in placement.h (the table in storaged/FORMAT.md "Drives and sets").
 */
int stor_default_parity(int n)
{
    if (n <= 1)
        return 0;
    if (n <= 3)
        return 1;
    if (n <= 5)
        return 2;
    if (n <= 7)
        return 3;
    return 4;
}

/* Contract in placement.h. */
int stor_choose_set_size(int ndrives)
{
    if (ndrives == 1)
        return 1;
    for (int s = 16; s >= 2; s--)
        if (ndrives % s == 0)
            return s;
    return 0;
}

/* Contract in placement.h. */
int stor_write_quorum(int k, int m)
{
    return k == m ? k + 1 : k;
}

/* Contract in placement.h. */
int stor_small_k(int K, uint64_t size)
{
    uint64_t k = size / STOR_SMALL_UNIT;

    if (k < 1)
        k = 1;
    return k < (uint64_t)K ? (int)k : K;
}

/* Hashes "bucket/key" in one pass over a small stack buffer when it fits. */
void stor_place(const uint8_t dkey[16], const char *bucket, const char *key,
                size_t key_len, int nsets, int set_size, struct stor_place *out)
{
    uint8_t buf[64 + 1 + 1024];
    size_t bl = strlen(bucket);
    uint64_t h;

    if (bl > 64)
        bl = 64;
    if (key_len > 1024)
        key_len = 1024;
    memcpy(buf, bucket, bl);
    buf[bl] = '/';
    memcpy(buf + bl + 1, key, key_len);
    h = stor_siphash(dkey, buf, bl + 1 + key_len);
    out->set = nsets > 0 ? (int)((uint32_t)h % (uint32_t)nsets) : 0;
    out->rot = set_size > 0 ? (int)((h >> 32) % (uint64_t)set_size) : 0;
}

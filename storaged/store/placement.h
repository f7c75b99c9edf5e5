/* storaged/store/placement.h - where an object lives: erasure-set geometry
 * rules and the keyed hash that picks an object's set and shard rotation. Pure
 * functions, no state; the deployment id is the hash key so the placement is
 * stable for the life of a deployment. */
#ifndef STORAGED_STORE_PLACEMENT_H
#define STORAGED_STORE_PLACEMENT_H
#include <stddef.h>
#include <stdint.h>

/* bytes of object per data shard of a small object */
#define STOR_SMALL_UNIT 4096

/* SipHash-2-4 of @p with the 16-byte @key. */
uint64_t stor_siphash(const uint8_t key[16], const void *p, size_t n);

/* Default parity for a set of @n drives (1->0, 2-3->1, 4-5->2, 6-7->3, 8+->4).
 */
int stor_default_parity(int n);

/* Chooses the set size for @ndrives: the largest of 16..2 that divides it,
 * or 1 for one drive; 0 when nothing fits (e.g. 17 drives). */
int stor_choose_set_size(int ndrives);

/* Write quorum of a set: data, +1 when data == parity. */
int stor_write_quorum(int k, int m);

/* Data shards for an object of @size bytes in a set coded K+M:
 * min(K, max(1, size / 4 KiB)). */
int stor_small_k(int K, uint64_t size);

struct stor_place {
    int set; /* erasure set index */
    int rot; /* position in the set of shard 0 */
};
/* Places bucket/key: set = h % nsets, rotation from the high bits. */
void stor_place(const uint8_t dkey[16], const char *bucket, const char *key,
                size_t key_len, int nsets, int set_size,
                struct stor_place *out);

#endif /* STORAGED_STORE_PLACEMENT_H */

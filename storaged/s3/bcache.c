/* storaged/s3/bcache.c - per-loop-thread LRU cache of small object bodies.
 *
 * DESIGN: a uthash table on (bucket, object id) plus a doubly linked LRU
 * list; each entry is one allocation (header + bytes). Correctness does not
 * depend on invalidation: lookups name the version the index holds, and
 * object versions are never reused, so a stale entry is a miss, replaced
 * on the next fill. Integrity: the CRC-64 taken when the entry was filled
 * (from bytes that had just passed the meta record's CRC) is recomputed on
 * every hit; a mismatch (memory corruption) drops the entry and misses. */
#include "storaged/s3/bcache.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "common/hash.h"
#include "common/list.h"

/* The hash key: ids name keys, not buckets, so the bucket is part of it
 * (zero-padded: compared as bytes). */
struct bc_key {
    uint8_t id[16];
    char bucket[64];
};

struct bc_ent {
    struct bc_key key;
    uint64_t version;
    uint64_t crc;
    size_t len;
    struct cm_list lru; /* c->lru: first = most recent */
    UT_hash_handle hh;
    uint8_t data[];
};

struct stor_bcache {
    size_t max_bytes, bytes;
    struct bc_ent *map;
    struct cm_list lru; /* of bc_ent.lru */
};

#define ENT_COST(len) (sizeof(struct bc_ent) + (len))

/* Fills @k for @bucket/@id; -1 when the bucket name is too long. */
static int key_make(struct bc_key *k, const char *bucket, const uint8_t id[16])
{
    size_t n = strlen(bucket);

    if (n >= sizeof(k->bucket))
        return -1;
    memset(k, 0, sizeof(*k));
    memcpy(k->id, id, 16);
    memcpy(k->bucket, bucket, n);
    return 0;
}

/* See header. */
struct stor_bcache *stor_bcache_create(size_t max_bytes)
{
    struct stor_bcache *c;

    if (max_bytes == 0)
        return NULL;
    c = calloc(1, sizeof(*c));
    if (c != NULL) {
        c->max_bytes = max_bytes;
        cm_list_init(&c->lru);
    }
    return c;
}

/* Unlinks @e from the LRU list and the map and frees it. */
static void ent_drop(struct stor_bcache *c, struct bc_ent *e)
{
    cm_list_del(&e->lru);
    HASH_DEL(c->map, e);
    c->bytes -= ENT_COST(e->len);
    free(e);
}

/* See header. */
void stor_bcache_destroy(struct stor_bcache *c)
{
    if (c == NULL)
        return;
    while (!cm_list_empty(&c->lru))
        ent_drop(c, CM_LIST_FIRST(&c->lru, struct bc_ent, lru));
    free(c);
}

/* See header. */
const void *stor_bcache_get(struct stor_bcache *c, const char *bucket,
                            const uint8_t id[16], uint64_t version, size_t len)
{
    struct bc_ent *e;
    struct bc_key k;

    if (c == NULL || key_make(&k, bucket, id) < 0)
        return NULL;
    HASH_FIND(hh, c->map, &k, sizeof(k), e);
    if (e == NULL || e->version != version || e->len != len)
        return NULL;
    if (cm_crc64(0, e->data, e->len) != e->crc) {
        ent_drop(c, e);
        return NULL;
    }
    cm_list_move_front(&c->lru, &e->lru);
    return e->data;
}

/* See header. */
void stor_bcache_put(struct stor_bcache *c, const char *bucket,
                     const uint8_t id[16], uint64_t version, const void *p,
                     size_t len)
{
    struct bc_ent *e;
    struct bc_key k;

    if (c == NULL || ENT_COST(len) > c->max_bytes ||
        key_make(&k, bucket, id) < 0)
        return;
    HASH_FIND(hh, c->map, &k, sizeof(k), e);
    if (e != NULL)
        ent_drop(c, e);
    while (!cm_list_empty(&c->lru) && c->bytes + ENT_COST(len) > c->max_bytes)
        ent_drop(c, CM_LIST_LAST(&c->lru, struct bc_ent, lru));
    e = malloc(ENT_COST(len));
    if (e == NULL)
        return;
    e->key = k;
    e->version = version;
    e->len = len;
    if (len)
        memcpy(e->data, p, len);
    e->crc = cm_crc64(0, e->data, len);
    HASH_ADD(hh, c->map, key, sizeof(k), e);
    cm_list_push_front(&c->lru, &e->lru);
    c->bytes += ENT_COST(len);
}

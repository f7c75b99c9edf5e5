/* storaged/store/ec.h - Reed-Solomon coding over isa-l for the object layer.
 * One immutable codec per (k, m) geometry, built once and cached for the
 * life of the process (k + m <= STOR_EC_MAX_SHARDS). Callers own all shard
 * buffers; the codec owns only its matrices and tables. */
#ifndef STORAGED_STORE_EC_H
#define STORAGED_STORE_EC_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STOR_EC_MAX_SHARDS 32

struct stor_ec;

/* Returns the shared codec for @k data + @m parity shards (1 <= k,
 * 0 <= m, k + m <= STOR_EC_MAX_SHARDS), or NULL on bad geometry / ENOMEM.
 * The result is immutable and never freed; thread-safe. */
const struct stor_ec *stor_ec_get(int k, int m);

/* Computes the m parity shards of one stripe: @data[0..k) are @len bytes
 * each, @parity[0..m) receive @len bytes each. */
void stor_ec_encode(const struct stor_ec *e, size_t len, uint8_t *const *data,
                    uint8_t *const *parity);

/* Rebuilds the shards marked in @want from the shards marked in @present.
 * @shards has k + m pointers to @len-byte buffers (index = shard number);
 * wanted buffers are overwritten. 0, or -EIO when fewer than k shards are
 * present, -ENOMEM on allocation failure. A shard may not be both. */
CM_MUST_CHECK int stor_ec_reconstruct(const struct stor_ec *e, size_t len,
                                      uint8_t *const *shards,
                                      const bool *present, const bool *want);

/* Geometry accessors. */
int stor_ec_k(const struct stor_ec *e);
int stor_ec_m(const struct stor_ec *e);

#endif /* STORAGED_STORE_EC_H */

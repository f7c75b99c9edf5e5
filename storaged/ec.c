/* storaged/ec.c - Reed-Solomon codec cache over isa-l.
 *
 * DESIGN: we use isa-l's Cauchy generator (gf_gen_cauchy1_matrix) because
 * every k x k submatrix of it is invertible, so any k surviving shards can
 * rebuild the rest for every geometry up to 32 shards (the Vandermonde
 * variant is not guaranteed to be). Encode tables are built once per
 * (k, m) and cached; decode tables depend on which shards survived, are
 * cheap for k <= 16 (one k x k inversion) and are built per call. The hot
 * loop is isa-l's ec_encode_data, which picks its SIMD path at run time. */
#include "storaged/ec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <isa-l/erasure_code.h>

struct stor_ec {
    int k, m;
    uint8_t *matrix; /* (k + m) x k generator; owned; immutable */
    uint8_t *tables; /* 32 * k * m encode tables; owned; immutable */
};

static pthread_mutex_t ec_lock = PTHREAD_MUTEX_INITIALIZER;
/* cache[k][m]; protected by ec_lock for writes, read after publication */
static struct stor_ec *ec_cache[STOR_EC_MAX_SHARDS + 1][STOR_EC_MAX_SHARDS + 1];

/* Builds a codec; NULL on ENOMEM. */
static struct stor_ec *ec_create(int k, int m)
{
    struct stor_ec *e = calloc(1, sizeof(*e));

    if (e == NULL)
        return NULL;
    e->k = k;
    e->m = m;
    e->matrix = malloc((size_t)(k + m) * k);
    e->tables = malloc(32 * (size_t)k * (m > 0 ? m : 1));
    if (e->matrix == NULL || e->tables == NULL) {
        free(e->matrix);
        free(e->tables);
        free(e);
        return NULL;
    }
    gf_gen_cauchy1_matrix(e->matrix, k + m, k);
    if (m > 0)
        ec_init_tables(k, m, e->matrix + (size_t)k * k, e->tables);
    return e;
}

/* Returns the cached codec for (k, m), creating it on first use. */
const struct stor_ec *stor_ec_get(int k, int m)
{
    struct stor_ec *e;

    if (k < 1 || m < 0 || k + m > STOR_EC_MAX_SHARDS)
        return NULL;
    e = __atomic_load_n(&ec_cache[k][m], __ATOMIC_ACQUIRE);
    if (e != NULL)
        return e;
    pthread_mutex_lock(&ec_lock);
    e = ec_cache[k][m];
    if (e == NULL) {
        e = ec_create(k, m);
        if (e != NULL)
            __atomic_store_n(&ec_cache[k][m], e, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ec_lock);
    return e;
}

int stor_ec_k(const struct stor_ec *e)
{
    return e->k;
}

int stor_ec_m(const struct stor_ec *e)
{
    return e->m;
}

/* Encodes one stripe with the cached tables. */
void stor_ec_encode(const struct stor_ec *e, size_t len, uint8_t *const *data,
                    uint8_t *const *parity)
{
    if (e->m == 0 || len == 0)
        return;
    ec_encode_data((int)len, e->k, e->m, e->tables, (uint8_t **)data,
                   (uint8_t **)parity);
}

/* Rebuilds wanted shards from the first k present ones: invert the rows of
 * the generator that the sources came from, then express every wanted row
 * in terms of the sources and run one ec_encode_data over them. */
int stor_ec_reconstruct(const struct stor_ec *e, size_t len,
                        uint8_t *const *shards, const bool *present,
                        const bool *want)
{
    int k = e->k, n = e->k + e->m;
    uint8_t sub[STOR_EC_MAX_SHARDS * STOR_EC_MAX_SHARDS];
    uint8_t inv[STOR_EC_MAX_SHARDS * STOR_EC_MAX_SHARDS];
    uint8_t rows[STOR_EC_MAX_SHARDS * STOR_EC_MAX_SHARDS];
    uint8_t *src[STOR_EC_MAX_SHARDS], *dst[STOR_EC_MAX_SHARDS];
    int srcidx[STOR_EC_MAX_SHARDS];
    uint8_t *tables;
    int ns = 0, nw = 0;

    for (int i = 0; i < n && ns < k; i++)
        if (present[i] && !want[i])
            srcidx[ns++] = i;
    if (ns < k)
        return -EIO;
    for (int i = 0; i < n; i++)
        if (want[i])
            nw++;
    if (nw == 0 || len == 0)
        return 0;
    for (int r = 0; r < k; r++) {
        memcpy(sub + r * k, e->matrix + (size_t)srcidx[r] * k, k);
        src[r] = shards[srcidx[r]];
    }
    if (gf_invert_matrix(sub, inv, k) < 0)
        return -EIO; /* cannot happen with a Cauchy matrix */
    nw = 0;
    for (int w = 0; w < n; w++) {
        if (!want[w])
            continue;
        /* row of the generator for shard w, times the inverse */
        for (int j = 0; j < k; j++) {
            uint8_t acc = 0;
            for (int t = 0; t < k; t++)
                acc ^= gf_mul(e->matrix[(size_t)w * k + t], inv[t * k + j]);
            rows[nw * k + j] = acc;
        }
        dst[nw++] = shards[w];
    }
    tables = malloc(32 * (size_t)k * nw);
    if (tables == NULL)
        return -ENOMEM;
    ec_init_tables(k, nw, rows, tables);
    ec_encode_data((int)len, k, nw, tables, src, dst);
    free(tables);
    return 0;
}

/* storaged/store/ec.c - Reed-Solomon codec cache over isa-l.
 *
 * DESIGN: we use isa-l's Cauchy generator (gf_gen_cauchy1_matrix) because
 * every k x k submatrix of it is invertible, so any k surviving shards can
 * rebuild the rest for every geometry up to 32 shards (the Vandermonde
 * variant is not guaranteed to be). Encode tables are built once per
 * (k, m) and cached; decode tables depend on which shards survived, are
 * cheap for k <= 16 (one k x k inversion) and are built per call. The hot
 * loop is isa-l's ec_encode_data, which picks its SIMD path at run time. */
#include "storaged/store/ec.h"

#include <errno.h>
#include <isa-l/erasure_code.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEC_CACHE 16

/* Decode tables for one erasure pattern; immutable once published. */
struct dec_entry {
    uint32_t src_mask, want_mask;
    int nw;
    int srcidx[STOR_EC_MAX_SHARDS];
    uint8_t *tables; /* 32 * k * nw; owned */
};

/* A degraded set loses the same drives for many reads in a row, so decode
 * tables are cached per pattern; entries are published once and never
 * freed. */
struct dec_cache {
    pthread_mutex_t lock; /* taken to publish an entry */
    struct dec_entry dec[DEC_CACHE];
    int ndec; /* atomic */
};

struct stor_ec {
    int k, m;
    uint8_t *matrix; /* (k + m) x k generator; owned; immutable */
    uint8_t *tables; /* 32 * k * m encode tables; owned; immutable */
    /* owned; behind a pointer because codecs are shared as const and this
     * cache is the one part that changes */
    struct dec_cache *dc;
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
    e->dc = calloc(1, sizeof(*e->dc));
    if (e->matrix == NULL || e->tables == NULL || e->dc == NULL) {
        free(e->matrix);
        free(e->tables);
        free(e->dc);
        free(e);
        return NULL;
    }
    pthread_mutex_init(&e->dc->lock, NULL);
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

/* Data shards of the codec. */
int stor_ec_k(const struct stor_ec *e)
{
    return e->k;
}

/* Parity shards of the codec. */
int stor_ec_m(const struct stor_ec *e)
{
    return e->m;
}

/* Encodes one stripe with the cached tables. */
void stor_ec_encode(const struct stor_ec *e, size_t len, uint8_t *const *data,
                    uint8_t *const *parity)
{
    uint8_t *d[STOR_EC_MAX_SHARDS], *p[STOR_EC_MAX_SHARDS];

    if (e->m == 0 || len == 0)
        return;
    /* ISA-L takes non-const pointer arrays; it writes only through the
     * parity pointers */
    memcpy(d, data, (size_t)e->k * sizeof(*d));
    memcpy(p, parity, (size_t)e->m * sizeof(*p));
    ec_encode_data((int)len, e->k, e->m, e->tables, d, p);
}

/* Builds the decode tables of one pattern: invert the rows of the
 * generator the sources came from, express every wanted row in terms of
 * the sources. 0 or -ENOMEM/-EIO; fills @d (tables malloc'd). */
static int dec_build(const struct stor_ec *e, const bool *present,
                     const bool *want, struct dec_entry *d)
{
    int k = e->k, n = e->k + e->m, ns = 0, nw = 0;
    uint8_t sub[STOR_EC_MAX_SHARDS * STOR_EC_MAX_SHARDS];
    uint8_t inv[STOR_EC_MAX_SHARDS * STOR_EC_MAX_SHARDS];
    uint8_t rows[STOR_EC_MAX_SHARDS * STOR_EC_MAX_SHARDS];

    memset(d, 0, sizeof(*d));
    for (int i = 0; i < n && ns < k; i++)
        if (present[i] && !want[i]) {
            d->srcidx[ns++] = i;
            d->src_mask |= 1u << i;
        }
    if (ns < k)
        return -EIO;
    for (int r = 0; r < k; r++)
        memcpy(sub + r * k, e->matrix + (size_t)d->srcidx[r] * k, k);
    if (gf_invert_matrix(sub, inv, k) < 0)
        return -EIO; /* cannot happen with a Cauchy matrix */
    for (int w = 0; w < n; w++) {
        if (!want[w])
            continue;
        d->want_mask |= 1u << w;
        for (int j = 0; j < k; j++) {
            uint8_t acc = 0;

            for (int t = 0; t < k; t++)
                acc ^= gf_mul(e->matrix[(size_t)w * k + t], inv[t * k + j]);
            rows[nw * k + j] = acc;
        }
        nw++;
    }
    d->nw = nw;
    d->tables = malloc(32 * (size_t)k * (nw ? nw : 1));
    if (d->tables == NULL)
        return -ENOMEM;
    ec_init_tables(k, nw, rows, d->tables);
    return 0;
}

/* Rebuilds wanted shards from the first k present ones, with cached
 * decode tables when this pattern was seen before. */
int stor_ec_reconstruct(const struct stor_ec *e, size_t len,
                        uint8_t *const *shards, const bool *present,
                        const bool *want)
{
    struct dec_cache *dc = e->dc;
    int k = e->k, n = e->k + e->m, ns = 0, nd;
    uint32_t src_mask = 0, want_mask = 0;
    uint8_t *src[STOR_EC_MAX_SHARDS], *dst[STOR_EC_MAX_SHARDS];
    const struct dec_entry *hit = NULL;
    struct dec_entry tmp;
    int ret;

    for (int i = 0; i < n; i++) {
        if (present[i] && !want[i] && ns < k) {
            src_mask |= 1u << i;
            ns++;
        }
        if (want[i])
            want_mask |= 1u << i;
    }
    if (ns < k)
        return -EIO;
    if (want_mask == 0 || len == 0)
        return 0;
    nd = __atomic_load_n(&dc->ndec, __ATOMIC_ACQUIRE);
    for (int i = 0; i < nd; i++)
        if (dc->dec[i].src_mask == src_mask &&
            dc->dec[i].want_mask == want_mask)
            hit = &dc->dec[i];
    if (hit == NULL) {
        ret = dec_build(e, present, want, &tmp);
        if (ret < 0) {
            free(tmp.tables);
            return ret;
        }
        pthread_mutex_lock(&dc->lock);
        if (dc->ndec < DEC_CACHE) {
            dc->dec[dc->ndec] = tmp;
            hit = &dc->dec[dc->ndec];
            __atomic_store_n(&dc->ndec, dc->ndec + 1, __ATOMIC_RELEASE);
            tmp.tables = NULL;
        }
        pthread_mutex_unlock(&dc->lock);
        if (hit == NULL)
            hit = &tmp;
    }
    for (int r = 0; r < k; r++)
        src[r] = shards[hit->srcidx[r]];
    for (int w = 0, i = 0; w < n; w++)
        if (want_mask & (1u << w))
            dst[i++] = shards[w];
    ec_encode_data((int)len, k, hit->nw, hit->tables, src, dst);
    if (hit == &tmp)
        free(tmp.tables);
    return 0;
}

/* tests/unit/fc_pack_ahead_test.c - read-ahead of unread members
 * (fuse/pack_ahead.c) over a pack whose shards live in memory: shuffled
 * epochs (also from four threads) return every byte and keep nothing
 * after, the budget bounds what is kept, a GET per miss, partial reads,
 * a corrupted member fails alone, a failed GET is retried by the next
 * read, stale members of a partial epoch are dropped. With a disk below
 * (an in-memory stand-in for the mount's cache_dir), an epoch GETs each
 * aligned window once, in any order and from four threads, the next epoch
 * none, a disk copy that fails its CRC is fetched again, and a corrupt
 * member never reaches the disk. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "common/hash.h"
#include "fuse/pack.h"
#include "fuse/pack_ahead.h"

#define NMEM   300
#define NSHARD 2

struct env {
    struct fc_pack *p;
    char *shard[NSHARD];
    uint64_t shard_len[NSHARD];
    uint64_t total; /* member bytes */
    pthread_mutex_t mu;
    unsigned gets, fail_next;
    uint64_t max_len;
    char *disk[NMEM]; /* the fake disk: a copy per member, or NULL */
    unsigned dhits, dputs;
};

static uint64_t rnd_state = 42;
static uint64_t rnd(void)
{
    rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
    return rnd_state >> 33;
}

static int fake_get(void *arg, const struct fc_pack *p, uint32_t sh,
                    uint64_t off, size_t len, char *buf)
{
    struct env *e = arg;

    (void)p;
    pthread_mutex_lock(&e->mu);
    e->gets++;
    if (len > e->max_len)
        e->max_len = len;
    if (e->fail_next) {
        e->fail_next--;
        pthread_mutex_unlock(&e->mu);
        return -EIO;
    }
    pthread_mutex_unlock(&e->mu);
    assert_true(sh < NSHARD && off + len <= e->shard_len[sh]);
    memcpy(buf, e->shard[sh] + off, len);
    return 0;
}

static int fake_dget(void *arg, const struct fc_pack *p, uint64_t i, char *out)
{
    struct env *e = arg;
    int ret = -ENOENT;

    pthread_mutex_lock(&e->mu);
    if (e->disk[i] != NULL) {
        memcpy(out, e->disk[i], (size_t)p->members[i].size);
        e->dhits++;
        ret = 0;
    }
    pthread_mutex_unlock(&e->mu);
    return ret;
}

static void fake_dput(void *arg, const struct fc_pack *p, uint64_t i,
                      const char *data)
{
    struct env *e = arg;
    char *c = malloc((size_t)p->members[i].size);

    assert_non_null(c);
    memcpy(c, data, (size_t)p->members[i].size);
    pthread_mutex_lock(&e->mu);
    free(e->disk[i]);
    e->disk[i] = c;
    e->dputs++;
    pthread_mutex_unlock(&e->mu);
}

/* NMEM members "mNNN" (sizes 1..3000, one 0-byte), laid out in shards
 * in a shuffled order with 512-byte gaps (the tar headers). */
static struct env *make_env(void)
{
    struct env *e = calloc(1, sizeof(*e));
    struct fc_pmember ms[NMEM];
    struct fc_pshard shards[NSHARD];
    char paths[NMEM * 5];
    unsigned perm[NMEM];
    size_t len;
    void *idx;
    const char *why = "";

    assert_non_null(e);
    pthread_mutex_init(&e->mu, NULL);
    memset(ms, 0, sizeof(ms));
    memset(shards, 0, sizeof(shards));
    for (unsigned i = 0; i < NMEM; i++) {
        snprintf(paths + i * 5, 5, "m%03u", i);
        ms[i].path_off = i * 5;
        ms[i].path_len = 4;
        ms[i].mode = S_IFREG | 0644;
        ms[i].size = i == 7 ? 0 : 1 + rnd() % 3000;
        ms[i].shard = i % NSHARD;
        e->total += ms[i].size;
        perm[i] = i;
    }
    for (unsigned i = NMEM - 1; i > 0; i--) {
        unsigned j = (unsigned)(rnd() % (i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (unsigned k = 0; k < NMEM; k++) {
        struct fc_pmember *m = &ms[perm[k]];
        m->offset = e->shard_len[m->shard] + 512;
        e->shard_len[m->shard] = m->offset + ((m->size + 511) / 512) * 512;
    }
    for (unsigned s = 0; s < NSHARD; s++) {
        e->shard[s] = malloc(e->shard_len[s]);
        assert_non_null(e->shard[s]);
        for (uint64_t b = 0; b < e->shard_len[s]; b++)
            e->shard[s][b] = (char)rnd();
        shards[s].size = e->shard_len[s];
    }
    for (unsigned i = 0; i < NMEM; i++)
        ms[i].crc = cm_crc32c(0, e->shard[ms[i].shard] + ms[i].offset,
                              (size_t)ms[i].size);
    idx = fc_pack_encode(1, 0, 0, shards, NSHARD, ms, NMEM, paths,
                         sizeof(paths), &len);
    assert_non_null(idx);
    assert_int_equal(fc_pack_decode(idx, len, FC_PACK_FREE, &e->p, &why), 0);
    return e;
}

static void free_env(struct env *e)
{
    for (unsigned i = 0; i < NMEM; i++)
        free(e->disk[i]);
    fc_pack_free(e->p);
    for (unsigned s = 0; s < NSHARD; s++)
        free(e->shard[s]);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static const char *bytes_of(struct env *e, uint64_t i)
{
    const struct fc_pmember *m = &e->p->members[i];
    return e->shard[m->shard] + m->offset;
}

static void read_check(struct env *e, struct fc_pahead *a, uint64_t i)
{
    const struct fc_pmember *m = &e->p->members[i];
    char *buf = malloc(m->size ? m->size : 1);

    assert_non_null(buf);
    assert_int_equal(fc_pahead_read(a, i, 0, (size_t)m->size, buf), 0);
    assert_memory_equal(buf, bytes_of(e, i), (size_t)m->size);
    free(buf);
}

static void shuffle(uint64_t *ids, size_t n)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rnd() % (i + 1));
        uint64_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
}

/* The covered members (all but the 0-byte one) in a shuffled order. */
static size_t epoch_order(struct env *e, struct fc_pahead *a, uint64_t *ids)
{
    size_t n = 0;

    for (uint64_t i = 0; i < e->p->nmembers; i++)
        if (fc_pahead_covers(a, i))
            ids[n++] = i;
    shuffle(ids, n);
    return n;
}

static void test_shuffled_epochs(void **state)
{
    struct env *e = make_env();
    struct fc_pahead *a;
    struct fc_pahead_stats st;
    uint64_t ids[NMEM];
    size_t n;

    (void)state;
    assert_int_equal(
        fc_pahead_create(e->p, e->total / 4, 64 << 10, fake_get, e, &a), 0);
    assert_false(fc_pahead_covers(a, 7)); /* 0 bytes */
    for (int ep = 1; ep <= 2; ep++) {
        unsigned g0 = e->gets;
        n = epoch_order(e, a, ids);
        assert_int_equal(n, NMEM - 1);
        for (size_t k = 0; k < n; k++) {
            read_check(e, a, ids[k]);
            fc_pahead_stats(a, &st);
            assert_true(st.bytes <= e->total / 4 + 3000);
        }
        fc_pahead_stats(a, &st);
        assert_int_equal(st.bytes, 0); /* all read: nothing kept */
        assert_int_equal(st.epochs, ep);
        assert_int_equal(st.stale, 0);
        /* the bound for f = 1/4: 0.40 misses per member; allow 0.5 */
        assert_true((e->gets - g0) * 2 <= n);
        assert_true(st.hits > 0 && st.kept > 0);
    }
    assert_true(e->max_len <= 64 << 10);
    fc_pahead_destroy(a);
    free_env(e);
}

struct worker {
    struct env *e;
    struct fc_pahead *a;
    const uint64_t *ids;
    size_t n;
};

static void *work(void *arg)
{
    struct worker *w = arg;

    for (size_t k = 0; k < w->n; k++)
        read_check(w->e, w->a, w->ids[k]);
    return NULL;
}

/* Reads @ids[0..n) through @a from four threads, a quarter each. */
static void four_threads(struct env *e, struct fc_pahead *a,
                         const uint64_t *ids, size_t n)
{
    pthread_t t[4];
    struct worker w[4];

    for (int k = 0; k < 4; k++) {
        w[k] = (struct worker){e, a, ids + k * (n / 4),
                               k == 3 ? n - 3 * (n / 4) : n / 4};
        assert_int_equal(pthread_create(&t[k], NULL, work, &w[k]), 0);
    }
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
}

static void test_four_threads(void **state)
{
    struct env *e = make_env();
    struct fc_pahead *a;
    struct fc_pahead_stats st;
    uint64_t ids[NMEM];
    size_t n;

    (void)state;
    assert_int_equal(
        fc_pahead_create(e->p, e->total / 3, 32 << 10, fake_get, e, &a), 0);
    n = epoch_order(e, a, ids);
    four_threads(e, a, ids, n);
    fc_pahead_stats(a, &st);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.epochs, 1);
    assert_true(e->gets < n);
    fc_pahead_destroy(a);
    free_env(e);
}

static void test_partial_reads_and_stale(void **state)
{
    struct env *e = make_env();
    struct fc_pahead *a;
    struct fc_pahead_stats st;
    uint64_t i = 3, ids[NMEM];
    const struct fc_pmember *m = &e->p->members[i];
    size_t half = (size_t)m->size / 2, n;
    char buf[3000];

    (void)state;
    assert_true(m->size >= 2);
    assert_int_equal(fc_pahead_create(e->p, e->total, 1 << 20, fake_get, e, &a),
                     0);
    assert_int_equal(fc_pahead_read(a, i, 0, half, buf), 0);
    assert_memory_equal(buf, bytes_of(e, i), half);
    assert_int_equal(e->gets, 1);
    fc_pahead_stats(a, &st);
    assert_true(st.bytes >= m->size); /* kept: not read to its end */
    assert_int_equal(fc_pahead_read(a, i, half, (size_t)m->size - half, buf),
                     0);
    assert_memory_equal(buf, bytes_of(e, i) + half, (size_t)m->size - half);
    assert_int_equal(e->gets, 1); /* the second half was kept */
    fc_pahead_destroy(a);
    /* a partial epoch under a quarter of the pack: each member's first
     * byte only, three times over; no read reaches an end, so members kept
     * for their next read are dropped oldest first to stay within the
     * budget, and those unread after more reads than members as stale */
    assert_int_equal(
        fc_pahead_create(e->p, e->total / 4, 1 << 20, fake_get, e, &a), 0);
    n = epoch_order(e, a, ids);
    for (int round = 0; round < 3; round++)
        for (size_t k = 0; k < n; k++) {
            char c;
            assert_int_equal(fc_pahead_read(a, ids[k], 0, 1, &c), 0);
            assert_int_equal(c, bytes_of(e, ids[k])[0]);
            fc_pahead_stats(a, &st);
            assert_true(st.bytes <= e->total / 4 + 3000);
        }
    fc_pahead_stats(a, &st);
    assert_true(st.stale > 0);
    assert_int_equal(st.epochs, 0);
    /* whole reads then consume, with the same bytes */
    for (size_t k = 0; k < n; k++)
        read_check(e, a, ids[k]);
    fc_pahead_stats(a, &st);
    assert_int_equal(st.epochs, 1);
    fc_pahead_destroy(a);
    free_env(e);
}

static void test_corrupt_and_failed_get(void **state)
{
    struct env *e = make_env();
    struct fc_pahead *a;
    struct fc_pahead_stats st;
    const struct fc_pmember *m;
    uint64_t bad = 5, ids[NMEM];
    char buf[3000];
    unsigned g;
    size_t n;

    (void)state;
    m = &e->p->members[bad];
    e->shard[m->shard][m->offset + m->size / 2] ^= 0x5a;
    assert_int_equal(fc_pahead_create(e->p, e->total, 1 << 20, fake_get, e, &a),
                     0);
    e->fail_next = 1;
    assert_int_equal(fc_pahead_read(a, 0, 0, 1, buf), -EIO); /* the GET */
    assert_int_equal(atomic_load(&e->p->checked[0]), 0);
    fc_pahead_stats(a, &st);
    assert_int_equal(st.bytes, 0); /* nothing left pending */
    n = epoch_order(e, a, ids);
    for (size_t k = 0; k < n; k++) {
        if (ids[k] == bad) {
            assert_int_equal(fc_pahead_read(a, bad, 0, (size_t)m->size, buf),
                             -EIO);
            continue;
        }
        read_check(e, a, ids[k]);
    }
    g = e->gets;
    assert_int_equal(fc_pahead_read(a, bad, 0, 1, buf), -EIO);
    assert_int_equal(e->gets, g); /* known bad: no GET */
    assert_int_equal(atomic_load(&e->p->checked[bad]), 2);
    fc_pahead_stats(a, &st);
    assert_int_equal(st.crc_errors, 1);
    fc_pahead_destroy(a);
    free_env(e);
}

/* The aligned windows of @range bytes holding covered members. */
static unsigned windows(struct env *e, struct fc_pahead *a, uint64_t range)
{
    uint64_t seen[NMEM];
    unsigned n = 0;

    for (uint64_t i = 0; i < e->p->nmembers; i++) {
        const struct fc_pmember *m = &e->p->members[i];
        uint64_t w = ((uint64_t)m->shard << 40) | (m->offset / range);
        unsigned k = 0;
        if (!fc_pahead_covers(a, i))
            continue;
        while (k < n && seen[k] != w)
            k++;
        if (k == n)
            seen[n++] = w;
    }
    return n;
}

static void test_disk_windows(void **state)
{
    struct env *e = make_env();
    struct fc_pahead *a;
    struct fc_pahead_stats st;
    uint64_t ids[NMEM], bad = 9, range = 16 << 10;
    const struct fc_pmember *mb = &e->p->members[bad];
    unsigned nwin, g;
    char buf[3000];
    size_t n;

    (void)state;
    e->shard[mb->shard][mb->offset] ^= 0x11; /* member 9 is corrupt */
    /* a budget of a tenth: memory alone would miss most members */
    assert_int_equal(
        fc_pahead_create(e->p, e->total / 10, range, fake_get, e, &a), 0);
    fc_pahead_set_disk(a, fake_dget, fake_dput);
    nwin = windows(e, a, range);
    assert_true(nwin > 10 && nwin < NMEM / 4);
    /* epoch 1 from four threads: one GET per window, every good member
     * stored once, the corrupt one never */
    n = epoch_order(e, a, ids);
    for (size_t k = 0; k < n; k++)
        if (ids[k] == bad)
            ids[k] = ids[--n]; /* read alone below */
    four_threads(e, a, ids, n);
    assert_int_equal(fc_pahead_read(a, bad, 0, (size_t)mb->size, buf), -EIO);
    assert_int_equal(e->gets, nwin);
    assert_true(e->max_len <= 2 * range);
    assert_null(e->disk[bad]);
    assert_int_equal(e->dputs, n);
    fc_pahead_stats(a, &st);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.crc_errors, 1);
    /* epoch 2 (and a fresh read-ahead over the same disk, as a remount):
     * no GET at all, every read from the disk or memory */
    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            fc_pahead_destroy(a);
            assert_int_equal(
                fc_pahead_create(e->p, e->total / 10, range, fake_get, e, &a),
                0);
            fc_pahead_set_disk(a, fake_dget, fake_dput);
        }
        n = epoch_order(e, a, ids);
        for (size_t k = 0; k < n; k++)
            if (ids[k] != bad)
                read_check(e, a, ids[k]);
        assert_int_equal(e->gets, nwin);
    }
    fc_pahead_stats(a, &st);
    assert_true(st.disk_hits >= n - 1 - st.hits);
    assert_int_equal(st.misses, 0);
    /* a disk copy that fails its CRC: a miss, fetched and stored again */
    g = e->gets;
    e->disk[3][0] ^= 0x22;
    read_check(e, a, 3);
    assert_int_equal(e->gets, g + 1);
    assert_memory_equal(e->disk[3], bytes_of(e, 3),
                        (size_t)e->p->members[3].size);
    /* a partial read from the disk keeps the copy for the rest */
    {
        uint64_t i = 4;
        while (i == bad || e->p->members[i].size < 2)
            i++;
        const struct fc_pmember *m = &e->p->members[i];
        size_t half = (size_t)m->size / 2;
        unsigned h = e->dhits;
        assert_int_equal(fc_pahead_read(a, i, 0, half, buf), 0);
        assert_int_equal(
            fc_pahead_read(a, i, half, (size_t)m->size - half, buf + half), 0);
        assert_memory_equal(buf, bytes_of(e, i), (size_t)m->size);
        assert_int_equal(e->dhits, h + 1);
    }
    assert_int_equal(e->gets, g + 1);
    fc_pahead_destroy(a);
    free_env(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffled_epochs),
        cmocka_unit_test(test_four_threads),
        cmocka_unit_test(test_partial_reads_and_stale),
        cmocka_unit_test(test_corrupt_and_failed_get),
        cmocka_unit_test(test_disk_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

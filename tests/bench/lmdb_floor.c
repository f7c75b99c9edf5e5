/* tests/bench/lmdb_floor.c - the LMDB floor of storaged's GET hot and LIST
 * hot on a kept bench_scale store (figures, not pass/fail): what the B+tree
 * alone costs at 10^3 and at 10^6 keys, on the same machine.
 *   cc -O2 -o lmdb_floor tests/bench/lmdb_floor.c -llmdb
 *   lmdb_floor STORE/d0/.ecfs.sys/index N ROUNDS [any] [SWEEP_KIB]
 * Opens the index read-only with storaged's flags. Per GET: a renewed read
 * txn, mdb_get of "scale\0obj/%09d" in "obj" and of the object's body
 * ("scale\0" + its id) in "body", as storaged's lookup_body does. Keys: the
 * hot set obj/000000000..999 (with "any": random keys of the whole bucket,
 * after one walk of both tables), read once before the timing. LIST hot: a
 * seek to obj/000000000 and 1000 MDB_NEXT, each record read. ROUNDS of 500
 * GETs and one page; time (CLOCK_MONOTONIC) per GET and per page. With
 * SWEEP_KIB, each GET follows an untimed write sweep of that many KiB, which
 * stands for the rest of a request's work evicting the caches and the TLB. */
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static MDB_env *env;
static MDB_dbi obj, body;
static volatile uint64_t sink;

static int get2(MDB_txn *t, long i)
{
    char kb[64], bk[22];
    MDB_val k, v;
    int kl = snprintf(kb, sizeof(kb), "scale%cobj/%09ld", 0, i), rc;

    k.mv_size = (size_t)kl;
    k.mv_data = kb;
    if ((rc = mdb_get(t, obj, &k, &v)) != 0)
        return rc;
    memcpy(bk, "scale", 6);
    memcpy(bk + 6, (const uint8_t *)v.mv_data + 10 + 13,
           16); /* id after the key */
    k.mv_size = 22;
    k.mv_data = bk;
    if ((rc = mdb_get(t, body, &k, &v)) != 0)
        return rc;
    sink += ((const uint8_t *)v.mv_data)[v.mv_size - 1];
    return 0;
}

int main(int argc, char **argv)
{
    MDB_txn *t;
    long n = atol(argv[2]), rounds = atol(argv[3]), hot = n < 1000 ? n : 1000;
    int any = argc > 4 && strcmp(argv[4], "any") == 0;
    long pk = argc > 4 + any ? atol(argv[4 + any]) : 0; /* KiB */
    uint8_t *junk = pk > 0 ? calloc((size_t)pk, 1024) : NULL;
    unsigned seed = 7;
    double g = 0, l = 0;
    int rc;

    mdb_env_create(&env);
    mdb_env_set_maxdbs(env, 8);
    mdb_env_set_mapsize(env, (size_t)1 << 34);
    mdb_env_set_maxreaders(env, 256);
    rc = mdb_env_open(env, argv[1], MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD,
                      0644);
    if (rc) {
        fprintf(stderr, "open: %s\n", mdb_strerror(rc));
        return 1;
    }
    mdb_txn_begin(env, NULL, MDB_RDONLY, &t);
    if ((rc = mdb_dbi_open(t, "obj", 0, &obj)) ||
        (rc = mdb_dbi_open(t, "body", 0, &body))) {
        fprintf(stderr, "dbi: %s\n", mdb_strerror(rc));
        return 1;
    }
    mdb_txn_commit(t);
    mdb_txn_begin(env, NULL, MDB_RDONLY, &t);
    /* touch what the timed part reads (the server's check walked it all) */
    if (any) {
        MDB_cursor *c;
        MDB_val k, v;
        MDB_dbi d[2] = {obj, body};
        for (int j = 0; j < 2; j++) {
            mdb_cursor_open(t, d[j], &c);
            while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
                sink += ((const uint8_t *)v.mv_data)[0];
            mdb_cursor_close(c);
        }
    }
    for (long i = 0; i < hot; i++)
        if ((rc = get2(t, i)) != 0) {
            fprintf(stderr, "get %ld: %s\n", i, mdb_strerror(rc));
            return 1;
        }
    mdb_txn_reset(t);
    for (long r = 0; r < rounds; r++) {
        double t0;
        for (int i = 0; i < 500; i++) {
            long key =
                any ? (long)(((uint64_t)rand_r(&seed) << 16 ^ rand_r(&seed)) %
                             n)
                    : rand_r(&seed) % hot;
            /* the request's other work, standing in as a sweep of @pk KiB
             * (not timed) */
            for (long j = 0; j < pk * 1024; j += 64)
                junk[j]++;
            t0 = now();
            mdb_txn_renew(t);
            get2(t, key);
            mdb_txn_reset(t);
            g += now() - t0;
        }
        t0 = now();
        {
            MDB_cursor *c;
            char kb[64];
            MDB_val k, v;
            int kl = snprintf(kb, sizeof(kb), "scale%cobj/%09d", 0, 0);
            mdb_txn_renew(t);
            mdb_cursor_open(t, obj, &c);
            k.mv_size = (size_t)kl;
            k.mv_data = kb;
            rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
            for (int i = 0; i < 1000 && rc == 0; i++) {
                const uint8_t *p = v.mv_data;
                for (size_t j = 0; j < v.mv_size; j += 8)
                    sink += p[j];
                rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
            }
            mdb_cursor_close(c);
            mdb_txn_reset(t);
        }
        l += now() - t0;
    }
    free(junk);
    printf(
        "n=%ld sweep %ld KiB: GET %s (obj + body mdb_get) %.0f ns, LIST hot page (seek + 1000 next) %.1f us\n",
        n, pk, any ? "any" : "hot", g / rounds / 500, l / rounds / 1000);
    mdb_txn_abort(t);
    mdb_env_close(env);
    return 0;
}

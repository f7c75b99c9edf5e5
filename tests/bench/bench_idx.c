/* tests/bench/bench_idx.c - the object index alone (storaged/store/obj_idx.c,
 * LMDB) at growing sizes, in thread CPU time per operation (steady on a
 * shared machine): lookup, lookup_nb, put (new key, one transaction),
 * remove, a 1000-key cursor page from a random seek.
 *   bench_idx DIR [SIZES...]     (default sizes 1000 100000 1000000)
 * Prints a Markdown table with the ratio against the first size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storaged/store/drive.h"
#include "storaged/store/obj_i.h"
#include "storaged/store/obj_idx.h"

static double cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t xr(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A typical small object: key obj/NNNNNNNNN, one header, inline. */
static void mk(struct obj_ent *e, char *key, long i, struct stor_hdr *h)
{
    memset(e, 0, sizeof(*e));
    e->key_len = (size_t)snprintf(key, 32, "obj/%09ld", i);
    e->key = key;
    for (int b = 0; b < 16; b++)
        e->id[b] = (uint8_t)(i >> (b % 8));
    e->version = 1700000000000000000ULL + (uint64_t)i;
    e->mtime_ns = (int64_t)e->version;
    e->size = 1024;
    snprintf(e->etag, sizeof(e->etag), "%032lx", i);
    e->k = 1;
    e->m = 2;
    e->inl = true;
    e->hdrs = h;
    e->nhdrs = 1;
}

int main(int argc, char **argv)
{
    long sizes[8] = {1000, 100000, 1000000};
    int nsizes = 3;
    double base[5] = {0};
    struct stor_hdr h = {(char *)"content-type",
                         (char *)"application/octet-stream"};
    struct obj_idx *x;
    long have = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: bench_idx DIR [SIZES...]\n");
        return 2;
    }
    if (argc > 2) {
        nsizes = 0;
        for (int i = 2; i < argc && nsizes < 8; i++)
            sizes[nsizes++] = atol(argv[i]);
    }
    (void)stor_rmtree(argv[1]);
    if (obj_idx_open(argv[1], true, &x) < 0 ||
        obj_idx_bucket_set(x, "b", 1) < 0) {
        fprintf(stderr, "bench_idx: cannot open %s\n", argv[1]);
        return 1;
    }
    printf("| objects | lookup ns (x) | lookup_nb ns (x) | put ns (x) | "
           "remove ns (x) | 1000-key page µs (x) | data.mdb MiB |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int si = 0; si < nsizes; si++) {
        long n = sizes[si], ops = 20000;
        double t, r[5];
        static struct obj_ent *batch[10000];
        static struct obj_ent ents[10000];
        static char keys[10000][32];
        FILE *fp;
        long sz = 0;

        while (have < n) { /* fill in random order, 10000 per txn */
            long m = n - have < 10000 ? n - have : 10000;

            for (long j = 0; j < m; j++) {
                mk(&ents[j], keys[j], have + j, &h);
                batch[j] = &ents[j];
            }
            if (obj_idx_put_many(x, "b", batch, (size_t)m) < 0)
                return 1;
            have += m;
        }
        t = cpu_ns();
        for (long i = 0; i < ops; i++) {
            char k[32];
            struct obj_ent *e;
            int kl = snprintf(k, sizeof(k), "obj/%09ld", (long)(xr() % n));

            if (obj_idx_lookup(x, "b", k, (size_t)kl, &e) < 0)
                return 1;
            obj_ent_free(e);
        }
        r[0] = (cpu_ns() - t) / ops;
        t = cpu_ns();
        for (long i = 0; i < ops; i++) {
            char k[32];
            struct obj_ent *e;
            int kl = snprintf(k, sizeof(k), "obj/%09ld", (long)(xr() % n));

            if (obj_idx_lookup_nb(x, "b", k, (size_t)kl, &e) < 0)
                return 1;
            obj_ent_free(e);
        }
        r[1] = (cpu_ns() - t) / ops;
        t = cpu_ns();
        for (long i = 0; i < ops / 4; i++) {
            struct obj_ent e;
            char k[32];

            mk(&e, k, 0, &h);
            e.key_len = (size_t)snprintf(k, sizeof(k), "new/%09ld", i);
            if (obj_idx_put(x, "b", &e, NULL) < 0)
                return 1;
        }
        r[2] = (cpu_ns() - t) / (ops / 4);
        t = cpu_ns();
        for (long i = 0; i < ops / 4; i++) {
            char k[32];
            int kl = snprintf(k, sizeof(k), "new/%09ld", i);

            if (obj_idx_remove(x, "b", k, (size_t)kl, NULL) < 0)
                return 1;
        }
        r[3] = (cpu_ns() - t) / (ops / 4);
        t = cpu_ns();
        for (long i = 0; i < 200; i++) {
            struct obj_idx_cur *c;
            struct obj_idx_view v;
            char k[32];
            long from = n > 1000 ? (long)(xr() % (uint64_t)(n - 1000)) : 0;
            int kl = snprintf(k, sizeof(k), "obj/%09ld", from), got = 0;

            if (obj_idx_cur_open(x, "b", &c) < 0 ||
                obj_idx_cur_seek(c, k, (size_t)kl, true) < 0)
                return 1;
            while (got < 1000 && obj_idx_cur_next(c, &v) == 0)
                got++;
            obj_idx_cur_close(c);
        }
        r[4] = (cpu_ns() - t) / 200 / 1000;
        if (si == 0)
            memcpy(base, r, sizeof(base));
        fp = fopen(obj_idx_data_path(x), "rb");
        if (fp && fseek(fp, 0, SEEK_END) == 0)
            sz = ftell(fp);
        if (fp)
            fclose(fp);
        printf("| %ld | %.0f (%.2f) | %.0f (%.2f) | %.0f (%.2f) | %.0f "
               "(%.2f) | %.0f (%.2f) | %.1f |\n",
               n, r[0], r[0] / base[0], r[1], r[1] / base[1], r[2],
               r[2] / base[2], r[3], r[3] / base[3], r[4], r[4] / base[4],
               (double)sz / 1048576.0);
        fflush(stdout);
    }
    obj_idx_close(x, false);
    (void)stor_rmtree(argv[1]);
    return 0;
}

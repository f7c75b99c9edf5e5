/* tests/bench/bench_fill.c - fills a bucket fast through the object layer
 * (not through S3), for tests/bench/bench_scale.py:
 *   bench_fill BUCKET FIRST COUNT SIZE THREADS DRIVE...
 * PUTs keys "obj/%09d" for FIRST..FIRST+COUNT-1, SIZE bytes each, with
 * fsync off and no background threads, then closes the store cleanly (so
 * the index is trusted at the next start). Prints "filled N in S s". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storaged/store/object.h"

struct job {
    struct stor_store *s;
    const char *bucket;
    long first, count, size;
    int t, nt;
    int err;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    uint8_t *body = malloc((size_t)j->size + 1);

    if (body == NULL) {
        j->err = 1;
        return NULL;
    }
    for (long i = j->first + j->t; i < j->first + j->count; i += j->nt) {
        char key[32];
        struct stor_put *p;
        int n = snprintf(key, sizeof(key), "obj/%09ld", i);

        for (long b = 0; b < j->size; b++)
            body[b] = (uint8_t)(i * 31 + b);
        if (stor_put_begin(j->s, j->bucket, key, (size_t)n, j->size, NULL, 0,
                           &p) < 0 ||
            stor_put_write(p, body, (size_t)j->size) < 0) {
            j->err = 1;
            break;
        }
        if (stor_put_commit(p, NULL, NULL) < 0) {
            j->err = 1;
            break;
        }
    }
    free(body);
    return NULL;
}

int main(int argc, char **argv)
{
    /* small bodies go into the index as `storaged serve` puts them */
    struct stor_store_opts o = {.ec_parity = -1,
                                .fsync = false,
                                .index_body_max = STOR_INDEX_BODY_DEFAULT};
    struct stor_store *s;
    struct timespec t0, t1;
    char *err = NULL;
    pthread_t th[64];
    struct job jobs[64];
    int nt, ret;

    if (argc < 7) {
        fprintf(stderr, "usage: bench_fill BUCKET FIRST COUNT SIZE THREADS "
                        "DRIVE...\n");
        return 2;
    }
    nt = atoi(argv[5]);
    if (nt < 1 || nt > 64)
        nt = 2;
    setenv("STORAGED_NO_BACKGROUND", "1", 1);
    o.drives = (const char *const *)(argv + 6);
    o.ndrives = (size_t)(argc - 6);
    if (stor_store_open(&o, &s, &err) < 0) {
        fprintf(stderr, "bench_fill: %s\n", err ? err : "open failed");
        return 1;
    }
    ret = stor_bucket_create(s, argv[1]);
    if (ret < 0 && ret != -STOR_EBUCKETEXISTS) {
        fprintf(stderr, "bench_fill: cannot create bucket\n");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int t = 0; t < nt; t++) {
        jobs[t] = (struct job){
            s, argv[1], atol(argv[2]), atol(argv[3]), atol(argv[4]), t, nt, 0};
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    ret = 0;
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        ret |= jobs[t].err;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    stor_store_close(s);
    printf("filled %s in %.1f s%s\n", argv[3],
           (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
           ret ? " (with errors)" : "");
    return ret ? 1 : 0;
}

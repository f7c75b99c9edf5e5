/* tests/bench/bench_meta.c - where should the meta records live? (figures,
 * not pass/fail; storaged/FORMAT.md "Where the meta records live")
 *
 * The per-operation cost of one 4.7 KB meta record (a 4 KiB object's inline
 * meta) kept as today, one file per object per drive under DIR/b/bench/HH/,
 * against the same records as values of one per-drive LMDB environment:
 *   read:  open + pread + close of a random file (warm page cache), against
 *          mdb_get + copy in a reused read transaction (thread CPU time);
 *   write: temp file + write + fdatasync + rename + fsync(dir), against
 *          mdb_put + a synced commit (thread CPU and wall time).
 *
 * Usage: bench_meta DIR OBJECTS READS PUTS   (DIR: an empty directory)
 * Build: cc -O2 -o build/rel/bench/bench_meta tests/bench/bench_meta.c -llmdb
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static double cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
#define VAL 4700
int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_meta DIR OBJECTS READS PUTS\n");
        return 2;
    }
    const char *dir = argv[1];
    int n = atoi(argv[2]);
    int reads = atoi(argv[3]);
    int puts = atoi(argv[4]);
    char p[512], q[512];
    static char buf[VAL];
    memset(buf, 'm', VAL);
    MDB_env *env;
    MDB_txn *t;
    MDB_dbi dbi;
    snprintf(p, sizeof p, "%s/b", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/b/bench", dir);
    mkdir(p, 0755);
    for (int h = 0; h < 256; h++) {
        snprintf(p, sizeof p, "%s/b/bench/%02x", dir, h);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/lmdb", dir);
    mkdir(p, 0755);
    mdb_env_create(&env);
    mdb_env_set_mapsize(env, 1ULL << 36);
    mdb_env_open(env, p, MDB_NORDAHEAD, 0644);
    mdb_txn_begin(env, NULL, 0, &t);
    mdb_dbi_open(t, NULL, 0, &dbi);
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/b/bench/%02x/%032x.m", dir, i % 256,
                 i * 2654435761u);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (write(fd, buf, VAL) != VAL)
            return 1;
        close(fd);
        char k[40];
        int kl = snprintf(k, sizeof k, "bench/%032x", i * 2654435761u);
        MDB_val kv = {kl, k}, vv = {VAL, buf};
        mdb_put(t, dbi, &kv, &vv, 0);
    }
    mdb_txn_commit(t);
    sync();
    unsigned *order = malloc(sizeof(unsigned) * reads);
    srand(1);
    for (int i = 0; i < reads; i++)
        order[i] = rand() % n;
    /* warm both */
    for (int pass = 0; pass < 2; pass++) {
        double c0 = cpu();
        long s = 0;
        for (int r = 0; r < reads; r++) {
            int i = order[r];
            snprintf(p, sizeof p, "%s/b/bench/%02x/%032x.m", dir, i % 256,
                     i * 2654435761u);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            s += pread(fd, buf, VAL, 0);
            close(fd);
        }
        double c1 = cpu();
        MDB_txn *rt;
        mdb_txn_begin(env, NULL, MDB_RDONLY, &rt);
        mdb_txn_reset(rt);
        for (int r = 0; r < reads; r++) {
            int i = order[r];
            char k[40];
            int kl = snprintf(k, sizeof k, "bench/%032x", i * 2654435761u);
            MDB_val kv = {kl, k}, vv;
            mdb_txn_renew(rt);
            if (mdb_get(rt, dbi, &kv, &vv) == 0) {
                memcpy(buf, vv.mv_data, vv.mv_size);
                s += vv.mv_size;
            }
            mdb_txn_reset(rt);
        }
        double c2 = cpu();
        mdb_txn_abort(rt);
        if (pass)
            printf(
                "n=%d read: file open+pread+close %.2f us/op, lmdb get+copy %.2f us/op (cpu) [%ld]\n",
                n, (c1 - c0) * 1e6 / reads, (c2 - c1) * 1e6 / reads, s);
    }
    /* puts with sync */
    double c0 = cpu(), w0 = wall();
    for (int i = 0; i < puts; i++) {
        snprintf(p, sizeof p, "%s/b/bench/%02x/new%08x.m.tmp", dir, i % 256, i);
        snprintf(q, sizeof q, "%s/b/bench/%02x/new%08x.m", dir, i % 256, i);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (write(fd, buf, VAL) != VAL)
            return 1;
        fdatasync(fd);
        close(fd);
        rename(p, q);
        snprintf(p, sizeof p, "%s/b/bench/%02x", dir, i % 256);
        fd = open(p, O_RDONLY | O_DIRECTORY);
        fsync(fd);
        close(fd);
    }
    double c1 = cpu(), w1 = wall();
    for (int i = 0; i < puts; i++) {
        char k[40];
        int kl = snprintf(k, sizeof k, "bench/new%08x", i);
        MDB_val kv = {kl, k}, vv = {VAL, buf};
        mdb_txn_begin(env, NULL, 0, &t);
        mdb_put(t, dbi, &kv, &vv, 0);
        mdb_txn_commit(t);
    }
    double c2 = cpu(), w2 = wall();
    printf(
        "put (synced): file tmp+write+fdatasync+rename+fsync(dir) %.1f us cpu %.0f us wall/op, lmdb put+commit(sync) %.1f us cpu %.0f us wall/op\n",
        (c1 - c0) * 1e6 / puts, (w1 - w0) * 1e6 / puts, (c2 - c1) * 1e6 / puts,
        (w2 - w1) * 1e6 / puts);
    struct stat st;
    snprintf(p, sizeof p, "%s/lmdb/data.mdb", dir);
    stat(p, &st);
    printf("lmdb data.mdb %.1f MiB for %d values (%.0f B/value)\n",
           st.st_size / 1048576.0, n + puts, (double)st.st_size / (n + puts));
    return 0;
}

/* tests/bench/bench_policy.c - the cost of one authorisation decision:
 * stor_policy_eval (storaged/s3/policy.c) of tests/bench/policy10.json, a
 * 10-statement policy whose GetObject Allow is the last statement (so a
 * GET walks all ten, four Deny statements and an aws:SourceIp condition
 * included), for keys rotating over N objects, against the 1-statement
 * readonly policy. Prints ns per evaluation (thread CPU time), the median
 * of R rounds with the range. The client address is handed over without a
 * syscall here; in the server it costs one getpeername, and only for policies
 * with aws:SourceIp. tests/bench/bench_policy.sh [ROUNDS [EVALS_PER_ROUND]]  */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storaged/s3/policy.h"

static int peer(void *arg, struct sockaddr_storage *ss)
{
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

    (void)arg;
    memset(ss, 0, sizeof(*ss));
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(0x7f000001);
    return 0;
}

static double now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* ns per evaluation of @p over @n evaluations; aborts on a wrong answer */
static double round_ns(const struct stor_policy *p, long n, char keys[][32])
{
    struct stor_pol_ctx c = {.act = STOR_ACT_GET_OBJECT,
                             .bucket = "bench",
                             .user = "bench",
                             .peer = peer};
    double t0 = now_ns();
    long i, allow = 0;

    for (i = 0; i < n; i++) {
        c.key = keys[i & 1023];
        c.key_len = 13;
        allow += stor_policy_eval(p, &c) == STOR_POL_ALLOW;
    }
    if (allow != n) {
        fprintf(stderr, "bench_policy: %ld of %ld allowed\n", allow, n);
        exit(1);
    }
    return (now_ns() - t0) / (double)n;
}

static struct stor_policy *load(const char *path)
{
    static char buf[65536];
    struct stor_policy *p;
    char err[256];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL) {
        perror(path);
        exit(1);
    }
    n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    if (stor_policy_compile(buf, n, STOR_POL_USER, &p, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", path, err);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9, r;
    long n = argc > 2 ? atol(argv[2]) : 2000000;
    static char keys[1024][32];
    struct stor_policy *p10 = load("tests/bench/policy10.json"), *p1;
    const char *ro = stor_policy_canned("readonly");
    double *a = calloc((size_t)rounds, sizeof(double));
    double *b = calloc((size_t)rounds, sizeof(double));
    char err[256];
    int i;

    if (rounds < 1 || n < 1 || a == NULL || b == NULL ||
        stor_policy_compile(ro, strlen(ro), STOR_POL_USER, &p1, err,
                            sizeof(err)))
        return 2;
    for (i = 0; i < 1024; i++)
        snprintf(keys[i], sizeof(keys[i]), "obj/%05d.bin", i);
    (void)round_ns(p10, n / 10, keys); /* warm */
    for (r = 0; r < rounds; r++) {
        a[r] = round_ns(p10, n, keys);
        b[r] = round_ns(p1, n, keys);
    }
    qsort(a, (size_t)rounds, sizeof(double), cmp);
    qsort(b, (size_t)rounds, sizeof(double), cmp);
    printf("| policy | ns per GetObject decision (median of %d x %ld) | "
           "range |\n|---|---|---|\n",
           rounds, n);
    printf("| policy10.json (10 statements) | %.1f | %.1f-%.1f |\n",
           a[rounds / 2], a[0], a[rounds - 1]);
    printf("| readonly (1 statement) | %.1f | %.1f-%.1f |\n", b[rounds / 2],
           b[0], b[rounds - 1]);
    stor_policy_destroy(p10);
    stor_policy_destroy(p1);
    free(a);
    free(b);
    return 0;
}

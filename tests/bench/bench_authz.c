/* tests/bench/bench_authz.c - what a GET's authentication and
 * authorisation cost in storaged's own code, without the network: the
 * request head of a presigned 4 KiB GET is parsed, its target decoded,
 * its SigV4 verified (stor_auth_check), routed and authorised
 * (stor_iam_authorize), as s3.c's on_head does, for root (no policy)
 * and for a user whose policy is tests/bench/policy10.json, kept in a
 * real store on temporary drives. Prints ns per request of each, median
 * and range over R rounds (thread CPU time, so other load on the machine
 * does not count), and the difference. The request has no
 * connection here, so its address is unknown: the policy's
 * NotIpAddress statement is read as IpAddress (it still evaluates, and
 * does not deny).
 *   tests/bench/bench_authz.sh [ROUNDS [REQUESTS_PER_ROUND]] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/sigv4.h"
#include "storaged/s3/auth.h"
#include "storaged/s3/iam.h"
#include "storaged/s3/iam_i.h"
#include "storaged/s3/s3_i.h"
#include "storaged/store/object.h"

#define ROOT_AK "benchroot"
#define ROOT_SK "bench-secret-key-0123456789"
#define USER_AK "BENCHUSERAAAAAAAAAAA"
#define USER_SK "benchusersecretbenchusersecretbenchuser0"

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

static void die(const char *what)
{
    fprintf(stderr, "bench_authz: %s\n", what);
    exit(1);
}

/* "GET /bench/KEY?<presigned query> HTTP/1.1\r\nHost: ...\r\n\r\n" */
static char *presigned_head(const char *ak, const char *sk, const char *key)
{
    struct cm_sigv4_cred cred = {ak, sk, "us-east-1", "s3"};
    struct cm_kv h = {"host", 4, "127.0.0.1:9000", 14};
    char path[128];
    struct cm_sigv4_req sr = {.method = "GET", .headers = &h, .nheaders = 1};
    struct cm_buf q, out;

    snprintf(path, sizeof(path), "/bench/%s", key);
    sr.path = path;
    sr.path_len = strlen(path);
    cm_buf_init(&q, CM_BUF_NOLIMIT);
    cm_buf_init(&out, CM_BUF_NOLIMIT);
    if (cm_sigv4_presign(&cred, &sr, time(NULL), 3600, &q) < 0 ||
        cm_buf_appendf(&out,
                       "GET %s?%s HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n\r\n",
                       path, q.data) < 0)
        die("presign");
    cm_buf_fini(&q);
    return out.data;
}

/* One request through the head hook's steps; the authorisation's
 * answer. */
static enum stor_s3_err one(struct stor_s3 *s3, struct stor_s3_req *r,
                            const char *head, size_t n)
{
    enum stor_s3_err e;

    memset(r, 0, offsetof(struct stor_s3_req, query));
    r->http.headbuf = (char *)(uintptr_t)head;
    r->http.headlen = n;
    r->http.head.hdrs = r->http.hdrs;
    r->http.head.nhdrs = STOR_HTTP_MAX_HEADERS;
    if (stor_http_parse_head(head, n, &r->http.head) != (int)n)
        die("parse");
    r->http.is_get = true;
    r->http.app = s3;
    r->s3 = s3;
    r->decoded_len = UINT64_MAX;
    e = stor_s3_decode_target(r);
    if (e == S3E_NONE)
        e = stor_auth_check(r, time(NULL));
    if (e == S3E_NONE)
        e = stor_s3_route(r);
    if (e == S3E_NONE)
        e = stor_iam_authorize(r);
    stor_iam_snap_unref(r->iam_snap);
    stor_s3_target_fini(r);
    return e;
}

static double round_ns(struct stor_s3 *s3, struct stor_s3_req *r, char **heads,
                       long n)
{
    size_t len[64];
    double t0;
    long i;

    for (i = 0; i < 64; i++)
        len[i] = strlen(heads[i]);
    t0 = now_ns();
    for (i = 0; i < n; i++)
        if (one(s3, r, heads[i & 63], len[i & 63]) != S3E_NONE)
            die("a request was refused");
    return (now_ns() - t0) / (double)n;
}

/* Adds user "bench" with @policy to @iam's state (as the admin API does). */
static void add_user(struct stor_iam *iam, const char *policy)
{
    struct stor_iam_snap *s = stor_iam_snap_get(iam);
    json_t *doc = json_deep_copy(s->doc);
    char sealed[256];

    stor_iam_snap_unref(s);
    if (stor_iam_seal(iam, USER_AK, USER_SK, sealed, sizeof(sealed)) < 0)
        die("seal");
    json_array_append_new(json_object_get(doc, "users"),
                          json_pack("{s:s, s:s, s:s, s:b, s:s}", "name",
                                    "bench", "access_key", USER_AK, "secret",
                                    sealed, "disabled", 0, "policy", policy));
    pthread_mutex_lock(&iam->wlock);
    if (stor_iam_commit(iam, doc) < 0)
        die("commit");
    pthread_mutex_unlock(&iam->wlock);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9, i;
    long n = argc > 2 ? atol(argv[2]) : 100000;
    char dir[] = "/tmp/bench-authz-XXXXXX", *drives[4], *err = NULL;
    char *root_heads[64], *user_heads[64], key[32], *pol, *at;
    struct stor_store_opts so = {.ndrives = 4, .ec_parity = -1};
    struct stor_store *store;
    struct stor_s3 s3 = {
        .root_user = ROOT_AK, .root_secret = ROOT_SK, .region = "us-east-1"};
    struct stor_s3_req *r = calloc(1, sizeof(*r));
    double *a = calloc((size_t)rounds, sizeof(double));
    double *b = calloc((size_t)rounds, sizeof(double));
    FILE *f;
    long plen;

    if (r == NULL || a == NULL || b == NULL || rounds < 1 || n < 1 ||
        mkdtemp(dir) == NULL)
        die("setup");
    for (i = 0; i < 4; i++) {
        if (asprintf(&drives[i], "%s/d%d", dir, i) < 0 ||
            mkdir(drives[i], 0755) < 0)
            die("mkdir");
    }
    so.drives = (const char *const *)drives;
    if (stor_store_open(&so, &store, &err) < 0)
        die(err ? err : "store");
    if (stor_iam_open(store, ROOT_AK, ROOT_SK, &s3.iam, &err) < 0)
        die(err ? err : "iam");
    s3.store = store;
    f = fopen("tests/bench/policy10.json", "r");
    if (f == NULL || fseek(f, 0, SEEK_END) < 0 || (plen = ftell(f)) <= 0)
        die("tests/bench/policy10.json");
    rewind(f);
    pol = calloc(1, (size_t)plen + 1);
    if (pol == NULL || fread(pol, 1, (size_t)plen, f) != (size_t)plen)
        die("read policy");
    fclose(f);
    at = strstr(pol, "\"NotIpAddress\"");
    if (at) /* no connection here, so no address: see the header */
        memcpy(at, "\"IpAddress\"   ", 14);
    add_user(s3.iam, pol);
    for (i = 0; i < 64; i++) {
        snprintf(key, sizeof(key), "obj/%05d.bin", i);
        root_heads[i] = presigned_head(ROOT_AK, ROOT_SK, key);
        user_heads[i] = presigned_head(USER_AK, USER_SK, key);
    }
    (void)round_ns(&s3, r, user_heads, n / 10); /* warm */
    (void)round_ns(&s3, r, root_heads, n / 10);
    for (i = 0; i < rounds; i++) {
        a[i] = round_ns(&s3, r, root_heads, n);
        b[i] = round_ns(&s3, r, user_heads, n);
    }
    qsort(a, (size_t)rounds, sizeof(double), cmp);
    qsort(b, (size_t)rounds, sizeof(double), cmp);
    printf("| presigned GET head: parse, decode, SigV4, route, authorise | "
           "ns per request (median of %d x %ld) | range |\n|---|---|---|\n",
           rounds, n);
    printf("| root (no policy) | %.0f | %.0f-%.0f |\n", a[rounds / 2], a[0],
           a[rounds - 1]);
    printf("| user, policy10.json (10 statements) | %.0f | %.0f-%.0f |\n",
           b[rounds / 2], b[0], b[rounds - 1]);
    printf("\nthe user's authorisation adds %.0f ns per request (medians)\n",
           b[rounds / 2] - a[rounds / 2]);
    stor_iam_close(s3.iam);
    stor_store_close(store);
    for (i = 0; i < 64; i++) {
        free(root_heads[i]);
        free(user_heads[i]);
    }
    {
        char cmd[64];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_authz: could not remove %s\n", dir);
    }
    return 0;
}

/* tests/fuzz/fuzz_policy.c - libFuzzer target for the policy compiler and
 * evaluator (storaged/s3/policy.c), fed to it as a user policy and as a
 * bucket policy. Properties: compile returns 0 with a policy or -EINVAL
 * with a non-empty reason (or -ENOMEM), never anything else; a compiled
 * policy evaluates every action against resources, keys, listing
 * conditions and addresses cut from the input itself to one of the three
 * effects, and the ListBuckets check runs, without reading past what it
 * was given (ASan) or allocating. */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storaged/s3/policy.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

static const uint8_t *g_data;
static size_t g_size;

/* The client address: the input's first bytes, as IPv4 or IPv6. */
static int peer(void *arg, struct sockaddr_storage *ss)
{
    (void)arg;
    memset(ss, 0, sizeof(*ss));
    if (g_size >= 16 && (g_data[0] & 1)) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

        s6->sin6_family = AF_INET6;
        memcpy(&s6->sin6_addr, g_data, 16);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

        s4->sin_family = AF_INET;
        memcpy(&s4->sin_addr, g_data, g_size < 4 ? g_size : 4);
    }
    return 0;
}

static void evaluate(const struct stor_policy *p, const char *text, size_t len)
{
    static const char *const buckets[] = {"data", "pub", "", "a"};
    static const char *const keys[] = {"train/a.jpg", "", "x/y/z", NULL};
    char key[64];
    size_t kl = len < sizeof(key) - 1 ? len : sizeof(key) - 1;
    int a, b, k;

    memcpy(key, text, kl); /* a key from the input: any bytes */
    key[kl] = 0;
    for (a = 0; a < STOR_ACT_COUNT; a++)
        for (b = 0; b < 4; b++)
            for (k = 0; k < 5; k++) {
                struct stor_pol_ctx c = {
                    .act = (enum stor_act)a,
                    .bucket = buckets[b],
                    .key = k < 4 ? keys[k] : key,
                    .user = (k & 1) ? "alice" : NULL,
                    .account = (k & 1) ? "alice" : NULL,
                    .account_id = (k & 1) ? key : NULL,
                    .prefix = (k & 2) ? key : NULL,
                    .delimiter = (k & 1) ? "/" : NULL,
                    .peer = peer,
                };
                enum stor_pol_effect e;

                c.key_len = c.key ? (k < 4 ? strlen(c.key) : kl) : 0;
                e = stor_policy_eval(p, &c);
                CHECK(e == STOR_POL_NONE || e == STOR_POL_ALLOW ||
                      e == STOR_POL_DENY);
            }
    (void)stor_policy_mentions_bucket(p, "data", "alice");
    (void)stor_policy_is_public(p);
    (void)stor_policy_mentions_bucket(p, key[0] ? "pub" : "a", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum stor_pol_kind kinds[] = {STOR_POL_USER, STOR_POL_BUCKET};
    char *copy = malloc(size ? size : 1); /* exact size: ASan sees overreads */
    size_t i;

    if (copy == NULL)
        return 0;
    memcpy(copy, data, size);
    g_data = data;
    g_size = size;
    for (i = 0; i < 2; i++) {
        struct stor_policy *p = NULL;
        char err[256];
        int ret =
            stor_policy_compile(copy, size, kinds[i], &p, err, sizeof(err));

        CHECK(ret == 0 || ret == -EINVAL || ret == -ENOMEM);
        if (ret == -EINVAL)
            CHECK(err[0] != 0 && p == NULL);
        if (ret == 0) {
            CHECK(p != NULL);
            evaluate(p, copy, size);
            stor_policy_destroy(p);
        }
    }
    free(copy);
    return 0;
}

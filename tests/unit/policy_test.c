/* tests/unit/policy_test.c - the policy compiler and evaluator
 * (storaged/s3/policy.c): action wildcards, resource literals, prefixes
 * and globs, explicit Deny over Allow, default deny, s3:prefix /
 * s3:delimiter / aws:SourceIp conditions (absent keys included),
 * principals in bucket policies, ListBuckets visibility, and
 * MalformedPolicy reasons for each kind of bad document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four above first */
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "storaged/s3/policy.h"

static struct stor_policy *compile(const char *json, enum stor_pol_kind k)
{
    struct stor_policy *p = NULL;
    char err[256];
    int ret = stor_policy_compile(json, strlen(json), k, &p, err, sizeof(err));

    if (ret != 0)
        fail_msg("compile failed: %s", err);
    return p;
}

/* The reason a bad document gets (asserts that it is refused). */
static const char *reason(const char *json, enum stor_pol_kind k)
{
    static char err[256];
    struct stor_policy *p = NULL;

    assert_int_equal(
        stor_policy_compile(json, strlen(json), k, &p, err, sizeof(err)),
        -EINVAL);
    assert_null(p);
    assert_true(err[0] != 0);
    return err;
}

static enum stor_pol_effect ev(const struct stor_policy *p, enum stor_act a,
                               const char *bucket, const char *key)
{
    struct stor_pol_ctx c = {.act = a,
                             .bucket = bucket,
                             .key = key,
                             .key_len = key ? strlen(key) : 0,
                             .user = "alice"};

    return stor_policy_eval(p, &c);
}

static void test_actions_and_resources(void **state)
{
    struct stor_policy *p =
        compile("{\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":"
                "\"Allow\",\"Action\":[\"s3:Get*\",\"s3:listbucket\"],"
                "\"Resource\":[\"arn:aws:s3:::data\","
                "\"arn:aws:s3:::data/train/*\",\"arn:aws:s3:::lo?s/*.jpg\"]}]}",
                STOR_POL_USER);

    (void)state;
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "data", "train/a.jpg"),
                     STOR_POL_ALLOW);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "data", "train/"),
                     STOR_POL_ALLOW);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "data", "val/a.jpg"),
                     STOR_POL_NONE);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "data", "train"),
                     STOR_POL_NONE);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "database", "train/a"),
                     STOR_POL_NONE);
    assert_int_equal(ev(p, STOR_ACT_PUT_OBJECT, "data", "train/a.jpg"),
                     STOR_POL_NONE);
    assert_int_equal(ev(p, STOR_ACT_LIST_BUCKET, "data", NULL),
                     STOR_POL_ALLOW); /* case-insensitive action */
    assert_int_equal(ev(p, STOR_ACT_LIST_BUCKET, "other", NULL), STOR_POL_NONE);
    /* a glob: '?' one byte, '*' any run, also across '/' */
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "logs", "a/b/c.jpg"),
                     STOR_POL_ALLOW);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "logs", "a/b/c.png"),
                     STOR_POL_NONE);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "lgs", "c.jpg"), STOR_POL_NONE);
    assert_true(stor_policy_mentions_bucket(p, "data", "alice"));
    assert_true(stor_policy_mentions_bucket(p, "lots", "alice"));
    assert_false(stor_policy_mentions_bucket(p, "other", "alice"));
    /* admin actions are not s3:* */
    assert_int_equal(ev(p, STOR_ACT_ADMIN_LIST_USERS, "", NULL), STOR_POL_NONE);
    stor_policy_destroy(p);
}

static void test_deny_wins(void **state)
{
    struct stor_policy *p =
        compile("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
                "\"Resource\":\"arn:aws:s3:::*\"},{\"Effect\":\"Deny\","
                "\"Action\":[\"s3:DeleteObject\",\"s3:PutObject\"],"
                "\"Resource\":\"arn:aws:s3:::data/golden/*\"}]}",
                STOR_POL_USER);

    (void)state;
    assert_int_equal(ev(p, STOR_ACT_PUT_OBJECT, "data", "scratch/x"),
                     STOR_POL_ALLOW);
    assert_int_equal(ev(p, STOR_ACT_PUT_OBJECT, "data", "golden/x"),
                     STOR_POL_DENY);
    assert_int_equal(ev(p, STOR_ACT_DELETE_OBJECT, "data", "golden/x"),
                     STOR_POL_DENY);
    assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "data", "golden/x"),
                     STOR_POL_ALLOW);
    assert_int_equal(
        stor_policy_eval(NULL,
                         &(struct stor_pol_ctx){.act = STOR_ACT_GET_OBJECT,
                                                .bucket = "data"}),
        STOR_POL_NONE);
    stor_policy_destroy(p);
}

static void test_list_conditions(void **state)
{
    struct stor_policy *p = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:ListBucket\","
        "\"Resource\":\"arn:aws:s3:::data\",\"Condition\":{\"StringLike\":"
        "{\"s3:prefix\":[\"\",\"home/\",\"home/alice/*\"]},"
        "\"StringEquals\":{\"s3:delimiter\":\"/\"}}},"
        "{\"Effect\":\"Deny\",\"Action\":\"s3:ListBucket\",\"Resource\":"
        "\"arn:aws:s3:::data\",\"Condition\":{\"StringNotLike\":"
        "{\"s3:prefix\":[\"\",\"home/*\"]}}}]}",
        STOR_POL_USER);
    struct stor_pol_ctx c = {
        .act = STOR_ACT_LIST_BUCKET, .bucket = "data", .user = "alice"};

    (void)state;
    c.prefix = "home/alice/x/";
    c.delimiter = "/";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    c.prefix = "";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    c.prefix = "home/bob/";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    c.prefix = "etc/";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_DENY);
    c.prefix = "home/alice/";
    c.delimiter = NULL; /* absent: StringEquals does not hold */
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    /* no prefix key at all (not a listing): StringNotLike holds */
    c.prefix = NULL;
    c.delimiter = "/";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_DENY);
    stor_policy_destroy(p);
}

static struct sockaddr_storage peer_addr;

static int peer(void *arg, struct sockaddr_storage *ss)
{
    (void)arg;
    *ss = peer_addr;
    return 0;
}

static void set_peer(const char *ip)
{
    memset(&peer_addr, 0, sizeof(peer_addr));
    if (strchr(ip, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&peer_addr;

        s6->sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&peer_addr;

        s4->sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
    }
}

static void test_source_ip(void **state)
{
    struct stor_policy *p = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:GetObject\","
        "\"Resource\":\"arn:aws:s3:::data/*\",\"Condition\":{\"IpAddress\":"
        "{\"aws:SourceIp\":[\"10.1.0.0/16\",\"127.0.0.1\",\"fd00::/8\"]}}},"
        "{\"Effect\":\"Deny\",\"Action\":\"s3:GetObject\",\"Resource\":"
        "\"arn:aws:s3:::data/*\",\"Condition\":{\"IpAddress\":"
        "{\"aws:SourceIp\":\"10.1.2.0/23\"}}}]}",
        STOR_POL_USER);
    struct stor_pol_ctx c = {.act = STOR_ACT_GET_OBJECT,
                             .bucket = "data",
                             .key = "k",
                             .key_len = 1,
                             .peer = peer};

    (void)state;
    set_peer("10.1.200.3");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    set_peer("10.1.3.3");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_DENY);
    set_peer("10.2.0.1");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    set_peer("127.0.0.1");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    set_peer("127.0.0.2");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    set_peer("fd12::1");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    set_peer("fe80::1");
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    c.peer = NULL; /* address unknown: IpAddress does not hold */
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    stor_policy_destroy(p);
}

static void test_principals(void **state)
{
    struct stor_policy *p = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":\"*\","
        "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::pub/ds/*\"},"
        "{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":[\"arn:aws:iam::1:user/"
        "bob\",\"carol\"]},\"Action\":\"s3:PutObject\",\"Resource\":"
        "\"arn:aws:s3:::pub/*\"}]}",
        STOR_POL_BUCKET);
    struct stor_pol_ctx c = {.act = STOR_ACT_GET_OBJECT,
                             .bucket = "pub",
                             .key = "ds/x",
                             .key_len = 4};

    (void)state;
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW); /* anon */
    c.key = "other";
    c.key_len = 5;
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    c.act = STOR_ACT_PUT_OBJECT;
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    c.user = "bob";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    c.user = "carol";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_ALLOW);
    c.user = "dave";
    assert_int_equal(stor_policy_eval(p, &c), STOR_POL_NONE);
    assert_true(stor_policy_mentions_bucket(p, "pub", NULL));
    stor_policy_destroy(p);
}

/* What the public access block counts as a public policy. */
static void test_is_public(void **state)
{
    static const struct {
        const char *json;
        bool pub;
    } t[] = {
        {"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":\"*\","
         "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::b/*\"}]}",
         true},
        {"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":"
         "\"*\"},\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::"
         "b/*\",\"Condition\":{\"StringLike\":{\"s3:prefix\":\"x\"}}}]}",
         true},
        {"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":\"*\","
         "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::b/*\","
         "\"Condition\":{\"IpAddress\":{\"aws:SourceIp\":\"10.0.0.0/8\"}}}]}",
         false},
        {"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":\"*\","
         "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::b/*\","
         "\"Condition\":{\"NotIpAddress\":{\"aws:SourceIp\":\"10.0.0.0/8\"}}"
         "}]}",
         true},
        {"{\"Statement\":[{\"Effect\":\"Deny\",\"Principal\":\"*\","
         "\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::b/*\"}]}",
         false},
        {"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":"
         "\"bob\"},\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::"
         "b/*\"}]}",
         false},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct stor_policy *p = compile(t[i].json, STOR_POL_BUCKET);

        assert_int_equal(stor_policy_is_public(p), t[i].pub);
        stor_policy_destroy(p);
    }
    assert_false(stor_policy_is_public(NULL));
}

static void test_malformed(void **state)
{
    (void)state;
    assert_non_null(strstr(reason("{\"Statement\":[", STOR_POL_USER),
                           "invalid JSON at line 1"));
    assert_non_null(strstr(reason("[]", STOR_POL_USER), "JSON object"));
    assert_non_null(
        strstr(reason("{\"Statement\":[]}", STOR_POL_USER), "non-empty"));
    assert_non_null(
        strstr(reason("{\"Version\":\"2020-01-01\",\"Statement\":[{}]}",
                      STOR_POL_USER),
               "Version"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Maybe\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\"}]}",
               STOR_POL_USER),
        "Effect"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"GetObject\","
               "\"Resource\":\"*\"}]}",
               STOR_POL_USER),
        "service:action"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"arn:aws:ec2:::x\"}]}",
               STOR_POL_USER),
        "arn:aws:s3:::"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\"}]}",
               STOR_POL_USER),
        "no Resource"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\",\"Condition\":{\"DateGreaterThan\":{}}}]}",
               STOR_POL_USER),
        "DateGreaterThan"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\",\"Condition\":{\"StringLike\":{\"s3:"
               "RequestObjectTagKeys\":\"y\"}}}]}",
               STOR_POL_USER),
        "not supported"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\",\"Condition\":{\"IpAddress\":{\"aws:"
               "SourceIp\":\"10.0.0.0/33\"}}}]}",
               STOR_POL_USER),
        "prefix length"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"NotAction\":\"s3:*\","
               "\"Resource\":\"*\"}]}",
               STOR_POL_USER),
        "NotAction"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":\"*\","
               "\"Action\":\"s3:*\",\"Resource\":\"*\"}]}",
               STOR_POL_USER),
        "user policy"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\"}]}",
               STOR_POL_BUCKET),
        "Principal"));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{"
               "\"Service\":\"x\"},\"Action\":\"s3:*\",\"Resource\":\"*\"}]}",
               STOR_POL_BUCKET),
        "Service"));
    assert_non_null(strstr(reason("{\"Statement\":[{\"Effect\":\"Allow\","
                                  "\"Effect\":\"Deny\"}]}",
                                  STOR_POL_USER),
                           "duplicate"));
}

/* A request's header values for the value callback: "name=value" pairs,
 * request tags under "tag:NAME", the stored object's under "ex:NAME". */
static const char *const *req_vals;

static const char *vals_cb(void *arg, enum stor_pol_vkind kind,
                           const char *name, char *buf, size_t cap, size_t *n)
{
    char want[128];
    size_t i;

    (void)arg;
    (void)buf;
    (void)cap;
    snprintf(want, sizeof(want), "%s%s=",
             kind == STOR_POL_V_REQTAG  ? "tag:"
             : kind == STOR_POL_V_EXTAG ? "ex:"
                                        : "",
             name);
    for (i = 0; req_vals && req_vals[i]; i++)
        if (strncmp(req_vals[i], want, strlen(want)) == 0) {
            *n = strlen(req_vals[i] + strlen(want));
            return req_vals[i] + strlen(want);
        }
    return NULL;
}

static enum stor_pol_effect ev_vals(const struct stor_policy *p,
                                    const char *const *vals)
{
    struct stor_pol_ctx c = {.act = STOR_ACT_PUT_OBJECT,
                             .bucket = "b",
                             .key = "k",
                             .key_len = 1,
                             .user = "alice",
                             .value = vals_cb};

    req_vals = vals;
    return stor_policy_eval(p, &c);
}

static void test_request_keys_and_null(void **state)
{
    static const char *const none[] = {NULL};
    static const char *const sse[] = {"x-amz-server-side-encryption=AES256",
                                      NULL};
    static const char *const pub[] = {"x-amz-acl=public-read", "tag:team=ml",
                                      NULL};
    struct stor_policy *p = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:PutObject\","
        "\"Resource\":\"arn:aws:s3:::b/*\"},"
        "{\"Effect\":\"Deny\",\"Action\":\"s3:PutObject\","
        "\"Resource\":\"arn:aws:s3:::b/*\",\"Condition\":{\"Null\":"
        "{\"s3:x-amz-server-side-encryption\":\"true\"}}}]}",
        STOR_POL_USER);
    struct stor_policy *q = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:PutObject\","
        "\"Resource\":\"arn:aws:s3:::b/*\",\"Condition\":{"
        "\"StringLike\":{\"S3:X-Amz-Acl\":\"public*\"},"
        "\"StringEquals\":{\"s3:RequestObjectTag/team\":\"ml\"}}}]}",
        STOR_POL_USER);

    (void)state;
    assert_int_equal(ev_vals(p, none), STOR_POL_DENY);
    assert_int_equal(ev_vals(p, sse), STOR_POL_ALLOW);
    assert_int_equal(ev_vals(q, pub), STOR_POL_ALLOW);
    assert_int_equal(ev_vals(q, sse), STOR_POL_NONE);
    assert_int_equal(ev_vals(q, none), STOR_POL_NONE);
    /* no value callback: every such key is absent */
    assert_int_equal(ev(p, STOR_ACT_PUT_OBJECT, "b", "k"), STOR_POL_DENY);
    assert_true(stor_policy_has_deny(p));
    assert_false(stor_policy_has_deny(q));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\",\"Condition\":{\"Null\":"
               "{\"s3:x-amz-acl\":\"yes\"}}}]}",
               STOR_POL_USER),
        "takes \"true\" or \"false\""));
    stor_policy_destroy(p);
    stor_policy_destroy(q);
}

/* s3:ExistingObjectTag/NAME is asked of the callback as the stored
 * object's tag (not the request's), and flags the policy. */
static void test_existing_object_tag(void **state)
{
    static const char *const pub[] = {"ex:security=public", NULL};
    static const char *const req[] = {"tag:security=public", NULL};
    static const char *const priv[] = {"ex:security=private", NULL};
    struct stor_policy *p = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:PutObject\","
        "\"Resource\":\"arn:aws:s3:::b/*\",\"Condition\":{\"StringEquals\":"
        "{\"s3:ExistingObjectTag/security\":\"public\"}}}]}",
        STOR_POL_USER);
    struct stor_policy *q = compile(
        "{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:PutObject\","
        "\"Resource\":\"arn:aws:s3:::b/*\",\"Condition\":{\"StringEquals\":"
        "{\"s3:RequestObjectTag/security\":\"public\"}}}]}",
        STOR_POL_USER);

    (void)state;
    assert_int_equal(ev_vals(p, pub), STOR_POL_ALLOW);
    assert_int_equal(ev_vals(p, req), STOR_POL_NONE);
    assert_int_equal(ev_vals(p, priv), STOR_POL_NONE);
    assert_int_equal(ev_vals(q, pub), STOR_POL_NONE);
    assert_true(stor_policy_uses_existing_tags(p));
    assert_false(stor_policy_uses_existing_tags(q));
    assert_false(stor_policy_uses_existing_tags(NULL));
    assert_non_null(strstr(
        reason("{\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"s3:*\","
               "\"Resource\":\"*\",\"Condition\":{\"StringEquals\":"
               "{\"s3:ExistingObjectTag/\":\"x\"}}}]}",
               STOR_POL_USER),
        "not supported"));
    stor_policy_destroy(p);
    stor_policy_destroy(q);
}

static void test_canned(void **state)
{
    const char *names[] = {"readonly", "readwrite", "writeonly", "admin"};
    struct stor_policy *p;
    size_t i;

    (void)state;
    for (i = 0; i < 4; i++) {
        p = compile(stor_policy_canned(names[i]), STOR_POL_USER);
        assert_int_equal(ev(p, STOR_ACT_GET_OBJECT, "b", "k"),
                         i == 2 ? STOR_POL_NONE : STOR_POL_ALLOW);
        assert_int_equal(ev(p, STOR_ACT_PUT_OBJECT, "b", "k"),
                         i == 0 ? STOR_POL_NONE : STOR_POL_ALLOW);
        assert_int_equal(ev(p, STOR_ACT_ADMIN_CREATE_USER, "", NULL),
                         i == 3 ? STOR_POL_ALLOW : STOR_POL_NONE);
        stor_policy_destroy(p);
    }
    assert_null(stor_policy_canned("root"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_actions_and_resources),
        cmocka_unit_test(test_deny_wins),
        cmocka_unit_test(test_list_conditions),
        cmocka_unit_test(test_source_ip),
        cmocka_unit_test(test_principals),
        cmocka_unit_test(test_is_public),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_request_keys_and_null),
        cmocka_unit_test(test_existing_object_tag),
        cmocka_unit_test(test_canned),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

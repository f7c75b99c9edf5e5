/* tests/unit/common_otlp_test.c - Prometheus text -> OTLP JSON (common/otlp.c):
 * each metric kind, label escaping, histogram bucket differencing, malformed
 * input, endpoint checks, and a pusher that starts and stops cleanly against
 * a port where nothing listens. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/otlp.h"

static const struct cm_otlp_resource res = {"svc", "host:1", "0.1"};

/* Encodes @text; returns the JSON (static buffer) or NULL on error *@ret. */
static char *enc(const char *text, int *ret)
{
    static struct cm_buf b;

    cm_buf_fini(&b);
    cm_buf_init(&b, CM_BUF_NOLIMIT);
    *ret = cm_otlp_encode(text, strlen(text), &res, 1000, 2000, &b);
    return *ret == 0 ? b.data : NULL;
}

static void has(const char *json, const char *want)
{
    if (strstr(json, want) == NULL)
        fail_msg("missing %s in %s", want, json);
}

static void test_kinds(void **state)
{
    int ret;
    char *j;

    (void)state;
    j = enc("# HELP r_total Requests.\n# TYPE r_total counter\n"
            "r_total{api=\"Get\",status=\"200\"} 5\n"
            "# TYPE g gauge\ng 0.5\n"
            "loose 7\n",
            &ret);
    assert_int_equal(ret, 0);
    has(j, "{\"resourceMetrics\":[{\"resource\":{\"attributes\":["
           "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"svc\"}},"
           "{\"key\":\"service.instance.id\",\"value\":{\"stringValue\":"
           "\"host:1\"}}");
    has(j, "\"scope\":{\"name\":\"svc\"}");
    has(j, "{\"name\":\"r_total\",\"description\":\"Requests.\",\"unit\":\"\","
           "\"sum\":{\"aggregationTemporality\":2,\"isMonotonic\":true,"
           "\"dataPoints\":[{\"attributes\":[{\"key\":\"api\",\"value\":"
           "{\"stringValue\":\"Get\"}},{\"key\":\"status\",\"value\":"
           "{\"stringValue\":\"200\"}}],\"startTimeUnixNano\":\"1000\","
           "\"timeUnixNano\":\"2000\",\"asInt\":\"5\"}]}}");
    has(j, "{\"name\":\"g\",\"description\":\"\",\"unit\":\"\",\"gauge\":"
           "{\"dataPoints\":[{\"attributes\":[],\"startTimeUnixNano\":\"1000\","
           "\"timeUnixNano\":\"2000\",\"asDouble\":0.5}]}}");
    has(j, "{\"name\":\"loose\",");
    has(j, "\"asInt\":\"7\"");
}

static void test_histogram(void **state)
{
    int ret;
    char *j;

    (void)state;
    j = enc("# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{api=\"a\",le=\"0.1\"} 1\n"
            "lat_seconds_bucket{api=\"a\",le=\"1\"} 3\n"
            "lat_seconds_bucket{api=\"a\",le=\"+Inf\"} 4\n"
            "lat_seconds_sum{api=\"a\"} 2.5\n"
            "lat_seconds_count{api=\"a\"} 4\n"
            "lat_seconds_bucket{api=\"b\",le=\"0.1\"} 0\n"
            "lat_seconds_bucket{api=\"b\",le=\"1\"} 0\n"
            "lat_seconds_bucket{api=\"b\",le=\"+Inf\"} 2\n"
            "lat_seconds_sum{api=\"b\"} 9\n"
            "lat_seconds_count{api=\"b\"} 2\n",
            &ret);
    assert_int_equal(ret, 0);
    has(j, "\"unit\":\"s\",\"histogram\":{\"aggregationTemporality\":2,");
    has(j,
        "\"stringValue\":\"a\"}}],\"startTimeUnixNano\":\"1000\","
        "\"timeUnixNano\":\"2000\",\"count\":\"4\",\"sum\":2.5,"
        "\"bucketCounts\":[\"1\",\"2\",\"1\"],\"explicitBounds\":[0.10000000000000001,1]}");
    has(j, "\"count\":\"2\",\"sum\":9,\"bucketCounts\":[\"0\",\"0\",\"2\"]");
    /* one metric with two points, no stray _bucket metrics */
    assert_null(strstr(j, "lat_seconds_bucket"));
    assert_null(strstr(j, "lat_seconds_count"));
}

static void test_escapes(void **state)
{
    int ret;
    char *j;

    (void)state;
    j = enc("m{path=\"a\\\"b\\\\c\\nd\"} 1\n", &ret);
    assert_int_equal(ret, 0);
    has(j, "\"stringValue\":\"a\\\"b\\\\c\\u000ad\"");
    j = enc("  \n# a comment\n\r\nm 1\r\n", &ret);
    assert_int_equal(ret, 0);
    has(j, "\"name\":\"m\"");
}

static void test_malformed(void **state)
{
    static const char *const bad[] = {
        "foo{a=\"b} 1\n",
        "foo\n",
        "foo 1x\n",
        "{a=\"b\"} 1\n",
        "foo{a=b} 1\n",
        "foo{a=\"b\" 1\n",
        "foo{=\"b\"} 1\n",
        "foo{a=\"\\x\"} 1\n",
        "# TYPE h histogram\nh 1\n",
        "# TYPE h histogram\nh_bucket{le=\"x\"} 1\n",
    };
    int ret;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(enc(bad[i], &ret));
        assert_int_equal(ret, -EBADMSG);
    }
}

static void test_endpoint(void **state)
{
    (void)state;
    assert_int_equal(cm_otlp_check_endpoint("http://127.0.0.1:4318"), 0);
    assert_int_equal(
        cm_otlp_check_endpoint("https://c.example/otlp/v1/metrics"), 0);
    assert_int_equal(cm_otlp_check_endpoint("127.0.0.1:4318"), -EINVAL);
    assert_int_equal(cm_otlp_check_endpoint("http://"), -EINVAL);
    assert_int_equal(cm_otlp_check_endpoint("ftp://x"), -EINVAL);
    assert_int_equal(cm_otlp_check_endpoint(NULL), -EINVAL);
}

static int renders;

static int render(void *arg, struct cm_buf *out)
{
    (void)arg;
    renders++;
    return cm_buf_appends(out, "# TYPE x counter\nx 1\n");
}

static void test_pusher_start_stop(void **state)
{
    struct cm_otlp_conf c = {.endpoint = "http://127.0.0.1:1",
                             .interval_s = 0.05,
                             .res = res,
                             .render = render};
    struct cm_otlp *p;

    (void)state;
    assert_int_equal(cm_otlp_start(&c, &p), 0);
    usleep(300 * 1000);
    cm_otlp_stop(p);
    assert_true(renders >= 2); /* pushed (and failed) on schedule */
    c.interval_s = 0;
    assert_int_equal(cm_otlp_start(&c, &p), -EINVAL);
    c.interval_s = 1;
    c.endpoint = "localhost:1";
    assert_int_equal(cm_otlp_start(&c, &p), -EINVAL);
    cm_otlp_stop(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_pusher_start_stop),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    int dummy;

    (void)enc("", &dummy); /* frees the static buffer */
    return r;
}

/* tests/unit/common_time_test.c - the three S3 time formats: formatting
 * (including years and dates that trip naive code), locale independence,
 * strict parsing and round trips. */
#include <errno.h>
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/timefmt.h"

#define T_2015 ((time_t)1440938160) /* 2015-08-30T12:36:00Z, a Sunday */

static void test_format(void **state)
{
    char iso[CM_TIME_ISO_BASIC_LEN + 1], rfc[CM_TIME_RFC3339_LEN + 1],
        http[CM_TIME_HTTP_LEN + 1];

    (void)state;
    cm_time_iso_basic(T_2015, iso);
    assert_string_equal(iso, "20150830T123600Z");
    cm_time_rfc3339(T_2015, 123, rfc);
    assert_string_equal(rfc, "2015-08-30T12:36:00.123Z");
    cm_time_http(T_2015, http);
    assert_string_equal(http, "Sun, 30 Aug 2015 12:36:00 GMT");

    cm_time_iso_basic(0, iso);
    assert_string_equal(iso, "19700101T000000Z");
    cm_time_rfc3339(0, 0, rfc);
    assert_string_equal(rfc, "1970-01-01T00:00:00.000Z");
    cm_time_http(0, http);
    assert_string_equal(http, "Thu, 01 Jan 1970 00:00:00 GMT");

    /* leap day, and past 2038 (64-bit time_t) */
    cm_time_http(1709208000, http);
    assert_string_equal(http, "Thu, 29 Feb 2024 12:00:00 GMT");
    cm_time_iso_basic((time_t)2147483648LL, iso);
    assert_string_equal(iso, "20380119T031408Z");
    cm_time_rfc3339((time_t)4102444799LL, 999, rfc);
    assert_string_equal(rfc, "2099-12-31T23:59:59.999Z");
    assert_int_equal(strlen(http), CM_TIME_HTTP_LEN);
}

static void test_ms_clamped(void **state)
{
    char rfc[CM_TIME_RFC3339_LEN + 1];

    (void)state;
    cm_time_rfc3339(T_2015, -5, rfc);
    assert_string_equal(rfc, "2015-08-30T12:36:00.000Z");
    cm_time_rfc3339(T_2015, 1000, rfc);
    assert_string_equal(rfc, "2015-08-30T12:36:00.999Z");
}

static void test_locale_independent(void **state)
{
    static const char *const locales[] = {"de_DE.UTF-8", "fr_FR.UTF-8",
                                          "ja_JP.UTF-8", "C.UTF-8"};
    char http[CM_TIME_HTTP_LEN + 1];
    time_t t;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(locales) / sizeof(locales[0]); i++) {
        if (setlocale(LC_ALL, locales[i]) == NULL)
            continue; /* not installed here; C locale is checked anyway */
        cm_time_http(T_2015, http);
        assert_string_equal(http, "Sun, 30 Aug 2015 12:36:00 GMT");
        assert_int_equal(cm_time_parse_http(http, strlen(http), &t), 0);
        assert_int_equal(t, T_2015);
    }
    setlocale(LC_ALL, "C");
}

static void test_parse_good(void **state)
{
    time_t t;

    (void)state;
    assert_int_equal(cm_time_parse_iso_basic("20150830T123600Z", 16, &t), 0);
    assert_int_equal(t, T_2015);
    assert_int_equal(cm_time_parse_rfc3339("2015-08-30T12:36:00Z", 20, &t), 0);
    assert_int_equal(t, T_2015);
    assert_int_equal(cm_time_parse_rfc3339("2015-08-30T12:36:00.123Z", 24, &t),
                     0);
    assert_int_equal(t, T_2015);
    assert_int_equal(
        cm_time_parse_rfc3339("2015-08-30t12:36:00.123456789z", 30, &t), 0);
    assert_int_equal(t, T_2015);
    assert_int_equal(
        cm_time_parse_rfc3339("2015-08-30T12:36:00.5+00:00", 27, &t), 0);
    assert_int_equal(t, T_2015);
    assert_int_equal(
        cm_time_parse_http("Sun, 30 Aug 2015 12:36:00 GMT", 29, &t), 0);
    assert_int_equal(t, T_2015);
    assert_int_equal(cm_time_parse_iso_basic("19700101T000000Z", 16, &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(cm_time_parse_iso_basic("20240229T000000Z", 16, &t), 0);
    assert_int_equal(cm_time_parse_iso_basic("20000229T000000Z", 16, &t), 0);
    /* 1969-12-31T23:59:59Z is -1: a valid time, not an error */
    assert_int_equal(cm_time_parse_iso_basic("19691231T235959Z", 16, &t), 0);
    assert_int_equal(t, -1);
    /* leap second accepted (normalised to the next minute) */
    assert_int_equal(cm_time_parse_iso_basic("20161231T235960Z", 16, &t), 0);
    assert_int_equal(t, 1483228800);
}

static void test_parse_bad(void **state)
{
    static const char *const iso_bad[] = {
        "",
        "20150830T123600",   /* short */
        "20150830T123600ZZ", /* long */
        "20150830 123600Z",
        "2015083OT123600Z", /* letter O */
        "20151330T123600Z", /* month 13 */
        "20150030T123600Z", /* month 0 */
        "20150200T123600Z", /* day 0 */
        "20150230T123600Z", /* Feb 30 */
        "20230229T123600Z", /* not a leap year */
        "19000229T123600Z", /* century, not a leap year */
        "20150831T243600Z", /* hour 24 */
        "20150831T126000Z", /* minute 60 */
        "20150831T123661Z", /* second 61 */
        "2015-830T123600Z",
        "+0150830T123600Z",
    };
    static const char *const rfc_bad[] = {
        "",
        "2015-08-30",
        "2015-08-30T12:36:00",             /* no zone */
        "2015-08-30T12:36:00.Z",           /* empty fraction */
        "2015-08-30T12:36:00.1234567890Z", /* fraction too long */
        "2015-08-30T12:36:00+01:00",       /* only UTC */
        "2015-08-30T12:36:00Zjunk",
        "2015-08-30 12:36:00Z",
        "2015/08/30T12:36:00Z",
        "2015-8-30T12:36:00Z",
        "2015-08-30T12:36Z",
        "2015-02-30T12:36:00Z",
    };
    static const char *const http_bad[] = {
        "",
        "Sun, 30 Aug 2015 12:36:00 UTC",
        "sun, 30 Aug 2015 12:36:00 GMT",
        "Sun, 30 aug 2015 12:36:00 GMT",
        "Xyz, 30 Aug 2015 12:36:00 GMT",
        "Sun, 30 Aug 2015 12:36:00 GMT ",
        "Sun 30 Aug 2015 12:36:00 GMT",
        "Sun, 3 Aug 2015 12:36:00 GMT",
        "Sunday, 30-Aug-15 12:36:00 GMT", /* RFC 850 */
        "Sun Aug 30 12:36:00 2015",       /* asctime */
        "Sun, 31 Sep 2015 12:36:00 GMT",
        "Sun, 30 Aug 2015 25:36:00 GMT",
    };
    time_t t = 12345;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(iso_bad) / sizeof(iso_bad[0]); i++)
        if (cm_time_parse_iso_basic(iso_bad[i], strlen(iso_bad[i]), &t) !=
            -EINVAL)
            fail_msg("iso accepted #%zu: %s", i, iso_bad[i]);
    for (i = 0; i < sizeof(rfc_bad) / sizeof(rfc_bad[0]); i++)
        if (cm_time_parse_rfc3339(rfc_bad[i], strlen(rfc_bad[i]), &t) !=
            -EINVAL)
            fail_msg("rfc3339 accepted #%zu: %s", i, rfc_bad[i]);
    for (i = 0; i < sizeof(http_bad) / sizeof(http_bad[0]); i++)
        if (cm_time_parse_http(http_bad[i], strlen(http_bad[i]), &t) != -EINVAL)
            fail_msg("http accepted #%zu: %s", i, http_bad[i]);
    assert_int_equal(t, 12345); /* untouched on failure */
    /* length is honoured: a valid prefix of a longer buffer is rejected */
    assert_int_equal(cm_time_parse_iso_basic("20150830T123600Z", 15, &t),
                     -EINVAL);
}

/* The three HTTP-date forms of RFC 9110 section 5.6.7, as conditional
 * request headers may carry them. */
static void test_parse_http_any(void **state)
{
    static const char *const bad[] = {
        "",
        "Sunday, 30-Aug-15 12:36:00 UTC",
        "Sun, 30-Aug-15 12:36:00 GMT",      /* short weekday in RFC 850 */
        "sunday, 30-Aug-15 12:36:00 GMT",   /* case */
        "Sunday, 30-Aug-2015 12:36:00 GMT", /* four-digit year */
        "Sunday, 31-Sep-15 12:36:00 GMT",
        "Sunday, 30-Aug-15 12:36:00 GMT ",
        "Sun Aug 30 12:36:00 15",
        "Sun Aug 30 12:36:00 2015 ",
        "Sun Aug  6 12:36:00 2015 GMT",
        "Sun Aug 6 12:36:00 2015", /* day not padded */
        "Sun Aug 06  12:36:00 2015",
        "Sun Aug 30 24:36:00 2015",
        "Sun Aug 32 12:36:00 2015",
        "2015-08-30T12:36:00Z",
        "not a date",
    };
    time_t now = T_2015, t = 12345;
    size_t i;

    (void)state;
    assert_int_equal(
        cm_time_parse_http_any("Sun, 30 Aug 2015 12:36:00 GMT", 29, now, &t),
        0);
    assert_int_equal(t, T_2015);
    t = 0;
    assert_int_equal(
        cm_time_parse_http_any("Sunday, 30-Aug-15 12:36:00 GMT", 30, now, &t),
        0);
    assert_int_equal(t, T_2015);
    t = 0;
    assert_int_equal(
        cm_time_parse_http_any("Sun Aug 30 12:36:00 2015", 24, now, &t), 0);
    assert_int_equal(t, T_2015);
    /* RFC 9110's own example, 1994-11-06T08:49:37Z, in all three forms */
    assert_int_equal(
        cm_time_parse_http_any("Sun, 06 Nov 1994 08:49:37 GMT", 29, now, &t),
        0);
    assert_int_equal(t, 784111777);
    t = 0;
    assert_int_equal(
        cm_time_parse_http_any("Sunday, 06-Nov-94 08:49:37 GMT", 30, now, &t),
        0);
    assert_int_equal(t, 784111777);
    t = 0;
    assert_int_equal(
        cm_time_parse_http_any("Sun Nov  6 08:49:37 1994", 24, now, &t), 0);
    assert_int_equal(t, 784111777);
    /* two-digit years: up to 50 years ahead of now's year, else the
     * century before (now = 2015: 65 -> 2065, 66 -> 1966) */
    assert_int_equal(
        cm_time_parse_http_any("Thursday, 01-Jan-65 00:00:00 GMT", 32, now, &t),
        0);
    assert_int_equal(t, (time_t)2997993600LL);
    assert_int_equal(
        cm_time_parse_http_any("Saturday, 01-Jan-66 00:00:00 GMT", 32, now, &t),
        0);
    assert_int_equal(t, (time_t)-126230400LL);
    t = 12345;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (cm_time_parse_http_any(bad[i], strlen(bad[i]), now, &t) != -EINVAL)
            fail_msg("http_any accepted #%zu: %s", i, bad[i]);
    assert_int_equal(t, 12345); /* untouched on failure */
}

static void test_round_trip(void **state)
{
    char iso[CM_TIME_ISO_BASIC_LEN + 1], rfc[CM_TIME_RFC3339_LEN + 1],
        http[CM_TIME_HTTP_LEN + 1];
    time_t t, back;

    (void)state;
    /* every ~3.7 days over 100 years, plus odd seconds */
    for (t = 0; t < (time_t)4102444800LL; t += 320417) {
        cm_time_iso_basic(t, iso);
        cm_time_rfc3339(t, 7, rfc);
        cm_time_http(t, http);
        assert_int_equal(cm_time_parse_iso_basic(iso, strlen(iso), &back), 0);
        assert_int_equal(back, t);
        assert_int_equal(cm_time_parse_rfc3339(rfc, strlen(rfc), &back), 0);
        assert_int_equal(back, t);
        assert_int_equal(cm_time_parse_http(http, strlen(http), &back), 0);
        assert_int_equal(back, t);
    }
}

/* Maps two pages and makes the second PROT_NONE; inputs copied flush
 * against it fault on a one-byte overread even without ASan. */
static char *guard_map(size_t *pagesz)
{
    char *map;

    *pagesz = (size_t)sysconf(_SC_PAGESIZE);
    map = mmap(NULL, 2 * *pagesz, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + *pagesz, *pagesz, PROT_NONE), 0);
    return map;
}

static const char *flush(char *map, size_t pagesz, const char *s, size_t n)
{
    memcpy(map + pagesz - n, s, n);
    return map + pagesz - n;
}

static void test_guard_page_prefixes(void **state)
{
    static const char *const good[] = {"20150830T123600Z",
                                       "2015-08-30T12:36:00.123456Z",
                                       "2015-08-30T12:36:00+00:00",
                                       "Sun, 30 Aug 2015 12:36:00 GMT",
                                       "Sunday, 30-Aug-15 12:36:00 GMT",
                                       "Sun Aug 30 12:36:00 2015"};
    size_t pagesz, i, n;
    char *map = guard_map(&pagesz);
    time_t t;

    (void)state;
    for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t len = strlen(good[i]);
        for (n = 0; n <= len; n++) {
            const char *p = flush(map, pagesz, good[i], n);
            int a = cm_time_parse_iso_basic(p, n, &t);
            int b = cm_time_parse_rfc3339(p, n, &t);
            int c = cm_time_parse_http(p, n, &t);
            int d = cm_time_parse_http_any(p, n, T_2015, &t);
            /* a strict prefix never parses (except RFC 3339 before its
             * optional fraction/offset is cut, which still needs a 'Z') */
            if (n < len)
                assert_true(a == -EINVAL && b == -EINVAL && c == -EINVAL &&
                            d == -EINVAL);
            else
                assert_true(a == 0 || b == 0 || c == 0 || d == 0);
        }
    }
    munmap(map, 2 * pagesz);
}

/* The arithmetic civil date (years 1970..9999) against glibc's gmtime_r:
 * a sweep with an odd stride, every year's first and last second and the
 * days around February's end, and the edges of the fast range. */
static void expect_like_gmtime(time_t t)
{
    static const char *const wd[] = {"Sun", "Mon", "Tue", "Wed",
                                     "Thu", "Fri", "Sat"};
    static const char *const mo[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char http[CM_TIME_HTTP_LEN + 1], rfc[CM_TIME_RFC3339_LEN + 1];
    char want[64];
    struct tm tm;

    assert_non_null(gmtime_r(&t, &tm));
    cm_time_http(t, http);
    snprintf(want, sizeof(want), "%s, %02d %s %04d %02d:%02d:%02d GMT",
             wd[tm.tm_wday], tm.tm_mday, mo[tm.tm_mon], tm.tm_year + 1900,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
    assert_string_equal(http, want);
    cm_time_rfc3339(t, 7, rfc);
    snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.007Z",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec);
    assert_string_equal(rfc, want);
}

static void test_civil_date_like_gmtime(void **state)
{
    (void)state;
    for (long long t = 0; t <= 253402300799LL; t += 3214567LL)
        expect_like_gmtime((time_t)t);
    for (int y = 1970; y <= 9999; y++) {
        struct tm tm = {.tm_year = y - 1900, .tm_mon = 0, .tm_mday = 1};
        time_t jan1 = timegm(&tm);

        expect_like_gmtime(jan1);
        if (y > 1970)
            expect_like_gmtime(jan1 - 1);
        for (int d = 57; d <= 61; d++) /* Feb 27 .. Mar 2 */
            expect_like_gmtime(jan1 + (time_t)d * 86400 + 43199);
    }
    expect_like_gmtime((time_t)253402300799LL);
    expect_like_gmtime((time_t)-1);
    expect_like_gmtime((time_t)-86401);
}

/* The parser's arithmetic (years 1970..9999) gives what timegm gives,
 * a leap second included, on every day's first and last second of
 * sampled years and across every year's February. */
static void expect_parse_like_timegm(int y, int mo, int d, int h, int mi,
                                     int sec)
{
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    char iso[64]; /* room for any int: -Werror=format-truncation */
    time_t t = 0;

    snprintf(iso, sizeof(iso), "%04d%02d%02dT%02d%02d%02dZ", y, mo, d, h, mi,
             sec);
    assert_int_equal(cm_time_parse_iso_basic(iso, 16, &t), 0);
    assert_true(t == timegm(&tm));
}

static void test_parse_like_timegm(void **state)
{
    static const int mlen[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

    (void)state;
    for (int y = 1970; y <= 9999; y++) {
        bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

        expect_parse_like_timegm(y, 1, 1, 0, 0, 0);
        expect_parse_like_timegm(y, 2, 28, 23, 59, 59);
        if (leap)
            expect_parse_like_timegm(y, 2, 29, 12, 30, 60);
        expect_parse_like_timegm(y, 3, 1, 0, 0, 0);
        expect_parse_like_timegm(y, 12, 31, 23, 59, 60);
        if (y % 97 != 0 && y != 2026)
            continue;
        for (int mo = 1; mo <= 12; mo++)
            for (int d = 1; d <= mlen[mo - 1]; d++)
                if (mo != 2 || d < 29 || leap) {
                    expect_parse_like_timegm(y, mo, d, 0, 0, 0);
                    expect_parse_like_timegm(y, mo, d, 23, 59, 59);
                }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_ms_clamped),
        cmocka_unit_test(test_civil_date_like_gmtime),
        cmocka_unit_test(test_locale_independent),
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_like_timegm),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_parse_http_any),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_guard_page_prefixes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

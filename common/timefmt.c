/* common/timefmt.c - the time formats S3 speaks, always UTC.
 *
 * DESIGN: no strftime/strptime: their %a/%b depend on the locale and
 * strptime is lenient. We format with the civil date (arithmetic for years
 * 1970..9999, gmtime_r outside) + fixed English names and
 * parse with a strict fixed-width scanner, then timegm(). Parsers validate
 * field ranges (month 1-12, day within the month, hour 0-23, minute 0-59,
 * second 0-60) so "20150231T..." is rejected rather than normalised. */
#include "common/timefmt.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const char *const wdays[] = {"Sun", "Mon", "Tue", "Wed",
                                    "Thu", "Fri", "Sat"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* Years 1970..9999: the civil date from the day count by arithmetic
 * (H. Hinnant's days_from_civil inverse), as gmtime_r gives it but without
 * its time-zone lock and conversion: a listing formats a date per key. */
#define UTC_FAST_MAX ((time_t)253402300799LL) /* 9999-12-31T23:59:59Z */

static void utc_fast(time_t t, struct tm *tm)
{
    long long days = (long long)(t / 86400), secs = (long long)(t % 86400);
    long long z = days + 719468, era = z / 146097;
    long long doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    long long mp = (5 * doy + 2) / 153;
    long long d = doy - (153 * mp + 2) / 5 + 1;
    long long m = mp < 10 ? mp + 3 : mp - 9;
    long long y = yoe + era * 400 + (m <= 2);
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    static const int before[12] = {0,   31,  59,  90,  120, 151,
                                   181, 212, 243, 273, 304, 334};

    memset(tm, 0, sizeof(*tm));
    tm->tm_sec = (int)(secs % 60);
    tm->tm_min = (int)(secs / 60 % 60);
    tm->tm_hour = (int)(secs / 3600);
    tm->tm_mday = (int)d;
    tm->tm_mon = (int)m - 1;
    tm->tm_year = (int)y - 1900;
    tm->tm_wday = (int)((days + 4) % 7); /* 1970-01-01 was a Thursday */
    tm->tm_yday = before[m - 1] + (int)d - 1 + (leap && m > 2);
}

/* gmtime_r that never leaves @tm undefined (a time_t too large for struct
 * tm gives the epoch). */
static void utc(time_t t, struct tm *tm)
{
    if (t >= 0 && t <= UTC_FAST_MAX) {
        utc_fast(t, tm);
        return;
    }
    if (gmtime_r(&t, tm) == NULL) {
        time_t zero = 0;
        gmtime_r(&zero, tm);
    }
}

/* Writes @v as exactly @w decimal digits (v is clamped to fit). gcc cannot
 * prove struct tm ranges, so we avoid snprintf's truncation warnings. */
static char *put_num(char *p, int v, int w)
{
    int i, max = 1;

    for (i = 0; i < w; i++)
        max *= 10;
    v = CM_MIN(CM_MAX(v, 0), max - 1);
    for (i = w - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + w;
}

/* Formats "YYYYMMDDTHHMMSSZ". Years outside 0..9999 are clamped to fit. */
void cm_time_iso_basic(time_t t, char out[CM_TIME_ISO_BASIC_LEN + 1])
{
    struct tm tm;
    char *p = out;

    utc(t, &tm);
    p = put_num(p, tm.tm_year + 1900, 4);
    p = put_num(p, tm.tm_mon + 1, 2);
    p = put_num(p, tm.tm_mday, 2);
    *p++ = 'T';
    p = put_num(p, tm.tm_hour, 2);
    p = put_num(p, tm.tm_min, 2);
    p = put_num(p, tm.tm_sec, 2);
    *p++ = 'Z';
    *p = '\0';
}

/* Formats "YYYY-MM-DDTHH:MM:SS.mmmZ"; @ms is clamped to 0..999. */
void cm_time_rfc3339(time_t t, int ms, char out[CM_TIME_RFC3339_LEN + 1])
{
    struct tm tm;
    char *p = out;

    utc(t, &tm);
    p = put_num(p, tm.tm_year + 1900, 4);
    *p++ = '-';
    p = put_num(p, tm.tm_mon + 1, 2);
    *p++ = '-';
    p = put_num(p, tm.tm_mday, 2);
    *p++ = 'T';
    p = put_num(p, tm.tm_hour, 2);
    *p++ = ':';
    p = put_num(p, tm.tm_min, 2);
    *p++ = ':';
    p = put_num(p, tm.tm_sec, 2);
    *p++ = '.';
    p = put_num(p, ms, 3);
    *p++ = 'Z';
    *p = '\0';
}

/* Formats IMF-fixdate "Sun, 30 Aug 2015 12:36:00 GMT". */
void cm_time_http(time_t t, char out[CM_TIME_HTTP_LEN + 1])
{
    struct tm tm;
    char *p = out;

    utc(t, &tm);
    memcpy(p, wdays[tm.tm_wday], 3);
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    p = put_num(p, tm.tm_mday, 2);
    *p++ = ' ';
    memcpy(p, months[tm.tm_mon], 3);
    p += 3;
    *p++ = ' ';
    p = put_num(p, tm.tm_year + 1900, 4);
    *p++ = ' ';
    p = put_num(p, tm.tm_hour, 2);
    *p++ = ':';
    p = put_num(p, tm.tm_min, 2);
    *p++ = ':';
    p = put_num(p, tm.tm_sec, 2);
    memcpy(p, " GMT", 5);
}

/* Reads exactly @w decimal digits at s[*pos]; advances *pos. */
static bool digits(const char *s, size_t n, size_t *pos, int w, int *v)
{
    int i, x = 0;

    if (n - *pos < (size_t)w)
        return false;
    for (i = 0; i < w; i++) {
        char c = s[*pos + (size_t)i];
        if (c < '0' || c > '9')
            return false;
        x = x * 10 + (c - '0');
    }
    *pos += (size_t)w;
    *v = x;
    return true;
}

/* Matches the literal byte @c at s[*pos]; advances *pos. */
static bool lit(const char *s, size_t n, size_t *pos, char c)
{
    if (*pos >= n || s[*pos] != c)
        return false;
    (*pos)++;
    return true;
}

/* Days in @month (1-12) of @year (proleptic Gregorian). */
static int mdays(int year, int month)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

    return month == 2 && leap ? 29 : d[month - 1];
}

/* Range-checks the fields and converts them: years 1970..9999 by
 * arithmetic (H. Hinnant's days_from_civil; timegm's result, a leap
 * second included, without its time-zone lock: SigV4 parses a date per
 * request), other years with timegm. */
static int to_time(int y, int mo, int d, int h, int mi, int s, time_t *t)
{
    struct tm tm;
    time_t r;

    if (mo < 1 || mo > 12 || d < 1 || d > mdays(y, mo) || h > 23 || mi > 59 ||
        s > 60)
        return -EINVAL;
    if (y >= 1970 && y <= 9999) {
        long long yy = mo <= 2 ? y - 1 : y, era = yy / 400;
        long long yoe = yy - era * 400;
        long long doy = (153LL * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1;
        long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        long long days = era * 146097 + doe - 719468;

        *t = (time_t)(days * 86400 + h * 3600LL + mi * 60LL + s);
        return 0;
    }
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    r = timegm(&tm);
    if (r == (time_t)-1 &&
        !(y == 1969 && mo == 12 && d == 31 && h == 23 && mi == 59 && s == 59))
        return -EINVAL;
    *t = r;
    return 0;
}

/* Parses exactly "YYYYMMDDTHHMMSSZ" (16 bytes). 0 or -EINVAL. */
int cm_time_parse_iso_basic(const char *s, size_t n, time_t *t)
{
    size_t p = 0;
    int y, mo, d, h, mi, sec;

    if (n != CM_TIME_ISO_BASIC_LEN)
        return -EINVAL;
    if (!digits(s, n, &p, 4, &y) || !digits(s, n, &p, 2, &mo) ||
        !digits(s, n, &p, 2, &d) || !lit(s, n, &p, 'T') ||
        !digits(s, n, &p, 2, &h) || !digits(s, n, &p, 2, &mi) ||
        !digits(s, n, &p, 2, &sec) || !lit(s, n, &p, 'Z'))
        return -EINVAL;
    return to_time(y, mo, d, h, mi, sec, t);
}

/* Parses "YYYY-MM-DDTHH:MM:SS[.fraction]Z" ('t'/'z' accepted too; also a
 * "+00:00" offset, the only one S3 ever sends). The fraction (1-9
 * digits) is dropped. 0 or -EINVAL. */
int cm_time_parse_rfc3339(const char *s, size_t n, time_t *t)
{
    size_t p = 0;
    int y, mo, d, h, mi, sec, k;

    if (!digits(s, n, &p, 4, &y) || !lit(s, n, &p, '-') ||
        !digits(s, n, &p, 2, &mo) || !lit(s, n, &p, '-') ||
        !digits(s, n, &p, 2, &d))
        return -EINVAL;
    if (!lit(s, n, &p, 'T') && !lit(s, n, &p, 't'))
        return -EINVAL;
    if (!digits(s, n, &p, 2, &h) || !lit(s, n, &p, ':') ||
        !digits(s, n, &p, 2, &mi) || !lit(s, n, &p, ':') ||
        !digits(s, n, &p, 2, &sec))
        return -EINVAL;
    if (lit(s, n, &p, '.')) {
        for (k = 0; p < n && s[p] >= '0' && s[p] <= '9'; k++)
            p++;
        if (k < 1 || k > 9)
            return -EINVAL;
    }
    if (lit(s, n, &p, 'Z') || lit(s, n, &p, 'z')) {
        /* UTC */
    } else if (n - p == 6 && memcmp(s + p, "+00:00", 6) == 0) {
        p += 6;
    } else {
        return -EINVAL;
    }
    if (p != n)
        return -EINVAL;
    return to_time(y, mo, d, h, mi, sec, t);
}

/* Index of a 3-letter name in @names (exact case), or -1. */
static int name_index(const char *s, size_t n, size_t pos,
                      const char *const *names, int count)
{
    int i;

    if (n - pos < 3)
        return -1;
    for (i = 0; i < count; i++)
        if (memcmp(s + pos, names[i], 3) == 0)
            return i;
    return -1;
}

/* The fields of an HTTP date after its weekday. */
struct http_date {
    int y, mo, d, h, mi, sec;
};

/* Parses ", DD<sep>Mon<sep>YEAR hh:mm:ss GMT" from s[p] to the end of @s
 * into @f, with a year of @ydigits digits (4 for IMF-fixdate, 2 for RFC
 * 850, whose separator is '-'). */
static bool date_gmt(const char *s, size_t n, size_t p, char sep, int ydigits,
                     struct http_date *f)
{
    if (!lit(s, n, &p, ',') || !lit(s, n, &p, ' ') ||
        !digits(s, n, &p, 2, &f->d) || !lit(s, n, &p, sep))
        return false;
    f->mo = name_index(s, n, p, months, 12) + 1;
    if (f->mo == 0)
        return false;
    p += 3;
    return lit(s, n, &p, sep) && digits(s, n, &p, ydigits, &f->y) &&
           lit(s, n, &p, ' ') && digits(s, n, &p, 2, &f->h) &&
           lit(s, n, &p, ':') && digits(s, n, &p, 2, &f->mi) &&
           lit(s, n, &p, ':') && digits(s, n, &p, 2, &f->sec) &&
           lit(s, n, &p, ' ') && n - p == 3 && memcmp(s + p, "GMT", 3) == 0;
}

/* Parses IMF-fixdate "Sun, 30 Aug 2015 12:36:00 GMT" (29 bytes). The
 * weekday must be a valid name but is not cross-checked against the date
 * (RFC 9110 lets recipients ignore it). 0 or -EINVAL. */
int cm_time_parse_http(const char *s, size_t n, time_t *t)
{
    struct http_date f;

    if (n != CM_TIME_HTTP_LEN)
        return -EINVAL;
    if (name_index(s, n, 0, wdays, 7) < 0)
        return -EINVAL;
    if (!date_gmt(s, n, 3, ' ', 4, &f))
        return -EINVAL;
    return to_time(f.y, f.mo, f.d, f.h, f.mi, f.sec, t);
}

static const char *const wdays_long[] = {"Sunday",    "Monday",   "Tuesday",
                                         "Wednesday", "Thursday", "Friday",
                                         "Saturday"};

/* Index of the full weekday name at s[pos] (exact case, as RFC 9110's
 * day-name-l), its length in *len, or -1. */
static int long_wday(const char *s, size_t n, size_t pos, size_t *len)
{
    int i;

    for (i = 0; i < 7; i++) {
        size_t l = strlen(wdays_long[i]);

        if (n - pos >= l && memcmp(s + pos, wdays_long[i], l) == 0) {
            *len = l;
            return i;
        }
    }
    return -1;
}

/* RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT". The two-digit year is the
 * most recent year ending in those digits that is not more than 50 years
 * in the future of @now's year (RFC 9110 section 5.6.7). */
static int parse_rfc850(const char *s, size_t n, time_t now, time_t *t)
{
    size_t wl = 0;
    struct http_date f;
    int cur;
    struct tm tm;

    if (long_wday(s, n, 0, &wl) < 0)
        return -EINVAL;
    if (!date_gmt(s, n, wl, '-', 2, &f))
        return -EINVAL;
    utc(now, &tm);
    cur = tm.tm_year + 1900;
    f.y += cur - cur % 100;
    if (f.y > cur + 50)
        f.y -= 100;
    return to_time(f.y, f.mo, f.d, f.h, f.mi, f.sec, t);
}

/* asctime "Sun Nov  6 08:49:37 1994" (day space-padded to two). */
static int parse_asctime(const char *s, size_t n, time_t *t)
{
    size_t p = 0;
    int y, mo, d, h, mi, sec;

    if (n != 24 || name_index(s, n, 0, wdays, 7) < 0)
        return -EINVAL;
    p = 3;
    if (!lit(s, n, &p, ' '))
        return -EINVAL;
    mo = name_index(s, n, p, months, 12) + 1;
    if (mo == 0)
        return -EINVAL;
    p += 3;
    if (!lit(s, n, &p, ' '))
        return -EINVAL;
    if (lit(s, n, &p, ' ')) {
        if (!digits(s, n, &p, 1, &d))
            return -EINVAL;
    } else if (!digits(s, n, &p, 2, &d)) {
        return -EINVAL;
    }
    if (!lit(s, n, &p, ' ') || !digits(s, n, &p, 2, &h) ||
        !lit(s, n, &p, ':') || !digits(s, n, &p, 2, &mi) ||
        !lit(s, n, &p, ':') || !digits(s, n, &p, 2, &sec) ||
        !lit(s, n, &p, ' ') || !digits(s, n, &p, 4, &y) || p != n)
        return -EINVAL;
    return to_time(y, mo, d, h, mi, sec, t);
}

/* Parses any of RFC 9110's three HTTP-date forms: IMF-fixdate, RFC 850
 * (two-digit year resolved against @now) and asctime. 0 or -EINVAL. */
int cm_time_parse_http_any(const char *s, size_t n, time_t now, time_t *t)
{
    if (cm_time_parse_http(s, n, t) == 0)
        return 0;
    if (parse_rfc850(s, n, now, t) == 0)
        return 0;
    return parse_asctime(s, n, t);
}

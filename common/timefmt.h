/* common/timefmt.h - the time formats S3 speaks.
 *  ISO 8601 basic  "20150830T123600Z"          (x-amz-date, SigV4)
 *  RFC 3339 / ISO  "2015-08-30T12:36:00.000Z"  (XML LastModified)
 *  IMF-fixdate     "Sun, 30 Aug 2015 12:36:00 GMT" (Last-Modified, Date)
 *  and, parsed only, the obsolete RFC 850 and asctime HTTP-dates that
 *  conditional request headers may still carry. */
#ifndef COMMON_TIMEFMT_H
#define COMMON_TIMEFMT_H
#include "common/compiler.h"
#include <stddef.h>
#include <time.h>

#define CM_TIME_ISO_BASIC_LEN 16 /* without NUL */
#define CM_TIME_RFC3339_LEN   24
#define CM_TIME_HTTP_LEN      29

void cm_time_iso_basic(time_t t, char out[CM_TIME_ISO_BASIC_LEN + 1]);
/* @ms: milliseconds 0..999 */
void cm_time_rfc3339(time_t t, int ms, char out[CM_TIME_RFC3339_LEN + 1]);
void cm_time_http(time_t t, char out[CM_TIME_HTTP_LEN + 1]);
/* Parsers: 0 and *t set, or -EINVAL. parse_http accepts IMF-fixdate, and
 * parse_rfc3339 accepts an optional fraction. */
CM_MUST_CHECK int cm_time_parse_iso_basic(const char *s, size_t n, time_t *t);
CM_MUST_CHECK int cm_time_parse_rfc3339(const char *s, size_t n, time_t *t);
CM_MUST_CHECK int cm_time_parse_http(const char *s, size_t n, time_t *t);
/* Parses any HTTP-date of RFC 9110 section 5.6.7, as a recipient must:
 * IMF-fixdate, RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT" (a two-digit year
 * more than 50 years after @now's year means the century before) and
 * asctime "Sun Nov  6 08:49:37 1994". Names are case-sensitive, fields
 * range-checked, the weekday not cross-checked. 0 and *t set, or -EINVAL
 * (*t untouched). */
CM_MUST_CHECK int cm_time_parse_http_any(const char *s, size_t n, time_t now,
                                         time_t *t);

#endif /* COMMON_TIMEFMT_H */

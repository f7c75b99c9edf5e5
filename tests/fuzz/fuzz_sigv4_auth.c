/* tests/fuzz/fuzz_sigv4_auth.c - libFuzzer target for everything storaged
 * parses out of an untrusted request's auth material: the Authorization
 * header, X-Amz-Credential, percent-decoding of paths and queries, the
 * three time formats, hex/base64 decoders, and canonicalisation of
 * arbitrary query/header bytes. Besides "no crash", it checks properties:
 * parsed fields point inside the input, decoders round-trip with the
 * encoders, and formatting a parsed time parses back to the same value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/codec.h"
#include "common/sigv4.h"
#include "common/timefmt.h"
#include "common/uri.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

/* True when [p, p+n) lies inside [base, base+size). */
static int inside(const char *base, size_t size, const char *p, size_t n)
{
    return p >= base && n <= size && (size_t)(p - base) <= size - n;
}

static void fuzz_auth(const char *s, size_t n)
{
    struct cm_sigv4_auth a;

    if (cm_sigv4_parse_authorization(s, n, &a) == 0) {
        CHECK(inside(s, n, a.access_key, a.access_key_len));
        CHECK(a.access_key_len > 0);
        CHECK(inside(s, n, a.date8, 8));
        CHECK(inside(s, n, a.region, a.region_len) && a.region_len > 0);
        CHECK(inside(s, n, a.service, a.service_len) && a.service_len > 0);
        CHECK(inside(s, n, a.signed_headers, a.signed_headers_len));
        CHECK(inside(s, n, a.signature, 64));
    }
    if (cm_sigv4_parse_credential(s, n, &a) == 0) {
        CHECK(inside(s, n, a.access_key, a.access_key_len));
        CHECK(inside(s, n, a.date8, 8));
        CHECK(inside(s, n, a.service, a.service_len));
    }
}

static void fuzz_uri(const char *s, size_t n)
{
    struct cm_buf d, e, d2;
    int plus;

    for (plus = 0; plus < 2; plus++) {
        cm_buf_init(&d, 1 << 20);
        if (cm_uri_decode(&d, s, n, plus) == 0) {
            CHECK(d.len <= n);
            /* encode(decode(x)) decodes back to the same bytes */
            cm_buf_init(&e, CM_BUF_NOLIMIT);
            cm_buf_init(&d2, CM_BUF_NOLIMIT);
            CHECK(cm_uri_encode(&e, d.data, d.len, plus) == 0);
            CHECK(cm_uri_decode(&d2, e.data, e.len, false) == 0);
            CHECK(d2.len == d.len && memcmp(d2.data, d.data, d.len) == 0);
            cm_buf_fini(&e);
            cm_buf_fini(&d2);
        } else {
            CHECK(d.data == NULL && d.len == 0);
        }
        cm_buf_fini(&d);
    }
}

static void fuzz_time(const char *s, size_t n)
{
    char iso[CM_TIME_ISO_BASIC_LEN + 1], http[CM_TIME_HTTP_LEN + 1];
    char rfc[CM_TIME_RFC3339_LEN + 1];
    time_t t, back;

    if (cm_time_parse_iso_basic(s, n, &t) == 0) {
        cm_time_iso_basic(t, iso);
        CHECK(cm_time_parse_iso_basic(iso, CM_TIME_ISO_BASIC_LEN, &back) == 0);
        CHECK(back == t);
    }
    if (cm_time_parse_rfc3339(s, n, &t) == 0) {
        cm_time_rfc3339(t, 0, rfc);
        CHECK(cm_time_parse_rfc3339(rfc, CM_TIME_RFC3339_LEN, &back) == 0);
        CHECK(back == t);
    }
    if (cm_time_parse_http(s, n, &t) == 0) {
        cm_time_http(t, http);
        CHECK(cm_time_parse_http(http, CM_TIME_HTTP_LEN, &back) == 0);
        CHECK(back == t);
    }
    /* all three HTTP-date forms; "now" fixed so a run is reproducible */
    if (cm_time_parse_http_any(s, n, (time_t)1440938160, &t) == 0) {
        cm_time_http(t, http);
        CHECK(cm_time_parse_http_any(http, CM_TIME_HTTP_LEN, (time_t)1440938160,
                                     &back) == 0);
        CHECK(back == t);
    }
}

static void fuzz_codec(const char *s, size_t n)
{
    uint8_t *out = malloc(n + 1);
    char *enc;
    long r;

    if (out == NULL)
        return;
    r = cm_hex_decode(s, n, out);
    CHECK(r < 0 || (size_t)r == n / 2);
    r = cm_base64_decode(s, n, out);
    if (r >= 0) {
        CHECK((size_t)r <= 3 * n / 4);
        /* strict decoding means re-encoding gives the input back */
        enc = malloc(CM_BASE64_LEN((size_t)r) + 1);
        if (enc != NULL) {
            cm_base64_encode(out, (size_t)r, enc);
            CHECK(strlen(enc) == n && memcmp(enc, s, n) == 0);
            free(enc);
        }
    }
    free(out);
}

/* Splits the input at '\n' into alternating names and values and builds a
 * canonical request from them (as both query params and headers). */
static void fuzz_canonical(const char *s, size_t n)
{
    struct cm_kv kv[40];
    size_t nkv = 0, i = 0;
    struct cm_buf out;

    while (i < n && nkv < 40) {
        const char *name = s + i, *val;
        size_t nl = 0, vl = 0;
        while (i < n && s[i] != '\n')
            i++, nl++;
        i++;
        val = s + (i < n ? i : n);
        while (i < n && s[i] != '\n')
            i++, vl++;
        i++;
        kv[nkv].name = name;
        kv[nkv].name_len = nl;
        kv[nkv].value = val;
        kv[nkv].value_len = vl;
        nkv++;
    }
    {
        struct cm_sigv4_req r = {"GET", s, n, kv, nkv, kv, nkv, NULL};
        cm_buf_init(&out, CM_BUF_NOLIMIT);
        CHECK(cm_sigv4_canonical_request(&r, &out) == 0);
        cm_buf_fini(&out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;

    fuzz_auth(s, size);
    fuzz_uri(s, size);
    fuzz_time(s, size);
    fuzz_codec(s, size);
    if (size < 4096)
        fuzz_canonical(s, size);
    return 0;
}

/* common/sigv2.c - AWS Signature Version 2 (S3 RESTAuthentication).
 *
 * DESIGN: the verifier must rebuild exactly the bytes the client signed,
 * so the path is taken as sent (percent-encoded as on the wire: the AWS
 * documentation's own example signs "/dictionary/fran%C3%A7ais/pr%c3%a9..."
 * with mixed-case escapes), and the sub-resources are read from the raw
 * query the way clients build them: names compared undecoded, values
 * percent-decoded, "name" and "name=" kept apart, sorted by name. */
#include "common/sigv2.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <strings.h>

#include "common/codec.h"
#include "common/hash.h"

/* Query names that are sub-resources, with their class. */
static const struct {
    const char *name;
    unsigned cls;
} subres[] = {
    {"accelerate", CM_SIGV2_SUB_BASE},
    {"acl", CM_SIGV2_SUB_BASE},
    {"analytics", CM_SIGV2_SUB_BASE},
    {"cors", CM_SIGV2_SUB_BASE},
    {"defaultObjectAcl", CM_SIGV2_SUB_BASE},
    {"delete", CM_SIGV2_SUB_BASE},
    {"encryption", CM_SIGV2_SUB_EXTRA},
    {"intelligent-tiering", CM_SIGV2_SUB_EXTRA},
    {"inventory", CM_SIGV2_SUB_BASE},
    {"legal-hold", CM_SIGV2_SUB_EXTRA},
    {"lifecycle", CM_SIGV2_SUB_BASE},
    {"location", CM_SIGV2_SUB_BASE},
    {"logging", CM_SIGV2_SUB_BASE},
    {"metrics", CM_SIGV2_SUB_BASE},
    {"notification", CM_SIGV2_SUB_BASE},
    {"object-lock", CM_SIGV2_SUB_BASE},
    {"ownershipControls", CM_SIGV2_SUB_EXTRA},
    {"partNumber", CM_SIGV2_SUB_BASE},
    {"policy", CM_SIGV2_SUB_BASE},
    {"policyStatus", CM_SIGV2_SUB_EXTRA},
    {"publicAccessBlock", CM_SIGV2_SUB_EXTRA},
    {"replication", CM_SIGV2_SUB_BASE},
    {"requestPayment", CM_SIGV2_SUB_BASE},
    {"response-cache-control", CM_SIGV2_SUB_BASE},
    {"response-content-disposition", CM_SIGV2_SUB_BASE},
    {"response-content-encoding", CM_SIGV2_SUB_BASE},
    {"response-content-language", CM_SIGV2_SUB_BASE},
    {"response-content-type", CM_SIGV2_SUB_BASE},
    {"response-expires", CM_SIGV2_SUB_BASE},
    {"restore", CM_SIGV2_SUB_BASE},
    {"retention", CM_SIGV2_SUB_EXTRA},
    {"select", CM_SIGV2_SUB_BASE},
    {"select-type", CM_SIGV2_SUB_BASE},
    {"storageClass", CM_SIGV2_SUB_BASE},
    {"tagging", CM_SIGV2_SUB_BASE},
    {"torrent", CM_SIGV2_SUB_BASE},
    {"uploadId", CM_SIGV2_SUB_BASE},
    {"uploads", CM_SIGV2_SUB_BASE},
    {"versionId", CM_SIGV2_SUB_BASE},
    {"versioning", CM_SIGV2_SUB_BASE},
    {"versions", CM_SIGV2_SUB_BASE},
    {"website", CM_SIGV2_SUB_BASE},
};

#define MAX_SUBRES 32 /* sub-resources one request may name */

/* See header. */
unsigned cm_sigv2_subresource(const char *name, size_t n)
{
    size_t i;

    for (i = 0; i < sizeof(subres) / sizeof(subres[0]); i++)
        if (strlen(subres[i].name) == n && memcmp(subres[i].name, name, n) == 0)
            return subres[i].cls;
    return 0;
}

/* @s without leading and trailing blanks (SP, HTAB, CR, LF). */
static const char *trim(const char *s, size_t *n)
{
    while (*n > 0 &&
           (s[0] == ' ' || s[0] == '\t' || s[0] == '\r' || s[0] == '\n')) {
        s++;
        (*n)--;
    }
    while (*n > 0 && (s[*n - 1] == ' ' || s[*n - 1] == '\t' ||
                      s[*n - 1] == '\r' || s[*n - 1] == '\n'))
        (*n)--;
    return s;
}

/* strcasecmp order of two names of given lengths (shorter first on a tie). */
static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int c = strncasecmp(a, b, n);

    if (c != 0)
        return c;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

/* Appends @n bytes of @s lowercased. */
static int append_lower(struct cm_buf *out, const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char c = s[i];

        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (cm_buf_appendc(out, c) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* CanonicalizedAmzHeaders: "name:v1,v2\n" per lowercased name, sorted by
 * name; repeated names joined in the order they came. */
static int amz_headers(const struct cm_sigv2_req *r, struct cm_buf *out)
{
    size_t idx[CM_SIGV2_MAX_AMZ], i, j, n = r->namz;

    if (n > CM_SIGV2_MAX_AMZ)
        return -EINVAL;
    for (i = 0; i < n; i++) { /* stable insertion sort: few headers */
        size_t k = i;

        while (k > 0) {
            const struct cm_kv *a = &r->amz[idx[k - 1]];

            if (name_cmp(a->name, a->name_len, r->amz[i].name,
                         r->amz[i].name_len) <= 0)
                break;
            idx[k] = idx[k - 1];
            k--;
        }
        idx[k] = i;
    }
    for (i = 0; i < n; i = j) {
        const struct cm_kv *h = &r->amz[idx[i]];

        if (append_lower(out, h->name, h->name_len) < 0 ||
            cm_buf_appendc(out, ':') < 0)
            return -ENOMEM;
        for (j = i; j < n; j++) {
            const struct cm_kv *g = &r->amz[idx[j]];
            size_t vn = g->value_len;
            const char *v = trim(g->value, &vn);

            if (name_cmp(g->name, g->name_len, h->name, h->name_len) != 0)
                break;
            if ((j > i && cm_buf_appendc(out, ',') < 0) ||
                cm_buf_append(out, v, vn) < 0)
                return -ENOMEM;
        }
        if (cm_buf_appendc(out, '\n') < 0)
            return -ENOMEM;
    }
    return 0;
}

/* One sub-resource of the raw query: name and raw value, borrowed. */
struct subres_kv {
    const char *name, *value;
    size_t name_len, value_len;
    bool has_eq;
};

/* Appends the percent-decoded @n bytes of @s ('+' stays '+', as clients
 * unquote). -EINVAL on a malformed escape. */
static int append_unquoted(struct cm_buf *out, const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char c = s[i];

        if (c == '%') {
            int hi, lo;

            if (n - i < 3)
                return -EINVAL;
            hi = cm_hex_digit(s[i + 1]);
            lo = cm_hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0)
                return -EINVAL;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (cm_buf_appendc(out, c) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* CanonicalizedResource: ["/" bucket] path ["?" sub-resources]. */
static int resource(const struct cm_sigv2_req *r, struct cm_buf *out)
{
    struct subres_kv sv[MAX_SUBRES];
    unsigned want = r->subres ? r->subres : CM_SIGV2_SUB_BASE;
    /* no query: NULL, and NULL + 0 is undefined (clang's UBSan, found by
     * fuzz_s3_auth) */
    const char *q = r->query, *end = q ? q + r->query_len : NULL;
    size_t n = 0, i, k;

    if (r->bucket &&
        (cm_buf_appendc(out, '/') < 0 || cm_buf_appends(out, r->bucket) < 0))
        return -ENOMEM;
    if (cm_buf_append(out, r->path, r->path_len) < 0 ||
        (r->path_slash && cm_buf_appendc(out, '/') < 0))
        return -ENOMEM;
    if (r->lead && (cm_buf_appendc(out, '?') < 0 ||
                    cm_buf_append(out, r->lead, r->lead_len) < 0))
        return -ENOMEM;
    while (q != NULL && q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        size_t len = amp ? (size_t)(amp - q) : (size_t)(end - q);
        const char *eq = memchr(q, '=', len);
        size_t nl = eq ? (size_t)(eq - q) : len;

        if (cm_sigv2_subresource(q, nl) & want) {
            if (n == MAX_SUBRES)
                return -EINVAL;
            k = n++;
            while (k > 0 &&
                   name_cmp(sv[k - 1].name, sv[k - 1].name_len, q, nl) > 0) {
                sv[k] = sv[k - 1];
                k--;
            }
            sv[k].name = q;
            sv[k].name_len = nl;
            sv[k].has_eq = eq != NULL;
            sv[k].value = eq ? eq + 1 : NULL;
            sv[k].value_len = eq ? len - nl - 1 : 0;
        }
        q = amp ? amp + 1 : end;
    }
    for (i = 0; i < n; i++) {
        if (cm_buf_appendc(out, i == 0 ? '?' : '&') < 0 ||
            cm_buf_append(out, sv[i].name, sv[i].name_len) < 0)
            return -ENOMEM;
        if (sv[i].has_eq) {
            int ret;

            if (cm_buf_appendc(out, '=') < 0)
                return -ENOMEM;
            ret = append_unquoted(out, sv[i].value, sv[i].value_len);
            if (ret < 0)
                return ret;
        }
    }
    return 0;
}

/* Appends @n bytes of @s (NULL: none), trimmed, and a newline. */
static int append_line(struct cm_buf *out, const char *s, size_t n)
{
    if (s != NULL)
        s = trim(s, &n);
    if ((s != NULL && cm_buf_append(out, s, n) < 0) ||
        cm_buf_appendc(out, '\n') < 0)
        return -ENOMEM;
    return 0;
}

/* See header. */
int cm_sigv2_string_to_sign(const struct cm_sigv2_req *r, struct cm_buf *out)
{
    int ret;

    if (cm_buf_appends(out, r->method) < 0 || cm_buf_appendc(out, '\n') < 0)
        return -ENOMEM;
    if (append_line(out, r->content_md5, r->content_md5_len) < 0 ||
        append_line(out, r->content_type, r->content_type_len) < 0 ||
        append_line(out, r->date, r->date_len) < 0)
        return -ENOMEM;
    ret = amz_headers(r, out);
    if (ret == 0)
        ret = resource(r, out);
    return ret;
}

/* See header. */
void cm_sigv2_signature(const char *secret, const char *sts, size_t sts_len,
                        char out[CM_SIGV2_SIG_LEN + 1])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mlen = 0;

    if (HMAC(EVP_sha1(), secret, (int)strlen(secret),
             (const unsigned char *)sts, sts_len, mac, &mlen) == NULL ||
        mlen != CM_SHA1_LEN) {
        /* only without memory inside OpenSSL: a value no base64 input of
         * CM_SIGV2_SIG_LEN chars equals, so nothing verifies */
        memset(out, '!', CM_SIGV2_SIG_LEN);
        out[CM_SIGV2_SIG_LEN] = 0;
        return;
    }
    cm_base64_encode(mac, mlen, out);
}

/* See header. */
bool cm_sigv2_equal(const char *want, const char *got, size_t n)
{
    return strlen(want) == n && CRYPTO_memcmp(want, got, n) == 0;
}

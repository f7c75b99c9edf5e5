/* common/uri.c - percent-encoding as SigV4 and S3 require it (RFC 3986
 * unreserved set, uppercase hex) and the matching decoder used on request
 * paths and query strings. */
#include "common/uri.h"

#include <errno.h>
#include <stdint.h>

#include "common/codec.h"

/* True for RFC 3986 unreserved bytes: A-Z a-z 0-9 - _ . ~ */
static bool is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
           c == '~';
}

/* Appends the encoding of @s[0..n) to @out. 0, -ENOMEM or -E2BIG (out
 * emptied on failure, per cm_buf). Runs of unreserved bytes are appended
 * in one call. */
int cm_uri_encode(struct cm_buf *out, const char *s, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0, start;
    int ret;

    ret = cm_buf_reserve(out, n);
    if (ret < 0)
        return ret;
    while (i < n) {
        start = i;
        while (i < n && (is_unreserved((unsigned char)s[i]) ||
                         (keep_slash && s[i] == '/')))
            i++;
        if (i > start) {
            ret = cm_buf_append(out, s + start, i - start);
            if (ret < 0)
                return ret;
        }
        if (i < n) {
            unsigned char c = (unsigned char)s[i++];
            char esc[3] = {'%', hex[c >> 4], hex[c & 0xf]};
            ret = cm_buf_append(out, esc, 3);
            if (ret < 0)
                return ret;
        }
    }
    return 0;
}

/* Appends the decoding of @s[0..n) to @out. A '%' not followed by two hex
 * digits is -EINVAL, and then @out is emptied (freed) so no partial value
 * escapes. Decoded bytes may include NUL; callers that need C strings must
 * check for it. */
int cm_uri_decode(struct cm_buf *out, const char *s, size_t n,
                  bool plus_is_space)
{
    size_t i = 0, start;
    int ret;

    ret = cm_buf_reserve(out, n);
    if (ret < 0)
        return ret;
    while (i < n) {
        start = i;
        while (i < n && s[i] != '%' && !(plus_is_space && s[i] == '+'))
            i++;
        if (i > start) {
            ret = cm_buf_append(out, s + start, i - start);
            if (ret < 0)
                return ret;
        }
        if (i >= n)
            break;
        if (s[i] == '+') {
            ret = cm_buf_appendc(out, ' ');
            i++;
        } else {
            int hi, lo;
            if (n - i < 3 || (hi = cm_hex_digit(s[i + 1])) < 0 ||
                (lo = cm_hex_digit(s[i + 2])) < 0) {
                cm_buf_fini(out);
                return -EINVAL;
            }
            ret = cm_buf_appendc(out, (char)(hi << 4 | lo));
            i += 3;
        }
        if (ret < 0)
            return ret;
    }
    return 0;
}

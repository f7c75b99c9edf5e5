/* common/uri.c - percent-encoding as SigV4 and S3 require it (RFC 3986
 * unreserved set, uppercase hex) and the matching decoder used on request
 * paths and query strings. */
#include "common/uri.h"

#include <errno.h>
#include <stdint.h>

#include "common/codec.h"

/* 1 for the RFC 3986 unreserved bytes (A-Z a-z 0-9 - _ . ~), as a
 * table: the encoder looks each byte up twice, and SigV4 encodes every
 * request's path and query. */
static const unsigned char unreserved_tab[256] = {
    ['-'] = 1, ['_'] = 1, ['.'] = 1, ['~'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1,
    ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
    ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,
    ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1,
    ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1,
    ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1,
    ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* Appends the encoding of @s[0..n) to @out. 0, -ENOMEM or -E2BIG (out
 * emptied on failure, per cm_buf). DESIGN: one pass counts the encoded
 * length, one reserve makes room for exactly that (so a limited buffer
 * fails only when the result does not fit), and the second pass writes
 * in place: no call per run of bytes. */
int cm_uri_encode(struct cm_buf *out, const char *s, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t i, esc = 0;
    char *p;
    int ret;

    for (i = 0; i < n; i++)
        esc += !(unreserved_tab[u[i]] || (keep_slash && u[i] == '/'));
    if (esc > (SIZE_MAX - n) / 2) {
        cm_buf_fini(out);
        return -ENOMEM;
    }
    ret = cm_buf_reserve(out, n + 2 * esc);
    if (ret < 0)
        return ret;
    p = out->data + out->len;
    for (i = 0; i < n; i++) {
        unsigned char c = u[i];

        if (unreserved_tab[c] || (keep_slash && c == '/')) {
            *p++ = (char)c;
        } else {
            *p++ = '%';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 0xf];
        }
    }
    out->len += n + 2 * esc;
    out->data[out->len] = '\0';
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

/* storaged/s3/mime.c - RFC 2047 encoded-words in user metadata values
 * (x-amz-meta-*), decoded before a value is stored and made for a value
 * answered on GET/HEAD (mime.h). AWS: "Values of such headers are
 * character decoded as per RFC 2047 before storing and encoded as per RFC
 * 2047 to make them mail-safe before returning. If the string contains
 * only US-ASCII characters, it is presented as is." */
#include "storaged/s3/mime.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum mime_cs { CS_NONE, CS_UTF8, CS_ASCII, CS_LATIN1 };

/* The charset named by the @n bytes at @s (an RFC 2231 "*LANG" ignored). */
static enum mime_cs charset_of(const char *s, size_t n)
{
    const char *star = memchr(s, '*', n);

    if (star)
        n = (size_t)(star - s);
    if (n == 5 && strncasecmp(s, "UTF-8", 5) == 0)
        return CS_UTF8;
    if (n == 8 && strncasecmp(s, "US-ASCII", 8) == 0)
        return CS_ASCII;
    if (n == 10 && strncasecmp(s, "ISO-8859-1", 10) == 0)
        return CS_LATIN1;
    return CS_NONE;
}

/* RFC 2047's token: printable ASCII but SPACE and its especials. */
static bool token_char(char c)
{
    return c > 0x20 && c < 0x7f && strchr("()<>@,;:\"/[]?.=", c) == NULL;
}

/* Writes byte @c read as ISO-8859-1 (U+0000..U+00FF) in UTF-8 to @o;
 * returns the bytes written (1 or 2). */
static size_t put_latin1(unsigned char c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    o[0] = (char)(0xC0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

/* Decodes Q text @t (@n bytes) into @o (room for n); returns the bytes
 * written or -1 for a '=' not followed by two hex digits. */
static long q_decode(const char *t, size_t n, uint8_t *o)
{
    size_t i, k = 0;

    for (i = 0; i < n; i++) {
        if (t[i] == '_') {
            o[k++] = ' ';
        } else if (t[i] == '=') {
            int hi, lo;

            if (i + 2 >= n)
                return -1;
            hi = cm_hex_digit(t[i + 1]);
            lo = cm_hex_digit(t[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            o[k++] = (uint8_t)(hi << 4 | lo);
            i += 2;
        } else {
            o[k++] = (uint8_t)t[i];
        }
    }
    return (long)k;
}

/* When a well-formed encoded-word of a known charset that decodes cleanly
 * starts at @s (@n bytes left): writes its text in UTF-8 to @o (room for
 * 2n) and returns the bytes it spans, *olen the bytes written. Else 0 and
 * nothing counted (@o may hold scratch). @tmp: room for n bytes. */
static size_t decode_word(const char *s, size_t n, char *o, size_t *olen,
                          uint8_t *tmp)
{
    size_t i = 2, c0 = 2, t0, k;
    enum mime_cs cs;
    char enc;
    long d;

    if (n < 9 || s[0] != '=' || s[1] != '?')
        return 0;
    while (i < n && token_char(s[i]))
        i++;
    if (i == c0 || i + 2 >= n || s[i] != '?' || s[i + 2] != '?')
        return 0;
    cs = charset_of(s + c0, i - c0);
    enc = s[i + 1];
    i += 3;
    t0 = i;
    while (i < n && s[i] > 0x20 && s[i] < 0x7f && s[i] != '?')
        i++;
    if (cs == CS_NONE || i == t0 || i + 1 >= n || s[i] != '?' ||
        s[i + 1] != '=')
        return 0;
    if (enc == 'B' || enc == 'b')
        d = cm_base64_decode(s + t0, i - t0, tmp);
    else if (enc == 'Q' || enc == 'q')
        d = q_decode(s + t0, i - t0, tmp);
    else
        return 0;
    if (d < 0 || memchr(tmp, 0, (size_t)d) != NULL)
        return 0;
    if (cs == CS_UTF8 && !cm_utf8_valid((const char *)tmp, (size_t)d))
        return 0;
    for (k = 0; cs == CS_ASCII && k < (size_t)d; k++)
        if (tmp[k] >= 0x80)
            return 0;
    if (cs == CS_LATIN1) {
        *olen = 0;
        for (k = 0; k < (size_t)d; k++)
            *olen += put_latin1(tmp[k], o + *olen);
    } else {
        memcpy(o, tmp, (size_t)d);
        *olen = (size_t)d;
    }
    return i + 2;
}

/* See mime.h. */
int stor_s3_meta_decode(const char *v, size_t n, char **out, size_t *outlen)
{
    char *s, *o;
    uint8_t *tmp;
    size_t m = 0, i, k = 0;

    /* bytes: UTF-8 as sent, anything else read as ISO-8859-1 */
    s = malloc(2 * n + 1);
    if (s == NULL)
        return -ENOMEM;
    if (cm_utf8_valid(v, n)) {
        memcpy(s, v, n);
        m = n;
    } else {
        for (i = 0; i < n; i++)
            m += put_latin1((unsigned char)v[i], s + m);
    }
    /* encoded-words: none decodes longer than twice what it spans */
    o = malloc(2 * m + 1);
    tmp = malloc(m + 1);
    if (o == NULL || tmp == NULL) {
        free(s);
        free(o);
        free(tmp);
        return -ENOMEM;
    }
    i = 0;
    while (i < m) {
        size_t w, wl, j;

        w = decode_word(s + i, m - i, o + k, &wl, tmp);
        if (w == 0) {
            o[k++] = s[i++];
            continue;
        }
        k += wl;
        i += w;
        /* white space between two encoded-words is not text (6.2) */
        for (;;) {
            for (j = i; j < m && (s[j] == ' ' || s[j] == '\t'); j++)
                ;
            if (j == i || j == m)
                break;
            w = decode_word(s + j, m - j, o + k, &wl, tmp);
            if (w == 0)
                break;
            k += wl;
            i = j + w;
        }
    }
    /* a NUL could only come from the bytes as sent (a header value holds
     * none); kept out so the stored C string is the whole value */
    for (i = 0, m = 0; i < k; i++)
        if (o[i] != 0)
            o[m++] = o[i];
    o[m] = 0;
    free(s);
    free(tmp);
    *out = o;
    *outlen = m;
    return 0;
}

/* See mime.h. */
bool stor_s3_meta_needs_encoding(const char *v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];

        if ((c < 0x20 && c != '\t') || c >= 0x7f)
            return true;
    }
    return false;
}

/* See mime.h. */
size_t stor_s3_meta_encode(const char *v, size_t n, char *out)
{
    const char *head = cm_utf8_valid(v, n) ? "=?UTF-8?B?" : "=?ISO-8859-1?B?";
    size_t h = strlen(head), b = CM_BASE64_LEN(n);

    memcpy(out, head, h);
    cm_base64_encode(v, n, out + h);
    memcpy(out + h + b, "?=", 3);
    return h + b + 2;
}

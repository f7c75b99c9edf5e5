/* common/codec.c - hex and base64 (RFC 4648 standard alphabet, padded).
 * Used for SigV4 signatures and hashes (hex) and Content-MD5 / checksum
 * headers (base64). Decoders are strict: any byte outside the alphabet,
 * bad padding or a wrong length is -EINVAL, never a crash. */
#include "common/codec.h"

#include <errno.h>
#include <stdint.h>

static const char hex_digits[] = "0123456789abcdef";
static const char b64_alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Writes 2n lowercase hex digits and a NUL to @out. */
void cm_hex_encode(const void *p, size_t n, char *out)
{
    const uint8_t *s = p;
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = hex_digits[s[i] >> 4];
        out[2 * i + 1] = hex_digits[s[i] & 0xf];
    }
    out[2 * n] = '\0';
}

/* Value of a hex digit (either case), or -1. */
int cm_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes @n hex digits into n/2 bytes; -EINVAL on odd length or bad digit
 * (out may then hold a partial result). */
long cm_hex_decode(const char *s, size_t n, uint8_t *out)
{
    size_t i;

    if (n % 2 != 0)
        return -EINVAL;
    for (i = 0; i < n; i += 2) {
        int hi = cm_hex_digit(s[i]), lo = cm_hex_digit(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -EINVAL;
        out[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return (long)(n / 2);
}

/* Writes CM_BASE64_LEN(n) characters and a NUL to @out. */
void cm_base64_encode(const void *p, size_t n, char *out)
{
    const uint8_t *s = p;
    size_t i, o = 0;

    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        out[o++] = b64_alpha[v >> 18];
        out[o++] = b64_alpha[(v >> 12) & 63];
        out[o++] = b64_alpha[(v >> 6) & 63];
        out[o++] = b64_alpha[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        out[o++] = b64_alpha[v >> 18];
        out[o++] = b64_alpha[(v >> 12) & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        out[o++] = b64_alpha[v >> 18];
        out[o++] = b64_alpha[(v >> 12) & 63];
        out[o++] = b64_alpha[(v >> 6) & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}

/* Value of a base64 character, or -1. */
static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes padded base64 (length a multiple of 4, '=' only at the end, at
 * most two, and unused bits zero). Returns the byte count or -EINVAL. */
long cm_base64_decode(const char *s, size_t n, uint8_t *out)
{
    size_t i, o = 0, pad = 0;

    if (n % 4 != 0)
        return -EINVAL;
    if (n > 0 && s[n - 1] == '=')
        pad++;
    if (n > 1 && s[n - 2] == '=')
        pad++;
    for (i = 0; i < n; i += 4) {
        int v[4], k;
        for (k = 0; k < 4; k++) {
            if (i + 4 == n && k >= 4 - (int)pad) {
                if (s[i + k] != '=')
                    return -EINVAL;
                v[k] = 0;
                continue;
            }
            v[k] = b64_val(s[i + k]);
            if (v[k] < 0)
                return -EINVAL;
        }
        out[o++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
        if (i + 4 == n && pad == 2) {
            if (v[1] & 0xf)
                return -EINVAL;
            break;
        }
        out[o++] = (uint8_t)((v[1] & 0xf) << 4 | v[2] >> 2);
        if (i + 4 == n && pad == 1) {
            if (v[2] & 0x3)
                return -EINVAL;
            break;
        }
        out[o++] = (uint8_t)((v[2] & 0x3) << 6 | v[3]);
    }
    return (long)o;
}

/* See header. */
size_t cm_utf8_seq_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len, k;
    uint32_t cp, min;

    if (n == 0)
        return 0;
    if ((p[0] & 0xE0) == 0xC0) {
        len = 2;
        cp = p[0] & 0x1Fu;
        min = 0x80;
    } else if ((p[0] & 0xF0) == 0xE0) {
        len = 3;
        cp = p[0] & 0x0Fu;
        min = 0x800;
    } else if ((p[0] & 0xF8) == 0xF0) {
        len = 4;
        cp = p[0] & 0x07u;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[k] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* See header. */
bool cm_utf8_valid(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t len;

        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        len = cm_utf8_seq_len(s + i, n - i);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}

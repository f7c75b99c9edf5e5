/* common/xml.c - XML text escaping for S3 responses (ListObjects keys,
 * error messages). Five predefined entities, numeric references for the
 * other control bytes, U+FFFD for a byte that is not UTF-8; everything else
 * (UTF-8 included) passes through. */
#include "common/xml.h"

#include <stdio.h>

/* Length of the well-formed UTF-8 sequence (RFC 3629) starting a @n-byte
 * @s whose first byte is >= 0x80, or 0 when it is not one. */
static size_t utf8_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    size_t len, k;
    unsigned long cp, min;

    if ((c & 0xE0) == 0xC0)
        len = 2, cp = c & 0x1Fu, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        len = 3, cp = c & 0x0Fu, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        len = 4, cp = c & 0x07u, min = 0x10000;
    else
        return 0;
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

/* Appends @s[0..n) escaped to @out. 0, -ENOMEM or -E2BIG (out emptied). */
int cm_xml_escape(struct cm_buf *out, const char *s, size_t n)
{
    size_t i = 0, start;
    int ret;

    while (i < n) {
        const char *rep = NULL;
        char num[8];
        unsigned char c;

        start = i;
        for (; i < n; i++) {
            c = (unsigned char)s[i];
            if (c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' ||
                (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
                break;
            if (c >= 0x80) {
                size_t len = utf8_len(s + i, n - i);

                if (len == 0)
                    break;
                i += len - 1;
            }
        }
        if (i > start) {
            ret = cm_buf_append(out, s + start, i - start);
            if (ret < 0)
                return ret;
        }
        if (i >= n)
            break;
        c = (unsigned char)s[i++];
        if (c >= 0x80) {
            /* not UTF-8 (a key stored before keys were checked): U+FFFD,
             * so the document stays well-formed */
            ret = cm_buf_appends(out, "\xEF\xBF\xBD");
            if (ret < 0)
                return ret;
            continue;
        }
        switch (c) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&apos;";
            break;
        default:
            snprintf(num, sizeof(num), "&#x%X;", c);
            rep = num;
            break;
        }
        ret = cm_buf_appends(out, rep);
        if (ret < 0)
            return ret;
    }
    /* An empty input still yields a valid (empty, NUL-terminated) value. */
    return cm_buf_reserve(out, 0);
}

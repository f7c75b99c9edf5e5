/* common/xml.c - XML text escaping for S3 responses (ListObjects keys,
 * error messages). Five predefined entities, numeric references for the
 * other control bytes, U+FFFD for a byte that is not UTF-8; everything else
 * (UTF-8 included) passes through. */
#include "common/xml.h"

#include <stdio.h>

#include "common/codec.h"

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
                size_t len = cm_utf8_seq_len(s + i, n - i);

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

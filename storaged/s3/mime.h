/* storaged/s3/mime.h - user metadata values (x-amz-meta-*) and RFC 2047,
 * as AWS documents them: the encoded-words of a value are decoded before it
 * is stored, and a stored value that is not printable US-ASCII is answered
 * as an RFC 2047 encoded-word ("mail-safe"); an ASCII one as it is.
 * Stored values are UTF-8. Pure functions: any thread, no state. */
#ifndef STORAGED_S3_MIME_H
#define STORAGED_S3_MIME_H
#include <stdbool.h>
#include <stddef.h>

#include "common/codec.h" /* CM_BASE64_LEN */

/* Decodes request value @v (@n bytes) into the value to store: *out
 * (malloc'd, NUL-terminated, *outlen bytes, never a NUL inside, always
 * well-formed UTF-8).
 * - Bytes first: a value that is well-formed UTF-8 stays as sent; any
 *   other is read as ISO-8859-1 (HTTP's historical charset) and converted.
 * - Then each well-formed encoded-word `=?CHARSET?B|Q?TEXT?=` (CHARSET
 *   UTF-8, US-ASCII or ISO-8859-1 in any case, an RFC 2231 `*LANG` suffix
 *   ignored) becomes its text; white space between two adjacent
 *   encoded-words goes (RFC 2047 6.2). An encoded-word in another charset,
 *   malformed, decoding to a NUL or to bytes that are not valid in its
 *   charset is kept as sent, as is every other byte.
 * 0 or -ENOMEM. */
int stor_s3_meta_decode(const char *v, size_t n, char **out, size_t *outlen);

/* true when stored value @v (@n bytes) must be encoded to be answered: it
 * holds a byte outside printable US-ASCII (tab and space allowed). */
bool stor_s3_meta_needs_encoding(const char *v, size_t n);

/* Room stor_s3_meta_encode needs for @n bytes, its NUL included. */
#define STOR_S3_META_ENC_LEN(n)                                                \
    (CM_BASE64_LEN(n) + sizeof("=?ISO-8859-1?B?") + 2)

/* Writes @v (@n bytes) as one encoded-word and a NUL to @out (room for
 * STOR_S3_META_ENC_LEN(n)): `=?UTF-8?B?...?=`, or `=?ISO-8859-1?B?...?=`
 * for a value that is not well-formed UTF-8 (one stored before values
 * were decoded). Returns the length written, without the NUL. */
size_t stor_s3_meta_encode(const char *v, size_t n, char *out);

#endif /* STORAGED_S3_MIME_H */

/* common/codec.h - hex, base64 (RFC 4648, standard alphabet, padded) and
 * strict UTF-8 checks (RFC 3629). */
#ifndef COMMON_CODEC_H
#define COMMON_CODEC_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes 2*n lowercase hex digits and a NUL to @out (size >= 2n+1). */
void cm_hex_encode(const void *p, size_t n, char *out);
/* Value of hex digit @c (either case), or -1. */
int cm_hex_digit(char c);
/* Decodes @n hex digits (either case) into @out; returns bytes written
 * (n/2) or -EINVAL on odd length or a non-hex digit. */
CM_MUST_CHECK long cm_hex_decode(const char *s, size_t n, uint8_t *out);

/* Size of the encoding of @n bytes, without the NUL. */
#define CM_BASE64_LEN(n) ((((n) + 2) / 3) * 4)
/* Writes CM_BASE64_LEN(n) chars and a NUL to @out. */
void cm_base64_encode(const void *p, size_t n, char *out);
/* Decodes padded base64; returns bytes written (at most 3*n/4) or -EINVAL. */
CM_MUST_CHECK long cm_base64_decode(const char *s, size_t n, uint8_t *out);

/* Strict UTF-8 (RFC 3629): no overlong form, no surrogate, nothing past
 * U+10FFFF, no stray continuation byte or truncated sequence. */
/* Length (2..4) of the well-formed multi-byte sequence at the start of the
 * @n bytes at @s, or 0 when there is none (an ASCII byte included). */
size_t cm_utf8_seq_len(const char *s, size_t n);
/* true when all @n bytes at @s are well-formed UTF-8. */
bool cm_utf8_valid(const char *s, size_t n);

#endif /* COMMON_CODEC_H */

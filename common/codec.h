/* common/codec.h - hex and base64 (RFC 4648, standard alphabet, padded). */
#ifndef COMMON_CODEC_H
#define COMMON_CODEC_H
#include "common/compiler.h"
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

#endif /* COMMON_CODEC_H */

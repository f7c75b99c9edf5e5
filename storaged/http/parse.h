/* storaged/http/parse.h - zero-copy HTTP/1.1 request-head parser and a
 * resumable chunked-body decoder (used for Transfer-Encoding: chunked and
 * for S3's aws-chunked content encoding, which share the same syntax).
 * The parser allocates nothing: every string in the result borrows from the
 * caller's input buffer, and the header array comes from the caller. */
#ifndef STORAGED_HTTP_PARSE_H
#define STORAGED_HTTP_PARSE_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STOR_HTTP_MAX_HEAD    (64 * 1024) /* request line + headers */
#define STOR_HTTP_MAX_HEADERS 100
#define STOR_HTTP_MAX_TARGET  (16 * 1024) /* request-target bytes */

struct stor_http_hdr {
    const char *name; /* borrows the input */
    size_t name_len;
    const char *value; /* borrows the input; surrounding blanks trimmed */
    size_t value_len;
};

struct stor_http_head {
    const char *method;
    size_t method_len;
    const char *target; /* request-target as sent (origin-form) */
    size_t target_len;
    int minor_version;          /* HTTP/1.x */
    struct stor_http_hdr *hdrs; /* caller's array */
    size_t nhdrs;               /* in: capacity; out: count */
};

/* Parses a request head from @buf (@len bytes). Returns the head's length
 * in bytes (through the blank line), -EAGAIN when more input is needed,
 * -EBADMSG on malformed input, -E2BIG when there are more headers than the
 * caller's capacity (h->nhdrs on entry) or the head or target exceeds the
 * limits above. Leading empty lines (RFC 9112 2.2) are skipped. */
CM_MUST_CHECK int stor_http_parse_head(const char *buf, size_t len,
                                       struct stor_http_head *h);

/* Case-insensitive header lookup; returns the first match or NULL. */
const struct stor_http_hdr *stor_http_find(const struct stor_http_head *h,
                                           const char *name);

/* true when the @n bytes at @s equal NUL-terminated @lit, ignoring ASCII
 * case. */
bool stor_http_ieq(const char *s, size_t n, const char *lit);

/* Parses an unsigned decimal of at most 19 digits; 0 or -EINVAL. */
CM_MUST_CHECK int stor_http_parse_u64(const char *s, size_t n, uint64_t *out);

/* ---- chunked bodies ---- */
#define STOR_CHUNK_MAX_EXT     256  /* bytes of chunk extensions kept */
#define STOR_CHUNK_MAX_TRAILER 4096 /* bytes of trailer section kept */

/* Callbacks of the chunk decoder; each returns 0 or a negative errno that
 * stops decoding and is returned by stor_chunk_decode. */
struct stor_chunk_cb {
    /* Decoded body bytes (borrowed, valid during the call). */
    int (*data)(void *arg, const char *p, size_t n);
    /* End of one chunk's data (also called for the final 0-size chunk,
     * before the trailers), with that chunk's extension text after the
     * size ("chunk-signature=..." or empty). */
    int (*chunk_end)(void *arg, const char *ext, size_t ext_len,
                     uint64_t chunk_size);
    /* One trailer field, after the last chunk. */
    int (*trailer)(void *arg, const char *name, size_t name_len,
                   const char *value, size_t value_len);
    void *arg;
};

struct stor_chunk_dec {
    int state;
    uint64_t remaining; /* data bytes left in the current chunk */
    uint64_t size;      /* size of the current chunk */
    uint64_t total;     /* data bytes decoded so far */
    uint64_t max_total; /* -E2BIG past this */
    size_t linelen;
    char line[STOR_CHUNK_MAX_TRAILER]; /* current size/trailer line */
    bool done;
};

void stor_chunk_init(struct stor_chunk_dec *d, uint64_t max_total);
/* Feeds @n input bytes. Returns the number of bytes consumed (all of them
 * unless the body ended inside this input: then the bytes after the end
 * are left for the caller) or -EBADMSG / -E2BIG / a callback's error.
 * d->done is set once the terminating empty line after the trailers has
 * been consumed. */
CM_MUST_CHECK ssize_t stor_chunk_decode(struct stor_chunk_dec *d,
                                        const char *in, size_t n,
                                        const struct stor_chunk_cb *cb);

#endif /* STORAGED_HTTP_PARSE_H */

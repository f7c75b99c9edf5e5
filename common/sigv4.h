/* common/sigv4.h - AWS Signature Version 4, for both sides: the client signs
 * (header or presigned query), the server recomputes and compares.
 *
 * One representation for requests on both sides: the path and the query
 * parameters are given DECODED (raw bytes); this module applies SigV4's
 * encoding (cm_uri_encode: path keeps '/', query names and values encode
 * everything but unreserved). S3 rules: the path is encoded once and not
 * normalised. Headers are given as sent; names are lowercased, values
 * trimmed and inner runs of spaces collapsed, sorted by name, and repeated
 * names joined with ','. Results go into caller buffers; internally only
 * short-lived scratch is allocated (sort indexes past 64 pairs, the
 * intermediate strings of sign/presign), and each thread caches its last
 * derived signing key. All functions are thread-safe. */
#ifndef COMMON_SIGV4_H
#define COMMON_SIGV4_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CM_SIGV4_ALGO                       "AWS4-HMAC-SHA256"
#define CM_SIGV4_UNSIGNED                   "UNSIGNED-PAYLOAD"
#define CM_SIGV4_STREAMING                  "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define CM_SIGV4_STREAMING_TRAILER          "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define CM_SIGV4_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
#define CM_SIGV4_EMPTY_SHA256                                                  \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define CM_SIGV4_MAX_PRESIGN_EXPIRES 604800 /* 7 days */
#define CM_SIGV4_SKEW_SECONDS        900    /* 15 minutes */

/* A name/value pair that borrows its bytes (not NUL-terminated). */
struct cm_kv {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

struct cm_sigv4_req {
    const char *method; /* "GET", ... */
    const char *path;   /* decoded, starts with '/' */
    size_t path_len;
    const struct cm_kv *query; /* decoded params, any order; may be NULL */
    size_t nquery;
    const struct cm_kv *headers; /* exactly the headers to sign, any order */
    size_t nheaders;
    const char *payload_hash; /* hex SHA-256, UNSIGNED-PAYLOAD or STREAMING-* */
};

struct cm_sigv4_cred {
    const char *access_key;
    const char *secret_key;
    const char *region;  /* "us-east-1" */
    const char *service; /* "s3" */
};

/* Appends the canonical request to @out. The SignedHeaders line lists the
 * names of r->headers. 0 or -ENOMEM. */
CM_MUST_CHECK int cm_sigv4_canonical_request(const struct cm_sigv4_req *r,
                                             struct cm_buf *out);
/* Appends "host;x-amz-date;..." (sorted, lowercased, deduplicated) to @out. */
CM_MUST_CHECK int cm_sigv4_signed_headers(const struct cm_sigv4_req *r,
                                          struct cm_buf *out);
/* Appends "20150830/us-east-1/s3/aws4_request" for @amz_date. */
CM_MUST_CHECK int cm_sigv4_scope(const char *amz_date, const char *region,
                                 const char *service, struct cm_buf *out);
/* Appends the string to sign: algorithm, amz_date, scope, hex SHA-256 of the
 * canonical request. */
CM_MUST_CHECK int cm_sigv4_string_to_sign(const char *amz_date,
                                          const char *scope,
                                          const struct cm_buf *canonical,
                                          struct cm_buf *out);
/* kSigning = HMAC chain over "AWS4"+secret, date8, region, service,
 * "aws4_request". @date8 is "YYYYMMDD". */
void cm_sigv4_signing_key(const char *secret, const char *date8,
                          const char *region, const char *service,
                          uint8_t key[32]);
/* hex HMAC-SHA256(key, sts): 64 chars + NUL */
void cm_sigv4_signature(const uint8_t key[32], const char *sts, size_t sts_len,
                        char out[65]);

/* Client side, header auth: computes the signature for @r at @now (the
 * caller must already have put host, x-amz-date = ISO basic of @now and
 * x-amz-content-sha256 into r->headers) and appends the complete
 * Authorization header value to @out. 0 or -ENOMEM. */
CM_MUST_CHECK int cm_sigv4_sign(const struct cm_sigv4_cred *c,
                                const struct cm_sigv4_req *r, time_t now,
                                struct cm_buf *out);

/* Client side, presigned URL: @r's query holds the request's own params,
 * its headers normally just "host", payload_hash is ignored (presigned URLs
 * sign UNSIGNED-PAYLOAD). Appends the full encoded query string (own params
 * plus X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders,
 * -Signature), without '?', to @out. -EINVAL if @expires is outside
 * 1..604800. */
CM_MUST_CHECK int cm_sigv4_presign(const struct cm_sigv4_cred *c,
                                   const struct cm_sigv4_req *r, time_t now,
                                   unsigned expires, struct cm_buf *out);

/* Server side: the parts of an Authorization header or of presigned query
 * params. All pointers borrow from the parsed input. */
struct cm_sigv4_auth {
    const char *access_key;
    size_t access_key_len;
    const char *date8; /* credential scope date, 8 chars */
    const char *region;
    size_t region_len;
    const char *service;
    size_t service_len;
    const char *signed_headers; /* "host;x-amz-date" */
    size_t signed_headers_len;
    const char *signature; /* 64 hex chars */
};
/* Parses "AWS4-HMAC-SHA256 Credential=AK/20150830/us-east-1/s3/aws4_request,
 * SignedHeaders=host;x-amz-date, Signature=<64 hex>" (spaces after commas
 * optional). 0 or -EINVAL. */
CM_MUST_CHECK int cm_sigv4_parse_authorization(const char *s, size_t n,
                                               struct cm_sigv4_auth *a);
/* Parses an X-Amz-Credential value "AK/date/region/service/aws4_request"
 * into the credential fields of @a. 0 or -EINVAL. */
CM_MUST_CHECK int cm_sigv4_parse_credential(const char *s, size_t n,
                                            struct cm_sigv4_auth *a);

/* Constant-time comparison of two 64-char hex signatures. */
bool cm_sigv4_equal(const char *a, const char *b, size_t n);

/* aws-chunked: signature of one chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD):
 * sts = "AWS4-HMAC-SHA256-PAYLOAD\n" amz_date "\n" scope "\n" prev_sig "\n"
 *       hex(sha256("")) "\n" hex(sha256(chunk)) */
void cm_sigv4_chunk_signature(const uint8_t key[32], const char *amz_date,
                              const char *scope, const char *prev_sig,
                              const char *chunk_sha256_hex, char out[65]);
/* Signature of the trailer block: sts = "AWS4-HMAC-SHA256-TRAILER\n" amz_date
 * "\n" scope "\n" prev_sig "\n" hex(sha256(trailer_bytes)) */
void cm_sigv4_trailer_signature(const uint8_t key[32], const char *amz_date,
                                const char *scope, const char *prev_sig,
                                const char *trailer_sha256_hex, char out[65]);

#endif /* COMMON_SIGV4_H */

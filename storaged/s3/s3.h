/* storaged/s3/s3.h - the S3 application's public interface: the table of
 * hooks to give the transport (storaged/http/http.h) and the server-wide S3
 * state it runs with. main.c creates the state, then serves with
 * stor_http_opts.app = &stor_s3_app and .app_ctx = that state. */
#ifndef STORAGED_S3_S3_H
#define STORAGED_S3_S3_H
#include "common/compiler.h"
#include "storaged/http/http.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stor_store;
struct stor_s3;

struct stor_s3_opts {
    struct stor_store *store; /* borrowed; outlives the stor_s3 */
    const char *root_user;    /* borrowed: root (users: iam.h) */
    const char *root_secret;  /* borrowed */
    const char *region;       /* NULL: "us-east-1" */
    size_t cache_bytes;       /* --cache-mem, split over the loops; 0: none */
    bool no_zero_copy;        /* --no-zero-copy: extent GETs copy their bytes */
    size_t zc_cache_bytes;    /* --zc-cache-mem: checked bodies kept as pipe
                                 pages for zero-copy GETs (zcache.h); 0: none */
    const char *domain;       /* borrowed; --domain: virtual-hosted-style
                                 requests to BUCKET.DOMAIN; NULL: path only */
    const uint8_t *kms_key;   /* --kms-key-file's 256-bit key (copied), or
                                 NULL: SSE-S3's master key is sealed under a
                                 key derived from the root credentials */
    bool tls;                 /* HTTPS is served (POST Object's 201 Location) */
    bool no_sigv2;            /* --no-sigv2: refuse SigV2 request signing
                                 (the POST form's SigV2 stays) */
};

/* Creates the S3 state (and its metrics). 0 or -ENOMEM. */
CM_MUST_CHECK int stor_s3_create(const struct stor_s3_opts *o,
                                 struct stor_s3 **out);
void stor_s3_destroy(struct stor_s3 *s3);

/* Reads `--kms-key-file` (for stor_s3_opts.kms_key; s3/sse.c): 32 raw
 * bytes, or 64 hex digits (a newline allowed). 0, or -errno with a message
 * in @err. */
CM_MUST_CHECK int stor_sse_read_key_file(const char *path, uint8_t key[32],
                                         char *err, size_t errlen);

/* Side services (s3/console.c): the OTLP metrics push (--otlp-endpoint)
 * and the status page (--console). Strings are copied. */
struct stor_s3_obs_opts {
    const char *otlp_endpoint; /* NULL: no push */
    double otlp_interval_s;    /* 0: 10 s */
    const char *console_addr;  /* HOST:PORT, NULL: no console */
    const char *instance;      /* service.instance.id, page title */
    const char *version;       /* service.version */
};
struct stor_s3_obs;
/* Binds the console and starts the push and the sampler; they run until
 * stor_s3_obs_stop. 0 and *out, or -errno with *@err set (caller frees). */
CM_MUST_CHECK int stor_s3_obs_start(struct stor_s3 *s3,
                                    const struct stor_s3_obs_opts *o,
                                    struct stor_s3_obs **out, char **err);
/* The running transport (NULL once it stopped): its connection figures
 * join the metrics. For stor_http_opts.on_serving. */
void stor_s3_obs_serving(void *obs, struct stor_http_server *srv, bool up);
/* Stops and frees (NULL: no-op). */
void stor_s3_obs_stop(struct stor_s3_obs *obs);

/* true when @d can be a --domain: a DNS name of 1..253 characters, labels
 * of letters, digits and '-' (not first or last), not an IPv4 address. */
bool stor_s3_domain_ok(const char *d);

/* The transport hooks of the S3 application. */
extern const struct stor_http_app stor_s3_app;

#endif /* STORAGED_S3_S3_H */

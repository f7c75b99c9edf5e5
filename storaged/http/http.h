/* storaged/http/http.h - the HTTP/1.1 server: event-loop threads that accept,
 * parse, authenticate and route S3 requests, with blocking work on a
 * worker pool. One instance per process (see struct stor_server in
 * http_i.h for the state it shares with the S3 layer). */
#ifndef STORAGED_HTTP_HTTP_H
#define STORAGED_HTTP_HTTP_H
#include "common/compiler.h"
#include <stddef.h>

struct stor_server;

struct stor_http_opts {
    const char *host; /* "127.0.0.1", "0.0.0.0", "::" */
    int port;
    size_t nthreads;    /* event loops; 0 = one per online CPU */
    size_t nworkers;    /* write workers; 0 = default (4 per loop, >= 16) */
    size_t nrworkers;   /* read workers; 0 = default (2 per loop, >= 4) */
    size_t cache_bytes; /* small-object body cache, split over the loops;
                           0 = none */
};

/* Binds, starts the loops and the workers, and serves until
 * stor_http_shutdown() is called; then stops accepting, finishes in-flight
 * requests (at most @drain_s seconds) and returns 0, or -errno when it
 * could not start (bind failure: message logged). Borrows @srv. */
CM_MUST_CHECK int stor_http_serve(struct stor_server *srv,
                                  const struct stor_http_opts *o);
/* Async-signal-safe: asks the running server to drain and return. */
void stor_http_shutdown(void);

#endif /* STORAGED_HTTP_HTTP_H */

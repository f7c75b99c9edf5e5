/* storaged/http/tls.h - TLS for the transport: one server context built from a
 * certificate chain and a key (OpenSSL), reloadable while serving, and the
 * non-blocking handshake, read and write calls the connection state machine
 * makes instead of read(2)/writev(2). A struct stor_tls is shared by every
 * loop; each connection owns its struct ssl_st. The calls on a connection
 * run on its loop thread only. */
#ifndef STORAGED_HTTP_TLS_H
#define STORAGED_HTTP_TLS_H
#include "common/compiler.h"
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct stor_tls;
struct ssl_st; /* OpenSSL's SSL */

/* Builds the context from PEM files @cert (the chain, leaf first) and @key
 * (TLS 1.2 and 1.3, HTTP/1.1 only). 0, or -errno with a message in *err
 * (malloc'd; the caller frees it). Borrows nothing: the paths are copied. */
CM_MUST_CHECK int stor_tls_create(const char *cert, const char *key,
                                  struct stor_tls **out, char **err);
/* Reads the files again and, when they make a valid context, uses it for
 * every connection accepted from now on (open ones keep theirs). 0, or
 * -errno with a message in *err (the old context stays). Thread-safe;
 * blocking (file I/O): call it on a worker. */
CM_MUST_CHECK int stor_tls_reload(struct stor_tls *t, char **err);
void stor_tls_destroy(struct stor_tls *t);

/* A server-side TLS session on socket @fd, or NULL (no memory). */
struct ssl_st *stor_tls_conn_new(struct stor_tls *t, int fd);
/* Sends close_notify unless @failed (best effort, never blocks) and frees
 * @s. */
void stor_tls_conn_free(struct ssl_st *s, int failed);

/* Results of the calls below besides byte counts: -EAGAIN (would block;
 * *want tells which of EPOLLIN/EPOLLOUT to wait for), -EPROTO (a TLS error:
 * the connection is unusable), -EBADMSG (a plain-HTTP request came to the
 * TLS port), or another -errno from the socket. */

/* Advances the handshake: 0 once it is done. */
CM_MUST_CHECK int stor_tls_handshake(struct ssl_st *s, uint32_t *want);
/* Reads up to @len bytes: > 0, or 0 at the peer's EOF (close_notify or
 * not), or an error as above. After a read that returns > 0 nothing
 * decrypted is left inside OpenSSL unless tls_pending() says so. */
CM_MUST_CHECK ssize_t stor_tls_read(struct ssl_st *s, char *buf, size_t len,
                                    uint32_t *want);
/* Bytes already decrypted and waiting inside OpenSSL (no syscall needed). */
size_t stor_tls_pending(const struct ssl_st *s);
/* Writes from @iov (TLS records of up to 16 KiB): the bytes written (> 0),
 * or an error as above when nothing could be written. OpenSSL may hold a
 * record it could not finish sending, so the next call must offer the same
 * bytes again, at least as many: after -EAGAIN the same iovecs; after a
 * short count, first the rest of the iovec that was cut short, whole (the
 * connection's head buffer and stream buffers are offered that way;
 * tests/fuzz/fuzz_tls.c checks it). */
CM_MUST_CHECK ssize_t stor_tls_writev(struct ssl_st *s, const struct iovec *iov,
                                      int niov, uint32_t *want);

#endif /* STORAGED_HTTP_TLS_H */

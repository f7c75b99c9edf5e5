/* storaged/http/tls.c - OpenSSL for the event loops: the server context, its
 * reload on SIGHUP, and non-blocking handshake/read/write wrappers.
 *
 * DESIGN: the loops never block on TLS. A connection's SSL works on its
 * non-blocking socket; every call that would block returns -EAGAIN with the
 * direction to wait for (a TLS read can need to write and a write to read),
 * and the connection state machine polls for it and calls again, so a
 * handshake is just more states of the same loop (nginx's way). Writes use
 * SSL_MODE_ENABLE_PARTIAL_WRITE (a call returns after each record, so the
 * caller counts progress exactly as with writev) and
 * SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER (the retry after -EAGAIN may come from
 * a reallocated buffer holding the same bytes). Read-ahead stays off: a read
 * takes one record from the socket, so what OpenSSL has not handed out is
 * only the rest of that record (stor_tls_pending), and everything else is
 * still in the kernel, where level-triggered epoll sees it.
 *
 * Reload: the context pointer is swapped under a mutex; each SSL holds its
 * own reference to the context it was made from (OpenSSL counts them), so
 * open connections keep the old certificate and the old context goes with
 * the last of them. */
#include "storaged/http/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "common/log.h"

struct stor_tls {
    char *cert, *key;     /* owned; immutable after creation */
    SSL_CTX *ctx;         /* protected by lock */
    pthread_mutex_t lock; /* guards ctx only */
};

/* The first queued OpenSSL error as text ("" when none); clears the queue. */
static void last_error(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();

    if (e == 0)
        snprintf(buf, len, "unknown error");
    else
        ERR_error_string_n(e, buf, len);
    ERR_clear_error();
}

/* ALPN: we speak HTTP/1.1 only; a client offering nothing we know gets no
 * ALPN answer (and uses HTTP/1.1, as without ALPN). */
static int alpn_select(SSL *s, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel;

    (void)s;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* A new context from @cert and @key, or NULL with a message in *err. */
static SSL_CTX *ctx_build(const char *cert, const char *key, char **err)
{
    char why[256];
    const char *what;
    SSL_CTX *ctx;

    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        what = "cannot create a TLS context";
        goto fail;
    }
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
        what = "cannot require TLS 1.2";
        goto fail;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"storaged", 8);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        what = "cannot load the certificate (--tls-cert)";
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error();

        what = ERR_GET_LIB(e) == ERR_LIB_X509 &&
                       ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH
                   ? "the private key does not match the certificate"
                   : "cannot load the private key (--tls-key)";
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        what = "the private key does not match the certificate";
        goto fail;
    }
    return ctx;

fail:
    last_error(why, sizeof(why));
    if (asprintf(err, "%s: %s (cert %s, key %s)", what, why, cert, key) < 0)
        *err = NULL;
    SSL_CTX_free(ctx);
    return NULL;
}

/* See header. */
int stor_tls_create(const char *cert, const char *key, struct stor_tls **out,
                    char **err)
{
    struct stor_tls *t;

    *err = NULL;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return -ENOMEM;
    t->cert = strdup(cert);
    t->key = strdup(key);
    if (t->cert == NULL || t->key == NULL) {
        stor_tls_destroy(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->ctx = ctx_build(cert, key, err);
    if (t->ctx == NULL) {
        stor_tls_destroy(t);
        return -EINVAL;
    }
    *out = t;
    return 0;
}

/* See header. */
int stor_tls_reload(struct stor_tls *t, char **err)
{
    SSL_CTX *ctx = ctx_build(t->cert, t->key, err), *old;

    if (ctx == NULL)
        return -EINVAL;
    pthread_mutex_lock(&t->lock);
    old = t->ctx;
    t->ctx = ctx;
    pthread_mutex_unlock(&t->lock);
    SSL_CTX_free(old); /* connections made from it hold their references */
    return 0;
}

/* See header. */
void stor_tls_destroy(struct stor_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    if (t->cert)
        pthread_mutex_destroy(&t->lock);
    free(t->cert);
    free(t->key);
    free(t);
}

/* See header. */
struct ssl_st *stor_tls_conn_new(struct stor_tls *t, int fd)
{
    SSL *s;

    pthread_mutex_lock(&t->lock);
    s = SSL_new(t->ctx); /* takes a reference to the context */
    pthread_mutex_unlock(&t->lock);
    if (s == NULL) {
        ERR_clear_error();
        return NULL;
    }
    if (SSL_set_fd(s, fd) != 1) {
        ERR_clear_error();
        SSL_free(s);
        return NULL;
    }
    SSL_set_accept_state(s);
    return s;
}

/* See header. */
void stor_tls_conn_free(struct ssl_st *s, int failed)
{
    if (s == NULL)
        return;
    if (!failed && SSL_is_init_finished(s))
        (void)SSL_shutdown(s); /* one close_notify; we do not wait for the
                                * peer's (the socket closes next) */
    ERR_clear_error();
    SSL_free(s);
}

/* Maps the result @ret of an SSL call on @s to our vocabulary. */
static int tls_result(SSL *s, int ret, uint32_t *want)
{
    int e = SSL_get_error(s, ret), saved = errno;
    unsigned long code;

    switch (e) {
    case SSL_ERROR_WANT_READ:
        *want = EPOLLIN;
        return -EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        *want = EPOLLOUT;
        return -EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (saved == EAGAIN || saved == EINTR) {
            *want = EPOLLIN;
            return -EAGAIN;
        }
        return saved ? -saved : -ECONNRESET;
    default:
        code = ERR_peek_error();
        if (ERR_GET_LIB(code) == ERR_LIB_SSL &&
            ERR_GET_REASON(code) == SSL_R_HTTP_REQUEST) {
            ERR_clear_error();
            return -EBADMSG;
        }
        if (cm_log_min <= CM_LOG_DEBUG) {
            char why[256];

            last_error(why, sizeof(why));
            cm_log(CM_LOG_DEBUG, 0, "tls: %s", why);
        }
        ERR_clear_error();
        return -EPROTO;
    }
}

/* See header. */
int stor_tls_handshake(struct ssl_st *s, uint32_t *want)
{
    int ret;

    ERR_clear_error();
    ret = SSL_do_handshake(s);
    if (ret == 1)
        return 0;
    ret = tls_result(s, ret, want);
    return ret == 0 ? -ECONNRESET : ret; /* EOF mid-handshake */
}

/* See header. */
ssize_t stor_tls_read(struct ssl_st *s, char *buf, size_t len, uint32_t *want)
{
    size_t got = 0;
    int ret;

    ERR_clear_error();
    ret = SSL_read_ex(s, buf, len, &got);
    if (ret == 1)
        return (ssize_t)got;
    return tls_result(s, ret, want);
}

/* See header. */
size_t stor_tls_pending(const struct ssl_st *s)
{
    int n = SSL_pending(s);

    return n > 0 ? (size_t)n : 0;
}

/* See header. */
ssize_t stor_tls_writev(struct ssl_st *s, const struct iovec *iov, int niov,
                        uint32_t *want)
{
    size_t total = 0;
    int i;

    for (i = 0; i < niov; i++) {
        size_t n = 0;
        int ret;

        if (iov[i].iov_len == 0)
            continue;
        ERR_clear_error();
        ret = SSL_write_ex(s, iov[i].iov_base, iov[i].iov_len, &n);
        if (ret != 1) {
            if (total > 0) {
                ERR_clear_error();
                return (ssize_t)total; /* the caller comes back for more */
            }
            ret = tls_result(s, ret, want);
            return ret == 0 ? -EPIPE : ret;
        }
        total += n;
        if (n < iov[i].iov_len)
            break; /* a partial write: the socket is filling */
    }
    return (ssize_t)total;
}

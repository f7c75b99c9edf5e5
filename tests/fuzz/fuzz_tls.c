/* tests/fuzz/fuzz_tls.c - libFuzzer target for the transport's TLS wrappers
 * (storaged/http/tls.c) as the connection state machine drives them: a
 * server session on a non-blocking socket, fed either raw bytes or a real
 * OpenSSL client, stepped one call at a time as the event loop would.
 *
 * Input: byte 0 picks the mode, bytes 1-2 a position, the rest is data.
 *   mode 0: the data is written raw to the server's socket (an attacker who
 *           speaks no TLS, or broken TLS), then EOF; the server handshakes
 *           and reads until it gives up.
 *   mode 1: a real client handshakes, sends the data as application bytes,
 *           and the server must read back exactly those bytes.
 *   mode 2: as 1, but one byte of the client's encrypted stream at the
 *           position is flipped: what the server reads must be a prefix of
 *           the data (never a wrong byte), and it must then fail.
 *   mode 3: the server sends the data with stor_tls_writev, split into
 *           chunks at data-chosen sizes and offered as the connection does
 *           (the rest of the current chunk, then whole ones), through a
 *           small socket buffer (partial writes, -EAGAIN): the client reads
 *           exactly the data.
 * Every call returns a count or one of the documented errors, and -EAGAIN
 * always names EPOLLIN or EPOLLOUT. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "storaged/http/tls.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(x)                                                               \
    do {                                                                       \
        if (!(x))                                                              \
            abort();                                                           \
    } while (0)

#define STEPS 1000 /* loop turns before a session is judged stuck */

static struct stor_tls *g_tls;
static SSL_CTX *g_cctx;

/* A self-signed P-256 certificate and key, written as PEM under @dir. */
static void make_cert(const char *dir)
{
    char cpath[256], kpath[256];
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *n;
    FILE *f;

    CHECK(k != NULL && x != NULL);
    CHECK(X509_set_version(x, 2) == 1);
    CHECK(ASN1_INTEGER_set(X509_get_serialNumber(x), 1) == 1);
    CHECK(X509_gmtime_adj(X509_getm_notBefore(x), -3600) != NULL);
    CHECK(X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 365) != NULL);
    CHECK(X509_set_pubkey(x, k) == 1);
    n = X509_get_subject_name(x);
    CHECK(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                     (const unsigned char *)"localhost", -1, -1,
                                     0) == 1);
    CHECK(X509_set_issuer_name(x, n) == 1);
    CHECK(X509_sign(x, k, EVP_sha256()) > 0);
    snprintf(cpath, sizeof(cpath), "%s/cert.pem", dir);
    snprintf(kpath, sizeof(kpath), "%s/key.pem", dir);
    f = fopen(cpath, "w");
    CHECK(f != NULL && PEM_write_X509(f, x) == 1 && fclose(f) == 0);
    f = fopen(kpath, "w");
    CHECK(f != NULL &&
          PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1 &&
          fclose(f) == 0);
    X509_free(x);
    EVP_PKEY_free(k);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char dir[] = "/tmp/fuzz_tls.XXXXXX", cpath[64], kpath[64], *err = NULL;

    (void)argc;
    (void)argv;
    CHECK(mkdtemp(dir) != NULL);
    make_cert(dir);
    snprintf(cpath, sizeof(cpath), "%s/cert.pem", dir);
    snprintf(kpath, sizeof(kpath), "%s/key.pem", dir);
    CHECK(stor_tls_create(cpath, kpath, &g_tls, &err) == 0);
    /* the context has read the files: nothing else needs them */
    CHECK(unlink(cpath) == 0 && unlink(kpath) == 0 && rmdir(dir) == 0);
    g_cctx = SSL_CTX_new(TLS_client_method());
    CHECK(g_cctx != NULL);
    SSL_CTX_set_verify(g_cctx, SSL_VERIFY_NONE, NULL);
    return 0;
}

/* A result of a stor_tls_* call is a count or a documented error. */
static void check_result(ssize_t r, uint32_t want)
{
    if (r >= 0)
        return;
    CHECK(r > -4096);
    if (r == -EAGAIN)
        CHECK(want == EPOLLIN || want == EPOLLOUT);
}

/* One server step of the handshake or a read into @out; returns 1 while
 * the session may still make progress. */
static int server_step(SSL *s, int *ready, char *out, size_t cap, size_t *got,
                       int *failed)
{
    uint32_t want = 0;
    ssize_t r;

    if (!*ready) {
        r = stor_tls_handshake(s, &want);
        check_result(r, want);
        if (r == 0) {
            *ready = 1;
            return 1;
        }
        if (r != -EAGAIN)
            *failed = 1;
        return r == -EAGAIN;
    }
    if (*got >= cap) { /* more than was sent: must not happen */
        char extra;

        r = stor_tls_read(s, &extra, 1, &want);
        check_result(r, want);
        CHECK(r <= 0);
        if (r < 0 && r != -EAGAIN)
            *failed = 1;
        return r == -EAGAIN;
    }
    r = stor_tls_read(s, out + *got, cap - *got, &want);
    check_result(r, want);
    if (r > 0) {
        *got += (size_t)r;
        CHECK(stor_tls_pending(s) <= 16384);
        return 1;
    }
    if (r < 0 && r != -EAGAIN)
        *failed = 1;
    return r == -EAGAIN;
}

/* The client end: an SSL on memory BIOs, pumped to/from socket @fd so the
 * target can see (and damage) the bytes on the wire. */
struct client {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int fd;
    long flip_at;    /* wire offset to damage; -1: none */
    long sent;       /* wire bytes written to fd */
    char pend[8192]; /* taken from wbio, not yet written */
    size_t plen;
};

static void client_init(struct client *cl, int fd, long flip_at)
{
    cl->ssl = SSL_new(g_cctx);
    CHECK(cl->ssl != NULL);
    cl->rbio = BIO_new(BIO_s_mem());
    cl->wbio = BIO_new(BIO_s_mem());
    CHECK(cl->rbio != NULL && cl->wbio != NULL);
    SSL_set_bio(cl->ssl, cl->rbio, cl->wbio);
    SSL_set_connect_state(cl->ssl);
    cl->fd = fd;
    cl->flip_at = flip_at;
    cl->sent = 0;
    cl->plen = 0;
}

/* Wire bytes the client has produced so far (sent or not). */
static long client_produced(struct client *cl)
{
    return cl->sent + (long)cl->plen + (long)BIO_pending(cl->wbio);
}

/* Moves wire bytes both ways without blocking. */
static void client_pump(struct client *cl)
{
    char buf[4096];
    ssize_t n;

    for (;;) { /* to the server: what the client SSL produced, in order */
        if (cl->plen == 0) {
            int len = BIO_read(cl->wbio, cl->pend, sizeof(cl->pend));

            if (len <= 0)
                break;
            cl->plen = (size_t)len;
            if (cl->flip_at >= cl->sent && cl->flip_at < cl->sent + len)
                cl->pend[cl->flip_at - cl->sent] ^= 0x5a;
        }
        n = write(cl->fd, cl->pend, cl->plen);
        if (n <= 0)
            break; /* full (EAGAIN) or the server end is closed */
        memmove(cl->pend, cl->pend + n, cl->plen - (size_t)n);
        cl->plen -= (size_t)n;
        cl->sent += n;
    }
    for (;;) { /* from the server */
        n = read(cl->fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        CHECK(BIO_write(cl->rbio, buf, (int)n) == (int)n);
    }
}

/* Both ends handshake, stepped in turn; 1 when both are done. */
static int handshake(struct client *cl, SSL *s, int *ready, int *failed)
{
    int i;

    for (i = 0; i < STEPS && !*failed; i++) {
        char dummy[1];
        size_t dg = 0;

        if (SSL_do_handshake(cl->ssl) != 1) {
            int e = SSL_get_error(cl->ssl, -1);

            ERR_clear_error();
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                return 0; /* the client gave up (damaged server bytes) */
        }
        client_pump(cl);
        if (!*ready && !server_step(s, ready, dummy, 0, &dg, failed))
            return 0;
        client_pump(cl);
        if (*ready && SSL_is_init_finished(cl->ssl))
            return 1;
    }
    return 0;
}

static void run_raw(SSL *s, int peer, const uint8_t *data, size_t size)
{
    char buf[4096];
    size_t got = 0, off = 0;
    int ready = 0, failed = 0, eof = 0, i;

    for (i = 0; i < STEPS; i++) {
        if (off < size) {
            ssize_t n = write(peer, data + off, size - off);

            if (n > 0)
                off += (size_t)n;
        } else if (!eof) {
            CHECK(shutdown(peer, SHUT_WR) == 0);
            eof = 1;
        }
        while (read(peer, buf, sizeof(buf)) > 0)
            ; /* drop whatever the server answers */
        if (!server_step(s, &ready, buf, sizeof(buf), &got, &failed))
            break;
        if (ready && got == sizeof(buf))
            got = 0;
    }
    /* noise never completes a handshake with a key only the server has,
     * and after the EOF the server must stop by itself */
    CHECK(!ready);
    CHECK(i < STEPS);
}

static void run_client(SSL *s, int peer, const uint8_t *data, size_t size,
                       long flip_at)
{
    struct client cl;
    char *out = malloc(size + 1);
    size_t got = 0, wrote = 0;
    int ready = 0, failed = 0, shut = 0, clean_eof = 0, i;
    long hs_end;

    CHECK(out != NULL);
    client_init(&cl, peer, flip_at);
    if (!handshake(&cl, s, &ready, &failed)) {
        /* only damage makes a handshake fail */
        CHECK(flip_at >= 0 && flip_at < client_produced(&cl));
        goto out;
    }
    hs_end = client_produced(&cl);
    for (i = 0; i < STEPS && !failed; i++) {
        if (wrote < size) {
            size_t n = 0;

            if (SSL_write_ex(cl.ssl, data + wrote, size - wrote, &n) == 1)
                wrote += n;
            ERR_clear_error();
        } else if (!shut) {
            (void)SSL_shutdown(cl.ssl); /* close_notify: the server sees 0 */
            ERR_clear_error();
            shut = 1;
        }
        client_pump(&cl);
        if (!server_step(s, &ready, out, size, &got, &failed) && !failed) {
            clean_eof = 1;
            break;
        }
    }
    /* never a wrong byte */
    CHECK(got <= size && memcmp(out, data, got) == 0);
    if (flip_at < 0) {
        CHECK(!failed && clean_eof && got == size);
    } else if (flip_at >= hs_end && flip_at < cl.sent) {
        /* a damaged record (header, ciphertext or tag: TLS 1.3 and the
         * 1.2 AEAD suites authenticate all three) is never taken as a clean
         * end of the stream */
        CHECK(!clean_eof);
    }
out:
    SSL_free(cl.ssl);
    ERR_clear_error();
    free(out);
}

static void run_send(SSL *s, int peer, const uint8_t *data, size_t size,
                     unsigned seed)
{
    struct client cl;
    char *in = malloc(size + 1), *src = malloc(size + 1);
    size_t sent = 0, got = 0;
    int ready = 0, failed = 0, i;

    CHECK(in != NULL && src != NULL);
    memcpy(src, data, size); /* iovecs point at writable memory */
    client_init(&cl, peer, -1);
    CHECK(handshake(&cl, s, &ready, &failed));
    /* a turn sends at least one byte once the socket has room */
    for (i = 0; i < STEPS + (int)size && !failed && got < size; i++) {
        if (sent < size) {
            struct iovec iov[4];
            size_t at = 0, k = 0, c = 0;
            uint32_t want = 0;
            ssize_t r;

            /* fixed, data-chosen chunk boundaries (as conn.c's head and
             * stream buffers): a call offers the rest of the chunk that
             * holds the next unsent byte, then up to 3 whole chunks */
            while (k < 4 && at < size) {
                size_t len = ((seed >> ((c & 3) * 4)) & 15) * 1024 + 1;

                if (len > size - at)
                    len = size - at;
                if (at + len > sent) {
                    size_t from = at > sent ? at : sent;

                    iov[k].iov_base = src + from;
                    iov[k].iov_len = at + len - from;
                    k++;
                }
                at += len;
                c++;
            }
            r = stor_tls_writev(s, iov, (int)k, &want);
            check_result(r, want);
            if (r > 0) {
                CHECK((size_t)r <= size - sent);
                sent += (size_t)r;
            } else if (r != -EAGAIN) {
                failed = 1;
            }
        }
        client_pump(&cl);
        for (;;) {
            size_t n = 0;

            if (SSL_read_ex(cl.ssl, in + got, size - got, &n) != 1)
                break;
            got += n;
        }
        ERR_clear_error();
    }
    CHECK(!failed);
    CHECK(got == size && memcmp(in, data, size) == 0);
    SSL_free(cl.ssl);
    ERR_clear_error();
    free(src);
    free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2], small = 4096;
    unsigned mode, pos;
    SSL *s;

    if (size < 3 || size > 65536 + 3)
        return 0;
    mode = data[0] & 3;
    pos = (unsigned)data[1] | (unsigned)data[2] << 8;
    data += 3;
    size -= 3;
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    /* a small buffer: partial writes and -EAGAIN on both sides */
    (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    s = stor_tls_conn_new(g_tls, sv[0]);
    CHECK(s != NULL);
    switch (mode) {
    case 0:
        run_raw(s, sv[1], data, size);
        break;
    case 1:
        run_client(s, sv[1], data, size, -1);
        break;
    case 2:
        run_client(s, sv[1], data, size, (long)pos);
        break;
    default:
        if (size > 0)
            run_send(s, sv[1], data, size, pos);
        break;
    }
    stor_tls_conn_free(s, 1);
    close(sv[0]);
    close(sv[1]);
    return 0;
}

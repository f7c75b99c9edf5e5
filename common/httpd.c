/* common/httpd.c - the side-endpoint HTTP server (see httpd.h).
 *
 * DESIGN: deliberately simple and separate from storaged's event loops: it
 * serves a scrape every few seconds or a person's browser, so one thread
 * that handles one connection at a time, with socket timeouts, is enough,
 * and a slow or hostile client can delay other scrapes by at most
 * CM_HTTPD_IO_MS, never a storage request. poll() on the listener and a
 * stop pipe lets cm_httpd_stop end it at once. */
#include "common/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/codec.h"
#include "common/log.h"
#include "common/sigv4.h"

#define BODY_LIMIT (64u << 20)

struct cm_httpd {
    int lfd;
    int stop_pipe[2];
    int port;
    char *name; /* owned */
    cm_httpd_handler *h;
    void *arg;
    pthread_t tid;
};

/* See header. */
int cm_hostport_parse(const char *a, char *host, size_t hcap, int *port)
{
    const char *colon;
    char *end;
    long p;
    size_t hl;

    if (a[0] == '[') {
        const char *rb = strchr(a, ']');

        if (rb == NULL || rb[1] != ':')
            return -EINVAL;
        hl = (size_t)(rb - a - 1);
        if (hl >= hcap)
            return -EINVAL;
        memcpy(host, a + 1, hl);
        host[hl] = 0;
        colon = rb + 1;
    } else {
        colon = strrchr(a, ':');
        if (colon == NULL)
            return -EINVAL;
        hl = (size_t)(colon - a);
        if (hl >= hcap)
            return -EINVAL;
        memcpy(host, a, hl);
        host[hl] = 0;
    }
    if (host[0] == 0)
        snprintf(host, hcap, "0.0.0.0");
    errno = 0;
    p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
        return -EINVAL;
    *port = (int)p;
    return 0;
}

/* See header. */
int cm_httpd_parse_head(char *buf, size_t len, struct cm_httpd_req *rq)
{
    char *s = buf, *end = buf + len, *eol, *sp, *q;

    memset(rq, 0, sizeof(*rq));
    eol = memchr(s, '\n', len);
    if (eol == NULL)
        return -EBADMSG;
    *eol = 0;
    if (eol > s && eol[-1] == '\r')
        eol[-1] = 0;
    sp = strchr(s, ' ');
    if (sp == NULL || sp == s)
        return -EBADMSG;
    *sp = 0;
    rq->method = s;
    s = sp + 1;
    sp = strchr(s, ' ');
    if (sp == NULL || *s != '/' || strncmp(sp + 1, "HTTP/1.", 7) != 0)
        return -EBADMSG;
    *sp = 0;
    rq->path = s;
    q = strchr(s, '?');
    rq->query = "";
    if (q) {
        *q = 0;
        rq->query = q + 1;
    }
    s = eol + 1;
    while (s < end) {
        char *colon, *v;

        eol = memchr(s, '\n', (size_t)(end - s));
        if (eol == NULL)
            eol = end - 1;
        *eol = 0;
        if (eol > s && eol[-1] == '\r')
            eol[-1] = 0;
        if (*s == 0)
            break;
        colon = strchr(s, ':');
        if (colon == NULL || colon == s)
            return -EBADMSG;
        *colon = 0;
        v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if (strcasecmp(s, "Authorization") == 0)
            rq->authorization = v;
        s = eol + 1;
    }
    return 0;
}

/* See header. */
int cm_httpd_basic_decode(const char *authorization, char *user, char *pass,
                          size_t cap)
{
    char got[512], *colon;
    size_t n, ul;
    long dl;

    if (authorization == NULL || strncasecmp(authorization, "Basic ", 6) != 0)
        return -EINVAL;
    authorization += 6;
    while (*authorization == ' ')
        authorization++;
    n = strlen(authorization);
    while (n && authorization[n - 1] == ' ')
        n--;
    if (n == 0 || n > CM_BASE64_LEN(sizeof(got) - 3))
        return -EINVAL;
    dl = cm_base64_decode(authorization, n, (uint8_t *)got);
    if (dl < 0)
        return -EINVAL;
    got[dl] = 0;
    colon = memchr(got, ':', (size_t)dl);
    if (colon == NULL)
        return -EINVAL;
    ul = (size_t)(colon - got);
    if (ul >= cap || (size_t)dl - ul - 1 >= cap)
        return -EINVAL;
    memcpy(user, got, ul);
    user[ul] = 0;
    memcpy(pass, colon + 1, (size_t)dl - ul - 1);
    pass[(size_t)dl - ul - 1] = 0;
    return 0;
}

/* See header. */
bool cm_httpd_basic_ok(const char *authorization, const char *user,
                       const char *pass)
{
    char u[512], p[512];
    size_t pl = strlen(pass);

    if (cm_httpd_basic_decode(authorization, u, p, sizeof(u)) < 0 ||
        strcmp(u, user) != 0 || strlen(p) != pl)
        return false;
    return cm_sigv4_equal(p, pass, pl);
}

/* Writes all of @p; false on error or timeout. */
static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static const char *reason(int st)
{
    switch (st) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 431:
        return "Request Header Fields Too Large";
    default:
        return st < 500 ? "Error" : "Internal Server Error";
    }
}

/* Sends one response and its body (none for HEAD). */
static void respond(int fd, struct cm_httpd_resp *rs, bool head)
{
    char hdr[1024];
    int n;

    if (rs->status == 0)
        rs->status = 500;
    n = snprintf(hdr, sizeof(hdr),
                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
                 "Content-Length: %zu\r\nCache-Control: no-store\r\n"
                 "%sConnection: close\r\n\r\n",
                 rs->status, reason(rs->status),
                 rs->content_type ? rs->content_type
                                  : "text/plain; charset=utf-8",
                 rs->body.len, rs->extra_headers ? rs->extra_headers : "");
    if (n < 0 || (size_t)n >= sizeof(hdr))
        return;
    if (write_all(fd, hdr, (size_t)n) && !head && rs->body.len)
        (void)write_all(fd, rs->body.data, rs->body.len);
}

/* Reads a request head (up to the blank line) into @buf; its length, 0 on
 * EOF/timeout/error, or -E2BIG when it does not fit. */
static ssize_t read_head(int fd, char *buf, size_t cap)
{
    size_t got = 0;

    while (got < cap - 1) {
        ssize_t r = recv(fd, buf + got, cap - 1 - got, 0);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        got += (size_t)r;
        buf[got] = 0;
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return (ssize_t)got;
    }
    return -E2BIG;
}

/* Serves one connection. */
static void serve_conn(struct cm_httpd *s, int fd)
{
    struct timeval tv = {CM_HTTPD_IO_MS / 1000, (CM_HTTPD_IO_MS % 1000) * 1000};
    char *buf = malloc(CM_HTTPD_HEAD_MAX);
    struct cm_httpd_resp rs = {0};
    struct cm_httpd_req rq;
    ssize_t n;
    bool head = false;

    cm_buf_init(&rs.body, BODY_LIMIT);
    if (buf == NULL)
        return;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    n = read_head(fd, buf, CM_HTTPD_HEAD_MAX);
    if (n == 0)
        goto out;
    if (n < 0) {
        rs.status = 431;
    } else if (cm_httpd_parse_head(buf, (size_t)n, &rq) < 0) {
        rs.status = 400;
    } else if (strcmp(rq.method, "GET") != 0 &&
               strcmp(rq.method, "HEAD") != 0) {
        rs.status = 405;
        rs.extra_headers = "Allow: GET, HEAD\r\n";
    } else {
        head = strcmp(rq.method, "HEAD") == 0;
        s->h(s->arg, &rq, &rs);
    }
    if (rs.status >= 400 && rs.body.len == 0 &&
        cm_buf_appendf(&rs.body, "%d %s\n", rs.status, reason(rs.status)) < 0)
        cm_buf_fini(&rs.body);
    respond(fd, &rs, head);
out:
    cm_buf_fini(&rs.body);
    free(buf);
}

static void *httpd_main(void *arg)
{
    struct cm_httpd *s = arg;
    struct pollfd pf[2] = {{.fd = s->lfd, .events = POLLIN},
                           {.fd = s->stop_pipe[0], .events = POLLIN}};

    for (;;) {
        int fd;

        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            cm_log(CM_LOG_ERROR, errno, "%s: poll failed; stopping", s->name);
            return NULL;
        }
        if (pf[1].revents)
            return NULL;
        fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue; /* EAGAIN, ECONNABORTED, EMFILE: try again later */
        serve_conn(s, fd);
        close(fd);
    }
}

/* Binds and listens on @host:@port; the socket, or -errno. */
static int listen_socket(const char *host, int port, int *bound)
{
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICHOST,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char ps[16];
    int fd, one = 1, ret;

    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) != 0)
        return -EINVAL;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ret = -errno;
        freeaddrinfo(ai);
        return ret;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        ret = -errno;
        close(fd);
        freeaddrinfo(ai);
        return ret;
    }
    freeaddrinfo(ai);
    *bound =
        ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                       : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* See header. */
int cm_httpd_start(const char *addr, const char *name, cm_httpd_handler *h,
                   void *arg, struct cm_httpd **out, char **err)
{
    struct cm_httpd *s;
    char host[256], msg[512];
    int port, ret;

    *out = NULL;
    *err = NULL;
    if (cm_hostport_parse(addr, host, sizeof(host), &port) < 0)
        return -EINVAL;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    s->h = h;
    s->arg = arg;
    s->name = strdup(name);
    ret = s->name ? listen_socket(host, port, &s->port) : -ENOMEM;
    if (ret < 0)
        goto out_free;
    s->lfd = ret;
    if (pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
        ret = -errno;
        goto out_close;
    }
    ret = -pthread_create(&s->tid, NULL, httpd_main, s);
    if (ret < 0)
        goto out_close;
    *out = s;
    return 0;

out_close:
    close(s->lfd);
    if (s->stop_pipe[0] >= 0) {
        close(s->stop_pipe[0]);
        close(s->stop_pipe[1]);
    }
out_free:
    if (ret != -EINVAL && ret != -ENOMEM) {
        snprintf(msg, sizeof(msg), "%s: cannot listen on %s: %s", name, addr,
                 strerror(-ret));
        *err = strdup(msg);
    }
    free(s->name);
    free(s);
    return ret;
}

/* See header. */
int cm_httpd_port(const struct cm_httpd *s)
{
    return s->port;
}

/* See header. */
void cm_httpd_stop(struct cm_httpd *s)
{
    if (s == NULL)
        return;
    if (write(s->stop_pipe[1], "x", 1) < 0)
        cm_log(CM_LOG_WARN, errno, "%s: cannot signal stop", s->name);
    pthread_join(s->tid, NULL);
    close(s->lfd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    free(s->name);
    free(s);
}

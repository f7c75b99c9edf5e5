/* common/httpd.h - a tiny read-only HTTP/1.1 server on its own thread, for
 * side endpoints that must never touch a request path: ecfs's Prometheus
 * /metrics (-o metrics=) and storaged's status page (--console). One
 * connection at a time, GET and HEAD only, a request head of at most
 * CM_HTTPD_HEAD_MAX bytes read within CM_HTTPD_IO_MS, Connection: close
 * after every answer. The handler runs on the server's thread. */
#ifndef COMMON_HTTPD_H
#define COMMON_HTTPD_H
#include "common/buf.h"
#include "common/compiler.h"
#include <stdbool.h>
#include <stddef.h>

#define CM_HTTPD_HEAD_MAX 8192
#define CM_HTTPD_IO_MS    2000

/* A parsed request head; every string borrows the server's buffer and is
 * NUL-terminated. */
struct cm_httpd_req {
    const char *method;
    const char *path;          /* without the query */
    const char *query;         /* after '?', "" when none */
    const char *authorization; /* the Authorization header, or NULL */
};

/* What the handler fills in (body starts empty, limit 64 MiB). */
struct cm_httpd_resp {
    int status;                /* 0: 500 */
    const char *content_type;  /* static; NULL: text/plain */
    const char *extra_headers; /* static "Name: value\r\n" lines, or NULL */
    struct cm_buf body;
};

typedef void cm_httpd_handler(void *arg, const struct cm_httpd_req *rq,
                              struct cm_httpd_resp *rs);

struct cm_httpd;

/* Parses the request head in @buf (@len bytes ending with the blank line;
 * modified in place: NULs are written). 0, or -EBADMSG. */
CM_MUST_CHECK int cm_httpd_parse_head(char *buf, size_t len,
                                      struct cm_httpd_req *rq);

/* Splits "HOST:PORT", "[V6]:PORT" or ":PORT" (host "0.0.0.0") into @host
 * (@hcap bytes) and *@port (0..65535). 0 or -EINVAL. */
CM_MUST_CHECK int cm_hostport_parse(const char *a, char *host, size_t hcap,
                                    int *port);

/* Listens on @addr ("HOST:PORT"; port 0 picks one) and serves @h(@arg)
 * on a new thread named @name in logs. 0 and *out, or -EINVAL (bad
 * address), -errno of socket/bind/listen (with *@err set to a message the
 * caller frees), -ENOMEM. */
CM_MUST_CHECK int cm_httpd_start(const char *addr, const char *name,
                                 cm_httpd_handler *h, void *arg,
                                 struct cm_httpd **out, char **err);
/* The port it listens on. */
int cm_httpd_port(const struct cm_httpd *s);
/* Stops and joins the thread, closes the socket, frees @s (NULL: no-op). */
void cm_httpd_stop(struct cm_httpd *s);

/* Decodes HTTP Basic @authorization ("Basic base64(user:pass)") into @user
 * and @pass (NUL-terminated, @cap bytes each). 0, or -EINVAL when it is
 * not Basic, not base64, has no colon or does not fit. */
CM_MUST_CHECK int cm_httpd_basic_decode(const char *authorization, char *user,
                                        char *pass, size_t cap);
/* Whether @authorization (an Authorization header value or NULL) is HTTP
 * Basic for exactly @user / @pass (constant-time on the secret). */
bool cm_httpd_basic_ok(const char *authorization, const char *user,
                       const char *pass);

#endif /* COMMON_HTTPD_H */

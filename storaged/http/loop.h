/* storaged/http/loop.h - one epoll event loop per I/O thread, plus a
 * thread-safe completion queue (an eventfd) through which worker threads hand
 * finished jobs back to the loop that owns the connection. A loop and
 * everything registered on it are used only from the loop's own thread, except
 * stor_loop_post() and stor_loop_stop(). */
#ifndef STORAGED_HTTP_LOOP_H
#define STORAGED_HTTP_LOOP_H
#include "common/compiler.h"
#include <stdbool.h>
#include <stdint.h>

struct stor_loop;
struct stor_ev;

typedef void stor_ev_cb(struct stor_loop *l, struct stor_ev *io,
                        uint32_t events);

/* A registered file descriptor; embedded in its owner (a connection, the
 * listener). Owned by the caller; must stay alive while registered. */
struct stor_ev {
    int fd;
    uint32_t events; /* EPOLLIN/EPOLLOUT mask currently registered */
    stor_ev_cb *cb;
    void *arg;
};

/* A unit of work that leaves the loop and comes back: run() on a worker,
 * then done() on @loop's thread. Owned by whoever submits it. */
struct stor_job {
    void (*run)(struct stor_job *j);
    void (*done)(struct stor_job *j);
    struct stor_loop *loop;
    struct stor_job *next; /* queue link; protected by the queue's lock */
};

/* A callback the loop calls about once a second (timeouts). */
typedef void stor_tick_cb(struct stor_loop *l, void *arg);

/* NULL only on ENOMEM or when epoll/eventfd cannot be created. */
struct stor_loop *stor_loop_create(void);
void stor_loop_destroy(struct stor_loop *l);

CM_MUST_CHECK int stor_loop_add(struct stor_loop *l, struct stor_ev *io,
                                uint32_t events);
CM_MUST_CHECK int stor_loop_mod(struct stor_loop *l, struct stor_ev *io,
                                uint32_t events);
void stor_loop_del(struct stor_loop *l, struct stor_ev *io);

void stor_loop_set_tick(struct stor_loop *l, stor_tick_cb *cb, void *arg);
/* A callback the loop calls after each batch of events, when no event of
 * that batch is still to be dispatched (deferred frees go here). */
void stor_loop_set_after(struct stor_loop *l, stor_tick_cb *cb, void *arg);

/* Thread-safe: queues @j to have j->done() called on @l's thread. */
void stor_loop_post(struct stor_loop *l, struct stor_job *j);
/* Runs until stor_loop_stop(); returns 0. */
int stor_loop_run(struct stor_loop *l);
/* Thread-safe, async-signal-unsafe: asks the loop to return. */
void stor_loop_stop(struct stor_loop *l);
bool stor_loop_stopping(const struct stor_loop *l);

#endif /* STORAGED_HTTP_LOOP_H */

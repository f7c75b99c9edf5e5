/* storaged/http/pool.h - the worker thread pool that runs blocking work (object
 * layer calls: disk I/O, fsync, erasure coding) off the event loops. A job
 * is run once on some worker and then posted back to its loop
 * (struct stor_job in loop.h). */
#ifndef STORAGED_HTTP_POOL_H
#define STORAGED_HTTP_POOL_H
#include "common/compiler.h"
#include "storaged/http/loop.h"
#include <stddef.h>

struct stor_pool;

/* Starts @nthreads workers. 0 or -errno. */
CM_MUST_CHECK int stor_pool_create(size_t nthreads, struct stor_pool **out);
/* Queues @j: j->run() on a worker, then j->done() on j->loop. Borrows @j
 * until done() is called. Never fails. */
void stor_pool_submit(struct stor_pool *p, struct stor_job *j);
/* Jobs queued or running right now (for metrics). */
size_t stor_pool_busy(struct stor_pool *p);
/* Finishes the queued jobs, joins the workers and frees the pool. */
void stor_pool_destroy(struct stor_pool *p);

#endif /* STORAGED_HTTP_POOL_H */

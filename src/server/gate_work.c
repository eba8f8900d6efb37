/* gate_work.c: a request's way to a worker thread and back (gate.h, GATE_WORK). The worker runs
 * the handler's `work`, puts the request on its loop's completion list and wakes the loop, which
 * queues the answer if the connection is still the one that asked (gate.c). */
#include "gate_int.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

static void work_main(struct work_item *w)
{
    struct gate_req *rq = (struct gate_req *)((char *)w - offsetof(struct gate_req, work));
    struct gate *g = rq->gate;
    g->cfg.handler.work(g->cfg.handler.cls, rq);
    pthread_mutex_lock(&g->done_mu);
    rq->next = g->done_head;
    g->done_head = rq;
    pthread_mutex_unlock(&g->done_mu);
    uint64_t one = 1;
    (void)!write(g->done_fd, &one, sizeof one);
}

int gate_submit(struct gate *g, struct conn *c, struct gate_req *rq)
{
    rq->gate = g;
    rq->conn_index = (unsigned)(c - g->conns);
    rq->conn_gen = c->gen;
    rq->work.fn = work_main;
    if (workers_submit(g->cfg.workers, &rq->work) < 0)
        return -1;
    c->st = C_WORK;
    return 0;
}

#include "sendq.h"
#include "../common/log.h"

#include <stdlib.h>

void wm_sendq_init(struct wm_sendq *q, int window)
{
    *q = (struct wm_sendq){ .window = window };
}

void wm_sendq_free(struct wm_sendq *q)
{
    free(q->heap);
    q->heap = NULL;
    q->n = q->cap = 0;
}

static void swap(struct wm_sendq_item *a, struct wm_sendq_item *b)
{
    struct wm_sendq_item t = *a;
    *a = *b;
    *b = t;
}

static void push(struct wm_sendq *q, struct wm_sendq_item it)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        struct wm_sendq_item *heap = realloc(q->heap, (size_t)cap * sizeof *heap);
        if (!heap)
            wm_fatal("out of memory: %d waiting sends", cap);
        q->heap = heap;
        q->cap = cap;
    }
    int i = q->n++;
    q->heap[i] = it;
    for (; i > 0 && q->heap[(i - 1) / 2].prio > q->heap[i].prio; i = (i - 1) / 2)
        swap(&q->heap[(i - 1) / 2], &q->heap[i]);
}

static struct wm_sendq_item pop(struct wm_sendq *q)
{
    struct wm_sendq_item top = q->heap[0];
    q->heap[0] = q->heap[--q->n];
    for (int i = 0;;) {
        int l = 2 * i + 1, m = i;
        if (l < q->n && q->heap[l].prio < q->heap[m].prio)
            m = l;
        if (l + 1 < q->n && q->heap[l + 1].prio < q->heap[m].prio)
            m = l + 1;
        if (m == i)
            break;
        swap(&q->heap[i], &q->heap[m]);
        i = m;
    }
    return top;
}

static int on_sent(struct wm_sched *s, void *arg, long item);

/* Hands waiting sends to the MPI library while the window has room. */
static int drain(struct wm_sched *s, struct wm_sendq *q)
{
    while (q->n > 0 && q->inflight < q->window && s->err == MPI_SUCCESS) {
        struct wm_sendq_item it = pop(q);
        q->inflight++;
        wm_sched_send(s, it.buf, it.count, it.type, it.dest, it.tag, on_sent, q, 0);
    }
    return s->err;
}

static int on_sent(struct wm_sched *s, void *arg, long item)
{
    (void)item;
    struct wm_sendq *q = arg;
    q->inflight--;
    return drain(s, q);
}

int wm_sendq_send(struct wm_sched *s, struct wm_sendq *q, const void *buf, int count, MPI_Datatype type,
                  int dest, int tag, long prio)
{
    if (q->window <= 0)
        return wm_sched_send(s, buf, count, type, dest, tag, NULL, NULL, 0);
    push(q, (struct wm_sendq_item){ buf, count, dest, tag, type, prio });
    return drain(s, q);
}

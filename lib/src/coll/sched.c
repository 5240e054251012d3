#include "sched.h"
#include "stats.h"
#include "../common/log.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

void (*wm_sched_idle)(void);

void wm_sched_init(struct wm_sched *s, const struct wm_comm *wc, int tag_base)
{
    memset(s, 0, sizeof *s);
    s->wc = wc;
    s->comm = wc->shadow;
    s->tag_base = tag_base;
    s->err = MPI_SUCCESS;
}

void wm_sched_at_end(struct wm_sched *s, wm_end_hook end, void *state)
{
    s->end = end;
    s->end_state = state;
}

int wm_sched_fail(struct wm_sched *s, int rc)
{
    if (rc != MPI_SUCCESS && s->err == MPI_SUCCESS)
        s->err = rc;
    return rc;
}

static int grow(struct wm_sched *s)
{
    if (s->n < s->cap)
        return 1;
    int cap = s->cap ? 2 * s->cap : 64;
    MPI_Request *req = realloc(s->req, (size_t)cap * sizeof *req);
    if (req)
        s->req = req;
    struct wm_pending *pending = realloc(s->pending, (size_t)cap * sizeof *pending);
    if (pending)
        s->pending = pending;
    int *done = realloc(s->done, (size_t)cap * sizeof *done);
    if (done)
        s->done = done;
    MPI_Status *status = realloc(s->status, (size_t)cap * sizeof *status);
    if (status)
        s->status = status;
    if (!req || !pending || !done || !status) {
        s->err = MPI_ERR_NO_MEM;
        return 0;
    }
    s->cap = cap;
    return 1;
}

static int add(struct wm_sched *s, int rc, wm_handler fn, void *arg, long item)
{
    if (rc != MPI_SUCCESS) {
        s->err = rc;
        return rc;
    }
    s->pending[s->n] = (struct wm_pending){ fn, arg, item };
    s->n++;
    s->active++;
    return MPI_SUCCESS;
}

int wm_sched_send(struct wm_sched *s, const void *buf, int count, MPI_Datatype type, int dest,
                  int tag, wm_handler fn, void *arg, long item)
{
    if (s->err != MPI_SUCCESS || !grow(s))
        return s->err;
    if (WM_DEBUG_ON(2))
        wm_debug(2, "send tag %d count %d to %d", tag, count, dest);
    wm_stats_sent(s->wc, dest, count, type);
    return add(s, PMPI_Isend(buf, count, type, dest, s->tag_base + tag, s->comm, &s->req[s->n]), fn, arg,
               item);
}

int wm_sched_adopt(struct wm_sched *s, MPI_Request request)
{
    if (s->err != MPI_SUCCESS || !grow(s))
        return s->err;
    s->req[s->n] = request;
    return add(s, MPI_SUCCESS, NULL, NULL, 0);
}

int wm_sched_recv(struct wm_sched *s, void *buf, int count, MPI_Datatype type, int source,
                  int tag, wm_handler fn, void *arg, long item)
{
    if (s->err != MPI_SUCCESS || !grow(s))
        return s->err;
    if (WM_DEBUG_ON(2))
        wm_debug(2, "recv tag %d count %d from %d", tag, count, source);
    return add(s, PMPI_Irecv(buf, count, type, source, s->tag_base + tag, s->comm, &s->req[s->n]), fn, arg,
               item);
}

/* Drops completed entries once they are the majority, so MPI_Testsome does
 * not scan a long tail of finished requests. */
static void compact(struct wm_sched *s)
{
    if (s->active * 2 > s->n || s->n < 64)
        return;
    int j = 0;
    for (int i = 0; i < s->n; i++)
        if (s->req[i] != MPI_REQUEST_NULL) {
            s->req[j] = s->req[i];
            s->pending[j] = s->pending[i];
            j++;
        }
    s->n = j;
}

/* Runs the handlers of the `outcount` operations MPI_Testsome reported. */
static void run_handlers(struct wm_sched *s, int outcount)
{
    s->active -= outcount;
    /* Handlers may post (and so move the arrays): copy what they need first. */
    struct wm_pending local[64];
    MPI_Status status[64];
    for (int first = 0; first < outcount; first += 64) {
        int m = outcount - first < 64 ? outcount - first : 64;
        for (int i = 0; i < m; i++) {
            local[i] = s->pending[s->done[first + i]];
            status[i] = s->status[first + i];
        }
        for (int i = 0; i < m; i++)
            if (local[i].fn && s->err == MPI_SUCCESS) {
                s->current = &status[i];
                wm_sched_fail(s, local[i].fn(s, local[i].arg, local[i].item));
            }
    }
    s->current = NULL;
}

const MPI_Status *wm_sched_status(const struct wm_sched *s)
{
    return s->current;
}

int wm_sched_step(struct wm_sched *s)
{
    s->completed = 0;
    if (s->active == 0 || s->err != MPI_SUCCESS)
        return 1;
    int outcount;
    /* MPI_Testsome and a yield (wm_sched_run) rather than MPI_Waitsome:
     * MPICH 5's MPI_Waitsome (and Waitany, Testsome, Test) loops never yield
     * the CPU while its MPI_Wait does, so with more ranks than cores every
     * step waited for a time slice (8 ranks on 2 cores, each exchanging 8
     * bytes with all: 16.5 ms against 0.9 ms; docs/benchmarks.md). */
    int rc = PMPI_Testsome(s->n, s->req, &outcount, s->done, s->status);
    if (rc != MPI_SUCCESS)
        return wm_sched_fail(s, rc), 1;
    if (outcount == MPI_UNDEFINED)
        return 1;
    s->completed = outcount;
    if (outcount > 0) {
        run_handlers(s, outcount);
        compact(s);
    }
    return s->active == 0 || s->err != MPI_SUCCESS;
}

int wm_sched_end(struct wm_sched *s)
{
    int rc = s->err;
    free(s->req);
    free(s->pending);
    free(s->done);
    free(s->status);
    s->req = NULL;
    s->pending = NULL;
    s->done = NULL;
    s->status = NULL;
    s->n = s->cap = s->active = 0;
    if (s->end) {
        wm_end_hook end = s->end;
        s->end = NULL;
        rc = end(s->end_state, rc);
    }
    return rc;
}

int wm_sched_run(struct wm_sched *s)
{
    while (!wm_sched_step(s))
        if (s->completed == 0) {
            if (wm_sched_idle)
                wm_sched_idle();
            sched_yield();
        }
    return wm_sched_end(s);
}

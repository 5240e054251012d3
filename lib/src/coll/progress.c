/* Where the outstanding nonblocking collectives of ours advance: inside the
 * MPI's completion calls (MPI_Wait, Test, Waitall, ...) and its blocking
 * point-to-point calls, as Open MPI's libNBC advances inside every MPI call.
 * A rank blocked in MPI_Recv may be the one that must forward a piece to
 * another rank's MPI_Wait; so while anything of ours is outstanding, a
 * blocking call becomes its nonblocking form and a loop that advances ours
 * and tests it, yielding the CPU between tests (2 cores, 8 ranks: never
 * spin). With nothing outstanding every call goes to the MPI directly.
 *
 * Not covered: a rank blocked in another MPI call (a collective we do not
 * wrap, MPI-IO) does not advance ours meanwhile; WANMPI_PROGRESS=thread
 * covers that too (nb.c).
 *
 * MPI_Request_free and MPI_Cancel of an active nonblocking collective are
 * erroneous (MPI-4.1, 6.12): both are refused with MPI_ERR_REQUEST through
 * the communicator's error handler, and the request stays valid. */
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>

#include "nb.h"
#include "persistent.h"
#include "../common/log.h"

/* ---- the requests the MPI sees: a persistent collective of ours stands
 * for its current round's request (persistent.h) ---- */

struct view {
    MPI_Request local[8];
    MPI_Request *heap;
};

static MPI_Request *view_of(struct view *v, int n, MPI_Request *reqs)
{
    if (!wm_persist_any() || n <= 0)
        return reqs;
    MPI_Request *m = v->local;
    v->heap = NULL;
    if (n > 8 && !(m = v->heap = malloc(sizeof *m * (size_t)n)))
        wm_fatal("out of memory (%d requests)", n);
    wm_persist_map(n, reqs, m);
    return m;
}

static void view_done(struct view *v, int n, MPI_Request *reqs, MPI_Request *m)
{
    if (m == reqs)
        return;
    wm_persist_unmap(n, reqs, m);
    free(v->heap);
}

/* While anything of ours is outstanding: advance it, then `test` (a call
 * that sets `flag`), yielding between tries, until `flag` or an error; once
 * nothing is outstanding, the MPI's blocking `wait`. Returns from the
 * function it is in. */
#define POLL(flag, test, wait)                                                        \
    do {                                                                              \
        while (wm_nb_pending()) {                                                     \
            int flag = 0;                                                             \
            wm_nb_progress();                                                         \
            int rc_ = test;                                                           \
            if (rc_ != MPI_SUCCESS || flag)                                           \
                return rc_;                                                           \
            sched_yield();                                                            \
        }                                                                             \
        return wait;                                                                  \
    } while (0)

static int wait_one(MPI_Request *request, MPI_Status *status)
{
    POLL(flag, PMPI_Test(request, &flag, status), PMPI_Wait(request, status));
}

/* Whether every request is complete, completing none (MPI_Request_get_status
 * makes progress). Not MPI_Testall: MPICH 5.0.2's returns MPI_ERR_IN_STATUS
 * when one of its own persistent collective requests (MPI_Bcast_init ...)
 * completes, every status saying MPI_SUCCESS; its MPI_Test, Testany,
 * Testsome and the Wait calls do not (measured: tests/programs/persistcheck,
 * docs/nonblocking.md). */
#ifndef OPEN_MPI
static int all_complete(int count, const MPI_Request requests[], int *flag)
{
    *flag = 1;
    for (int i = 0; i < count && *flag; i++) {
        int rc = requests[i] == MPI_REQUEST_NULL ? MPI_SUCCESS
                                                 : PMPI_Request_get_status(requests[i], flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}
#endif

/* MPI_Testall: the MPI's own, but under MPICH (all_complete) MPI_Waitall
 * once every request is complete, which then returns at once. */
static int testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
#ifdef OPEN_MPI
    return PMPI_Testall(count, requests, flag, statuses);
#else
    int rc = all_complete(count, requests, flag);
    return rc != MPI_SUCCESS || !*flag ? rc : PMPI_Waitall(count, requests, statuses);
#endif
}

static int waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    POLL(flag, testall(count, requests, &flag, statuses), PMPI_Waitall(count, requests, statuses));
}

static int waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    POLL(flag, PMPI_Testany(count, requests, index, &flag, status), PMPI_Waitany(count, requests, index, status));
}

static int waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    while (wm_nb_pending()) {
        wm_nb_progress();
        int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        if (rc != MPI_SUCCESS || *outcount != 0)
            return rc;
        sched_yield();
    }
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

/* Each completion call: advance ours, then the MPI's call on the mapped requests. */
#define ON_VIEW(n, reqs, call)                                                        \
    do {                                                                              \
        struct view v_;                                                               \
        MPI_Request *m_ = view_of(&v_, n, reqs);                                      \
        int rc_ = call;                                                               \
        view_done(&v_, n, reqs, m_);                                                  \
        return rc_;                                                                   \
    } while (0)

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    ON_VIEW(1, request, wait_one(m_, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    ON_VIEW(count, requests, waitall(count, m_, statuses));
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    ON_VIEW(count, requests, waitany(count, m_, index, status));
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    ON_VIEW(incount, requests, waitsome(incount, m_, outcount, indices, statuses));
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    wm_nb_progress();
    ON_VIEW(1, request, PMPI_Test(m_, flag, status));
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    wm_nb_progress();
    ON_VIEW(count, requests, testall(count, m_, flag, statuses));
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    wm_nb_progress();
    ON_VIEW(count, requests, PMPI_Testany(count, m_, index, flag, status));
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[], MPI_Status statuses[])
{
    wm_nb_progress();
    ON_VIEW(incount, requests, PMPI_Testsome(incount, m_, outcount, indices, statuses));
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    wm_nb_progress();
    MPI_Request m = request;
    if (wm_persist_any())
        wm_persist_map(1, &request, &m);
    return PMPI_Request_get_status(m, flag, status);
}

/* ---- erroneous calls on an active nonblocking collective ---- */

static int refuse(MPI_Comm comm, const char *call)
{
    wm_warn("%s on an active nonblocking collective: erroneous (MPI-4.1, section 6.12); "
            "the request stays valid, complete it with MPI_Wait or MPI_Test", call);
    PMPI_Comm_call_errhandler(comm, MPI_ERR_REQUEST);
    return MPI_ERR_REQUEST;
}

int MPI_Request_free(MPI_Request *request)
{
    int rc;
    if (request && wm_persist_any() && wm_persist_free(request, &rc))
        return rc;
    MPI_Comm comm = request ? wm_nb_owner(*request) : MPI_COMM_NULL;
    return comm != MPI_COMM_NULL ? refuse(comm, "MPI_Request_free") : PMPI_Request_free(request);
}

int MPI_Cancel(MPI_Request *request)
{
    MPI_Request m = request ? *request : MPI_REQUEST_NULL;
    if (request && wm_persist_any())
        wm_persist_map(1, request, &m);     /* a persistent collective's round */
    MPI_Comm comm = wm_nb_owner(m);
    return comm != MPI_COMM_NULL ? refuse(comm, "MPI_Cancel") : PMPI_Cancel(request);
}

/* ---- blocking point-to-point: their nonblocking form while ours run ---- */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (!wm_nb_pending())
        return PMPI_Send(buf, count, type, dest, tag, comm);
    MPI_Request r;
    int rc = PMPI_Isend(buf, count, type, dest, tag, comm, &r);
    return rc != MPI_SUCCESS ? rc : wait_one(&r, MPI_STATUS_IGNORE);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    if (!wm_nb_pending())
        return PMPI_Ssend(buf, count, type, dest, tag, comm);
    MPI_Request r;
    int rc = PMPI_Issend(buf, count, type, dest, tag, comm, &r);
    return rc != MPI_SUCCESS ? rc : wait_one(&r, MPI_STATUS_IGNORE);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (!wm_nb_pending())
        return PMPI_Recv(buf, count, type, source, tag, comm, status);
    MPI_Request r;
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
    return rc != MPI_SUCCESS ? rc : wait_one(&r, status);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                 MPI_Status *status)
{
    if (!wm_nb_pending())
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                             recvtag, comm, status);
    MPI_Request r[2];
    int rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &r[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    if ((rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r[1])) != MPI_SUCCESS) {
        PMPI_Cancel(&r[0]);
        PMPI_Request_free(&r[0]);
        return rc;
    }
    rc = wait_one(&r[1], MPI_STATUS_IGNORE);
    int rrc = wait_one(&r[0], status);
    return rc != MPI_SUCCESS ? rc : rrc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    POLL(flag, PMPI_Iprobe(source, tag, comm, &flag, status), PMPI_Probe(source, tag, comm, status));
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    POLL(flag, PMPI_Improbe(source, tag, comm, &flag, message, status),
         PMPI_Mprobe(source, tag, comm, message, status));
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status)
{
    if (!wm_nb_pending())
        return PMPI_Mrecv(buf, count, type, message, status);
    MPI_Request r;
    int rc = PMPI_Imrecv(buf, count, type, message, &r);
    return rc != MPI_SUCCESS ? rc : wait_one(&r, status);
}

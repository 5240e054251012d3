/* Persistent collectives (persistent.h). The init chooses, through the
 * nonblocking entry point with wm_persist_call set (entry.h): where the MPI's
 * own algorithm runs, the user gets the MPI's own persistent request
 * (MPI_<coll>_init) and we keep nothing; where ours runs, it keeps its
 * arguments, the algorithm and a tag slot of its own, and each MPI_Start
 * runs that nonblocking schedule in that slot and remembers the round's
 * request. Inits come in the same order on every rank, starts need not
 * (MPI-4.1, 6.13): so nothing a start does depends on the order of starts.
 * Under an MPI whose persistent collectives are broken (which_mpi.h)
 * the MPI's own choice is kept the same way, each start calling the MPI's
 * nonblocking collective on a duplicate of the communicator made at the
 * init (persistent_mpi.c). */
#include "persistent.h"
#include "entry.h"
#include "wanmpi_internal.h"
#include "../common/log.h"

#include <pthread.h>
#include <stdlib.h>

struct wm_persist {
    MPI_Request handle;         /* what the user holds */
    MPI_Request round;          /* the current round's request; MPI_REQUEST_NULL: inactive */
    struct wm_persist_args a;
    struct wm_persist_call call;    /* the algorithm and tag slot of every round */
    MPI_Comm own;               /* the MPI's own kept by us (call.emulated): its duplicate, else NULL */
    struct wm_persist *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct wm_persist *list;
static int count;

int wm_persist_any(void)
{
    return __atomic_load_n(&count, __ATOMIC_RELAXED) > 0;
}

/* Under the lock. */
static struct wm_persist *find(MPI_Request handle)
{
    if (handle == MPI_REQUEST_NULL)
        return NULL;
    for (struct wm_persist *p = list; p; p = p->next)
        if (p->handle == handle)
            return p;
    return NULL;
}

void wm_persist_map(int n, const MPI_Request *reqs, MPI_Request *mapped)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n; i++) {
        struct wm_persist *p = find(reqs[i]);
        mapped[i] = p ? p->round : reqs[i];
    }
    pthread_mutex_unlock(&lock);
}

void wm_persist_unmap(int n, MPI_Request *reqs, const MPI_Request *mapped)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n; i++) {
        struct wm_persist *p = find(reqs[i]);
        if (p)
            p->round = mapped[i];       /* MPI_REQUEST_NULL once the round completed: inactive */
        else
            reqs[i] = mapped[i];
    }
    pthread_mutex_unlock(&lock);
}

static int entry_point(const struct wm_persist_args *a, MPI_Request *round)
{
    switch (a->kind) {
    case WM_P_BCAST: return wm_ibcast(a->recvbuf, a->recvcount, a->recvtype, a->root, a->comm, round);
    case WM_P_ALLREDUCE:
        return wm_iallreduce(a->sendbuf, a->recvbuf, a->recvcount, a->recvtype, a->op, a->comm, round);
    case WM_P_REDUCE:
        return wm_ireduce(a->sendbuf, a->recvbuf, a->recvcount, a->recvtype, a->op, a->root, a->comm, round);
    case WM_P_REDUCE_SCATTER_BLOCK:
        return wm_ireduce_scatter_block(a->sendbuf, a->recvbuf, a->recvcount, a->recvtype, a->op, a->comm, round);
    case WM_P_REDUCE_SCATTER:
        return wm_ireduce_scatter(a->sendbuf, a->recvbuf, a->recvcounts, a->recvtype, a->op, a->comm, round);
    case WM_P_ALLGATHER:
        return wm_iallgather(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype, a->comm,
                             round);
    case WM_P_ALLGATHERV:
        return wm_iallgatherv(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcounts, a->rdispls,
                              a->recvtype, a->comm, round);
    case WM_P_ALLTOALL:
        return wm_ialltoall(a->sendbuf, a->sendcount, a->sendtype, a->recvbuf, a->recvcount, a->recvtype, a->comm,
                            round);
    case WM_P_ALLTOALLV:
        return wm_ialltoallv(a->sendbuf, a->sendcounts, a->sdispls, a->sendtype, a->recvbuf, a->recvcounts,
                             a->rdispls, a->recvtype, a->comm, round);
    case WM_P_ALLTOALLW:
        return wm_ialltoallw(a->sendbuf, a->sendcounts, a->sdispls, a->sendtypes, a->recvbuf, a->recvcounts,
                             a->rdispls, a->recvtypes, a->comm, round);
    }
    return MPI_ERR_INTERN;
}

/* The nonblocking entry point of the kind, as `call` says (entry.h). */
static int nonblocking(const struct wm_persist_args *a, struct wm_persist_call *call, MPI_Request *round)
{
    wm_persist_call = call;
    int rc = entry_point(a, round);
    wm_persist_call = NULL;
    return rc;
}

static int refuse(MPI_Comm comm, const char *what)
{
    wm_warn("%s: erroneous (MPI-4.1, section 6.13); the request is unchanged", what);
    PMPI_Comm_call_errhandler(comm, MPI_ERR_REQUEST);
    return MPI_ERR_REQUEST;
}

int wm_persist_start(MPI_Request *request, int *rc)
{
    pthread_mutex_lock(&lock);
    struct wm_persist *p = find(*request);
    int active = p && p->round != MPI_REQUEST_NULL;
    pthread_mutex_unlock(&lock);
    if (!p)
        return 0;
    if (active) {
        *rc = refuse(p->a.comm, "MPI_Start of a persistent collective that is still active");
        return 1;
    }
    MPI_Request round = MPI_REQUEST_NULL;
    if (p->own != MPI_COMM_NULL) {
        *rc = wm_persist_mpi_start(&p->a, p->own, &round);
        pthread_mutex_lock(&lock);
        p->round = round;
        pthread_mutex_unlock(&lock);
        return 1;
    }
    struct wm_comm *wc = wm_comm_cached(p->a.comm);
    if (!wc || !wc->connected) {        /* libwanmpi let go of it at MPI_Comm_free */
        wm_warn("MPI_Start of a persistent collective of libwanmpi after MPI_Comm_free of its communicator: "
                "not supported (free the request first)");
        PMPI_Comm_call_errhandler(p->a.comm, MPI_ERR_COMM);
        *rc = MPI_ERR_COMM;
        return 1;
    }
    struct wm_persist_call call = p->call;
    *rc = nonblocking(&p->a, &call, &round);
    pthread_mutex_lock(&lock);
    p->round = round;
    pthread_mutex_unlock(&lock);
    return 1;
}

int wm_persist_free(MPI_Request *request, int *rc)
{
    pthread_mutex_lock(&lock);
    struct wm_persist **at = &list;
    while (*at && (*at)->handle != *request)
        at = &(*at)->next;
    struct wm_persist *p = *at;
    if (p && p->round == MPI_REQUEST_NULL) {
        *at = p->next;
        count--;
    }
    pthread_mutex_unlock(&lock);
    if (!p)
        return 0;
    if (p->round != MPI_REQUEST_NULL) {
        *rc = refuse(p->a.comm, "MPI_Request_free of an active persistent collective");
        return 1;
    }
    *rc = PMPI_Request_free(request);
    if (p->own != MPI_COMM_NULL)
        PMPI_Comm_free(&p->own);
    free(p->a.owned);
    free(p);
    return 1;
}

int wm_persist_init(const struct wm_persist_args *a, MPI_Request *request)
{
    if (!request) {
        free(a->owned);
        PMPI_Comm_call_errhandler(a->comm, MPI_ERR_ARG);
        return MPI_ERR_ARG;
    }
    struct wm_persist_call call = { .phase = WM_PERSIST_INIT, .info = a->info, .alg = WM_ALG_MPI, .slot = -1 };
    int rc = nonblocking(a, &call, request);
    if (rc != MPI_SUCCESS || (call.alg == WM_ALG_MPI && !call.emulated)) {
        free(a->owned);                 /* the MPI's own has built its schedule */
        return rc;                      /* the MPI's own persistent request, or its error */
    }
    struct wm_persist *p = calloc(1, sizeof *p);
    if (!p)
        wm_fatal("out of memory (persistent collective)");
    p->a = *a;
    p->call = call;
    p->call.phase = WM_PERSIST_START;
    p->round = MPI_REQUEST_NULL;
    p->own = MPI_COMM_NULL;
    if (call.emulated && (rc = PMPI_Comm_dup(a->comm, &p->own)) != MPI_SUCCESS) {
        free(a->owned);
        free(p);
        return rc;
    }
    /* Not a send to MPI_PROC_NULL: Intel MPI 2021.18.1 gives the slot of
     * such a request, once freed, to a later persistent collective of its
     * own, which then completes at once without running (docs/intelmpi.md) */
    rc = PMPI_Send_init(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_SELF, &p->handle);
    if (rc != MPI_SUCCESS) {
        if (p->own != MPI_COMM_NULL)
            PMPI_Comm_free(&p->own);
        free(a->owned);
        free(p);
        return rc;
    }
    *request = p->handle;
    pthread_mutex_lock(&lock);
    p->next = list;
    list = p;
    count++;
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

/* MPI_Init and MPI_Init_thread: the MPI starts, then what libwanmpi sets up
 * at once rather than at a first call:
 *   - the pacing attributes' keyvals (pacing/attr.c);
 *   - every rank's identity (identity.h: one allgather over
 *     MPI_COMM_WORLD), from which the map of every later communicator is
 *     read without a message;
 *   - MPI_COMM_WORLD's map and communicators (cluster.c), so that a program
 *     whose first collective is a nonblocking one gets ours: a nonblocking
 *     call must not make communicators, which waits for every rank (nb.h);
 *     the duplicate and the identities' allgather are in flight together;
 *   - with WANMPI_PROGRESS=thread, the MPI at MPI_THREAD_MULTIPLE (the
 *     progress thread calls MPI beside the program's threads; `provided`
 *     still says what the program asked for, or more) and the thread. */
#include <mpi.h>

#include "cluster.h"
#include "identity.h"
#include "nb.h"
#include "startup.h"
#include "../common/settings.h"
#include "../pacing/attr.h"

/* MPI_COMM_WORLD's identities and, where ours may run nonblocking calls,
 * its communicators. The duplicate and the identities' allgather each cost
 * WAN round trips (Open MPI agrees on a context id in several), so both are
 * posted before either is waited for: they cross the WAN together. */
static void prepare_world(const struct wm_settings *s)
{
    MPI_Comm shadow = MPI_COMM_NULL;
    MPI_Request dup = MPI_REQUEST_NULL;
    if (s->nonblocking_ours && PMPI_Comm_idup(MPI_COMM_WORLD, &shadow, &dup) != MPI_SUCCESS)
        shadow = MPI_COMM_NULL;     /* made later, by wm_comm_connect */
    wm_identity_world_start();
    int dup_rc = dup == MPI_REQUEST_NULL ? MPI_SUCCESS : PMPI_Wait(&dup, MPI_STATUS_IGNORE);
    if (dup_rc != MPI_SUCCESS)
        shadow = MPI_COMM_NULL;
    struct wm_comm *wc;
    if (wm_identity_world() == MPI_SUCCESS && s->nonblocking_ours
        && wm_comm_get(MPI_COMM_WORLD, &wc) == MPI_SUCCESS && !wc->flat)
        wm_comm_connect_dup(wc, shadow);
    else if (shadow != MPI_COMM_NULL)
        PMPI_Comm_free(&shadow);
}

void wm_started(void)
{
    const struct wm_settings *s = wm_settings();
    wm_attr_init();
    if (!s->disabled)
        prepare_world(s);
    wm_nb_thread_start();
}

int MPI_Init(int *argc, char ***argv)
{
    int provided, rc = wm_settings()->progress_thread
                           ? PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)
                           : PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        wm_started();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, wm_settings()->progress_thread ? MPI_THREAD_MULTIPLE : required,
                              provided);
    if (rc == MPI_SUCCESS)
        wm_started();
    return rc;
}

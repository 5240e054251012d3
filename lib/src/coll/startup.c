/* MPI_Init and MPI_Init_thread: the MPI starts, then what libwanmpi sets up
 * at once rather than at a first call:
 *   - the pacing attributes' keyvals (pacing/attr.c);
 *   - every rank's identity (identity.h: one allgather over
 *     MPI_COMM_WORLD), from which the map of every later communicator is
 *     read without a message;
 *   - MPI_COMM_WORLD's map and communicators (cluster.c), so that a program
 *     whose first collective is a nonblocking one gets ours: a nonblocking
 *     call must not make communicators, which waits for every rank (nb.h);
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

void wm_started(void)
{
    const struct wm_settings *s = wm_settings();
    wm_attr_init();
    struct wm_comm *wc;
    if (!s->disabled && wm_identity_world() == MPI_SUCCESS && s->nonblocking_ours
        && wm_comm_get(MPI_COMM_WORLD, &wc) == MPI_SUCCESS && !wc->flat)
        wm_comm_connect(wc);
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

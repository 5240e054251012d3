/* Whether a datatype may be used in communication: predefined, or derived
 * and committed (MPI-4.1, 5.1.9). An uncommitted datatype given to a
 * collective of ours would fail in the middle of a schedule, on the ranks
 * that post its messages, while their peers wait; such a call goes to the
 * MPI library instead, which reports it as it would without us
 * (MPI_ERR_TYPE).
 *
 * MPI has no query for it. Both MPIs refuse to pack with an uncommitted
 * datatype (Open MPI: OMPI_CHECK_DATATYPE_FOR_SEND; MPICH: its committed
 * check), so packing nothing answers, on a private duplicate of
 * MPI_COMM_SELF that returns errors (MPI_Pack raises them on its
 * communicator). Not cached: a freed handle may come back as another
 * type. */
#include "coll.h"

#include <pthread.h>

static MPI_Comm quiet = MPI_COMM_NULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static MPI_Comm quiet_self(void)
{
    pthread_mutex_lock(&lock);
    if (quiet == MPI_COMM_NULL && PMPI_Comm_dup(MPI_COMM_SELF, &quiet) == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(quiet, MPI_ERRORS_RETURN);
    MPI_Comm c = quiet;
    pthread_mutex_unlock(&lock);
    return c;
}

int wm_type_combiner(MPI_Datatype type, int *combiner, int *large)
{
    *large = 0;
    if (type == MPI_DATATYPE_NULL)
        return 0;
#if MPI_VERSION >= 4 && !defined(OPEN_MPI)
    /* MPICH refuses the int query (an error, fatal by default) for a type made
     * with large counts (MPI_Type_create_hindexed_c: api_large.c makes them) */
    MPI_Count ni, na, nl, nd;
    if (PMPI_Type_get_envelope_c(type, &ni, &na, &nl, &nd, combiner) != MPI_SUCCESS)
        return 0;
    *large = nl > 0;
    return 1;
#else
    int ni, na, nd;
    return PMPI_Type_get_envelope(type, &ni, &na, &nd, combiner) == MPI_SUCCESS;
#endif
}

int wm_type_committed(MPI_Datatype type)
{
    int combiner, large;
    if (!wm_type_combiner(type, &combiner, &large))
        return 0;
    if (combiner == MPI_COMBINER_NAMED)
        return 1;
    MPI_Comm c = quiet_self();
    char nothing[1];
    int position = 0;
    return c != MPI_COMM_NULL && PMPI_Pack(nothing, 0, type, nothing, (int)sizeof nothing, &position, c) == MPI_SUCCESS;
}

/* Whether a predefined operation is defined on a named datatype (MPI-4.1,
 * 6.9.2: MPI_SUM on integers, floating point and complex, MPI_BAND on
 * integers and bytes, MPI_MINLOC on the pair types, ...). The reduction
 * engine combines pieces with MPI_Reduce_local as it goes, so a pair the
 * MPI does not define would fail on some ranks in the middle of a schedule
 * while their peers wait for them; such a call goes to the MPI library
 * instead, which reports it as it would without us (MPI_ERR_OP).
 *
 * The MPI's own answer is asked once per pair: MPI_Reduce_local of one zero
 * element, with MPI_COMM_WORLD's and MPI_COMM_SELF's error handlers set to
 * return errors meanwhile (both MPIs report a handle-less call through one
 * of them) and restored after. */
#include "coll.h"

#include <pthread.h>
#include <string.h>

#define KNOWN 256

static struct {
    MPI_Datatype type;
    MPI_Op op;
    int defined;
} known[KNOWN];
static int nknown;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int ask_the_mpi(MPI_Datatype type, MPI_Op op)
{
    MPI_Aint lb = 0, extent = 0;
    if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS || extent <= 0 || extent > 256)
        return 0;
    _Alignas(64) unsigned char in[256], inout[256];
    memset(in, 0, sizeof in);
    memset(inout, 0, sizeof inout);
    MPI_Errhandler world, self;
    PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
    PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rc = PMPI_Reduce_local(in - lb, inout - lb, 1, type, op);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
    PMPI_Errhandler_free(&world);
    PMPI_Errhandler_free(&self);
    return rc == MPI_SUCCESS;
}

int wm_op_defined(MPI_Datatype type, MPI_Op op)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nknown; i++)
        if (known[i].type == type && known[i].op == op) {
            int d = known[i].defined;
            pthread_mutex_unlock(&lock);
            return d;
        }
    pthread_mutex_unlock(&lock);
    int defined = ask_the_mpi(type, op);
    pthread_mutex_lock(&lock);
    if (nknown < KNOWN)
        known[nknown++] = (__typeof__(known[0])){ type, op, defined };
    pthread_mutex_unlock(&lock);
    return defined;
}

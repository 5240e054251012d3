/* Fortran MPI_INIT and MPI_INIT_THREAD: the MPI's own (its Fortran set-up
 * included), then libwanmpi's start as after a C MPI_Init (startup.h):
 * MPI_COMM_WORLD's cluster map, so that a first nonblocking collective on it
 * is ours, and the progress thread. With WANMPI_PROGRESS=thread, MPI_INIT
 * becomes MPI_INIT_THREAD(MPI_THREAD_MULTIPLE) and MPI_INIT_THREAD asks for
 * MPI_THREAD_MULTIPLE, as in C.
 *
 * Measured (objdump): Open MPI 4.1's mpi_init_ and mpi_init_f08_ call
 * PMPI_Init, MPICH's mpi_init_f08_ too; MPICH's mpi_init_ calls MPI_Init
 * (ours, so the start runs twice there: it is idempotent). */
#include <dlfcn.h>
#include <mpi.h>

#include "arguments.h"
#include "../coll/startup.h"
#include "../common/log.h"
#include "../common/settings.h"

typedef void init_fn(MPI_Fint *ierr);
typedef void init_thread_fn(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);

/* The MPI's own Fortran function `name`, looked up once into *slot. */
static void *real(void **slot, const char *name)
{
    if (!*slot && !(*slot = dlsym(RTLD_NEXT, name)))
        wm_fatal("the MPI library has no Fortran function %s", name);
    return *slot;
}

/* binding: 0 mpif.h and the mpi module, 1 mpi_f08 */
static void init(int binding, MPI_Fint *ierr)
{
    static void *plain[2], *thread[2];
    MPI_Fint rc = MPI_SUCCESS, required = MPI_THREAD_MULTIPLE, provided;
    if (wm_settings()->progress_thread)
        ((init_thread_fn *)real(&thread[binding], binding ? "mpi_init_thread_f08_" : "mpi_init_thread_"))(
            &required, &provided, &rc);
    else
        ((init_fn *)real(&plain[binding], binding ? "mpi_init_f08_" : "mpi_init_"))(&rc);
    if (rc == MPI_SUCCESS)
        wm_started();
    set(ierr, rc);
}

static void init_thread(int binding, MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    static void *slot[2];
    MPI_Fint rc = MPI_SUCCESS, level = wm_settings()->progress_thread ? MPI_THREAD_MULTIPLE : *required;
    ((init_thread_fn *)real(&slot[binding], binding ? "mpi_init_thread_f08_" : "mpi_init_thread_"))(&level,
                                                                                                   provided, &rc);
    if (rc == MPI_SUCCESS)
        wm_started();
    set(ierr, rc);
}

void mpi_init_(MPI_Fint *ierr) { init(0, ierr); }
void mpi_init(MPI_Fint *ierr) { init(0, ierr); }
void mpi_init__(MPI_Fint *ierr) { init(0, ierr); }
void MPI_INIT(MPI_Fint *ierr) { init(0, ierr); }
void mpi_init_f08_(MPI_Fint *ierr) { init(1, ierr); }

void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    init_thread(0, required, provided, ierr);
}
void mpi_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    init_thread(0, required, provided, ierr);
}
void mpi_init_thread__(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    init_thread(0, required, provided, ierr);
}
void MPI_INIT_THREAD(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    init_thread(0, required, provided, ierr);
}
void mpi_init_thread_f08_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    init_thread(1, required, provided, ierr);
}

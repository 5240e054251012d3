/* Fortran access to the pacing attributes (see pacing/attr.c):
 *
 *   integer :: kmax, kmatb, ierr
 *   integer(kind=MPI_ADDRESS_KIND) :: val
 *   logical :: flag
 *   call wanmpi_keyvals(kmax, kmatb, ierr)
 *   call MPI_Comm_get_attr(MPI_COMM_WORLD, kmax, val, flag, ierr)    ! B, KB/s
 *   call MPI_Comm_set_attr(MPI_COMM_WORLD, kmatb, val / 4, ierr)     ! re-paces now
 *   call wanmpi_set_senders(MPI_COMM_WORLD, 4, ierr)
 *
 * Fortran passes attribute values themselves (INTEGER(MPI_ADDRESS_KIND) in
 * MPI_COMM_*_ATTR, INTEGER in the MPI-1 MPI_ATTR_*). Calls with any other
 * keyval go on to the MPI library's own Fortran function of the same name. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "names.h"
#include "../pacing/attr.h"
#include "../../include/wanmpi.h"

static void set(MPI_Fint *ierr, int rc)
{
    if (ierr)
        *ierr = (MPI_Fint)rc;
}

/* The MPI library's own Fortran function `name` (lower case, one underscore),
 * looked up once into `*cache`. */
static void *next(void **cache, const char *name)
{
    if (!*cache) {
        *cache = dlsym(RTLD_NEXT, name);
        if (!*cache) {
            fprintf(stderr, "wanmpi: the MPI library has no Fortran function %s\n", name);
            abort();
        }
    }
    return *cache;
}

typedef void get_fn(MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *);
typedef void put_fn(MPI_Fint *, MPI_Fint *, void *, MPI_Fint *);
typedef void delete_fn(MPI_Fint *, MPI_Fint *, MPI_Fint *);

static int get(MPI_Fint *comm, MPI_Fint *keyval, long long *value, MPI_Fint *flag)
{
    int v = 0, f = 0;
    int rc = wm_attr_value(MPI_Comm_f2c(*comm), *keyval, &v, &f);
    *value = v;
    *flag = f;                          /* .true. is 1 with gfortran, for both MPIs */
    return rc;
}

void mpi_comm_get_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag, MPI_Fint *ierr)
{
    if (!wm_attr_ours(*keyval)) {
        static void *real;
        ((get_fn *)next(&real, "mpi_comm_get_attr_"))(comm, keyval, value, flag, ierr);
        return;
    }
    long long v;
    set(ierr, get(comm, keyval, &v, flag));
    *value = (MPI_Aint)v;
}
FORTRAN_NAMES(mpi_comm_get_attr, MPI_COMM_GET_ATTR,
              (MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *flag, MPI_Fint *ierr),
              (comm, keyval, value, flag, ierr))

void mpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag, MPI_Fint *ierr)
{
    if (!wm_attr_ours(*keyval)) {
        static void *real;
        ((get_fn *)next(&real, "mpi_attr_get_"))(comm, keyval, value, flag, ierr);
        return;
    }
    long long v;
    set(ierr, get(comm, keyval, &v, flag));
    *value = (MPI_Fint)v;
}
FORTRAN_NAMES(mpi_attr_get, MPI_ATTR_GET,
              (MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag, MPI_Fint *ierr),
              (comm, keyval, value, flag, ierr))

void mpi_comm_set_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierr)
{
    if (!wm_attr_ours(*keyval)) {
        static void *real;
        ((put_fn *)next(&real, "mpi_comm_set_attr_"))(comm, keyval, value, ierr);
        return;
    }
    set(ierr, wm_attr_put(MPI_Comm_f2c(*comm), *keyval, (long long)*value));
}
FORTRAN_NAMES(mpi_comm_set_attr, MPI_COMM_SET_ATTR,
              (MPI_Fint *comm, MPI_Fint *keyval, MPI_Aint *value, MPI_Fint *ierr), (comm, keyval, value, ierr))

void mpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierr)
{
    if (!wm_attr_ours(*keyval)) {
        static void *real;
        ((put_fn *)next(&real, "mpi_attr_put_"))(comm, keyval, value, ierr);
        return;
    }
    set(ierr, wm_attr_put(MPI_Comm_f2c(*comm), *keyval, (long long)*value));
}
FORTRAN_NAMES(mpi_attr_put, MPI_ATTR_PUT,
              (MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierr), (comm, keyval, value, ierr))

void mpi_comm_delete_attr_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *ierr)
{
    if (!wm_attr_ours(*keyval)) {
        static void *real;
        ((delete_fn *)next(&real, "mpi_comm_delete_attr_"))(comm, keyval, ierr);
        return;
    }
    set(ierr, wm_attr_delete(MPI_Comm_f2c(*comm), *keyval));
}
FORTRAN_NAMES(mpi_comm_delete_attr, MPI_COMM_DELETE_ATTR, (MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *ierr),
              (comm, keyval, ierr))

void wanmpi_keyvals_(MPI_Fint *maxrate, MPI_Fint *matb, MPI_Fint *ierr)
{
    int rc = wm_attr_init();
    *maxrate = (MPI_Fint)WANMPI_MAXRATE;
    *matb = (MPI_Fint)WANMPI_MATB;
    set(ierr, rc);
}
FORTRAN_NAMES(wanmpi_keyvals, WANMPI_KEYVALS, (MPI_Fint *maxrate, MPI_Fint *matb, MPI_Fint *ierr),
              (maxrate, matb, ierr))

void wanmpi_set_senders_(MPI_Fint *comm, MPI_Fint *n, MPI_Fint *ierr)
{
    set(ierr, wm_set_senders(MPI_Comm_f2c(*comm), *n));
}
/* not the plain name: that is the C function */
void wanmpi_set_senders__(MPI_Fint *comm, MPI_Fint *n, MPI_Fint *ierr) { wanmpi_set_senders_(comm, n, ierr); }
void WANMPI_SET_SENDERS(MPI_Fint *comm, MPI_Fint *n, MPI_Fint *ierr) { wanmpi_set_senders_(comm, n, ierr); }

/* What a Fortran argument means in C, shared by the Fortran bindings:
 * MPI_IN_PLACE and MPI_BOTTOM (addresses of the MPI's own Fortran
 * variables, found through the dynamic linker, arguments.c) and the
 * optional IERROR of mpi_f08; a request handed back. */
#ifndef WM_FORTRAN_ARGUMENTS_H
#define WM_FORTRAN_ARGUMENTS_H

#include <mpi.h>

/* Whether p is the MPI's Fortran MPI_IN_PLACE, or its MPI_BOTTOM (any binding). */
int wm_fortran_in_place(const void *p);
int wm_fortran_bottom(const void *p);

/* A send buffer: MPI_IN_PLACE or MPI_BOTTOM in C terms, else p. */
static inline const void *send_buffer(const void *p)
{
    return wm_fortran_in_place(p) ? MPI_IN_PLACE : wm_fortran_bottom(p) ? MPI_BOTTOM : p;
}

/* A receive buffer: MPI_BOTTOM in C terms, else p. */
static inline void *buffer(void *p)
{
    return wm_fortran_bottom(p) ? MPI_BOTTOM : p;
}

/* IERROR, which mpi_f08 lets the program leave out (a null pointer). */
static inline void set(MPI_Fint *ierr, int rc)
{
    if (ierr)
        *ierr = (MPI_Fint)rc;
}

/* A call's request as the Fortran handle (MPI_REQUEST_NULL if it failed), and IERROR. */
static inline void out_request(int rc, MPI_Request r, MPI_Fint *request, MPI_Fint *ierr)
{
    *request = MPI_Request_c2f(rc == MPI_SUCCESS ? r : MPI_REQUEST_NULL);
    set(ierr, rc);
}

#endif

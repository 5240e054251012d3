/* Every name one Fortran subroutine has under gfortran, ifort and flang
 * (lower_, lower, lower__, UPPER), plus Open MPI's mpi_f08 name (lower_f08_).
 * The file defines lower_; FORTRAN_NAMES defines the others, calling it. */
#ifndef WM_FORTRAN_NAMES_H
#define WM_FORTRAN_NAMES_H

#define FORTRAN_NAMES(lower, upper, params, args)                                               \
    void lower params { lower##_ args; }                                                         \
    void lower##__ params { lower##_ args; }                                                     \
    void upper params { lower##_ args; }                                                         \
    void lower##_f08_ params { lower##_ args; }

/* A persistent collective's names: MPI-4's MPI_<COLL>_INIT under MPICH, Open
 * MPI 4.1's MPIX_<COLL>_INIT (its pcollreq extension), each calling the
 * file's static coll##_init (Open MPI 5: MPI_<COLL>_INIT, common/pcoll.h). */
#include "../common/pcoll.h"
#ifdef WM_PCOLL_MPIX
#define INIT_NAMES(coll, COLL, params, args)                                                          \
    void mpix_##coll##_init_ params { coll##_init args; }                                             \
    FORTRAN_NAMES(mpix_##coll##_init, MPIX_##COLL##_INIT, params, args)
#else
#define INIT_NAMES(coll, COLL, params, args)                                                          \
    void mpi_##coll##_init_ params { coll##_init args; }                                              \
    FORTRAN_NAMES(mpi_##coll##_init, MPI_##COLL##_INIT, params, args)
#endif

#endif

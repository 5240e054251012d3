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

#endif

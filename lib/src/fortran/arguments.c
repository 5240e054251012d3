/* Fortran's MPI_IN_PLACE and MPI_BOTTOM (arguments.h) are addresses of
 * Fortran variables, one per MPI and per Fortran binding: Open MPI's
 * mpi_fortran_in_place_ (in every mangling), MPICH's MPIR_F_MPI_IN_PLACE and
 * MPIR_F08_MPI_IN_PLACE (C variables that hold the address). They are looked
 * up once, through the dynamic linker. */
#include <dlfcn.h>
#include <stddef.h>

#include "arguments.h"

static void *in_place_addr[8], *bottom_addr[8];
static int sentinels_known;

static void add_symbol(void **list, const char *name, int is_pointer)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (p && is_pointer)
        p = *(void **)p;                /* MPICH keeps the address in a C variable */
    if (!p)
        return;
    for (int i = 0; i < 8; i++) {
        if (list[i] == p)
            return;
        if (!list[i]) {
            list[i] = p;
            return;
        }
    }
}

static void find_sentinels(void)
{
    static const char *ompi_in_place[] = { "mpi_fortran_in_place", "mpi_fortran_in_place_",
                                           "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE" };
    static const char *ompi_bottom[] = { "mpi_fortran_bottom", "mpi_fortran_bottom_",
                                         "mpi_fortran_bottom__", "MPI_FORTRAN_BOTTOM" };
    for (int i = 0; i < 4; i++) {
        add_symbol(in_place_addr, ompi_in_place[i], 0);
        add_symbol(bottom_addr, ompi_bottom[i], 0);
    }
    add_symbol(in_place_addr, "MPIR_F_MPI_IN_PLACE", 1);
    add_symbol(in_place_addr, "MPIR_F08_MPI_IN_PLACE", 1);
    add_symbol(bottom_addr, "MPIR_F_MPI_BOTTOM", 1);
    add_symbol(bottom_addr, "MPIR_F08_MPI_BOTTOM", 1);
    sentinels_known = 1;
}

static int is_one_of(void **list, const void *p)
{
    if (!sentinels_known)
        find_sentinels();
    for (int i = 0; i < 8 && list[i]; i++)
        if (list[i] == p)
            return 1;
    return 0;
}

int wm_fortran_in_place(const void *p)
{
    return is_one_of(in_place_addr, p);
}

int wm_fortran_bottom(const void *p)
{
    return is_one_of(bottom_addr, p);
}

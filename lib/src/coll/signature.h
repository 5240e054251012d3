/* Type signatures (MPI-4.1, 3.3.1 and 5.1): the sequence of basic datatypes
 * a (count, datatype) pair describes, as a hash, for the argument agreement
 * (agree.c). Two pairs with the same signature hash alike whatever their
 * layout (4 x MPI_INT and 1 x a contiguous type of 4 MPI_INT); a polynomial
 * hash over the sequence, so that a repeated type and a concatenation are
 * computed from their parts in O(log count), never element by element. */
#ifndef WANMPI_SIGNATURE_H
#define WANMPI_SIGNATURE_H

#include <mpi.h>
#include <stdint.h>

struct wm_sig {
    uint64_t hash;      /* sum of basic_i * B^(len-1-i), mod 2^64 */
    uint64_t len;       /* basic elements in the sequence */
    uint64_t power;     /* B^len, mod 2^64 */
};

/* The signature of `count` elements of `type` into *sig; 0 if the type has
 * no signature we can read (then the caller compares sizes only). */
int wm_sig_of(int64_t count, MPI_Datatype type, struct wm_sig *sig);

#endif

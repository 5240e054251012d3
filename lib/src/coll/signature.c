/* Type signatures as hashes (signature.h). A named type is one basic
 * element, coded by its name (the same on every rank of one MPI; handles
 * are not: Open MPI's are addresses). Every derived type but a struct has
 * one old type, and its signature is the old type's repeated size / old
 * size times (contiguous, vector, indexed, subarray, darray, resized, dup:
 * only the layout differs); a struct concatenates its blocks'. */
#include "signature.h"
#include "coll.h"

#include <stdlib.h>

#define BASE 0x100000001b3ULL   /* odd: powers never vanish mod 2^64 */

static const struct wm_sig empty = { 0, 0, 1 };

static struct wm_sig concat(struct wm_sig a, struct wm_sig b)
{
    struct wm_sig s = { a.hash * b.power + b.hash, a.len + b.len, a.power * b.power };
    return s;
}

/* n copies of a, by doubling */
static struct wm_sig repeat(struct wm_sig a, uint64_t n)
{
    struct wm_sig s = empty;
    for (; n; n >>= 1, a = concat(a, a))
        if (n & 1)
            s = concat(s, a);
    return s;
}

static uint64_t fnv(const char *text, uint64_t h)
{
    for (; *text; text++)
        h = (h ^ (unsigned char)*text) * BASE;
    return h;
}

static struct wm_sig basic(uint64_t code)
{
    struct wm_sig s = { code | 1, 1, BASE };     /* | 1: never the empty hash */
    return s;
}

static int sig_of_type(MPI_Datatype type, struct wm_sig *sig, int depth);

/* A struct's blocks, or a derived type's one old type, from its contents. */
static int sig_of_contents(MPI_Datatype type, int ni, int na, int nd, int combiner, struct wm_sig *sig,
                           int depth)
{
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int got = ints && addrs && types && PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, types) == MPI_SUCCESS;
    int ok = got;
    struct wm_sig part;
    *sig = empty;
    if (ok && combiner == MPI_COMBINER_STRUCT) {
        for (int i = 0; ok && i < nd; i++)
            if ((ok = ints[1 + i] >= 0 && sig_of_type(types[i], &part, depth + 1)))
                *sig = concat(*sig, repeat(part, (uint64_t)ints[1 + i]));
    } else if (ok) {
        int size = 0, old = 0;
        ok = PMPI_Type_size(type, &size) == MPI_SUCCESS && PMPI_Type_size(types[0], &old) == MPI_SUCCESS &&
             size >= 0 && old >= 0 && sig_of_type(types[0], &part, depth + 1);
        if (ok && old > 0)
            *sig = repeat(part, (uint64_t)(size / old));
    }
    for (int i = 0; got && i < nd; i++) {
        int a, b, c, comb;
        if (PMPI_Type_get_envelope(types[i], &a, &b, &c, &comb) == MPI_SUCCESS && comb != MPI_COMBINER_NAMED)
            PMPI_Type_free(&types[i]);
    }
    free(ints);
    free(addrs);
    free(types);
    return ok;
}

static int sig_of_type(MPI_Datatype type, struct wm_sig *sig, int depth)
{
    int ni, na, nd, combiner, large, size = 0;
    if (depth > 64 || !wm_type_combiner(type, &combiner, &large) || large ||
        PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return 0;
    if (combiner == MPI_COMBINER_NAMED) {
        char name[MPI_MAX_OBJECT_NAME] = "";
        int len = 0;
        if (PMPI_Type_get_name(type, name, &len) != MPI_SUCCESS || !name[0])
            return 0;
        *sig = basic(fnv(name, 0xcbf29ce484222325ULL));
        return 1;
    }
    if (combiner == MPI_COMBINER_STRUCT || nd == 1)
        return sig_of_contents(type, ni, na, nd, combiner, sig, depth);
    /* no old type (Fortran's MPI_Type_create_f90_*): one element, by combiner and size */
    if (nd != 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return 0;
    *sig = basic(((uint64_t)combiner << 32) ^ (uint64_t)size ^ 0x9e3779b97f4a7c15ULL);
    return 1;
}

int wm_sig_of(int64_t count, MPI_Datatype type, struct wm_sig *sig)
{
    struct wm_sig one;
    if (count < 0 || type == MPI_DATATYPE_NULL || !sig_of_type(type, &one, 0))
        return 0;
    *sig = repeat(one, (uint64_t)count);
    return 1;
}

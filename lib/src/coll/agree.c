/* The argument agreement of WANMPI_CHECK=1 (agree.h). Every rank fills the
 * same small vector: a sum over the point-to-point pairs of the call (what i
 * sends j, hashed with i and j, minus what j expects from i: zero when all
 * match), the maximum of "my arguments are invalid", and for each value
 * that must be equal on every rank its maximum and the maximum of its
 * complement (equal everywhere when max == ~max(~x)). One MPI_Allreduce with
 * an operation of ours combines them. */
#include "agree.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "coll.h"
#include "signature.h"
#include "../common/settings.h"

enum field { PAIRS, INVALID, ROOT, NOT_ROOT, OP, NOT_OP, BYTES, NOT_BYTES, SIG, NOT_SIG, NFIELDS };

struct agreement {
    MPI_Comm comm;
    const char *call;
    int rank, size;
    int64_t bytes;              /* this rank's message size, where BYTES holds sizes; else -1 */
    uint64_t v[NFIELDS];
};

static uint64_t mix(uint64_t x)     /* splitmix64's finalizer */
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t pair_hash(int from, int to, int64_t bytes)
{
    return mix(mix(mix((uint64_t)from + 0x9e3779b97f4a7c15ULL) ^ (uint64_t)to) ^ (uint64_t)bytes);
}

static void combine(void *in, void *inout, int *len, MPI_Datatype *type)
{
    uint64_t *a = in, *b = inout;
    (void)type;
    for (int i = 0; i < *len; i++)
        b[i] = i == PAIRS ? a[i] + b[i] : (a[i] > b[i] ? a[i] : b[i]);
}

static MPI_Op agree_op = MPI_OP_NULL;
static pthread_once_t agree_once = PTHREAD_ONCE_INIT;

static void make_op(void)
{
    PMPI_Op_create(combine, 1, &agree_op);
}

/* 0: nothing to check (not asked, or a communicator we do not check) */
static int start(struct agreement *a, const char *call, MPI_Comm comm)
{
    int inter = 1;
    if (!wm_settings()->check || comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        inter)
        return 0;
    a->comm = comm;
    a->call = call;
    a->bytes = -1;
    PMPI_Comm_rank(comm, &a->rank);
    PMPI_Comm_size(comm, &a->size);
    for (int f = 0; f < NFIELDS; f++)
        a->v[f] = f > INVALID && (f - ROOT) % 2 ? ~0ULL : 0;   /* equal fields: 0 everywhere */
    return 1;
}

static void equal(struct agreement *a, enum field f, uint64_t value)
{
    a->v[f] = value;
    a->v[f + 1] = ~value;
}

static void invalid(struct agreement *a)
{
    a->v[INVALID] = 1;
}

/* count elements of type in bytes, or -1 (and the rank's arguments invalid) */
static int64_t bytes_of(struct agreement *a, int count, MPI_Datatype type)
{
    int64_t size = count < 0 || !wm_type_committed(type) ? -1 : wm_type_bytes(type);
    if (size < 0) {
        invalid(a);
        return -1;
    }
    return (int64_t)count * size;
}

static void sends(struct agreement *a, int to, int64_t bytes)
{
    if (to != a->rank)
        a->v[PAIRS] += pair_hash(a->rank, to, bytes);
}

static void expects(struct agreement *a, int from, int64_t bytes)
{
    if (from != a->rank)
        a->v[PAIRS] -= pair_hash(from, a->rank, bytes);
}

static void root(struct agreement *a, int r)
{
    if (r < 0 || r >= a->size)
        invalid(a);
    equal(a, ROOT, (uint64_t)(int64_t)r);
}

static void op(struct agreement *a, MPI_Op o)
{
    static const MPI_Op ops[] = { MPI_MAX, MPI_MIN, MPI_SUM, MPI_PROD, MPI_LAND, MPI_BAND, MPI_LOR,
                                  MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC };
    uint64_t id = 100;  /* user operations: handles are not comparable between ranks */
    if (o == MPI_OP_NULL)
        invalid(a);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (o == ops[i])
            id = i;
    equal(a, OP, id);
}

static int differ(const struct agreement *a, enum field f)
{
    return a->v[f] != ~a->v[f + 1];
}

static int report(const struct agreement *a, int class, const char *what)
{
    MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
    PMPI_Comm_get_errhandler(a->comm, &handler);
    int fatal = handler == MPI_ERRORS_ARE_FATAL;
#ifdef MPI_ERRORS_ABORT
    fatal = fatal || handler == MPI_ERRORS_ABORT;
#endif
    if (fatal)
        fprintf(stderr, "wanmpi: %s on a communicator of %d ranks (rank %d): %s (WANMPI_CHECK=%s)\n", a->call,
                a->size, a->rank, what, wm_settings()->check == WM_CHECK_ALL ? "all" : "1");
    if (handler != MPI_ERRHANDLER_NULL && !fatal && handler != MPI_ERRORS_RETURN)
        PMPI_Errhandler_free(&handler);
    PMPI_Comm_call_errhandler(a->comm, class);
    return class;
}

/* The allreduce and the verdict. */
static int settle(struct agreement *a)
{
    uint64_t all[NFIELDS];
    pthread_once(&agree_once, make_op);
    int rc = PMPI_Allreduce(a->v, all, NFIELDS, MPI_UINT64_T, agree_op, a->comm);
    if (rc != MPI_SUCCESS)
        return rc;
    for (int f = 0; f < NFIELDS; f++)
        a->v[f] = all[f];
    if (a->v[INVALID])
        return MPI_SUCCESS;     /* the MPI reports the invalid rank's error in the call itself */
    if (differ(a, ROOT))
        return report(a, MPI_ERR_ROOT, "the ranks passed different roots");
    if (differ(a, OP))
        return report(a, MPI_ERR_OP, "the ranks passed different operations");
    if (differ(a, BYTES) && a->bytes >= 0) {
        char what[160];
        snprintf(what, sizeof what, "the ranks passed different counts: messages of %llu to %llu bytes, %lld here",
                 (unsigned long long)~a->v[NOT_BYTES], (unsigned long long)a->v[BYTES], (long long)a->bytes);
        return report(a, MPI_ERR_TRUNCATE, what);
    }
    if (differ(a, BYTES))
        return report(a, MPI_ERR_TRUNCATE, "the ranks passed different counts");
    if (a->v[PAIRS])
        return report(a, MPI_ERR_TRUNCATE, "what one rank sends another differs from what that rank expects");
    if (differ(a, SIG))
        return report(a, MPI_ERR_TYPE, "the ranks passed datatypes of different type signatures");
    return MPI_SUCCESS;
}

int wm_agree_bcast(int count, MPI_Datatype type, int r, MPI_Comm comm)
{
    struct agreement a;
    if (!start(&a, "MPI_Bcast", comm))
        return MPI_SUCCESS;
    root(&a, r);
    a.bytes = bytes_of(&a, count, type);
    equal(&a, BYTES, (uint64_t)a.bytes);
    return settle(&a);
}

int wm_agree_reduction(const char *call, int count, const int *counts, MPI_Datatype type, MPI_Op o, int r,
                       MPI_Comm comm)
{
    struct agreement a;
    struct wm_sig sig = { 0, 0, 1 };
    if (!start(&a, call, comm))
        return MPI_SUCCESS;
    if (r != WM_AGREE_NO_ROOT)
        root(&a, r);
    op(&a, o);
    uint64_t bytes = 0;
    if (counts) {       /* reduce_scatter: the same counts everywhere */
        for (int i = 0; i < a.size; i++)
            bytes = mix(bytes ^ (uint64_t)bytes_of(&a, counts[i], type));
        count = 1;
    } else {
        bytes = (uint64_t)(a.bytes = bytes_of(&a, count, type));
    }
    equal(&a, BYTES, bytes);
    if (!a.v[INVALID] && !wm_sig_of(count, type, &sig))
        sig.hash = 1;
    equal(&a, SIG, sig.hash);
    return settle(&a);
}

int wm_agree_allgather(const char *call, const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                       const int *recvcounts, MPI_Datatype recvtype, MPI_Comm comm)
{
    struct agreement a;
    if (!start(&a, call, comm))
        return MPI_SUCCESS;
    int64_t mine = -1;
    for (int j = 0; j < a.size; j++) {
        int64_t block = bytes_of(&a, recvcounts ? recvcounts[j] : recvcount, recvtype);
        expects(&a, j, block);
        if (j == a.rank)
            mine = block;
    }
    if (sendbuf != MPI_IN_PLACE)
        mine = bytes_of(&a, sendcount, sendtype);
    for (int j = 0; j < a.size; j++)
        sends(&a, j, mine);
    return settle(&a);
}

int wm_agree_rooted(const char *call, int gather, int count1, MPI_Datatype type1, int count, const int *counts, MPI_Datatype type, int r, MPI_Comm comm)
{
    struct agreement a;
    if (!start(&a, call, comm))
        return MPI_SUCCESS;
    root(&a, r);
    if (a.v[INVALID])
        return settle(&a);
    if (a.rank == r) {
        for (int j = 0; j < a.size; j++) {
            int64_t block = bytes_of(&a, counts ? counts[j] : count, type);
            if (gather)
                expects(&a, j, block);
            else
                sends(&a, j, block);
        }
    } else if (gather) {
        sends(&a, r, bytes_of(&a, count1, type1));
    } else {
        expects(&a, r, bytes_of(&a, count1, type1));
    }
    return settle(&a);
}

int wm_agree_alltoall(const char *call, const void *sendbuf, int sendcount, const int *sendcounts,
                      MPI_Datatype sendtype, const MPI_Datatype *sendtypes, int recvcount, const int *recvcounts,
                      MPI_Datatype recvtype, const MPI_Datatype *recvtypes, MPI_Comm comm)
{
    struct agreement a;
    if (!start(&a, call, comm))
        return MPI_SUCCESS;
    int in_place = sendbuf == MPI_IN_PLACE;
    for (int j = 0; j < a.size; j++) {
        int64_t in = bytes_of(&a, recvcounts ? recvcounts[j] : recvcount, recvtypes ? recvtypes[j] : recvtype);
        expects(&a, j, in);
        sends(&a, j, in_place ? in
                              : bytes_of(&a, sendcounts ? sendcounts[j] : sendcount,
                                         sendtypes ? sendtypes[j] : sendtype));
    }
    return settle(&a);
}

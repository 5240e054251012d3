/* Arguments that differ between ranks (an erroneous program: counts,
 * datatypes, roots, operations), run with WANMPI_CHECK=1 on a communicator
 * that spans clusters, with MPI_ERRORS_RETURN: every rank of every call must
 * return the expected error class (MPI_ERR_TRUNCATE for sizes, MPI_ERR_TYPE
 * for type signatures of the same size, MPI_ERR_ROOT, MPI_ERR_OP), never
 * hang, and the communicator must work afterwards. Calls whose arguments
 * differ only in layout (4 x MPI_INT against one contiguous type of 4 MPI_INT,
 * which MPI allows) must succeed with exact results.
 * Prints "mismatch: N cases ok" on rank 0; exit status 1 on a difference.
 * --bytes N: the size of the matching calls (default 200000). --nonblocking:
 * the nonblocking calls (and, under an MPI-4 library, a persistent
 * broadcast's init) instead, with WANMPI_CHECK=all: the error comes from the
 * call that starts it. --fatal: one
 * broadcast whose counts differ on MPI_COMM_WORLD, whose handler ends the job
 * (the message and the exit status are the launcher's to show). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, odd, failed, cases;
static MPI_Comm comm;
static int *a, *b, *counts, *displs, *counts2;
static MPI_Datatype *types;

static void expect(const char *what, int rc, int class)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    cases++;
    if (c != class) {
        fprintf(stderr, "mismatch: rank %d: %s: class %d, expected %d\n", rank, what, c, class);
        failed = 1;
    }
}

/* n: elements of the matching calls; the odd rank passes n/2 where a count differs */
static void sizes_differ(int n)
{
    int mine = rank == odd ? n / 2 : n;
    expect("bcast count", MPI_Bcast(a, mine, MPI_INT, 0, comm), MPI_ERR_TRUNCATE);
    expect("bcast small count", MPI_Bcast(a, rank == odd ? 8 : 16, MPI_INT, 0, comm), MPI_ERR_TRUNCATE);
    expect("allreduce count", MPI_Allreduce(a, b, mine, MPI_INT, MPI_SUM, comm), MPI_ERR_TRUNCATE);
    expect("reduce count", MPI_Reduce(a, b, mine, MPI_INT, MPI_SUM, 0, comm), MPI_ERR_TRUNCATE);
    expect("reduce_scatter_block count", MPI_Reduce_scatter_block(a, b, mine / size, MPI_INT, MPI_SUM, comm),
           MPI_ERR_TRUNCATE);
    for (int i = 0; i < size; i++)
        counts2[i] = n / size + (rank == odd && i == 1);
    expect("reduce_scatter counts", MPI_Reduce_scatter(a, b, counts2, MPI_INT, MPI_SUM, comm), MPI_ERR_TRUNCATE);
    expect("scan count", MPI_Scan(a, b, mine, MPI_INT, MPI_SUM, comm), MPI_ERR_TRUNCATE);
    expect("exscan count", MPI_Exscan(a, b, mine, MPI_INT, MPI_SUM, comm), MPI_ERR_TRUNCATE);
    int block = n / size, bmine = rank == odd ? block / 2 : block;
    expect("allgather send count", MPI_Allgather(a, bmine, MPI_INT, b, block, MPI_INT, comm), MPI_ERR_TRUNCATE);
    for (int i = 0; i < size; i++) {
        counts[i] = block;
        displs[i] = i * block;
        counts2[i] = rank == odd && i == 0 ? block / 2 : block;
    }
    expect("allgatherv receive counts", MPI_Allgatherv(a, block, MPI_INT, b, counts2, displs, MPI_INT, comm),
           MPI_ERR_TRUNCATE);
    expect("gather send count", MPI_Gather(a, bmine, MPI_INT, b, block, MPI_INT, 0, comm), MPI_ERR_TRUNCATE);
    for (int i = 0; i < size; i++)
        counts2[i] = i == odd ? block / 2 : block;          /* the root's view */
    expect("gatherv root's counts", MPI_Gatherv(a, block, MPI_INT, b, rank == 0 ? counts2 : counts, displs, MPI_INT, 0,
                                                comm), MPI_ERR_TRUNCATE);
    expect("scatter receive count", MPI_Scatter(a, block, MPI_INT, b, bmine, MPI_INT, 0, comm), MPI_ERR_TRUNCATE);
    expect("scatterv root's counts", MPI_Scatterv(a, rank == 0 ? counts2 : counts, displs, MPI_INT, b, block, MPI_INT,
                                                  0, comm), MPI_ERR_TRUNCATE);
    expect("alltoall send count", MPI_Alltoall(a, bmine, MPI_INT, b, block, MPI_INT, comm), MPI_ERR_TRUNCATE);
    for (int i = 0; i < size; i++)
        counts2[i] = rank == odd && i == 0 ? block + 1 : block;
    expect("alltoallv send counts", MPI_Alltoallv(a, counts2, displs, MPI_INT, b, counts, displs, MPI_INT, comm),
           MPI_ERR_TRUNCATE);
    for (int i = 0; i < size; i++) {
        counts2[i] = block * (int)sizeof(int);
        displs[i] = i * block * (int)sizeof(int);
        types[i] = MPI_BYTE;
    }
    if (rank == odd)
        counts2[size - 1] -= 4;
    expect("alltoallw send counts", MPI_Alltoallw(a, counts2, displs, types, b, counts2, displs, types, comm),
           MPI_ERR_TRUNCATE);
    for (int i = 0; i < size; i++)
        displs[i] = i * block;
}

static void others_differ(int n)
{
    expect("bcast root", MPI_Bcast(a, n, MPI_INT, rank == odd ? 1 : 0, comm), MPI_ERR_ROOT);
    expect("reduce root", MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, rank == odd ? 1 : 0, comm), MPI_ERR_ROOT);
    expect("gather root", MPI_Gather(a, 4, MPI_INT, b, 4, MPI_INT, rank == odd ? 1 : 0, comm), MPI_ERR_ROOT);
    expect("allreduce op", MPI_Allreduce(a, b, n, MPI_INT, rank == odd ? MPI_MAX : MPI_SUM, comm), MPI_ERR_OP);
    expect("allreduce type", MPI_Allreduce(a, b, n, rank == odd ? MPI_FLOAT : MPI_INT, MPI_MAX, comm),
           MPI_ERR_TYPE);
}

/* The nonblocking forms (WANMPI_CHECK=all): the start returns the error. */
#define NB(what, class, call, ...)                                          \
    do {                                                                    \
        MPI_Request r_ = MPI_REQUEST_NULL;                                  \
        int rc_ = MPI_##call(__VA_ARGS__, &r_);                             \
        if (rc_ == MPI_SUCCESS)                                             \
            rc_ = MPI_Wait(&r_, MPI_STATUS_IGNORE);                         \
        expect(what, rc_, class);                                           \
    } while (0)

static void nonblocking_differ(int n)
{
    int mine = rank == odd ? n / 2 : n, block = n / size, bmine = rank == odd ? block / 2 : block;
    NB("ibcast count", MPI_ERR_TRUNCATE, Ibcast, a, mine, MPI_INT, 0, comm);
    NB("ibcast root", MPI_ERR_ROOT, Ibcast, a, n, MPI_INT, rank == odd ? 1 : 0, comm);
    NB("iallreduce count", MPI_ERR_TRUNCATE, Iallreduce, a, b, mine, MPI_INT, MPI_SUM, comm);
    NB("iallreduce op", MPI_ERR_OP, Iallreduce, a, b, n, MPI_INT, rank == odd ? MPI_MAX : MPI_SUM, comm);
    NB("ireduce count", MPI_ERR_TRUNCATE, Ireduce, a, b, mine, MPI_INT, MPI_SUM, 0, comm);
    NB("ireduce_scatter_block count", MPI_ERR_TRUNCATE, Ireduce_scatter_block, a, b, mine / size, MPI_INT, MPI_SUM,
       comm);
    NB("iallgather send count", MPI_ERR_TRUNCATE, Iallgather, a, bmine, MPI_INT, b, block, MPI_INT, comm);
    NB("ialltoall send count", MPI_ERR_TRUNCATE, Ialltoall, a, bmine, MPI_INT, b, block, MPI_INT, comm);
    for (int i = 0; i < size; i++) {
        counts[i] = block;
        displs[i] = i * block;
        counts2[i] = rank == odd && i == 0 ? block + 1 : block;
    }
    NB("ialltoallv send counts", MPI_ERR_TRUNCATE, Ialltoallv, a, counts2, displs, MPI_INT, b, counts, displs,
       MPI_INT, comm);
    NB("ibcast matching", MPI_SUCCESS, Ibcast, a, n, MPI_INT, 0, comm);
#if MPI_VERSION >= 4
    MPI_Request r = MPI_REQUEST_NULL;
    expect("bcast_init count", MPI_Bcast_init(a, mine, MPI_INT, 0, comm, MPI_INFO_NULL, &r), MPI_ERR_TRUNCATE);
    if (r != MPI_REQUEST_NULL)
        MPI_Request_free(&r);
#endif
}

/* Equal signatures in different layouts: accepted, exact. */
static void layouts_differ(int n)
{
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    for (int i = 0; i < n; i++)
        a[i] = rank == 0 ? i * 7 + 1 : -1;
    int rc = rank == odd ? MPI_Bcast(a, n / 4, four, 0, comm) : MPI_Bcast(a, n, MPI_INT, 0, comm);
    expect("bcast in another layout", rc, MPI_SUCCESS);
    for (int i = 0; i < n; i++)
        if (a[i] != i * 7 + 1) {
            fprintf(stderr, "mismatch: rank %d: bcast in another layout: element %d is %d\n", rank, i, a[i]);
            failed = 1;
            break;
        }
    MPI_Type_free(&four);
}

int main(int argc, char **argv)
{
    int n = 200000 / (int)sizeof(int);
    MPI_Init(&argc, &argv);
    int nonblocking = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--nonblocking"))
            nonblocking = 1;
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            n = atoi(argv[i + 1]) / (int)sizeof(int);
        else if (!strcmp(argv[i], "--fatal")) {
            int x[2] = { 0, 0 };
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            MPI_Bcast(x, rank == 1 ? 1 : 2, MPI_INT, 0, MPI_COMM_WORLD);
            fprintf(stderr, "mismatch: rank %d: the broadcast returned\n", rank);
            MPI_Finalize();
            return 0;
        }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    odd = size > 5 ? 5 : size - 1;
    n -= n % (4 * size);
    a = calloc((size_t)n * 2, sizeof(int));
    b = calloc((size_t)n * 2, sizeof(int));
    counts = calloc((size_t)size, sizeof(int));
    counts2 = calloc((size_t)size, sizeof(int));
    displs = calloc((size_t)size, sizeof(int));
    types = calloc((size_t)size, sizeof(MPI_Datatype));
    if (nonblocking) {
        nonblocking_differ(n);
    } else {
        sizes_differ(n);
        others_differ(n);
    }
    layouts_differ(n);
    int sum = 0, one = 1, bad = failed;
    expect("allreduce afterwards", MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm), MPI_SUCCESS);
    if (sum != size) {
        fprintf(stderr, "mismatch: rank %d: allreduce afterwards gave %d\n", rank, sum);
        failed = 1;
    }
    MPI_Allreduce(&failed, &bad, 1, MPI_INT, MPI_MAX, comm);
    if (rank == 0 && !bad)
        printf("mismatch: %d cases ok\n", cases);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return bad;
}

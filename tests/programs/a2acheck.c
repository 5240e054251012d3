/* a2acheck: MPI_Alltoall and MPI_Alltoallv results, exactly.
 *
 * Every case fills the send buffer with values that name (source,
 * destination, element), runs the call (libwanmpi's when it is preloaded),
 * runs the same call through PMPI (the MPI library alone) into a second
 * buffer, and checks both: against the values the receiver must hold, and
 * byte for byte against each other, including the gaps between blocks, which
 * must stay untouched. Cases: counts from 0 to 1.2 MB per pair, MPI_INT,
 * MPI_DOUBLE, a strided vector type, send and receive types that cut the
 * data differently (4 x MPI_INT against one contiguous type of 4), uneven
 * alltoallv counts with zeros and blocks in reverse order, MPI_IN_PLACE;
 * on MPI_COMM_WORLD, a reversed copy and an uneven subset.
 * Prints "a2acheck: N cases ok" on rank 0; exits 1 on the first mismatch. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int world_rank, cases;

static int value(int src, int dst, long i) { return (int)((src * 1000003L + dst * 7919L + i * 31L) % 2147483647L); }

static void fail(const char *what, MPI_Comm comm, long at, long long got, long long want)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    fprintf(stderr, "a2acheck: FAIL %s: rank %d (world %d) element %ld: got %lld, want %lld\n", what, rank,
            world_rank, at, got, want);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Alltoall with `count` ints per pair, sent and received as `type` units of `per` ints. */
static void check_alltoall(MPI_Comm comm, int count, int in_place, const char *name)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    size_t total = (size_t)count * n;
    int *send = malloc((total + 1) * sizeof *send), *recv = malloc((total + 1) * sizeof *recv),
        *ref = malloc((total + 1) * sizeof *ref);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < count; i++)
            send[(size_t)p * count + i] = value(me, p, i);
    memcpy(recv, send, total * sizeof *send);
    memset(ref, 0x5a, (total + 1) * sizeof *ref);
    recv[total] = ref[total];
    if (in_place)
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, count, MPI_INT, comm);
    else
        MPI_Alltoall(send, count, MPI_INT, recv, count, MPI_INT, comm);
    PMPI_Alltoall(send, count, MPI_INT, ref, count, MPI_INT, comm);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < count; i++)
            if (recv[(size_t)p * count + i] != value(p, me, i))
                fail(name, comm, (long)((size_t)p * count + i), recv[(size_t)p * count + i], value(p, me, i));
    if (memcmp(recv, ref, (total + 1) * sizeof *recv))
        fail(name, comm, -1, 0, 1);
    free(send);
    free(recv);
    free(ref);
    cases++;
}

/* Alltoall of `count` doubles, or of a strided vector (every other double). */
static void check_typed(MPI_Comm comm, int count, int strided)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Datatype type = MPI_DOUBLE;
    int stride = 1;
    if (strided) {
        MPI_Type_vector(count, 1, 2, MPI_DOUBLE, &type);
        MPI_Type_commit(&type);
        stride = 2;
    }
    int per = strided ? 1 : count;                 /* elements of `type` per block */
    MPI_Aint lb, extent;
    MPI_Type_get_extent(type, &lb, &extent);
    size_t block = strided ? (size_t)extent / sizeof(double) : (size_t)count;
    size_t len = block * n + 1;
    double *send = calloc(len, sizeof *send), *recv = malloc(len * sizeof *recv),
           *ref = malloc(len * sizeof *ref);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < count; i++)
            send[p * block + (size_t)i * stride] = value(me, p, i) + 0.25;
    for (size_t i = 0; i < len; i++)
        recv[i] = ref[i] = -1.5;
    MPI_Alltoall(send, per, type, recv, per, type, comm);
    PMPI_Alltoall(send, per, type, ref, per, type, comm);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < count; i++)
            if (recv[p * block + (size_t)i * stride] != value(p, me, i) + 0.25)
                fail(strided ? "alltoall vector" : "alltoall double", comm, i,
                     (long long)recv[p * block + (size_t)i * stride], value(p, me, i));
    if (memcmp(recv, ref, len * sizeof *recv))
        fail(strided ? "alltoall vector vs PMPI" : "alltoall double vs PMPI", comm, -1, 0, 1);
    if (strided)
        MPI_Type_free(&type);
    free(send);
    free(recv);
    free(ref);
    cases++;
}

/* 4 ints per unit on the send side, one contiguous(4 x int) on the receive side. */
static void check_mixed_types(MPI_Comm comm, int units)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    size_t total = (size_t)units * 4 * n;
    int *send = malloc(total * sizeof *send), *recv = malloc(total * sizeof *recv);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < units * 4L; i++)
            send[(size_t)p * units * 4 + i] = value(me, p, i);
    MPI_Alltoall(send, units * 4, MPI_INT, recv, units, four, comm);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < units * 4L; i++)
            if (recv[(size_t)p * units * 4 + i] != value(p, me, i))
                fail("alltoall int vs contiguous", comm, i, recv[(size_t)p * units * 4 + i], value(p, me, i));
    MPI_Type_free(&four);
    free(send);
    free(recv);
    cases++;
}

static int vcount(int src, int dst, int scale, int seed)
{
    int c = (src * 7 + dst * 13 + seed) % 5;       /* 0..4, some pairs send nothing */
    return c == 0 ? 0 : c * scale + (src + dst) % 3;
}

static void check_alltoallv(MPI_Comm comm, int scale, int seed)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *sc = malloc(n * sizeof *sc), *sd = malloc(n * sizeof *sd), *rc = malloc(n * sizeof *rc),
        *rd = malloc(n * sizeof *rd);
    long st = 0, rt = 0;
    for (int p = n - 1; p >= 0; p--) {             /* blocks in reverse order, a gap of 3 after each */
        sc[p] = vcount(me, p, scale, seed);
        sd[p] = (int)st;
        st += sc[p] + 3;
        rc[p] = vcount(p, me, scale, seed);
        rd[p] = (int)rt;
        rt += rc[p] + 3;
    }
    int *send = malloc((st + 1) * sizeof *send), *recv = malloc((rt + 1) * sizeof *recv),
        *ref = malloc((rt + 1) * sizeof *ref);
    for (long i = 0; i <= st; i++)
        send[i] = -7;
    for (int p = 0; p < n; p++)
        for (long i = 0; i < sc[p]; i++)
            send[sd[p] + i] = value(me, p, i);
    for (long i = 0; i <= rt; i++)
        recv[i] = ref[i] = -9;
    MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
    PMPI_Alltoallv(send, sc, sd, MPI_INT, ref, rc, rd, MPI_INT, comm);
    for (int p = 0; p < n; p++)
        for (long i = 0; i < rc[p]; i++)
            if (recv[rd[p] + i] != value(p, me, i))
                fail("alltoallv", comm, rd[p] + i, recv[rd[p] + i], value(p, me, i));
    if (memcmp(recv, ref, (rt + 1) * sizeof *recv))
        fail("alltoallv vs PMPI (gaps touched?)", comm, -1, 0, 1);
    free(send);
    free(recv);
    free(ref);
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    cases++;
}

static void check_comm(MPI_Comm comm)
{
    static const int counts[] = { 0, 1, 7, 1000, 8192, 40000, 300000 };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        check_alltoall(comm, counts[i], 0, "alltoall int");
    check_alltoall(comm, 5000, 1, "alltoall in place");
    check_typed(comm, 3000, 0);
    check_typed(comm, 3000, 1);
    check_mixed_types(comm, 9000);
    for (int seed = 0; seed < 3; seed++) {
        check_alltoallv(comm, 1, seed);
        check_alltoallv(comm, 11000, seed);
    }
    check_alltoallv(comm, 60000, 5);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    check_comm(MPI_COMM_WORLD);
    MPI_Comm reversed, subset;
    MPI_Comm_split(MPI_COMM_WORLD, 0, n - world_rank, &reversed);
    check_comm(reversed);
    /* drop one rank: uneven clusters */
    MPI_Comm_split(MPI_COMM_WORLD, world_rank == 1 ? MPI_UNDEFINED : 0, world_rank, &subset);
    if (subset != MPI_COMM_NULL) {
        check_comm(subset);
        MPI_Comm_free(&subset);
    }
    MPI_Comm_free(&reversed);
    int total = 0;
    MPI_Reduce(&cases, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("a2acheck: %d cases ok\n", total);
    MPI_Finalize();
    return 0;
}

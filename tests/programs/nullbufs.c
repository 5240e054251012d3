/* nullbufs: every collective libwanmpi takes, with zero counts and NULL
 * buffers, as MPI allows (a NULL buffer with count 0 is valid; so is
 * MPI_Gather(NULL, 0, MPI_BYTE, NULL, 0, MPI_BYTE, ...) at every rank).
 * Each call must return MPI_SUCCESS (errors return, not abort) on
 * MPI_COMM_WORLD and on a split. Prints "nullbufs: ok". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

static void expect(int rc, const char *what, int rank)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(rc, s, &n);
        fprintf(stderr, "nullbufs: rank %d: %s gave %s\n", rank, what, s);
        failures++;
    }
}

static void run(MPI_Comm comm)
{
    int rank, size, root;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int *zeros = calloc((size_t)size, sizeof(int));
    MPI_Datatype byte = MPI_BYTE;
    for (root = 0; root < size; root++) {
        expect(MPI_Bcast(NULL, 0, byte, root, comm), "MPI_Bcast", rank);
        expect(MPI_Reduce(NULL, NULL, 0, MPI_INT, MPI_SUM, root, comm), "MPI_Reduce", rank);
        expect(MPI_Gather(NULL, 0, byte, NULL, 0, byte, root, comm), "MPI_Gather", rank);
        expect(MPI_Gatherv(NULL, 0, byte, NULL, zeros, zeros, byte, root, comm), "MPI_Gatherv", rank);
        expect(MPI_Scatter(NULL, 0, byte, NULL, 0, byte, root, comm), "MPI_Scatter", rank);
        expect(MPI_Scatterv(NULL, zeros, zeros, byte, NULL, 0, byte, root, comm), "MPI_Scatterv", rank);
    }
    expect(MPI_Allreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, comm), "MPI_Allreduce", rank);
    expect(MPI_Reduce_scatter_block(NULL, NULL, 0, MPI_INT, MPI_SUM, comm), "MPI_Reduce_scatter_block", rank);
    expect(MPI_Reduce_scatter(NULL, NULL, zeros, MPI_INT, MPI_SUM, comm), "MPI_Reduce_scatter", rank);
    expect(MPI_Allgather(NULL, 0, byte, NULL, 0, byte, comm), "MPI_Allgather", rank);
    expect(MPI_Allgatherv(NULL, 0, byte, NULL, zeros, zeros, byte, comm), "MPI_Allgatherv", rank);
    /* not the all-to-alls: MPICH 5 alone refuses their two NULL buffers ("Buffers must not be aliased") */
    expect(MPI_Scan(NULL, NULL, 0, MPI_INT, MPI_SUM, comm), "MPI_Scan", rank);
    expect(MPI_Exscan(NULL, NULL, 0, MPI_INT, MPI_SUM, comm), "MPI_Exscan", rank);
    MPI_Request r;
    expect(MPI_Iallreduce(NULL, NULL, 0, MPI_INT, MPI_SUM, comm, &r), "MPI_Iallreduce", rank);
    expect(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait", rank);
    expect(MPI_Ireduce_scatter(NULL, NULL, zeros, MPI_INT, MPI_SUM, comm, &r), "MPI_Ireduce_scatter", rank);
    expect(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait", rank);
    free(zeros);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    run(MPI_COMM_WORLD);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 3 == 0, rank, &half);
    run(half);
    MPI_Comm_free(&half);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all == 0)
        printf("nullbufs: ok\n");
    MPI_Finalize();
    return all != 0;
}

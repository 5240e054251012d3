/* halo: MPI_Alltoallv as a halo exchange (each rank sends --count ints to
 * its two ring neighbours and nothing to the others), then as a full
 * exchange (--count ints to every rank), each checked exactly. libwanmpi
 * paces an all-to-all by the fan-in of its receivers: 2 in the first call,
 * P - 1 in the second (docs/pacing.md). Prints "halo: ok". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int value(int src, int dst, int i) { return src * 1000003 + dst * 7919 + i; }

/* to[p]: whether this rank sends to p (and, the pattern being symmetric, receives from p). */
static int exchange(const int *to, int count, int rank, int size)
{
    int *sc = calloc((size_t)size, sizeof(int)), *sd = calloc((size_t)size, sizeof(int));
    int *rc = calloc((size_t)size, sizeof(int)), *rd = calloc((size_t)size, sizeof(int));
    int *send = malloc((size_t)size * count * sizeof(int) + 1), *recv = malloc((size_t)size * count * sizeof(int) + 1);
    if (!sc || !sd || !rc || !rd || !send || !recv) {
        fprintf(stderr, "halo: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int p = 0; p < size; p++) {
        sc[p] = rc[p] = to[p] ? count : 0;
        sd[p] = rd[p] = p * count;
        for (int i = 0; i < count; i++) {
            send[p * count + i] = value(rank, p, i);
            recv[p * count + i] = -1;
        }
    }
    MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, MPI_COMM_WORLD);
    int bad = 0;
    for (int p = 0; p < size && !bad; p++)
        for (int i = 0; i < count && !bad; i++) {
            int want = to[p] ? value(p, rank, i) : -1;
            if (recv[p * count + i] != want) {
                fprintf(stderr, "halo: rank %d: from %d element %d is %d, not %d\n", rank, p, i,
                        recv[p * count + i], want);
                bad = 1;
            }
        }
    free(sc); free(sd); free(rc); free(rd); free(send); free(recv);
    return bad;
}

int main(int argc, char **argv)
{
    int count = 65536, rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    if (argc > 2 && !strcmp(argv[1], "--count"))
        count = atoi(argv[2]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *to = calloc((size_t)size, sizeof(int));
    to[(rank + 1) % size] = to[(rank + size - 1) % size] = 1;
    to[rank] = 0;
    bad |= exchange(to, count, rank, size);
    for (int p = 0; p < size; p++)
        to[p] = p != rank;
    bad |= exchange(to, count, rank, size);
    int any;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("halo: ok\n");
    free(to);
    MPI_Finalize();
    return any;
}

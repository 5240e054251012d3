/* MPI_Alltoallv_c and MPI_Alltoallw_c where one rank's arguments do not fit
 * in an int and the others' do: rank 0 sends its block to the last rank from
 * past 2 GiB into its send buffer, the last rank receives rank 1's block past
 * 2 GiB into its receive buffer (buffers reserved, not touched, with
 * MAP_NORESERVE); every other block is small. Every rank must take the same
 * path (a rank alone in the MPI's own call, the others in ours, would wait
 * for ever) and every byte must arrive. --bytes N: bytes per block (default
 * 100000). Prints "largecount: N calls ok" on rank 0; exit status 1 on a
 * wrong byte. Needs an MPI-4 library (the _c bindings). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if MPI_VERSION < 4
int main(void)
{
    printf("largecount: needs an MPI-4 library\n");
    return 2;
}
#else

#define FAR ((MPI_Aint)1 << 31 | 8192)

static int rank, size, failed;

static unsigned char value(int from, int to, MPI_Count i)
{
    return (unsigned char)(from * 31 + to * 7 + i * 13 + 1);
}

static char *reserve(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("largecount: mmap");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void check(const char *call, const char *recvbuf, const MPI_Aint *rdispls, MPI_Count k)
{
    for (int from = 0; from < size; from++)
        for (MPI_Count i = 0; i < k; i++)
            if ((unsigned char)recvbuf[rdispls[from] + i] != value(from, rank, i)) {
                fprintf(stderr, "largecount: %s: rank %d: byte %lld from %d is %d, expected %d\n", call, rank,
                        (long long)i, from, (unsigned char)recvbuf[rdispls[from] + i], value(from, rank, i));
                failed = 1;
                return;
            }
}

int main(int argc, char **argv)
{
    MPI_Count k = 100000;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--bytes"))
            k = atoll(argv[i + 1]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t room = (size_t)FAR + (size_t)k * (size_t)size;
    char *sendbuf = reserve(room), *recvbuf = reserve(room);
    MPI_Count *counts = malloc(sizeof(MPI_Count) * (size_t)size);
    MPI_Aint *sdispls = malloc(sizeof(MPI_Aint) * (size_t)size), *rdispls = malloc(sizeof(MPI_Aint) * (size_t)size);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)size);
    for (int p = 0; p < size; p++) {
        counts[p] = k;
        types[p] = MPI_BYTE;
        sdispls[p] = rank == 0 && p == size - 1 ? FAR : (MPI_Aint)p * k;
        rdispls[p] = rank == size - 1 && p == 1 ? FAR : (MPI_Aint)p * k;
        for (MPI_Count i = 0; i < k; i++)
            sendbuf[sdispls[p] + i] = (char)value(rank, p, i);
    }
    int calls = 0;
    MPI_Alltoallv_c(sendbuf, counts, sdispls, MPI_BYTE, recvbuf, counts, rdispls, MPI_BYTE, MPI_COMM_WORLD);
    check("MPI_Alltoallv_c", recvbuf, rdispls, k);
    calls++;
    for (int p = 0; p < size; p++)
        memset(recvbuf + rdispls[p], 0, (size_t)k);
    MPI_Alltoallw_c(sendbuf, counts, sdispls, types, recvbuf, counts, rdispls, types, MPI_COMM_WORLD);
    check("MPI_Alltoallw_c", recvbuf, rdispls, k);
    calls++;
    int bad = failed;
    MPI_Allreduce(&failed, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !bad)
        printf("largecount: %d calls ok\n", calls);
    MPI_Finalize();
    return bad;
}
#endif

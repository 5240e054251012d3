/* pingpong: latency and bandwidth between rank 0 and every other rank.
 *
 * Usage: pingpong [-s BYTES] [-r REPS]
 * Rank 0 plays ping-pong with each rank in turn and prints one line per peer:
 *   peer <rank> <host> cluster-link <same|wan> latency_us <median RTT/2>
 *   bandwidth_mbit <one-way rate of BYTES-sized messages>
 * Every received buffer is checked; a mismatch exits with status 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LATENCY_REPS 21
#define TAG 7

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 131 + seed);
}

static int check(const unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (unsigned char)(i * 131 + seed))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    size_t bytes = 1 << 20;
    int reps = 8, opt, rank, size, ok = 1;
    while ((opt = getopt(argc, argv, "s:r:")) != -1) {
        if (opt == 's') bytes = strtoull(optarg, NULL, 10);
        else if (opt == 'r') reps = atoi(optarg);
        else { fprintf(stderr, "usage: pingpong [-s BYTES] [-r REPS]\n"); return 2; }
    }
    if (bytes == 0 || reps < 1) {
        fprintf(stderr, "pingpong: -s and -r must be positive\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    char *hosts = malloc((size_t)size * MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
               0, MPI_COMM_WORLD);
    unsigned char *buf = malloc(bytes);
    for (int peer = 1; peer < size; peer++) {
        double rtt[LATENCY_REPS];
        char small[8] = {0};
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (int i = 0; i < LATENCY_REPS; i++) {
                double t0 = MPI_Wtime();
                MPI_Send(small, 8, MPI_CHAR, peer, TAG, MPI_COMM_WORLD);
                MPI_Recv(small, 8, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                rtt[i] = MPI_Wtime() - t0;
            }
            /* Bandwidth: reps messages one way, then a 1-byte acknowledgement. */
            fill(buf, bytes, peer);
            MPI_Send(buf, 1, MPI_CHAR, peer, TAG, MPI_COMM_WORLD);       /* warm up */
            MPI_Recv(small, 1, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t0 = MPI_Wtime();
            for (int i = 0; i < reps; i++)
                MPI_Send(buf, (int)bytes, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
            MPI_Recv(small, 1, MPI_CHAR, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double seconds = MPI_Wtime() - t0 - rtt[LATENCY_REPS / 2] / 2;
            qsort(rtt, LATENCY_REPS, sizeof rtt[0], compare_double);
            int peer_ok;
            MPI_Recv(&peer_ok, 1, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ok &= peer_ok;
            printf("peer %d host %s latency_us %.1f bandwidth_mbit %.1f %s\n", peer,
                   hosts + (size_t)peer * MPI_MAX_PROCESSOR_NAME, rtt[LATENCY_REPS / 2] / 2 * 1e6,
                   8.0 * bytes * reps / seconds / 1e6, peer_ok ? "ok" : "CORRUPT");
            fflush(stdout);
        } else if (rank == peer) {
            for (int i = 0; i < LATENCY_REPS; i++) {
                MPI_Recv(small, 8, MPI_CHAR, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(small, 8, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
            }
            MPI_Recv(buf, 1, MPI_CHAR, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(small, 1, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
            int peer_ok = 1;
            for (int i = 0; i < reps; i++) {
                memset(buf, 0, bytes);
                MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                peer_ok &= check(buf, bytes, peer);
            }
            MPI_Send(small, 1, MPI_CHAR, 0, TAG, MPI_COMM_WORLD);
            MPI_Send(&peer_ok, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD);
        }
    }
    free(buf);
    free(hosts);
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}

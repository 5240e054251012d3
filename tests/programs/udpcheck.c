/* udpcheck: the WANMPI_UDP_PARAMS attribute (libwanmpi, docs/libwanmpi.md
 * "Blast transport") end to end.
 *
 * Usage: udpcheck [--udp RATE_MBPS,PAYLOAD] [--bytes N] [--checks]
 * Rank r of the first half pairs with rank r + size/2 (placed block-wise,
 * the halves are two clusters). With --udp both ranks of every pair put
 * WANMPI_UDP_PARAMS on MPI_COMM_WORLD naming each other, right after
 * MPI_Init, before any message. Then each pair exchanges N bytes each way
 * (default 64 MB, in 4 MiB messages) and checks every byte. --checks also
 * makes every rank try bad values (each must fail with the documented error
 * class and leave the attribute as it was), reads the attribute back,
 * replaces it once the connection is open (libwanmpi then warns that it stays
 * on TCP) and deletes it on a duplicate.
 * Rank 0 prints one JSON line:
 *   {"bench": "udpcheck", "pairs": P, "bytes": N, "seconds": S, "requested": 0|1,
 *    "checks": "ok"|"skipped", "check": "ok"}
 * Anything wrong is printed by the rank that saw it and the job aborts
 * with status 3. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/include/wanmpi.h"

static int rank;

#define FAIL(...) do { fprintf(stderr, "udpcheck rank %d: ", rank); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, "\n"); MPI_Abort(MPI_COMM_WORLD, 3); } while (0)

static unsigned char byte_at(int sender, long offset)
{
    return (unsigned char)((offset * 193 + (offset >> 14) * 11 + sender * 41) & 0xFF);
}

static void expect_class(int rc, int cls, const char *what)
{
    int got = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &got);
    if (got != cls)
        FAIL("%s: error class %d, expected %d", what, got, cls);
}

static void bad_values(int partner, int size)
{
    struct wanmpi_udp_params bad[] = {
        { size, 1452, 100.0 }, { -1, 1452, 100.0 }, { rank, 1452, 100.0 },
        { partner, 63, 100.0 }, { partner, 65508, 100.0 },
        { partner, 1452, 0.0 }, { partner, 1452, -5.0 }, { partner, 1452, NAN }, { partner, 1452, 2e6 },
    };
    int classes[] = { MPI_ERR_RANK, MPI_ERR_RANK, MPI_ERR_RANK, MPI_ERR_ARG, MPI_ERR_ARG,
                      MPI_ERR_ARG, MPI_ERR_ARG, MPI_ERR_ARG, MPI_ERR_ARG };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "bad value %zu", i);
        expect_class(MPI_Comm_set_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, &bad[i]), classes[i], what);
    }
    expect_class(MPI_Comm_set_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, NULL), MPI_ERR_ARG, "NULL");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long bytes = 64L << 20, chunk = 4L << 20;
    double rate = 0;
    int payload = 0, checks = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--udp")) {
            if (sscanf(argv[++i], "%lf,%d", &rate, &payload) != 2)
                FAIL("--udp takes RATE_MBPS,PAYLOAD, got %s", argv[i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--bytes")) {
            bytes = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--checks")) {
            checks = 1;
        } else {
            FAIL("unknown argument %s (usage: udpcheck [--udp RATE_MBPS,PAYLOAD] [--bytes N] [--checks])",
                 argv[i]);
        }
    }
    if (size < 2 || size % 2 || bytes < 1)
        FAIL("needs an even number of ranks (got %d) and --bytes >= 1", size);
    int half = size / 2, partner = rank < half ? rank + half : rank - half;
    struct wanmpi_udp_params up = { partner, payload, rate };
    if (rate > 0) {             /* before any message, as the attribute asks */
        int rc = MPI_Comm_set_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, &up);
        if (rc != MPI_SUCCESS)
            FAIL("put of WANMPI_UDP_PARAMS failed (%d)", rc);
    }
    if (checks) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        bad_values(partner, size);
        struct wanmpi_udp_params *got = NULL;
        int flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, &got, &flag);
        if (rate > 0 && (!flag || got->partner_rank != partner || got->payload_size != payload
                         || got->rate_mbps != rate))
            FAIL("get after put: flag %d, values not those put", flag);
        if (rate <= 0 && flag)
            FAIL("get without a put: flag 1");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }

    unsigned char *out = malloc((size_t)chunk), *in = malloc((size_t)chunk);
    if (!out || !in)
        FAIL("out of memory");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long off = 0; off < bytes; off += chunk) {
        long n = bytes - off < chunk ? bytes - off : chunk;
        for (long i = 0; i < n; i++)
            out[i] = byte_at(rank, off + i);
        MPI_Sendrecv(out, (int)n, MPI_BYTE, partner, 7, in, (int)n, MPI_BYTE, partner, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (long i = 0; i < n; i++)
            if (in[i] != byte_at(partner, off + i))
                FAIL("byte %ld from rank %d is %d, expected %d", off + i, partner, in[i],
                     byte_at(partner, off + i));
    }
    double seconds = MPI_Wtime() - t0, slowest;
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (checks) {
        /* the connection to the partner is open now: a new put applies to
         * later connections only (libwanmpi warns), a delete withdraws it */
        if (rate > 0 && MPI_Comm_set_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, &up) != MPI_SUCCESS)
            FAIL("second put failed");
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        if (rate > 0) {
            int flag = 1;
            void *got;
            MPI_Comm_set_attr(dup, WANMPI_UDP_PARAMS, &up);
            MPI_Comm_delete_attr(dup, WANMPI_UDP_PARAMS);
            MPI_Comm_get_attr(dup, WANMPI_UDP_PARAMS, &got, &flag);
            if (flag)
                FAIL("get after delete: flag 1");
            MPI_Comm_get_attr(MPI_COMM_WORLD, WANMPI_UDP_PARAMS, &got, &flag);
            if (!flag)
                FAIL("a delete on a duplicate removed MPI_COMM_WORLD's attribute");
        }
        MPI_Comm_free(&dup);
    }
    if (rank == 0)
        printf("{\"bench\": \"udpcheck\", \"pairs\": %d, \"bytes\": %ld, \"seconds\": %.3f, \"requested\": %d, "
               "\"checks\": \"%s\", \"check\": \"ok\"}\n", half, bytes, slowest, rate > 0,
               checks ? "ok" : "skipped");
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}

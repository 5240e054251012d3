/* wanflow: aggregate throughput between the two halves of the job.
 *
 * Usage: wanflow [--bytes N] [--chunk N] [--window W]
 * Rank r of the first half sends N bytes (default 16 MB) to rank r + size/2
 * of the second half, all pairs at once, in messages of --chunk bytes
 * (default 1 MiB), W of them in flight (default 4: MPI_Isend / MPI_Irecv on
 * a ring of W buffers, so the rendezvous round trip of each large message
 * does not idle the path; 1 = blocking MPI_Send / MPI_Recv); placed
 * block-wise, the halves are two clusters and every pair crosses the WAN. Each receiver checks every byte (a pattern of its
 * sender and offset). Rank 0 prints one JSON line:
 *   {"bench": "wanflow", "pairs": P, "bytes": N, "seconds": S,
 *    "aggregate_mbit": total bits / S / 1e6, "slowest_pair_mbit": ...,
 *    "sum_of_pair_rates_mbit": the pairs' own rates added, "check": "ok"|"CORRUPT"}
 * S runs from a common start (barrier) to the last receiver's last byte;
 * a pair's own rate runs to its receiver's last byte (the sum is above the
 * aggregate when pairs finish at different times).
 * A corrupt payload also exits with status 3.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char byte_at(int sender, long offset)
{
    return (unsigned char)((offset * 131 + (offset >> 12) * 7 + sender * 29) & 0xFF);
}

struct flow {
    long bytes, chunk, window;
};

/* 0, or 2 after rank 0 printed what is wrong (every rank sees the same arguments) */
static int parse_options(int argc, char **argv, int rank, int size, struct flow *f)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--bytes"))
            f->bytes = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--chunk"))
            f->chunk = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--window"))
            f->window = atol(argv[++i]);
        else {
            if (rank == 0)
                fprintf(stderr, "wanflow: unknown argument %s (usage: wanflow [--bytes N] [--chunk N] "
                                "[--window W])\n", argv[i]);
            return 2;
        }
    }
    if (size < 2 || size % 2 || f->bytes < 1 || f->chunk < 1 || f->chunk > (1L << 30) || f->window < 1 ||
        f->window > 64) {
        if (rank == 0)
            fprintf(stderr, "wanflow: needs an even number of ranks (got %d), --bytes >= 1, 1 <= --chunk <= 1 GiB "
                            "and 1 <= --window <= 64\n", size);
        return 2;
    }
    return 0;
}

static long message_length(const struct flow *f, long message)
{
    long off = message * f->chunk;
    return f->bytes - off < f->chunk ? f->bytes - off : f->chunk;
}

/* Sends or receives (and checks) the whole flow with `window` messages in
 * flight; returns 1 if every received byte was right. Message i uses buffer
 * slot i mod window; messages of one pair and tag match in order, so receive
 * slot order is send order. */
static int transfer(const struct flow *f, int rank, int sender, int partner, unsigned char *buf, MPI_Request *req)
{
    int ok = 1;
    long messages = (f->bytes + f->chunk - 1) / f->chunk;
    for (long i = 0; i < messages + (sender ? 0 : f->window); i++) {
        long slot = i % f->window;
        unsigned char *b = buf + slot * f->chunk;
        if (sender) {
            long off = i * f->chunk, n = message_length(f, i);
            MPI_Wait(&req[slot], MPI_STATUS_IGNORE);        /* the slot's previous send is done */
            for (long k = 0; k < n; k++)
                b[k] = byte_at(rank, off + k);
            MPI_Isend(b, (int)n, MPI_BYTE, partner, 2, MPI_COMM_WORLD, &req[slot]);
        } else {
            long done = i - f->window;                       /* the message this slot held */
            if (done >= 0) {
                long off = done * f->chunk, n = message_length(f, done);
                MPI_Wait(&req[slot], MPI_STATUS_IGNORE);
                for (long k = 0; k < n && ok; k++)
                    ok = b[k] == byte_at(partner, off + k);
            }
            if (i < messages)
                MPI_Irecv(b, (int)message_length(f, i), MPI_BYTE, partner, 2, MPI_COMM_WORLD, &req[slot]);
        }
    }
    MPI_Waitall((int)f->window, req, MPI_STATUSES_IGNORE);
    return ok;
}

/* rank 0 prints the JSON line; returns whether every pair's bytes were right */
static int report(const struct flow *f, int rank, int half, int sender, int ok, double seconds)
{
    double mine = sender ? 0.0 : seconds;
    double rate = sender ? 0.0 : 8.0 * (double)f->bytes / mine / 1e6;
    double slowest, sum_of_rates;
    int all_ok;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&rate, &sum_of_rates, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("{\"bench\": \"wanflow\", \"pairs\": %d, \"bytes\": %ld, \"seconds\": %.6f, \"aggregate_mbit\": %.2f, "
               "\"slowest_pair_mbit\": %.2f, \"sum_of_pair_rates_mbit\": %.2f, \"check\": \"%s\"}\n", half, f->bytes,
               slowest, 8.0 * (double)f->bytes * half / slowest / 1e6, 8.0 * (double)f->bytes / slowest / 1e6,
               sum_of_rates, all_ok ? "ok" : "CORRUPT");
        fflush(stdout);
    }
    return all_ok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct flow f = {.bytes = 16 * 1000 * 1000, .chunk = 1 << 20, .window = 4};
    if (parse_options(argc, argv, rank, size, &f)) {
        MPI_Finalize();
        return 2;
    }
    int half = size / 2, sender = rank < half;
    int partner = sender ? rank + half : rank - half;
    unsigned char *buf = malloc((size_t)(f.chunk * f.window));
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)f.window);
    if (!buf || !req)
        MPI_Abort(MPI_COMM_WORLD, 2);
    for (long w = 0; w < f.window; w++)
        req[w] = MPI_REQUEST_NULL;
    /* warm up: every pair's connection is open before the clock starts */
    char token = 0;
    if (sender)
        MPI_Send(&token, 1, MPI_CHAR, partner, 1, MPI_COMM_WORLD);
    else
        MPI_Recv(&token, 1, MPI_CHAR, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int ok = transfer(&f, rank, sender, partner, buf, req);
    int all_ok = report(&f, rank, half, sender, ok, MPI_Wtime() - t0);
    free(buf);
    free(req);
    MPI_Finalize();
    return all_ok || rank != 0 ? 0 : 3;
}

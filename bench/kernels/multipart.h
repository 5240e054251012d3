/* multipart.h: the multipartition pattern of NAS BT and SP, shared by bt.c
 * and sp.c (they differ in message sizes and counts and in the line solver).
 *
 * Process grid: R rows x C columns (MPI_Dims_create, R >= C), rank = row * C
 * + col, periodic. With block placement on two clusters, rows 0..R/2-1 are in
 * the first cluster, so the rows R/2-1 and R-1 (whose south neighbour is in
 * the other cluster) are the two rows that talk across, as the pacing
 * paper's Fig. 1 shows for BT and SP. Each rank owns a q^3 cell of 5
 * components. One iteration (a time step):
 *   - copy_faces: one face (q^2 x 5 doubles) to each of the four neighbours;
 *   - x, y and z solves: a forward and a backward sweep of stages; at each
 *     stage every rank (multipartition: all are busy) solves a share of its
 *     lines (the compute phase) and sends `pieces` messages of `sweep` doubles
 *     to the next rank of the sweep (x: east, C-1 stages; y: south, R-1; z:
 *     the diagonal south-east, max(R,C)-1), then back;
 *   - an allreduce of the residual norm.
 * Checks: every received element (value() payload) and each allreduce
 * (closed-form term and conservation of what was sent), exactly. */
#ifndef MULTIPART_H
#define MULTIPART_H
#include "kernel.h"

struct mp {
    int q;                           /* cell edge */
    long sweep;                      /* doubles per sweep message */
    int pieces;                      /* sweep messages per stage */
    void (*solve)(double *u, long lines, int len);   /* line solver, 5 components per point */
};

static struct mp mp;
static int mp_r, mp_c, mp_row, mp_col;
static double *mp_u;
static uint32_t *mp_out[4], *mp_in[4];

static int mp_at(int row, int col)
{
    return ((row % mp_r + mp_r) % mp_r) * mp_c + (col % mp_c + mp_c) % mp_c;
}

static void mp_copy_faces(int key)
{
    long n = 2L * mp.q * mp.q * 5;
    int to[4] = {mp_at(mp_row - 1, mp_col), mp_at(mp_row + 1, mp_col), mp_at(mp_row, mp_col - 1),
                 mp_at(mp_row, mp_col + 1)};                   /* north, south, west, east */
    int from[4] = {to[1], to[0], to[3], to[2]};
    MPI_Request req[8];
    for (int f = 0; f < 4; f++)
        MPI_Irecv(mp_in[f], (int)n, MPI_UINT32_T, from[f], f, MPI_COMM_WORLD, &req[f]);
    for (int f = 0; f < 4; f++) {
        fill(mp_out[f], n, to[f], key * 4 + f);
        MPI_Isend(mp_out[f], (int)n, MPI_UINT32_T, to[f], f, MPI_COMM_WORLD, &req[4 + f]);
    }
    MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
    for (int f = 0; f < 4; f++)
        check("copy_faces", mp_in[f], n, from[f], key * 4 + f);
}

/* One sweep: `stages` stages towards (dr, dc), then back. */
static int mp_sweep(const char *what, int stages, int dr, int dc, int key)
{
    long lines = (long)mp.q * mp.q, share = lines / (stages > 0 ? stages : 1);
    int fwd = mp_at(mp_row + dr, mp_col + dc), back = mp_at(mp_row - dr, mp_col - dc);
    long n = mp.sweep * 2;
    for (int dir = 0; dir < 2; dir++)
        for (int s = 0; s < stages; s++) {
            mp.solve(mp_u + (s * share % lines) * mp.q * 5, share, mp.q);
            for (int k = 0; k < mp.pieces; k++)
                exchange(what, dir ? back : fwd, dir ? fwd : back, mp_out[0], mp_in[0], n, key++,
                         MPI_COMM_WORLD);
        }
    if (stages == 0)
        mp.solve(mp_u, lines, mp.q);
    return key;
}

static void mp_run(int iters)
{
    long cells = (long)mp.q * mp.q * mp.q * 5;
    for (long i = 0; i < cells; i++)
        mp_u[i] = 1.0 + (double)(i % 17) / 17.0;
    for (int it = 0; it < iters; it++) {
        int key = (it % 100000) * 4096;
        mp_copy_faces(key++);
        key = mp_sweep("x_solve", mp_c - 1, 0, 1, key);
        key = mp_sweep("y_solve", mp_r - 1, 1, 0, key);
        key = mp_sweep("z_solve", (mp_r > mp_c ? mp_r : mp_c) - 1, 1, 1, key);
        double norm = 0;
        for (long i = 0; i < cells; i++)
            norm += mp_u[i] * mp_u[i];
        allreduce_checked("norm", it, &norm, 1);
        if (!isfinite(norm)) {
            fprintf(stderr, "%s: rank %d, iteration %d: the norm is not finite\n", kname, rank, it);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

static int mp_main(void)
{
    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    mp_r = dims[0] >= dims[1] ? dims[0] : dims[1];
    mp_c = size / mp_r;
    mp_row = rank / mp_c;
    mp_col = rank % mp_c;
    mp_u = xmalloc((size_t)mp.q * mp.q * mp.q * 5 * sizeof(double));
    long face = (long)mp.q * mp.q * 5 * 8, big = mp.sweep * 8 > face ? mp.sweep * 8 : face;
    for (int f = 0; f < 4; f++) {
        mp_out[f] = xmalloc(big);
        mp_in[f] = xmalloc(big);
    }
    return kernel_run(mp_run);
}
#endif

/* mg: the communication pattern of NAS MG (multigrid V-cycle).
 *
 *   mg [--class S|A|B] [--iters I]
 *
 * Process grid: 3D, periodic (MPI_Dims_create), each rank owns an m^3 block
 * (S m = 16, A 64, B 128). One iteration is a V-cycle over the levels m,
 * m/2, ..., 4: going down and coming up, at each level a Jacobi smoothing
 * sweep of the 7-point stencil on the local block (the compute phase) and a
 * halo exchange of one face with each of the six neighbours (lm^2 doubles:
 * S 2 KiB .. 128 B, A 32 KiB .. 128 B, B 128 KiB .. 128 B: large messages
 * at the fine levels, small ones at the coarse), then an allreduce of the
 * residual norm. With block placement on two clusters every rank has a
 * neighbour in the other cluster (all nodes talk across, small and large
 * messages). Checks: every received element (value() payload) and each
 * allreduce (closed-form term and conservation of what was sent), exactly. */
#include "kernel.h"

static int m, levels, nbr[3][2];
static double *u[8], *v[8];
static uint32_t *out[6], *in[6];

#define IX(lm, i, j, k) (((long)(i) * ((lm) + 2) + (j)) * ((lm) + 2) + (k))

/* One Jacobi sweep of the 7-point stencil on the lm^3 interior; returns the
 * squared change. */
static double smooth(int l)
{
    int lm = m >> l;
    double *a = u[l], *b = v[l], s = 0;
    for (int i = 1; i <= lm; i++)
        for (int j = 1; j <= lm; j++)
            for (int k = 1; k <= lm; k++) {
                double nb = a[IX(lm, i - 1, j, k)] + a[IX(lm, i + 1, j, k)] + a[IX(lm, i, j - 1, k)] +
                            a[IX(lm, i, j + 1, k)] + a[IX(lm, i, j, k - 1)] + a[IX(lm, i, j, k + 1)];
                double nv = (nb + 1.0) / 6.0;
                s += (nv - a[IX(lm, i, j, k)]) * (nv - a[IX(lm, i, j, k)]);
                b[IX(lm, i, j, k)] = nv;
            }
    u[l] = b;
    v[l] = a;
    return s;
}

static void halo(int l, int key)
{
    int lm = m >> l;
    long n = 2L * lm * lm;                             /* uint32 elements: lm^2 doubles */
    MPI_Request req[12];
    int k = 0;
    for (int d = 0; d < 3; d++)
        for (int dir = 0; dir < 2; dir++) {            /* receive what the neighbour sent towards us */
            int f = d * 2 + dir;
            MPI_Irecv(in[f], (int)n, MPI_UINT32_T, nbr[d][1 - dir], f, MPI_COMM_WORLD, &req[k++]);
        }
    for (int d = 0; d < 3; d++)
        for (int dir = 0; dir < 2; dir++) {
            int f = d * 2 + dir;
            fill(out[f], n, nbr[d][dir], key * 8 + f);
            MPI_Isend(out[f], (int)n, MPI_UINT32_T, nbr[d][dir], f, MPI_COMM_WORLD, &req[k++]);
        }
    MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    for (int f = 0; f < 6; f++)
        check("halo", in[f], n, nbr[f / 2][1 - f % 2], key * 8 + f);
}

static void run(int iters)
{
    for (int it = 0; it < iters; it++) {
        double norm = 0;
        int key = it * 2 * levels;
        for (int l = 0; l < levels; l++) {             /* down: fine to coarse */
            norm += smooth(l);
            halo(l, key++);
        }
        for (int l = levels - 1; l >= 0; l--) {        /* up: coarse to fine */
            halo(l, key++);
            norm += smooth(l);
        }
        allreduce_checked("norm", it, &norm, 1);
        if (!isfinite(norm)) {
            fprintf(stderr, "mg: rank %d, iteration %d: the norm is not finite\n", rank, it);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

int main(int argc, char **argv)
{
    kernel_init(&argc, &argv, "mg", 8, 8, 8);
    m = BY_CLASS(16, 64, 128);
    levels = 0;
    for (int lm = m; lm >= 4; lm /= 2)
        levels++;
    int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
    MPI_Dims_create(size, 3, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
    for (int d = 0; d < 3; d++)
        MPI_Cart_shift(cart, d, 1, &nbr[d][0], &nbr[d][1]);   /* [0]: -1 side, [1]: +1 side */
    /* nbr[d][dir]: sending towards dir; the face in direction 0 goes to the -1 side */
    for (int l = 0; l < levels; l++) {
        int lm = m >> l;
        long cells = (long)(lm + 2) * (lm + 2) * (lm + 2);
        u[l] = xmalloc(cells * sizeof(double));
        v[l] = xmalloc(cells * sizeof(double));
    }
    for (int f = 0; f < 6; f++) {
        out[f] = xmalloc((size_t)m * m * 8);
        in[f] = xmalloc((size_t)m * m * 8);
    }
    return kernel_run(run);
}

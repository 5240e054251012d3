/* cg: the communication pattern of NAS CG (conjugate gradient).
 *
 *   cg [--class S|A|B] [--iters I]      (an even number of ranks)
 *
 * Process grid: 2 rows of size/2 columns, rank = row * cols + col, so with
 * block placement on two clusters each row is one cluster. Per iteration:
 *   - a local sparse matrix-vector product q = A p (A symmetric, 15 nonzeros
 *     per row, diagonally dominant) on `seg` rows: the compute phase;
 *   - the row reduction of the product: log2(cols) exchanges of a segment
 *     (seg doubles) with the partner col ^ 2^s in the same row;
 *   - the transpose exchange of a segment: the ranks with an even column
 *     swap with their mirror in the other row (across the clusters: half the
 *     nodes of each cluster talk across, as the pacing paper's Fig. 1 shows),
 *     odd columns with column col ^ 2 of their own row (when it exists);
 *   - two allreduces of dot products (p.q and r.r) that drive a CG update.
 * Segment (message) size: S 2048 doubles (16 KiB), A 16384 (128 KiB),
 * B 65536 (512 KiB). Checks: every received element (value() payload) and
 * each allreduce (a closed-form term and the conservation of everything sent
 * and received, exactly). */
#include "kernel.h"

#define NOFF 7
static long seg;
static int cols, row, col;
static double *p, *q, *r, *x, w[NOFF];
static long off[NOFF];
static uint32_t *out, *in;

static void matvec(void)
{
    double diag = 1.0;
    for (int k = 0; k < NOFF; k++)
        diag += 2 * fabs(w[k]);
    for (long i = 0; i < seg; i++) {
        double s = diag * p[i];
        for (int k = 0; k < NOFF; k++)
            s += w[k] * (p[(i + off[k]) % seg] + p[(i + seg - off[k]) % seg]);
        q[i] = s;
    }
}

static void start(void)
{
    for (long i = 0; i < seg; i++) {
        r[i] = p[i] = 1.0 + (double)(value(rank, 0, 0, i) % 1000) / 1000.0;
        x[i] = 0;
    }
}

static void run(int iters)
{
    int half = size / 2;
    int transpose;
    if (col % 2 == 0)
        transpose = row ? rank - half : rank + half;
    else
        transpose = (col ^ 2) < cols ? row * cols + (col ^ 2) : MPI_PROC_NULL;
    long n = seg * 2;                                  /* uint32 elements per segment */
    double rho = 0;
    start();
    for (long i = 0; i < seg; i++)
        rho += r[i] * r[i];
    allreduce_checked("rho", 0, &rho, 1);
    for (int it = 0; it < iters; it++) {
        if (it % 25 == 24)
            start();                                   /* restart: keep the numbers tame */
        matvec();
        int key = it * 32;
        for (int s = 1; s < cols; s <<= 1) {
            int c = col ^ s;
            int peer = c < cols ? row * cols + c : MPI_PROC_NULL;
            exchange("row reduction", peer, peer, out, in, n, key++, MPI_COMM_WORLD);
        }
        exchange("transpose", transpose, transpose, out, in, n, key++, MPI_COMM_WORLD);
        double d = 0;
        for (long i = 0; i < seg; i++)
            d += p[i] * q[i];
        allreduce_checked("p.q", it * 2 + 1, &d, 1);
        double alpha = rho / d, rr = 0;
        for (long i = 0; i < seg; i++) {
            x[i] += alpha * p[i];
            r[i] -= alpha * q[i];
            rr += r[i] * r[i];
        }
        allreduce_checked("r.r", it * 2 + 2, &rr, 1);
        double beta = rr / rho;
        rho = rr;
        for (long i = 0; i < seg; i++)
            p[i] = r[i] + beta * p[i];
        if (!isfinite(rho)) {
            fprintf(stderr, "cg: rank %d, iteration %d: the residual is not finite\n", rank, it);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}

int main(int argc, char **argv)
{
    kusage_extra = " (an even number of ranks)";
    kernel_init(&argc, &argv, "cg", 25, 50, 50);
    if (size % 2)
        usage("cg needs an even number of ranks");
    seg = BY_CLASS(2048, 16384, 65536);
    cols = size / 2;
    row = rank / cols;
    col = rank % cols;
    for (int k = 0; k < NOFF; k++) {
        off[k] = 1 + value(k, 7, 1, 0) % (uint32_t)(seg / 2 - 1);
        w[k] = -0.05 * (1 + k % 3);
    }
    p = xmalloc(seg * sizeof *p);
    q = xmalloc(seg * sizeof *q);
    r = xmalloc(seg * sizeof *r);
    x = xmalloc(seg * sizeof *x);
    out = xmalloc(seg * 8);
    in = xmalloc(seg * 8);
    return kernel_run(run);
}

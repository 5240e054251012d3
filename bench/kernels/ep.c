/* ep: the pattern of NAS EP (embarrassingly parallel): almost no
 * communication.
 *
 *   ep [--class S|A|B] [--iters I]
 *
 * Per iteration the ranks share 2^k pairs of uniform random numbers in
 * (-1, 1) (S k = 20, A 24, B 26; 4 iterations by default, so 2^22, 2^26 and
 * 2^28 pairs in all: a quarter of NAS EP's class S, A and B sizes, since the
 * WAN does not change EP's time and a suite should not wait on it). The
 * pairs are counted
 * from a global index (a counter-based generator, splitmix64), so the result
 * does not depend on the number of ranks. Each rank turns its pairs inside
 * the unit circle into Gaussian deviates (Marsaglia's polar method: log,
 * sqrt) and counts them in ten square annuli, and sums them in fixed point.
 * Then one small MPI_Allreduce of 12 integers (ten counts, the sums of X and
 * Y). Check: the allreduce equals, exactly, the sum of the per-rank values
 * gathered to rank 0 (MPI_Gather of the same 12 integers), and the counts
 * add up to about pi/4 of the pairs (the accepted ones). */
#include "kernel.h"

#define NQ 10
#define FIX 16777216.0                                  /* 2^24: fixed point of the sums */

static long pairs;

static uint64_t splitmix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t i)                       /* in (-1, 1) */
{
    return ((double)(splitmix(i) >> 11) + 0.5) / 4503599627370496.0 - 1.0;   /* / 2^52 */
}

static void run(int iters)
{
    int64_t mine[NQ + 2], all[NQ + 2], *each = rank == 0 ? xmalloc(sizeof(int64_t) * (NQ + 2) * size) : NULL;
    for (int it = 0; it < iters; it++) {
        memset(mine, 0, sizeof mine);
        long lo = pairs * rank / size, hi = pairs * (rank + 1) / size;
        uint64_t base = (uint64_t)it * (uint64_t)pairs;
        for (long j = lo; j < hi; j++) {
            double x = uniform(2 * (base + j)), y = uniform(2 * (base + j) + 1), t = x * x + y * y;
            if (t > 1.0 || t == 0.0)
                continue;
            double f = sqrt(-2.0 * log(t) / t), gx = x * f, gy = y * f;
            int l = (int)fmax(fabs(gx), fabs(gy));
            if (l < NQ)
                mine[l]++;
            else
                mine[NQ - 1]++;
            mine[NQ] += llround(gx * FIX);
            mine[NQ + 1] += llround(gy * FIX);
        }
        MPI_Allreduce(mine, all, NQ + 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Gather(mine, NQ + 2, MPI_INT64_T, each, NQ + 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            int64_t accepted = 0;
            for (int k = 0; k < NQ + 2; k++) {
                int64_t want = 0;
                for (int p = 0; p < size; p++)
                    want += each[p * (NQ + 2) + k];
                if (all[k] != want) {
                    fprintf(stderr, "ep allreduce: iteration %d, value %d: got %lld, the ranks' sum is %lld\n",
                            it, k, (long long)all[k], (long long)want);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                if (k < NQ)
                    accepted += all[k];
            }
            double ratio = (double)accepted / (double)pairs;
            if (fabs(ratio - M_PI / 4) > 0.01) {
                fprintf(stderr, "ep counts: iteration %d: %lld of %ld pairs accepted (%.4f, want about %.4f)\n",
                        it, (long long)accepted, pairs, ratio, M_PI / 4);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    free(each);
}

int main(int argc, char **argv)
{
    kernel_init(&argc, &argv, "ep", 4, 4, 4);
    pairs = 1L << BY_CLASS(20, 24, 26);
    return kernel_run(run);
}

/* bt: the communication pattern of NAS BT (block tridiagonal ADI solver).
 *
 *   bt [--class S|A|B] [--iters I]
 *
 * The multipartition pattern of multipart.h (copy_faces to the four
 * neighbours, then x, y and z sweeps of stages; two rows of the process
 * grid talk across the clusters). BT's line solver is block tridiagonal:
 * per point, a 5x5 block times the previous (forward) or next (backward)
 * point's 5 components. Per stage one large message: q^2 x 30 doubles (the
 * 5x5 block and the 5 right-hand sides of each face point).
 * Cell edge q: S 12, A 32, B 64; sweep message S 34 KiB, A 240 KiB,
 * B 960 KiB; face message S 5.6 KiB, A 40 KiB, B 160 KiB. */
#include "multipart.h"

static double blk[25];

static void solve_block(double *u, long lines, int len)
{
    for (long l = 0; l < lines; l++) {
        double *p = u + l * len * 5;
        for (int j = 1; j < len; j++)                  /* forward elimination */
            for (int a = 0; a < 5; a++) {
                double s = 0;
                for (int b = 0; b < 5; b++)
                    s += blk[a * 5 + b] * p[(j - 1) * 5 + b];
                p[j * 5 + a] = (p[j * 5 + a] - s) * 0.9 + 0.1;
            }
        for (int j = len - 2; j >= 0; j--)             /* back substitution */
            for (int a = 0; a < 5; a++) {
                double s = 0;
                for (int b = 0; b < 5; b++)
                    s += blk[b * 5 + a] * p[(j + 1) * 5 + b];
                p[j * 5 + a] = (p[j * 5 + a] - s) * 0.9 + 0.1;
            }
    }
}

int main(int argc, char **argv)
{
    kernel_init(&argc, &argv, "bt", 20, 20, 20);
    for (int i = 0; i < 25; i++)
        blk[i] = (i % 6 == 0 ? 0.1 : 0.02) * (1 + i % 3);
    mp.q = BY_CLASS(12, 32, 64);
    mp.sweep = (long)mp.q * mp.q * 30;
    mp.pieces = 1;
    mp.solve = solve_block;
    return mp_main();
}

/* sp: the communication pattern of NAS SP (scalar pentadiagonal ADI solver).
 *
 *   sp [--class S|A|B] [--iters I]
 *
 * The multipartition pattern of multipart.h (copy_faces to the four
 * neighbours, then x, y and z sweeps of stages; two rows of the process
 * grid talk across the clusters), with more, smaller messages than BT:
 * per stage three messages of q^2 x 4 doubles (the two pentadiagonal
 * coefficient rows, and the right-hand sides), and twice BT's iterations
 * by default. SP's line solver is scalar pentadiagonal: per point and
 * component, the two previous (forward) or next (backward) values.
 * Cell edge q: S 12, A 32, B 64; sweep messages S 4.5 KiB, A 32 KiB,
 * B 128 KiB; face message S 5.6 KiB, A 40 KiB, B 160 KiB. */
#include "multipart.h"

static void solve_penta(double *u, long lines, int len)
{
    for (long l = 0; l < lines; l++) {
        double *p = u + l * len * 5;
        for (int j = 2; j < len; j++)                  /* forward elimination */
            for (int c = 0; c < 5; c++)
                p[j * 5 + c] = (p[j * 5 + c] - 0.2 * p[(j - 1) * 5 + c] - 0.05 * p[(j - 2) * 5 + c]) * 0.9 + 0.1;
        for (int j = len - 3; j >= 0; j--)             /* back substitution */
            for (int c = 0; c < 5; c++)
                p[j * 5 + c] = (p[j * 5 + c] - 0.2 * p[(j + 1) * 5 + c] - 0.05 * p[(j + 2) * 5 + c]) * 0.9 + 0.1;
    }
}

int main(int argc, char **argv)
{
    kernel_init(&argc, &argv, "sp", 40, 40, 40);
    mp.q = BY_CLASS(12, 32, 64);
    mp.sweep = (long)mp.q * mp.q * 4;
    mp.pieces = 3;
    mp.solve = solve_penta;
    return mp_main();
}

/* newcomm: what a new communicator costs. N fresh communicators (MPI_Comm_dup of
 * MPI_COMM_WORLD), one 1-int MPI_Allreduce on each, then MPI_Comm_free.
 * argv[1] = N (default 20); argv[2] = 1: non-commutative user op (which
 * libwanmpi hands to the MPI anyway). Prints the time per communicator. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static void first(void *in, void *inout, int *len, MPI_Datatype *t) { (void)in; (void)inout; (void)len; (void)t; }
int main(int argc, char **argv)
{
    int rank, n = argc > 1 ? atoi(argv[1]) : 20, noncomm = argc > 2 ? atoi(argv[2]) : 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Op op = MPI_SUM;
    if (noncomm)
        MPI_Op_create(first, 0, &op);
    int x = 1, y;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Allreduce(&x, &y, 1, MPI_INT, op, c);
        MPI_Comm_free(&c);
    }
    double t1 = MPI_Wtime();
    /* the same number of allreduces on one communicator */
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Allreduce(&x, &y, 1, MPI_INT, op, c);
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = MPI_Wtime();
    for (int i = 0; i < n; i++)
        MPI_Allreduce(&x, &y, 1, MPI_INT, op, c);
    double t3 = MPI_Wtime();
    if (rank == 0)
        printf("%s op: fresh comm each: %.1f ms per comm (dup+allreduce+free); same comm: %.1f ms per allreduce\n",
               noncomm ? "non-commutative" : "MPI_SUM", 1e3 * (t1 - t0) / n, 1e3 * (t3 - t2) / n);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}

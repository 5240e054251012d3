/* rmacheck: MPI one-sided communication, results checked exactly.
 *
 * Usage: rmacheck [--count N]
 * Every rank exposes a window of N longs. Active target (fences): each rank
 * puts a pattern of its rank into its right neighbour's window, gets its
 * left neighbour's, and every rank accumulates (MPI_SUM) into rank 0's
 * window. Passive target (lock/unlock): each rank fetch-and-adds 1 on rank
 * 0's counter and compare-and-swaps on its right neighbour. Every value is
 * compared with what it must be; rank 0 prints "rmacheck ok ranks R count N"
 * or the first mismatch, and the exit status is 3 on any mismatch.
 *
 * MPICH jobs run with MPIR_CVAR_CH4_OFI_ENABLE_RMA=0 (docs/benchmarks.md,
 * "MPICH on par"), i.e. one-sided calls through active messages: this is
 * what shows they still give exact results. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long pattern(int rank, long i) { return rank * 1000003L + i * 7 + 1; }

static int check(const char *what, long got, long want, int rank, long i)
{
    if (got == want)
        return 0;
    fprintf(stderr, "rmacheck: rank %d %s[%ld] = %ld, expected %ld\n", rank, what, i, got, want);
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    long count = 1000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--count"))
            count = atol(argv[i + 1]);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    long *win_buf, *mine = malloc(count * sizeof(long)), *got = malloc(count * sizeof(long));
    long *sum_buf, counter_buf[2] = {0, 0};
    MPI_Win win, sum_win, counter_win;
    MPI_Win_allocate(count * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win_buf, &win);
    MPI_Win_allocate(count * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &sum_buf, &sum_win);
    MPI_Win_create(counter_buf, sizeof counter_buf, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &counter_win);
    for (long i = 0; i < count; i++) {
        mine[i] = pattern(rank, i);
        win_buf[i] = -1;
        sum_buf[i] = 0;
    }
    int bad = 0;

    MPI_Win_fence(0, win);
    MPI_Put(mine, (int)count, MPI_LONG, right, 0, (int)count, MPI_LONG, win);
    MPI_Win_fence(0, win);
    for (long i = 0; i < count && !bad; i++)
        bad |= check("put", win_buf[i], pattern(left, i), rank, i);
    MPI_Win_fence(0, win);
    MPI_Get(got, (int)count, MPI_LONG, left, 0, (int)count, MPI_LONG, win);
    MPI_Win_fence(0, win);
    for (long i = 0; i < count && !bad; i++)    /* left's window holds what left-1 put there */
        bad |= check("get", got[i], pattern((left + size - 1) % size, i), rank, i);

    MPI_Win_fence(0, sum_win);
    MPI_Accumulate(mine, (int)count, MPI_LONG, 0, 0, (int)count, MPI_LONG, MPI_SUM, sum_win);
    MPI_Win_fence(0, sum_win);
    if (rank == 0)
        for (long i = 0; i < count && !bad; i++) {
            long want = 0;
            for (int r = 0; r < size; r++)
                want += pattern(r, i);
            bad |= check("accumulate", sum_buf[i], want, rank, i);
        }

    long one = 1, before, swapped, mark = 1000 + rank;
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, counter_win);
    MPI_Fetch_and_op(&one, &before, MPI_LONG, 0, 0, MPI_SUM, counter_win);
    MPI_Win_unlock(0, counter_win);
    bad |= before < 0 || before >= size ? check("fetch_and_op", before, 0, rank, 0) : 0;
    long zero = 0;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, counter_win);
    MPI_Compare_and_swap(&mark, &zero, &swapped, MPI_LONG, right, 1, counter_win);
    MPI_Win_unlock(right, counter_win);
    bad |= check("compare_and_swap", swapped, 0, rank, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, counter_win);
    if (rank == 0)
        bad |= check("counter", counter_buf[0], size, rank, 0);
    bad |= check("swapped", counter_buf[1], 1000 + left, rank, 1);
    MPI_Win_unlock(rank, counter_win);

    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        if (any)
            printf("rmacheck FAILED ranks %d count %ld\n", size, count);
        else
            printf("rmacheck ok ranks %d count %ld\n", size, count);
    }
    MPI_Win_free(&counter_win);
    MPI_Win_free(&sum_win);
    MPI_Win_free(&win);
    free(mine);
    free(got);
    MPI_Finalize();
    return any ? 3 : 0;
}

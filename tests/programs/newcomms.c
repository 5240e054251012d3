/* newcomms: many new communicators, each used at once and freed, as MPI
 * test suites and set-up code do. For each of --rounds rounds, four kinds:
 * a duplicate of MPI_COMM_WORLD, a split by rank parity, MPI_Comm_create of
 * the world in reverse rank order and a split by rank / 3 (clusters cut
 * apart). On each: the map libwanmpi reads for it (wanmpi_comm_clusters,
 * looked up at run time; skipped without libwanmpi) must be the world's
 * clusters numbered in order of their lowest rank in the new communicator
 * (checked without a message on it);
 * then --calls allreduces of --count ints with --op sum (commutative: ours)
 * or --op first (non-commutative: the MPI's), each checked exactly.
 * Prints "newcomms: ok N communicators". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int clusters_fn(MPI_Comm, int *, int *);
static clusters_fn *clusters;

/* inout = in op inout, with a op b = a: the first operand wins (not commutative). */
static void first(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    memcpy(inout, in, (size_t)*len * sizeof(int));
}

static int failures;

static void fail(int rank, const char *what)
{
    fprintf(stderr, "newcomms: rank %d: %s\n", rank, what);
    failures++;
}

/* The clusters of comm: the world's (world_cluster[], by MPI_COMM_WORLD
 * rank), numbered by lowest rank in comm. No message on comm: a call there
 * could be one of libwanmpi's and make its communicators. */
static void check_map(MPI_Comm comm, const int *world_cluster)
{
    int size, rank, n, mine;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    int *ranks = malloc((size_t)size * sizeof(int)), *in_world = malloc((size_t)size * sizeof(int));
    int *number = malloc((size_t)size * sizeof(int));
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int r = 0; r < size; r++)
        ranks[r] = r;
    MPI_Group_translate_ranks(group, size, ranks, world, in_world);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    int count = 0, expect_mine = -1;
    for (int r = 0; r < size; r++) {
        int c = 0;
        while (c < count && number[c] != world_cluster[in_world[r]])
            c++;
        if (c == count)
            number[count++] = world_cluster[in_world[r]];
        if (r == rank)
            expect_mine = c;
    }
    if (clusters(comm, &n, &mine) != MPI_SUCCESS)
        fail(rank, "wanmpi_comm_clusters failed");
    else if (n != count || mine != expect_mine) {
        char text[160];
        snprintf(text, sizeof text, "map of a communicator of %d: %d clusters, mine %d; expected %d, mine %d",
                 size, n, mine, count, expect_mine);
        fail(rank, text);
    }
    free(ranks);
    free(in_world);
    free(number);
}

static void use(MPI_Comm comm, MPI_Op op, int noncommutative, int calls, int count)
{
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    int *in = malloc((size_t)count * sizeof(int)), *out = malloc((size_t)count * sizeof(int));
    for (int k = 0; k < calls; k++) {
        for (int i = 0; i < count; i++)
            in[i] = (rank + 1) * (i + k + 1);
        MPI_Allreduce(in, out, count, MPI_INT, op, comm);
        for (int i = 0; i < count; i++) {
            /* the sum over ranks of (r+1)(i+k+1); "first" keeps rank 0's */
            int expect = noncommutative ? i + k + 1 : size * (size + 1) / 2 * (i + k + 1);
            if (out[i] != expect) {
                char text[120];
                snprintf(text, sizeof text, "allreduce %d of a communicator of %d: element %d is %d, not %d",
                         k, size, i, out[i], expect);
                fail(rank, text);
                break;
            }
        }
    }
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    int rounds = 3, calls = 2, count = 1, noncommutative = 0;
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls")) calls = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--count")) count = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--op")) noncommutative = !strcmp(argv[i + 1], "first");
    }
    int rank, size, mine = 0, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *world_cluster = malloc((size_t)size * sizeof(int));
    clusters = (clusters_fn *)dlsym(RTLD_DEFAULT, "wanmpi_comm_clusters");
    if (clusters)
        clusters(MPI_COMM_WORLD, &n, &mine);
    MPI_Allgather(&mine, 1, MPI_INT, world_cluster, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Op op = MPI_SUM;
    if (noncommutative)
        MPI_Op_create(first, 0, &op);
    MPI_Group world, reversed;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *order = malloc((size_t)size * sizeof(int));
    for (int r = 0; r < size; r++)
        order[r] = size - 1 - r;
    MPI_Group_incl(world, size, order, &reversed);
    int made = 0;
    for (int k = 0; k < rounds; k++)
        for (int kind = 0; kind < 4; kind++) {
            MPI_Comm comm;
            if (kind == 0)
                MPI_Comm_dup(MPI_COMM_WORLD, &comm);
            else if (kind == 1)
                MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &comm);
            else if (kind == 2)
                MPI_Comm_create(MPI_COMM_WORLD, reversed, &comm);
            else
                MPI_Comm_split(MPI_COMM_WORLD, rank / 3, -rank, &comm);
            if (clusters)
                check_map(comm, world_cluster);
            use(comm, op, noncommutative, calls, count);
            MPI_Comm_free(&comm);
            made++;
        }
    MPI_Group_free(&reversed);
    MPI_Group_free(&world);
    free(order);
    free(world_cluster);
    int any;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("newcomms: ok %d communicators\n", made);
    MPI_Finalize();
    return any ? 1 : 0;
}

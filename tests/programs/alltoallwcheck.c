/* alltoallwcheck: MPI_Alltoallw and MPI_Ialltoallw results, exactly.
 *
 * Usage: alltoallwcheck [--seed N] [--cases N] [--max-ints N] | --mismatch SENT,EXPECTED
 *
 * Every case draws, from the seed and identically on every rank, how many
 * ints each rank sends each other rank (zeros included, some blocks past
 * WANMPI_CHUNK so that they travel in pieces), a datatype for every block
 * on both sides, independently (MPI_INT; a contiguous type of 3 ints; a
 * vector of 2 single ints 3 apart; a struct of 1 + 2 ints with a gap,
 * resized; both sides describe the same ints differently), and where the
 * blocks lie: byte displacements in a shuffled order, with gaps. The call
 * under test (MPI_Alltoallw, or MPI_Ialltoallw completed by MPI_Wait; also
 * MPI_IN_PLACE; MPI_Alltoallw_c where the MPI has it; MPI_Alltoallw_init,
 * Open MPI 4.1's MPIX_Alltoallw_init, started, completed by MPI_Wait and
 * freed) runs on MPI_COMM_WORLD or a split of uneven size; the
 * reference is the same exchange in point-to-point messages (PMPI_Isend,
 * PMPI_Irecv) into a second buffer. Checked: every int of every block is
 * the value that names (source, destination, position), the whole receive
 * buffer equals the reference byte for byte (the gaps between blocks and
 * inside the types untouched), and the send buffer is unchanged.
 * Prints "alltoallwcheck: N cases ok (seed S)" on rank 0; on the first
 * mismatch a description on stderr and MPI_Abort. */
#include <mpi.h>
#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5     /* Open MPI 5: MPI-4 names */
#include <mpi-ext.h>
#define ALLTOALLW_INIT MPIX_Alltoallw_init
#else
#define ALLTOALLW_INIT MPI_Alltoallw_init
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTYPES 4
static MPI_Datatype types[NTYPES];
static const int ints_per[NTYPES] = { 1, 3, 2, 3 };
static const char *type_name[NTYPES] = { "int", "contiguous3", "vector2", "struct3" };
static int world_rank;

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t draw(uint64_t seed, uint64_t a, uint64_t b, uint64_t what)
{
    return mix(seed * 0x9e3779b97f4a7c15ULL + a * 1000003ULL + b * 7919ULL + what * 31ULL + 1);
}

static int value(int src, int dst, long i) { return (int)((src * 1000003L + dst * 7919L + i * 31L) % 2147483647L); }

static void make_types(void)
{
    types[0] = MPI_INT;
    MPI_Type_contiguous(3, MPI_INT, &types[1]);
    MPI_Datatype v;
    MPI_Type_vector(2, 1, 3, MPI_INT, &v);                    /* ints 0 and 3 of 4 */
    MPI_Type_create_resized(v, 0, 5 * sizeof(int), &types[2]);
    MPI_Type_free(&v);
    int len[2] = { 1, 2 };
    MPI_Aint at[2] = { 0, 3 * sizeof(int) };
    MPI_Datatype base[2] = { MPI_INT, MPI_INT }, s;
    MPI_Type_create_struct(2, len, at, base, &s);              /* ints 0, 3, 4 of 6 */
    MPI_Type_create_resized(s, 0, 6 * sizeof(int), &types[3]);
    MPI_Type_free(&s);
    for (int t = 1; t < NTYPES; t++)
        MPI_Type_commit(&types[t]);
}

/* One side of a case on one rank: per peer, the block's ints, type, count and byte displacement. */
struct side {
    int *counts, *displs, *nints, *tix;
    MPI_Datatype *dt;
    size_t bytes;                  /* the buffer */
};

/* ints from src to dst in case c: 6 x k (every type divides it); zeros, small, some past 32 KiB */
static int pair_ints(uint64_t seed, int c, int src, int dst, int max_ints, int in_place)
{
    if (in_place && src > dst) {   /* in place, a block goes back the way it came: symmetric sizes */
        int t = src;
        src = dst;
        dst = t;
    }
    uint64_t h = draw(seed, (uint64_t)c, (uint64_t)(src * 4096 + dst), 1);
    int kind = (int)(h % 8), limit = kind == 0 ? 0 : kind < 5 ? 600 : max_ints;
    return limit ? (int)(draw(seed, (uint64_t)c, (uint64_t)(src * 4096 + dst), 2) % (uint64_t)(limit / 6 + 1)) * 6 : 0;
}

/* Lays out my blocks to (send) or from (receive) every peer, in a shuffled order with gaps. */
static void lay_out(struct side *sd, uint64_t seed, int c, int me, int n, const int *world_of, int sending,
                    int max_ints, int in_place)
{
    int *order = malloc((size_t)n * sizeof *order);
    sd->counts = malloc((size_t)n * 4 * sizeof(int));
    sd->displs = sd->counts + n;
    sd->nints = sd->counts + 2 * n;
    sd->tix = sd->counts + 3 * n;
    sd->dt = malloc((size_t)n * sizeof *sd->dt);
    for (int p = 0; p < n; p++) {
        int src = sending ? world_of[me] : world_of[p], dst = sending ? world_of[p] : world_of[me];
        sd->nints[p] = pair_ints(seed, c, src, dst, max_ints, in_place);
        sd->tix[p] = (int)(draw(seed, (uint64_t)c, (uint64_t)(src * 4096 + dst), sending ? 3 : 4) % NTYPES);
        sd->dt[p] = types[sd->tix[p]];
        sd->counts[p] = sd->nints[p] / ints_per[sd->tix[p]];
        order[p] = p;
    }
    for (int p = n - 1; p > 0; p--) {
        int q = (int)(draw(seed, (uint64_t)c, (uint64_t)(world_of[me] * 4096 + p), sending ? 5 : 6) % (uint64_t)(p + 1));
        int t = order[p];
        order[p] = order[q];
        order[q] = t;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        int p = order[i];
        MPI_Aint lb, extent;
        MPI_Type_get_extent(sd->dt[p], &lb, &extent);
        at += (size_t)(draw(seed, (uint64_t)c, (uint64_t)p, 7) % 3) * sizeof(int);   /* a gap */
        sd->displs[p] = (int)at;
        at += (size_t)sd->counts[p] * (size_t)extent;
    }
    sd->bytes = at + sizeof(int);
    free(order);
}

static void free_side(struct side *sd)
{
    free(sd->counts);
    free(sd->dt);
}

/* Copies n ints between a contiguous array and a block described by (count, type), on this rank. */
static void typed_copy(int to_block, int *ints, int n, char *block, int count, MPI_Datatype type)
{
    if (to_block)
        PMPI_Sendrecv(ints, n, MPI_INT, 0, 0, block, count, type, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    else
        PMPI_Sendrecv(block, count, type, 0, 0, ints, n, MPI_INT, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
}

static void fail(MPI_Comm comm, int c, const char *what, int peer, long at, long got, long want,
                 const struct side *r)
{
    int me;
    MPI_Comm_rank(comm, &me);
    fprintf(stderr, "alltoallwcheck: FAIL case %d: %s: rank %d (world %d), block from %d, int %ld: got %ld, "
            "want %ld (received as %d of %s)\n", c, what, me, world_rank, peer, at, got, want,
            peer >= 0 ? r->counts[peer] : 0, peer >= 0 ? type_name[r->tix[peer]] : "-");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One case on comm: 0 blocking, 1 nonblocking, 2 in place (blocking). */
static void run_case(MPI_Comm comm, uint64_t seed, int c, int mode, int max_ints)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *world_of = malloc((size_t)n * sizeof *world_of);
    MPI_Allgather(&world_rank, 1, MPI_INT, world_of, 1, MPI_INT, comm);
    int in_place = mode == 2;
    struct side s, r;
    lay_out(&s, seed, c, me, n, world_of, 1, max_ints, in_place);
    lay_out(&r, seed, c, me, n, world_of, 0, max_ints, in_place);
    char *send = malloc(s.bytes), *before = malloc(s.bytes), *recv = malloc(r.bytes), *ref = malloc(r.bytes);
    for (size_t i = 0; i < s.bytes; i++)
        send[i] = (char)(0x11 + i * 7);
    for (size_t i = 0; i < r.bytes; i++)
        recv[i] = ref[i] = (char)(0x5a + i * 13);
    int most = max_ints > 600 ? max_ints : 600, *ints = malloc((size_t)most * sizeof *ints);
    for (int p = 0; p < n; p++) {       /* what I send p (in place: from my receive buffer) */
        for (int i = 0; i < s.nints[p]; i++)
            ints[i] = value(world_of[me], world_of[p], i);
        if (in_place)
            typed_copy(1, ints, r.nints[p], recv + r.displs[p], r.counts[p], r.dt[p]);
        else
            typed_copy(1, ints, s.nints[p], send + s.displs[p], s.counts[p], s.dt[p]);
    }
    memcpy(before, send, s.bytes);
    /* the reference, point to point (in place: the blocks my receive buffer holds before the call) */
    char *source = in_place ? malloc(r.bytes) : send;
    if (in_place)
        memcpy(source, recv, r.bytes);
    MPI_Request *req = malloc((size_t)n * 2 * sizeof *req);
    for (int p = 0; p < n; p++)
        PMPI_Irecv(ref + r.displs[p], r.counts[p], r.dt[p], p, 77, comm, &req[p]);
    for (int p = 0; p < n; p++)
        if (in_place)
            PMPI_Isend(source + r.displs[p], r.counts[p], r.dt[p], p, 77, comm, &req[n + p]);
        else
            PMPI_Isend(send + s.displs[p], s.counts[p], s.dt[p], p, 77, comm, &req[n + p]);
    PMPI_Waitall(2 * n, req, MPI_STATUSES_IGNORE);
    int rc;
    if (mode == 1) {
        MPI_Request q;
        rc = MPI_Ialltoallw(send, s.counts, s.displs, s.dt, recv, r.counts, r.displs, r.dt, comm, &q);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else if (mode == 4) {
        MPI_Request q;
        rc = ALLTOALLW_INIT(send, s.counts, s.displs, s.dt, recv, r.counts, r.displs, r.dt, comm, MPI_INFO_NULL,
                            &q);
        if (rc == MPI_SUCCESS)
            rc = MPI_Start(&q);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS)
            rc = MPI_Request_free(&q);
#if MPI_VERSION >= 4
    } else if (mode == 3) {
        MPI_Count *counts = malloc((size_t)n * 2 * sizeof *counts);
        MPI_Aint *displs = malloc((size_t)n * 2 * sizeof *displs);
        for (int p = 0; p < n; p++) {
            counts[p] = s.counts[p], counts[n + p] = r.counts[p];
            displs[p] = s.displs[p], displs[n + p] = r.displs[p];
        }
        rc = MPI_Alltoallw_c(send, counts, displs, s.dt, recv, counts + n, displs + n, r.dt, comm);
        free(counts);
        free(displs);
#endif
    } else {
        rc = MPI_Alltoallw(in_place ? MPI_IN_PLACE : send, s.counts, s.displs, s.dt, recv, r.counts, r.displs,
                           r.dt, comm);
    }
    if (rc != MPI_SUCCESS)
        fail(comm, c, "the call failed", -1, 0, rc, MPI_SUCCESS, &r);
    for (int p = 0; p < n; p++) {
        typed_copy(0, ints, r.nints[p], recv + r.displs[p], r.counts[p], r.dt[p]);
        for (int i = 0; i < r.nints[p]; i++)
            if (ints[i] != value(world_of[p], world_of[me], i))
                fail(comm, c, "wrong value", p, i, ints[i], value(world_of[p], world_of[me], i), &r);
    }
    for (size_t i = 0; i < r.bytes; i++)
        if (recv[i] != ref[i])
            fail(comm, c, "receive buffer differs from the point-to-point reference at byte", -1, (long)i,
                 (unsigned char)recv[i], (unsigned char)ref[i], &r);
    if (memcmp(send, before, s.bytes))
        fail(comm, c, "the send buffer changed", -1, 0, 0, 0, &r);
    if (in_place)
        free(source);
    free(req);
    free(ints);
    free(send);
    free(before);
    free(recv);
    free(ref);
    free(world_of);
    free_side(&s);
    free_side(&r);
}

/* --mismatch S,R: rank 0 sends the last rank S ints, which expects R from it (erroneous where they
 * differ), every other block 1000 ints; on a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, every
 * rank prints the error class its MPI_Alltoallw returned ("success" if none). */
static void mismatch(int sent, int expected)
{
    MPI_Comm comm;
    int n, me, most = (sent > expected ? sent : expected) > 1000 ? (sent > expected ? sent : expected) : 1000;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *v = malloc((size_t)n * 4 * sizeof *v), *a = calloc((size_t)n * (size_t)most, sizeof *a),
        *b = calloc((size_t)n * (size_t)most, sizeof *b);
    MPI_Datatype *dt = malloc((size_t)n * sizeof *dt);
    for (int p = 0; p < n; p++) {
        v[p] = me == 0 && p == n - 1 ? sent : 1000;
        v[n + p] = me == n - 1 && p == 0 ? expected : 1000;
        v[2 * n + p] = p * most * (int)sizeof(int);
        dt[p] = MPI_INT;
    }
    int rc = MPI_Alltoallw(a, v, v + 2 * n, dt, b, v + n, v + 2 * n, dt, comm), cls = rc, len;
    char what[MPI_MAX_ERROR_STRING] = "success";
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
        MPI_Error_string(cls, what, &len);
    }
    printf("alltoallwcheck: rank %d: %s\n", me, what);
    fflush(stdout);
    free(v);
    free(a);
    free(b);
    free(dt);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    uint64_t seed = 1;
    int cases = 24, max_ints = 60000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--cases"))
            cases = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-ints"))
            max_ints = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mismatch") && strchr(argv[i + 1], ',')) {
            mismatch(atoi(argv[i + 1]), atoi(strchr(argv[i + 1], ',') + 1));
            MPI_Finalize();
            return 0;
        }
        else {
            if (world_rank == 0)
                fprintf(stderr, "usage: alltoallwcheck [--seed N] [--cases N] [--max-ints N] | --mismatch S,R\n");
            MPI_Finalize();
            return 2;
        }
    }
    make_types();
    MPI_Comm split;         /* uneven: ranks r with r % 3 != 0 (5 of 8), in reverse order */
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 3 != 0, -world_rank, &split);
    for (int c = 0; c < cases; c++) {
        int on_split = c % 2, mode = c % 8 >= 6 ? 2 : (c / 2) % 2;     /* in place: cases 6, 7 of every 8 */
        if (c % 8 == 4 || c % 8 == 5)
            mode = 4;                                                   /* MPI_Alltoallw_init */
#if MPI_VERSION >= 4
        if (c % 8 == 4)
            mode = 3;                                                   /* MPI_Alltoallw_c */
#endif
        if (on_split && world_rank % 3 == 0)
            continue;
        run_case(on_split ? split : MPI_COMM_WORLD, seed, c, mode, max_ints);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("alltoallwcheck: %d cases ok (seed %llu)\n", cases, (unsigned long long)seed);
    MPI_Comm_free(&split);
    for (int t = 1; t < NTYPES; t++)
        MPI_Type_free(&types[t]);
    MPI_Finalize();
    return 0;
}

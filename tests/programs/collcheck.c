/* collcheck: randomized, exact checker for MPI collectives.
 *
 * Usage: collcheck [--seed N] [--cases N] [--max-bytes N] [--only LIST] [--start N]
 *                  [--known-bugs avoid|check] [--nonblocking] [--request-errors] [--verbose]
 *
 * Every rank draws the same sequence of cases from the seed (collective,
 * datatype, operation, count, root, MPI_IN_PLACE, communicator). For each case
 * the collective is called through its MPI_ name (what an interposition library
 * such as libwanmpi replaces), then again through its PMPI_ name on the same
 * input (the MPI's own result), and both are compared exactly with an expected
 * value the program computes itself: every rank can regenerate every other
 * rank's input from the seed. The data is chosen so that every reduction order
 * gives the same exact result (wrapping integers, small integers or powers of
 * two in floating types), so floating results must match exactly too. The local
 * expected value is the arbiter: a mismatch says which of MPI_ and PMPI_
 * disagrees with it. Also checked: all ranks hold the identical result, the send
 * buffer is not modified, nothing is written past the receive buffer, into the
 * gaps of a vector datatype or into a non-root receive buffer, and
 * MPI_Barrier lets no rank out before every rank entered (when all ranks share
 * one clock).
 *
 * --nonblocking: the MPI_ side calls the nonblocking variant (MPI_Ibcast, ...)
 * and completes it with a call drawn from the case (MPI_Wait, MPI_Test,
 * MPI_Waitall, MPI_Waitany, MPI_Waitsome, MPI_Testall, MPI_Testany,
 * MPI_Testsome, MPI_Request_get_status), some among a point-to-point ring
 * exchange, some after a second nonblocking collective started behind it
 * and completed first; the PMPI_ side stays the blocking call.
 * --request-errors: before the cases, MPI_Request_free and MPI_Cancel of an
 * active nonblocking collective must fail with MPI_ERR_REQUEST and leave it
 * to complete normally (asserted with WANMPI_EXPECT_REQUEST_ERRORS=1 only).
 * Both are in collcheck_nb.c, included below.
 *
 * On success rank 0 prints "collcheck: N cases ok (seed S)" and every rank
 * exits 0. On the first mismatch the ranks that see it describe it on stderr
 * and the job ends with MPI_Abort (non-zero status). Bad arguments: exit 2.
 * See docs/testing.md.
 */
#include <mpi.h>
#include <complex.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------- collectives, operations, datatypes ---------- */

enum coll { BCAST, ALLREDUCE, REDUCE, ALLGATHER, RSB, BARRIER, GATHER, SCATTER, ALLGATHERV, GATHERV, SCATTERV,
            SCAN, EXSCAN, RS, NCOLL };
static const char *coll_name[NCOLL] = {"bcast", "allreduce", "reduce", "allgather",
                                       "reduce_scatter_block", "barrier", "gather", "scatter",
                                       "allgatherv", "gatherv", "scatterv", "scan", "exscan",
                                       "reduce_scatter"};
static const char *coll_mpi[NCOLL] = {"MPI_Bcast", "MPI_Allreduce", "MPI_Reduce",
                                      "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Barrier",
                                      "MPI_Gather", "MPI_Scatter", "MPI_Allgatherv", "MPI_Gatherv",
                                      "MPI_Scatterv", "MPI_Scan", "MPI_Exscan", "MPI_Reduce_scatter"};

enum opid { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_LAND, OP_LOR, OP_LXOR, OP_BAND, OP_BOR, OP_BXOR,
            OP_MINLOC, OP_MAXLOC, OP_PLUS1, OP_AFFINE, NOPS, OP_NONE = NOPS };
static const char *op_name[NOPS + 1] = {
    "MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX", "MPI_LAND", "MPI_LOR", "MPI_LXOR", "MPI_BAND",
    "MPI_BOR", "MPI_BXOR", "MPI_MINLOC", "MPI_MAXLOC",
    "user-commutative(x+y+1)", "user-noncommutative(affine)", "-"};

/* groups of datatypes (MPI standard, predefined reduction operations) */
enum {
    G_INT = 1,      /* C integer */
    G_FINT = 2,     /* Fortran integer */
    G_FLOAT = 4,    /* floating point */
    G_COMPLEX = 8,  /* complex */
    G_LOGICAL = 16, /* C_BOOL */
    G_BYTE = 32,
    G_PAIR = 64,    /* MINLOC/MAXLOC pairs */
    G_PLUS1 = 128,  /* our commutative user op: uint32 and vector of uint32 */
    G_AFFINE = 256, /* our non-commutative user op */
};
static const int op_groups[NOPS] = {
    G_INT | G_FINT | G_FLOAT | G_COMPLEX, G_INT | G_FINT | G_FLOAT | G_COMPLEX,
    G_INT | G_FINT | G_FLOAT, G_INT | G_FINT | G_FLOAT,
    G_INT | G_LOGICAL, G_INT | G_LOGICAL, G_INT | G_LOGICAL,
    G_INT | G_FINT | G_BYTE, G_INT | G_FINT | G_BYTE, G_INT | G_FINT | G_BYTE,
    G_PAIR, G_PAIR, G_PLUS1, G_AFFINE};

/* storage classes: how one base element is laid out in C */
enum cls { C_I8, C_U8, C_I16, C_U16, C_I32, C_U32, C_I64, C_U64, C_F32, C_F64, C_F80,
           C_CF32, C_CF64, C_CF80, C_BOOL, C_FI, C_DI, C_LI, C_II, C_SI, C_LDI, C_FF, C_DD,
           C_AFF, NCLS };
typedef struct { float v; int i; } fi_t;
typedef struct { double v; int i; } di_t;
typedef struct { long v; int i; } li_t;
typedef struct { int v; int i; } ii_t;
typedef struct { short v; int i; } si_t;
typedef struct { long double v; int i; } ldi_t;
typedef struct { float v, i; } ff_t;
typedef struct { double v, i; } dd_t;
typedef struct { uint32_t a, b; } aff_t; /* x -> a*x + b (mod 2^32) */
static const size_t cls_size[NCLS] = {
    1, 1, 2, 2, 4, 4, 8, 8, sizeof(float), sizeof(double), sizeof(long double),
    sizeof(float _Complex), sizeof(double _Complex), sizeof(long double _Complex), sizeof(_Bool),
    sizeof(fi_t), sizeof(di_t), sizeof(li_t), sizeof(ii_t), sizeof(si_t), sizeof(ldi_t),
    sizeof(ff_t), sizeof(dd_t), sizeof(aff_t)};

typedef struct {
    const char *name;
    MPI_Datatype dt;   /* the datatype passed to the collective */
    MPI_Datatype base; /* its base type (same as dt unless a vector) */
    int cls, groups;
    int nb, bl, stride; /* vector layout in base elements (1,1,1 when contiguous) */
} tinfo;

#define MAXTYPES 64
static tinfo types[MAXTYPES];
static int ntypes;
static MPI_Datatype aff_type, vec_u32, vec_f64, vec_si;
static MPI_Op user_op[2]; /* plus1, affine */

static void add_type(const char *name, MPI_Datatype dt, int cls, int groups)
{
    types[ntypes++] = (tinfo){name, dt, dt, cls, groups, 1, 1, 1};
}

static void add_vector(const char *name, MPI_Datatype *out, MPI_Datatype base, int cls,
                       int groups, int nb, int bl, int stride)
{
    MPI_Type_vector(nb, bl, stride, base, out);
    MPI_Type_commit(out);
    types[ntypes++] = (tinfo){name, *out, base, cls, groups, nb, bl, stride};
}

/* ---------- user-defined operations ---------- */

static void die_user_op(const char *which, MPI_Datatype dt)
{
    fprintf(stderr, "collcheck: the %s user operation was called with an unexpected datatype "
                    "(handle %#lx)\n", which, (unsigned long)(uintptr_t)dt);
    MPI_Abort(MPI_COMM_WORLD, 4);
}

/* inout = in + inout + 1 (mod 2^32): commutative and associative; applied
 * n-1 times for n ranks, so the result is sum + n - 1 */
static void plus1_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    uint32_t *a = inout, *b = in;
    if (*dt == MPI_UINT32_T) {
        for (int i = 0; i < *len; i++)
            a[i] = a[i] + b[i] + 1u;
    } else if (*dt == vec_u32) {
        const tinfo *t = NULL;
        for (int k = 0; k < ntypes; k++)
            if (types[k].dt == vec_u32) t = &types[k];
        long vext = (long)(t->nb - 1) * t->stride + t->bl;
        for (long v = 0; v < *len; v++)
            for (int blk = 0; blk < t->nb; blk++)
                for (int j = 0; j < t->bl; j++) {
                    long o = v * vext + (long)blk * t->stride + j;
                    a[o] = a[o] + b[o] + 1u;
                }
    } else {
        die_user_op("commutative", *dt);
    }
}

/* inout = in o inout (composition of affine maps): associative, not
 * commutative; the result is x_0 o x_1 o ... o x_{n-1} in rank order */
static inline void aff_compose(aff_t *inout, const aff_t *in)
{
    aff_t r = {in->a * inout->a, in->a * inout->b + in->b};
    *inout = r;
}

static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != aff_type)
        die_user_op("non-commutative", *dt);
    aff_t *a = inout, *b = in;
    for (int i = 0; i < *len; i++)
        aff_compose(&a[i], &b[i]);
}

static MPI_Op mpi_op(int op)
{
    static MPI_Op table[NOPS];
    if (!table[OP_SUM]) {
        MPI_Op t[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR,
                      MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MINLOC, MPI_MAXLOC};
        memcpy(table, t, sizeof t);
        table[OP_PLUS1] = user_op[0];
        table[OP_AFFINE] = user_op[1];
    }
    return table[op];
}

/* ---------- deterministic data ---------- */

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct { uint64_t s; } rng_t;
static uint64_t rnext(rng_t *r) { return mix64(r->s += 0x9e3779b97f4a7c15ULL); }
static uint64_t rbelow(rng_t *r, uint64_t n) { return n ? rnext(r) % n : 0; }
static double runit(rng_t *r) { return (double)(rnext(r) >> 11) / 9007199254740992.0; }

/* the random word behind element k of rank r's input in a case */
static inline uint64_t elem_hash(uint64_t dseed, int rank, long k)
{
    return mix64(dseed ^ ((uint64_t)(rank + 1) * 0xd1b54a32d192ed03ULL) ^
                 ((uint64_t)k * 0x9e3779b97f4a7c15ULL));
}

static uint64_t int_bits(int op, uint64_t h, int width)
{
    uint64_t mask = width == 8 ? ~0ULL : (1ULL << (8 * width)) - 1, v = h >> 7;
    switch (op) {
    case OP_PROD: /* mostly odd, so that products do not vanish */
        if (h & 7) v |= 1;
        break;
    case OP_MIN: case OP_MAX: case OP_MINLOC: case OP_MAXLOC:
        if ((h & 3) == 0) { /* ties and extremes */
            static const uint64_t ext[] = {0, 1, ~0ULL, 0x80ULL << 56, ~(0x80ULL << 56)};
            v = ext[(h >> 2) % 5];
            if (width < 8 && v >> 63) v = ((h >> 2) & 1) ? ~0ULL : (1ULL << (8 * width - 1));
            else if (width < 8 && v == ~(0x80ULL << 56)) v = (1ULL << (8 * width - 1)) - 1;
        }
        break;
    case OP_LAND: v = (h & 15) ? v : 0; break; /* mostly true */
    case OP_LOR: v = (h & 15) ? 0 : v; break;  /* mostly false */
    case OP_LXOR: v = (h & 1) ? v : 0; break;
    }
    v &= mask;
    /* logical ops: a true value is any non-zero value, often not 1 */
    if ((op == OP_LAND || op == OP_LOR || op == OP_LXOR) && v == 0 &&
        (op == OP_LAND ? (h & 15) : op == OP_LOR ? !(h & 15) : (h & 1)))
        v = 2;
    return v;
}

/* a floating value that keeps every reduction order exact */
static long double float_val(int op, uint64_t h, int rank)
{
    switch (op) {
    case OP_SUM: /* multiples of 1/4 below 500 in magnitude */
        return (long double)((int64_t)((h >> 8) % 4001) - 2000) / 4;
    case OP_PROD: { /* powers of two with sign */
        static const long double p[] = {1, -1, 2, 0.5};
        return rank < 64 ? p[(h >> 8) & 3] : (h & 256 ? -1 : 1);
    }
    default: /* MIN, MAX, MINLOC, MAXLOC, transfers: exact in float; ties */
        if ((h & 3) == 0) {
            static const long double t[] = {0, 1, -1, 2.5};
            return t[(h >> 2) & 3];
        }
        return (long double)((int64_t)((h >> 40) & 0xffffff) - 0x800000) / 8;
    }
}

static long double _Complex complex_val(int op, uint64_t h, int rank)
{
    if (op == OP_PROD) { /* units and powers of two times (1 +- i): exact products */
        static const long double re[] = {1, -1, 0, 0, 2, 0.5, 1, 1};
        static const long double im[] = {0, 0, 1, -1, 0, 0, 1, -1};
        int k = rank < 16 ? (int)((h >> 8) & 7) : 0;
        return re[k] + im[k] * I;
    }
    long double re = float_val(op == OP_SUM ? OP_SUM : OP_MIN, h, rank);
    long double im = float_val(op == OP_SUM ? OP_SUM : OP_MIN, mix64(h), rank);
    return re + im * I;
}

static int pair_index(uint64_t h)
{
    return (h & 0x10) ? (int)((h >> 20) % 8) : (int)((h >> 20) & 0x7fffffff) - 0x40000000;
}

#define PUT(T, val) do { T x_ = (T)(val); memcpy(dst, &x_, sizeof x_); } while (0)
#define PUTPAIR(S, vv) do { S x_; memset(&x_, 0, sizeof x_); x_.v = vv; \
        x_.i = pair_index(h); memcpy(dst, &x_, sizeof x_); } while (0)

/* write element value for (class, op) from random word h */
static void gen_elem(int cls, int op, uint64_t h, int rank, void *dst)
{
    switch (cls) {
    case C_I8: case C_U8: PUT(uint8_t, int_bits(op, h, 1)); break;
    case C_I16: case C_U16: PUT(uint16_t, int_bits(op, h, 2)); break;
    case C_I32: case C_U32: PUT(uint32_t, int_bits(op, h, 4)); break;
    case C_I64: case C_U64: PUT(uint64_t, int_bits(op, h, 8)); break;
    case C_F32: PUT(float, float_val(op, h, rank)); break;
    case C_F64: PUT(double, float_val(op, h, rank)); break;
    case C_F80: {
        long double x = float_val(op, h, rank);
        memset(dst, 0, sizeof x);
        memcpy(dst, &x, 10);
        break;
    }
    case C_CF32: PUT(float _Complex, complex_val(op, h, rank)); break;
    case C_CF64: PUT(double _Complex, complex_val(op, h, rank)); break;
    case C_CF80: PUT(long double _Complex, complex_val(op, h, rank)); break;
    case C_BOOL: {
        _Bool b = op == OP_LAND ? (h & 15) != 0 : op == OP_LOR ? (h & 15) == 0 : (h & 1);
        PUT(_Bool, b);
        break;
    }
    case C_FI: PUTPAIR(fi_t, (float)float_val(OP_MINLOC, h, rank)); break;
    case C_DI: PUTPAIR(di_t, (double)float_val(OP_MINLOC, h, rank)); break;
    case C_LI: PUTPAIR(li_t, (long)int_bits(OP_MINLOC, h, 8)); break;
    case C_II: PUTPAIR(ii_t, (int)int_bits(OP_MINLOC, h, 4)); break;
    case C_SI: PUTPAIR(si_t, (short)int_bits(OP_MINLOC, h, 2)); break;
    case C_LDI: PUTPAIR(ldi_t, float_val(OP_MINLOC, h, rank)); break;
    case C_FF: { ff_t x = {(float)float_val(OP_MINLOC, h, rank), (float)pair_index(h)};
            memcpy(dst, &x, sizeof x); break; }
    case C_DD: { dd_t x = {(double)float_val(OP_MINLOC, h, rank), (double)pair_index(h)};
            memcpy(dst, &x, sizeof x); break; }
    case C_AFF: { aff_t x = {(uint32_t)h | 1u, (uint32_t)(h >> 32)};
            memcpy(dst, &x, sizeof x); break; }
    }
}

/* ---------- element operations for the expected value ---------- */

#define INTOP(T, UT) do { T a_, b_; memcpy(&a_, acc, sizeof a_); memcpy(&b_, x, sizeof b_); \
    switch (op) { \
    case OP_SUM: a_ = (T)(UT)((UT)a_ + (UT)b_); break; \
    case OP_PROD: a_ = (T)(UT)((uint64_t)(UT)a_ * (uint64_t)(UT)b_); break; \
    case OP_MIN: if (b_ < a_) a_ = b_; break; \
    case OP_MAX: if (b_ > a_) a_ = b_; break; \
    case OP_LAND: a_ = (T)(a_ != 0 && b_ != 0); break; \
    case OP_LOR: a_ = (T)(a_ != 0 || b_ != 0); break; \
    case OP_LXOR: a_ = (T)((a_ != 0) != (b_ != 0)); break; \
    case OP_BAND: a_ = (T)(a_ & b_); break; \
    case OP_BOR: a_ = (T)(a_ | b_); break; \
    case OP_BXOR: a_ = (T)(a_ ^ b_); break; \
    case OP_PLUS1: a_ = (T)(UT)((UT)a_ + (UT)b_ + 1u); break; \
    } memcpy(acc, &a_, sizeof a_); } while (0)

#define FLOP(T) do { T a_, b_; memcpy(&a_, acc, sizeof a_); memcpy(&b_, x, sizeof b_); \
    switch (op) { \
    case OP_SUM: a_ = a_ + b_; break; \
    case OP_PROD: a_ = a_ * b_; break; \
    case OP_MIN: if (b_ < a_) a_ = b_; break; \
    case OP_MAX: if (b_ > a_) a_ = b_; break; \
    } memcpy(acc, &a_, sizeof a_); } while (0)

#define CPXOP(T) do { T a_, b_; memcpy(&a_, acc, sizeof a_); memcpy(&b_, x, sizeof b_); \
    a_ = op == OP_SUM ? a_ + b_ : a_ * b_; memcpy(acc, &a_, sizeof a_); } while (0)

#define PAIROP(S) do { S a_, b_; memcpy(&a_, acc, sizeof a_); memcpy(&b_, x, sizeof b_); \
    if (op == OP_MINLOC ? (b_.v < a_.v) : (b_.v > a_.v)) a_ = b_; \
    else if (b_.v == a_.v && b_.i < a_.i) a_.i = b_.i; \
    memcpy(acc, &a_, sizeof a_); } while (0)

/* acc = acc op x, where acc holds ranks before x's rank */
static void combine(int cls, int op, void *acc, const void *x)
{
    switch (cls) {
    case C_I8: INTOP(int8_t, uint8_t); break;
    case C_U8: INTOP(uint8_t, uint8_t); break;
    case C_I16: INTOP(int16_t, uint16_t); break;
    case C_U16: INTOP(uint16_t, uint16_t); break;
    case C_I32: INTOP(int32_t, uint32_t); break;
    case C_U32: INTOP(uint32_t, uint32_t); break;
    case C_I64: INTOP(int64_t, uint64_t); break;
    case C_U64: INTOP(uint64_t, uint64_t); break;
    case C_F32: FLOP(float); break;
    case C_F64: FLOP(double); break;
    case C_F80: FLOP(long double); break;
    case C_CF32: CPXOP(float _Complex); break;
    case C_CF64: CPXOP(double _Complex); break;
    case C_CF80: CPXOP(long double _Complex); break;
    case C_BOOL: {
        _Bool a, b;
        memcpy(&a, acc, 1);
        memcpy(&b, x, 1);
        a = op == OP_LAND ? (a && b) : op == OP_LOR ? (a || b) : (a != b);
        memcpy(acc, &a, 1);
        break;
    }
    case C_FI: PAIROP(fi_t); break;
    case C_DI: PAIROP(di_t); break;
    case C_LI: PAIROP(li_t); break;
    case C_II: PAIROP(ii_t); break;
    case C_SI: PAIROP(si_t); break;
    case C_LDI: PAIROP(ldi_t); break;
    case C_FF: PAIROP(ff_t); break;
    case C_DD: PAIROP(dd_t); break;
    case C_AFF: { /* acc = acc o x */
        aff_t a, b;
        memcpy(&a, acc, sizeof a);
        memcpy(&b, x, sizeof b);
        aff_compose(&b, &a);
        memcpy(acc, &b, sizeof b);
        break;
    }
    }
}

/* value comparison: padding bytes do not count, -0 == +0 */
static int elem_eq(int cls, const void *p, const void *q)
{
#define VEQ(T) do { T a_, b_; memcpy(&a_, p, sizeof a_); memcpy(&b_, q, sizeof b_); \
        return a_ == b_; } while (0)
#define PEQ(S) do { S a_, b_; memcpy(&a_, p, sizeof a_); memcpy(&b_, q, sizeof b_); \
        return a_.v == b_.v && a_.i == b_.i; } while (0)
    switch (cls) {
    case C_F32: VEQ(float);
    case C_F64: VEQ(double);
    case C_F80: VEQ(long double);
    case C_CF32: VEQ(float _Complex);
    case C_CF64: VEQ(double _Complex);
    case C_CF80: VEQ(long double _Complex);
    case C_FI: PEQ(fi_t);
    case C_DI: PEQ(di_t);
    case C_LI: PEQ(li_t);
    case C_II: PEQ(ii_t);
    case C_SI: PEQ(si_t);
    case C_LDI: PEQ(ldi_t);
    case C_FF: PEQ(ff_t);
    case C_DD: PEQ(dd_t);
    default: return memcmp(p, q, cls_size[cls]) == 0;
    }
}

/* hash of an element's value (for the all-ranks-agree check) */
static uint64_t elem_hash_val(int cls, const void *p)
{
    unsigned char b[32];
    size_t n = cls_size[cls];
    memset(b, 0, sizeof b);
    switch (cls) {
    case C_F32: { float x; memcpy(&x, p, sizeof x); x += 0.0f; memcpy(b, &x, sizeof x); break; }
    case C_F64: { double x; memcpy(&x, p, sizeof x); x += 0.0; memcpy(b, &x, sizeof x); break; }
    case C_F80: { long double x; memcpy(&x, p, sizeof x); x += 0.0L; memcpy(b, &x, 10); break; }
    case C_CF32: { float x[2]; memcpy(x, p, sizeof x); x[0] += 0.0f; x[1] += 0.0f;
            memcpy(b, x, sizeof x); break; }
    case C_CF64: { double x[2]; memcpy(x, p, sizeof x); x[0] += 0.0; x[1] += 0.0;
            memcpy(b, x, sizeof x); break; }
    case C_CF80: { long double x[2]; memcpy(x, p, sizeof x); x[0] += 0.0L; x[1] += 0.0L;
            memcpy(b, &x[0], 10); memcpy(b + 16, &x[1], 10); break; }
#define PH(S, VB) do { S x_; memcpy(&x_, p, sizeof x_); x_.v += 0; memcpy(b, &x_.v, VB); \
        memcpy(b + 16, &x_.i, sizeof x_.i); } while (0)
    case C_FI: PH(fi_t, 4); break;
    case C_DI: PH(di_t, 8); break;
    case C_LI: PH(li_t, 8); break;
    case C_II: PH(ii_t, 4); break;
    case C_SI: PH(si_t, 2); break;
    case C_LDI: PH(ldi_t, 10); break;
    case C_FF: { ff_t x; memcpy(&x, p, sizeof x); x.v += 0.0f; x.i += 0.0f;
            memcpy(b, &x, sizeof x); break; }
    case C_DD: { dd_t x; memcpy(&x, p, sizeof x); x.v += 0.0; x.i += 0.0;
            memcpy(b, &x, sizeof x); break; }
    default: memcpy(b, p, n); break;
    }
    uint64_t h = 0x12345;
    for (int i = 0; i < 32; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = mix64(h ^ w);
    }
    return h;
}

static void fmt_elem(int cls, const void *p, char *out, size_t n)
{
#define FI(T, F, C) do { T x_; memcpy(&x_, p, sizeof x_); snprintf(out, n, F, (C)x_); } while (0)
#define FP(S, F, C, FI_, CI) do { S x_; memcpy(&x_, p, sizeof x_); \
        snprintf(out, n, "(" F ", " FI_ ")", (C)x_.v, (CI)x_.i); } while (0)
    switch (cls) {
    case C_I8: FI(int8_t, "%lld", long long); break;
    case C_U8: FI(uint8_t, "%llu", unsigned long long); break;
    case C_I16: FI(int16_t, "%lld", long long); break;
    case C_U16: FI(uint16_t, "%llu", unsigned long long); break;
    case C_I32: FI(int32_t, "%lld", long long); break;
    case C_U32: FI(uint32_t, "%llu", unsigned long long); break;
    case C_I64: FI(int64_t, "%lld", long long); break;
    case C_U64: FI(uint64_t, "%llu", unsigned long long); break;
    case C_F32: FI(float, "%.9Lg", long double); break;
    case C_F64: FI(double, "%.17Lg", long double); break;
    case C_F80: FI(long double, "%.21Lg", long double); break;
    case C_BOOL: FI(_Bool, "%d", int); break;
#define FC(T) do { T x_; memcpy(&x_, p, sizeof x_); snprintf(out, n, "(%.21Lg, %.21Lg)", \
        (long double)creall(x_), (long double)cimagl(x_)); } while (0)
    case C_CF32: FC(float _Complex); break;
    case C_CF64: FC(double _Complex); break;
    case C_CF80: FC(long double _Complex); break;
    case C_FI: FP(fi_t, "%.9Lg", long double, "%d", int); break;
    case C_DI: FP(di_t, "%.17Lg", long double, "%d", int); break;
    case C_LI: FP(li_t, "%ld", long, "%d", int); break;
    case C_II: FP(ii_t, "%d", int, "%d", int); break;
    case C_SI: FP(si_t, "%d", int, "%d", int); break;
    case C_LDI: FP(ldi_t, "%.21Lg", long double, "%d", int); break;
    case C_FF: FP(ff_t, "%.9Lg", long double, "%.9Lg", long double); break;
    case C_DD: FP(dd_t, "%.17Lg", long double, "%.17Lg", long double); break;
    case C_AFF: { aff_t x; memcpy(&x, p, sizeof x);
            snprintf(out, n, "x -> %u*x + %u", x.a, x.b); break; }
    }
}

/* ---------- layout of a message of a datatype ---------- */

typedef struct {
    const tinfo *t;
    size_t bsz;  /* bytes per base element */
    long per;    /* base elements per datatype element */
    long vext;   /* extent of one datatype element, in base elements */
    size_t ext;  /* extent of one datatype element, in bytes */
} layout_t;

static layout_t layout_of(const tinfo *t)
{
    layout_t L = {t, cls_size[t->cls], (long)t->nb * t->bl, 0, 0};
    L.vext = (long)(t->nb - 1) * t->stride + t->bl;
    L.ext = (size_t)L.vext * L.bsz;
    return L;
}

static inline size_t off_of(const layout_t *L, long k)
{
    if (L->per == 1)
        return (size_t)k * L->bsz;
    long v = k / L->per, w = k % L->per;
    return ((size_t)v * L->vext + (size_t)(w / L->t->bl) * L->t->stride + w % L->t->bl) * L->bsz;
}

/* write elements k0 .. k0+n-1 of rank's input into buf (layout positions 0..n-1) */
static void gen_block(const layout_t *L, int op, uint64_t dseed, int rank, long k0, long n,
                      unsigned char *buf)
{
    int cls = L->t->cls;
    for (long k = 0; k < n; k++)
        gen_elem(cls, op, elem_hash(dseed, rank, k0 + k), rank, buf + off_of(L, k));
}

/* ---------- communicators ---------- */

enum { CM_WORLD, CM_DUP, CM_UNEVEN, CM_UNEVEN_REV, CM_REVERSED, CM_SHUFFLED, CM_THREE,
       CM_PAIRS, CM_SINGLE, NCOMM };
static const char *comm_name[NCOMM] = {
    "MPI_COMM_WORLD", "dup(world)", "split-uneven(~3/8+5/8)", "split-uneven-reversed-keys",
    "world-reversed", "world-shuffled", "split-three-random-keys", "split-pairs",
    "split-singletons"};
static MPI_Comm comms[NCOMM];
static int wrank, wsize;

static int in_small_group(int r) { return (r * 5 + 1) % 8 < 3; }

static void make_comms(uint64_t seed)
{
    rng_t r = {seed ^ 0xc0ffee};
    int *perm = malloc(sizeof(int) * (size_t)wsize), *key3 = malloc(sizeof(int) * (size_t)wsize);
    for (int i = 0; i < wsize; i++)
        perm[i] = i;
    for (int i = wsize - 1; i > 0; i--) {
        int j = (int)rbelow(&r, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < wsize; i++)
        key3[i] = (int)rbelow(&r, 1000);
    comms[CM_WORLD] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[CM_DUP]);
    MPI_Comm_split(MPI_COMM_WORLD, in_small_group(wrank), wrank, &comms[CM_UNEVEN]);
    MPI_Comm_split(MPI_COMM_WORLD, in_small_group(wrank), -wrank, &comms[CM_UNEVEN_REV]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - 1 - wrank, &comms[CM_REVERSED]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, perm[wrank], &comms[CM_SHUFFLED]);
    MPI_Comm_split(MPI_COMM_WORLD, (int)(mix64((uint64_t)wrank + seed) % 3), key3[wrank],
                    &comms[CM_THREE]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank / 2, wrank, &comms[CM_PAIRS]);
    MPI_Comm_split(MPI_COMM_WORLD, wrank, 0, &comms[CM_SINGLE]);
    free(perm);
    free(key3);
}

/* ---------- the cases ---------- */

typedef struct {
    int idx, coll, op, type, comm, inplace, sweep, nullbuf, avoided;
    long count;
    uint64_t rootraw, dseed, bseed;
} ccase;

static struct {
    uint64_t seed;
    long cases, start;
    long max_bytes;
    int only[NCOLL], verbose, same_clock, avoid_bugs;
    int nonblocking, request_errors;
} opt = {1, 200, 0, 4L << 20, {0}, 0, 0, 1, 0, 0};

static long next_prime(long c)
{
    for (;; c++) {
        if (c < 2) continue;
        int prime = 1;
        for (long d = 2; d * d <= c; d++)
            if (c % d == 0) { prime = 0; break; }
        if (prime) return c;
    }
}

static long pick_count(rng_t *r, long maxc)
{
    if (maxc < 1) return 0;
    double u = runit(r);
    if (u < 0.06) return 0;
    if (u < 0.12) return 1 + (long)rbelow(r, maxc < 16 ? maxc : 16);
    /* log-distributed: a power of two chosen uniformly, then uniform within it */
    int bits = 0;
    while (bits < 62 && (2L << bits) <= maxc) bits++;
    int e = (int)rbelow(r, (uint64_t)bits + 1);
    long c = (1L << e) + (long)rbelow(r, 1ULL << e);
    if (runit(r) < 0.4) { /* awkward counts */
        long bases[] = {2, 3, 4, 5, 6, 60, wsize, 3L * wsize, (long)wsize * wsize};
        long b = bases[rbelow(r, sizeof bases / sizeof *bases)];
        if (rbelow(r, 3) == 0) c = next_prime(c);
        else if (b > 1) c = (c / b) * b + (rbelow(r, 2) ? 1 : b - 1);
    }
    while (c > maxc) c = c > 2 ? c / 2 + 1 : maxc;
    return c;
}

/* the types valid for an operation (OP_NONE: data movement, every type) */
static int types_for(int op, int *list)
{
    int n = 0;
    for (int t = 0; t < ntypes; t++)
        if (op == OP_NONE || (types[t].groups & op_groups[op]))
            list[n++] = t;
    return n;
}

static int is_scan(int coll) { return coll == SCAN || coll == EXSCAN; }
static int is_reduction(int coll)
{
    return coll == ALLREDUCE || coll == REDUCE || coll == RSB || coll == RS || is_scan(coll);
}
static int is_rooted(int coll)
{
    return coll == BCAST || coll == REDUCE || coll == GATHER || coll == SCATTER || coll == GATHERV ||
           coll == SCATTERV;
}
static int is_v(int coll) { return coll == ALLGATHERV || coll == GATHERV || coll == SCATTERV; }
static int has_inplace(int coll) { return coll != BCAST && coll != BARRIER; }
static int is_gatherlike(int coll)
{
    return coll == ALLGATHER || coll == GATHER || coll == SCATTER || coll == RSB || is_v(coll);
}

/* The v-collectives' irregular blocks (MPI_Allgatherv, MPI_Gatherv,
 * MPI_Scatterv): rank r's block has count * (0..3) elements (some ranks
 * none), and the blocks lie in the root's (every rank's) buffer in reverse
 * rank order, so displacements are neither r * count nor increasing. */
static long v_count(long count, int r) { return count * ((r * 7 + 3) % 4); }
static long v_displ(long count, int r, int cs)
{
    long d = 0;
    for (int q = r + 1; q < cs; q++) d += v_count(count, q);
    return d;
}
static long v_total(long count, int cs) { return v_displ(count, -1, cs); }
/* MPI_Reduce_scatter: rank r gets v_count(count, r) elements of the
 * reduced vector, the blocks in rank order (the standard's layout). */
static long rs_first(long count, int r)
{
    long d = 0;
    for (int q = 0; q < r; q++) d += v_count(count, q);
    return d;
}

/* Cases the MPI library itself gets wrong. They are avoided by default, so
 * that a failure points at an interposition library; --known-bugs check runs
 * them anyway. The decision may depend only on what every rank knows alike
 * (collective, datatype, operation), never on the sub-communicator.
 * - MPI_MIN/MPI_MAX that compare with the wrong signedness (Open MPI 4.1.4:
 *   MPI_UNSIGNED_LONG as signed, MPI_OFFSET as unsigned) are found by a
 *   self-test of PMPI_Reduce_local at start.
 * - MPICH 5.0.2's binomial MPI_Gather fails ("Receiving data with a datatype
 *   whose signature does not match", or an assertion in yaksa) for datatypes
 *   with holes once a rank forwards more than ~4 KB (more than 3 ranks). Its
 *   MPI_Igather of them returns wrong data without an error (--nonblocking).
 * Open MPI 4.1's AVX op component, which saturates 8- and 16-bit integer sums
 * (open-mpi/ompi#8045), is not avoided: run Open MPI with --mca op ^avx.
 * Returns a description, or NULL. */
static int is_mpich;
static unsigned char minmax_bad[MAXTYPES][2];

static void selftest_minmax(void)
{
    for (int t = 0; t < ntypes; t++) {
        if (!(types[t].groups & (G_INT | G_FINT)) || types[t].nb != 1) continue;
        int cls = types[t].cls;
        size_t sz = cls_size[cls];
        for (int m = 0; m < 2; m++) {
            int op = m ? OP_MAX : OP_MIN;
            unsigned char in[64 * 8], io[64 * 8], ex[8];
            uint64_t ones = ~0ULL, one = 1;
            for (int k = 0; k < 64; k++) {
                memcpy(in + k * sz, &ones, sz); /* -1, or the largest unsigned value */
                memcpy(io + k * sz, &one, sz);
            }
            memcpy(ex, &one, sz);
            combine(cls, op, ex, in);
            PMPI_Reduce_local(in, io, 64, types[t].dt, mpi_op(op));
            for (int k = 0; k < 64; k++)
                if (memcmp(io + k * sz, ex, sz)) minmax_bad[t][m] = 1;
        }
    }
    PMPI_Allreduce(MPI_IN_PLACE, minmax_bad, (int)sizeof minmax_bad, MPI_UNSIGNED_CHAR, MPI_BOR,
                   MPI_COMM_WORLD);
}

static const char *known_bug(int coll, int type, int op)
{
    int cls = types[type].cls;
    if ((op == OP_MIN || op == OP_MAX) && minmax_bad[type][op == OP_MAX])
        return "this MPI's own MPI_MIN/MPI_MAX compare this type with the wrong signedness "
               "(PMPI_Reduce_local self-test at start)";
    if (is_mpich && coll == GATHER &&
        (cls == C_SI || cls == C_DI || cls == C_LI || cls == C_LDI || cls == C_CF80 || cls == C_FI))
        return "MPICH 5.0.2: MPI_Gather of a datatype with holes (MPI_SHORT_INT, MPI_DOUBLE_INT, "
               "MPI_LONG_INT, MPI_LONG_DOUBLE_INT, MPI_C_LONG_DOUBLE_COMPLEX) or of MPI_FLOAT_INT "
               "(MPICH alone, seeds 1 and 2 of --only gather: a rank exits with code 8) fails in the "
               "binomial algorithm above ~4 KB per rank with more than 3 ranks";
    return NULL;
}

static ccase make_case(rng_t *r, int idx)
{
    ccase c;
    memset(&c, 0, sizeof c);
    c.idx = idx;
    int enabled[NCOLL], ne = 0;
    for (int i = 0; i < NCOLL; i++)
        if (opt.only[i]) enabled[ne++] = i;
    c.coll = enabled[rbelow(r, (uint64_t)ne)];
    int list[MAXTYPES];
    if (is_reduction(c.coll)) {
        c.op = (int)rbelow(r, NOPS);
    } else {
        c.op = OP_NONE;
    }
    int nt = types_for(c.op, list);
    c.type = list[rbelow(r, (uint64_t)nt)];
    c.avoided = -1;
    for (int tries = 0; opt.avoid_bugs && known_bug(c.coll, c.type, c.op) && tries < 100; tries++) {
        c.avoided = c.type;
        c.type = list[rbelow(r, (uint64_t)nt)];
    }
    c.comm = (int)rbelow(r, NCOMM);
    /* the world comm gets more weight */
    if (rbelow(r, 4) == 0) c.comm = CM_WORLD;
    c.inplace = has_inplace(c.coll) && rbelow(r, 10) < 3;
    c.nullbuf = rbelow(r, 2) == 0;
    c.rootraw = rnext(r);
    c.dseed = rnext(r);
    c.bseed = rnext(r);
    layout_t L = layout_of(&types[c.type]);
    long f = is_v(c.coll) || c.coll == RS ? 3L * wsize : is_gatherlike(c.coll) ? wsize : 1;
    long maxc = opt.max_bytes / (long)(L.ext * (size_t)f);
    c.count = c.coll == BARRIER ? 0 : pick_count(r, maxc);
    c.sweep = is_rooted(c.coll) && c.count <= 4096 && rbelow(r, 100) < 15;
    return c;
}

/* ---------- failure reporting ---------- */

static char failmsg[8192];
static int failed; /* 2: a wrong value, 1: another problem */

static void fail_as(int kind, const char *fmt, ...)
{
    if (failed) return;
    failed = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failmsg, sizeof failmsg, fmt, ap);
    va_end(ap);
}
#define fail(...) fail_as(1, __VA_ARGS__)

static void nb_describe(char *out, size_t n);

static void describe(const ccase *c, int root, MPI_Comm comm, char *out, size_t n)
{
    int cr, cs;
    MPI_Comm_rank(comm, &cr);
    MPI_Comm_size(comm, &cs);
    char rootbuf[32] = "-";
    if (is_rooted(c->coll)) snprintf(rootbuf, sizeof rootbuf, "%d", root);
    snprintf(out, n, "case %d (seed %llu): %s type=%s op=%s count=%ld root=%s in_place=%s "
             "comm=%s (size %d; world rank %d is rank %d)", c->idx,
             (unsigned long long)opt.seed, coll_mpi[c->coll], types[c->type].name,
             op_name[c->op], c->count, rootbuf, c->inplace ? "yes" : "no",
             comm_name[c->comm], cs, wrank, cr);
    if (opt.nonblocking) {
        size_t len = strlen(out);
        nb_describe(out + len, n - len);
    }
}

/* ---------- running one collective ---------- */

#define GUARD 64
#define CANARY 0xa5
#define SENDGAP 0x5a

typedef struct {
    unsigned char *p;
    size_t n;     /* bytes that belong to the message */
} buf_t;

static buf_t balloc(size_t n, int fill)
{
    buf_t b = {malloc(n + GUARD), n};
    if (!b.p) {
        fprintf(stderr, "collcheck: out of memory (%zu bytes)\n", n + GUARD);
        MPI_Abort(MPI_COMM_WORLD, 5);
    }
    memset(b.p, fill, n + GUARD);
    return b;
}

static int guard_ok(const buf_t *b)
{
    for (size_t i = 0; i < GUARD; i++)
        if (b->p[b->n + i] != CANARY) return 0;
    return 1;
}

/* bytes of nvec vector elements outside the blocks must still hold the canary */
static long gaps_ok(const layout_t *L, const unsigned char *p, long nvec)
{
    if (L->per == 1 || L->t->stride == L->t->bl) return -1;
    for (long v = 0; v < nvec; v++)
        for (int b = 0; b + 1 < L->t->nb; b++) {
            size_t lo = ((size_t)v * L->vext + (size_t)b * L->t->stride + L->t->bl) * L->bsz;
            size_t hi = ((size_t)v * L->vext + (size_t)(b + 1) * L->t->stride) * L->bsz;
            for (size_t i = lo; i < hi; i++)
                if (p[i] != CANARY) return (long)i;
        }
    return -1;
}

/* classes whose value is all of their bytes: compared and hashed as bytes */
static int bytes_exact(int cls) { return cls <= C_U64 || cls == C_BOOL || cls == C_AFF; }

/* compare n elements; returns the first differing index or -1 */
static long cmp_elems(const layout_t *L, const unsigned char *got, const unsigned char *exp,
                      long n)
{
    if (L->per == 1 && bytes_exact(L->t->cls) && !memcmp(got, exp, (size_t)n * L->bsz))
        return -1;
    for (long k = 0; k < n; k++) {
        size_t o = off_of(L, k);
        if (!elem_eq(L->t->cls, got + o, exp + o)) return k;
    }
    return -1;
}

static uint64_t hash_elems(const layout_t *L, const unsigned char *p, long n)
{
    uint64_t h = 0;
    if (L->per == 1 && bytes_exact(L->t->cls)) {
        size_t bytes = (size_t)n * L->bsz, i = 0;
        for (; i + 8 <= bytes; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            h = mix64(h + w);
        }
        for (; i < bytes; i++)
            h = mix64(h + p[i] + 0x100);
    } else {
        for (long k = 0; k < n; k++)
            h = mix64(h + elem_hash_val(L->t->cls, p + off_of(L, k)));
    }
    return h ^ (uint64_t)n;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    int rc;            /* MPI return code */
    char err[512];     /* structural problem (buffers), if any */
    unsigned char *res; /* result region to compare (NULL: none on this rank) */
    long nres;         /* elements in it */
    long diff;         /* first differing index from the expected value */
    uint64_t hash;
} outcome;

#include "collcheck_nb.c" /* --nonblocking, --request-errors, MPI_SIDE() */

static void check_barrier(const ccase *c, MPI_Comm comm, int use_pmpi, outcome *o)
{
    int cr, cs;
    MPI_Comm_rank(comm, &cr);
    MPI_Comm_size(comm, &cs);
    rng_t r = {c->bseed};
    int late = (int)rbelow(&r, (uint64_t)cs);
    long delay_us = (long)rbelow(&r, 15000);
    PMPI_Barrier(comm);
    if (cr == late) usleep((useconds_t)delay_us);
    else usleep((useconds_t)rbelow(&r, 2000));
    double t[2];
    t[0] = now();
    o->rc = use_pmpi ? PMPI_Barrier(comm) : MPI_SIDE(MPI_Barrier(comm), MPI_Ibarrier(comm, &nb.req));
    t[1] = opt.nonblocking && !use_pmpi ? nb.t_done : now();
    if (o->rc != MPI_SUCCESS || !opt.same_clock) return;
    double *all = malloc(sizeof(double) * 2 * (size_t)cs);
    PMPI_Allgather(t, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, comm);
    double last_in = all[0], first_out = all[1];
    int who_in = 0, who_out = 0;
    for (int i = 0; i < cs; i++) {
        if (all[2 * i] > last_in) { last_in = all[2 * i]; who_in = i; }
        if (all[2 * i + 1] < first_out) { first_out = all[2 * i + 1]; who_out = i; }
    }
    if (first_out < last_in && cr == 0)
        snprintf(o->err, sizeof o->err, "rank %d left the barrier %.6f s before rank %d entered "
                 "it", who_out, last_in - first_out, who_in);
    free(all);
}

/* Expected result of this rank for (case, root). Returns NULL when the rank
 * has no result (non-root of reduce/gather). */
static unsigned char *expected(const ccase *c, const layout_t *L, int root, int cr, int cs,
                               long *nres)
{
    long n = c->count * L->per; /* base elements in one rank's block */
    size_t blk = (size_t)c->count * L->ext;
    unsigned char *e = NULL, *tmp;
    *nres = 0;
    switch (c->coll) {
    case BCAST:
        e = calloc(1, blk + 1);
        gen_block(L, c->op, c->dseed, root, 0, n, e);
        *nres = n;
        break;
    case SCATTER:
        e = calloc(1, blk + 1);
        gen_block(L, c->op, c->dseed, root, (long)cr * n, n, e);
        *nres = n;
        break;
    case ALLGATHER: case GATHER:
        if (c->coll == GATHER && cr != root) return NULL;
        e = calloc(1, blk * (size_t)cs + 1);
        for (int r = 0; r < cs; r++)
            gen_block(L, c->op, c->dseed, r, 0, n, e + blk * (size_t)r);
        *nres = n * cs;
        break;
    case SCATTERV:
        e = calloc(1, (size_t)v_count(c->count, cr) * L->ext + 1);
        gen_block(L, c->op, c->dseed, root, v_displ(c->count, cr, cs) * L->per, v_count(c->count, cr) * L->per, e);
        *nres = v_count(c->count, cr) * L->per;
        break;
    case ALLGATHERV: case GATHERV:
        if (c->coll == GATHERV && cr != root) return NULL;
        e = calloc(1, (size_t)v_total(c->count, cs) * L->ext + 1);
        for (int r = 0; r < cs; r++)
            gen_block(L, c->op, c->dseed, r, 0, v_count(c->count, r) * L->per,
                      e + (size_t)v_displ(c->count, r, cs) * L->ext);
        *nres = v_total(c->count, cs) * L->per;
        break;
    case ALLREDUCE: case REDUCE: case RSB: case RS: case SCAN: case EXSCAN: {
        if (c->coll == REDUCE && cr != root) return NULL;
        if (c->coll == RS) {                /* my irregular block */
            n = v_count(c->count, cr) * L->per;
            blk = (size_t)v_count(c->count, cr) * L->ext;
        }
        if (c->coll == EXSCAN && cr == 0) return NULL;      /* undefined there */
        /* the scans: ranks 0..cr (exscan: 0..cr-1) in rank order */
        int upto = c->coll == SCAN ? cr + 1 : c->coll == EXSCAN ? cr : cs;
        long k0 = c->coll == RSB ? (long)cr * n : c->coll == RS ? rs_first(c->count, cr) * L->per : 0;
        e = calloc(1, blk + 1);
        tmp = calloc(1, blk + 1);
        gen_block(L, c->op, c->dseed, 0, k0, n, e);
        for (int r = 1; r < upto; r++) {
            gen_block(L, c->op, c->dseed, r, k0, n, tmp);
            for (long k = 0; k < n; k++) {
                size_t o = off_of(L, k);
                combine(L->t->cls, c->op, e + o, tmp + o);
            }
        }
        free(tmp);
        *nres = n;
        break;
    }
    }
    return e;
}

/* MPI_Gatherv and MPI_Scatterv: the root's buffer holds every block (v_count,
 * v_displ); a non-root rank's is insignificant (NULL, with the counts, if
 * the case says so; else it must stay untouched). MPI_IN_PLACE at the root
 * only. */
static void run_rooted_v(const ccase *c, const layout_t *L, MPI_Comm comm, int root, int use_pmpi, outcome *o,
                         buf_t *s, buf_t *r, buf_t *scopy, unsigned char **res, long *nres, long *nvec_recv)
{
    int cr, cs;
    MPI_Comm_rank(comm, &cr);
    MPI_Comm_size(comm, &cs);
    MPI_Datatype dt = L->t->dt;
    int isroot = cr == root, inplace = c->inplace && isroot, gather = c->coll == GATHERV;
    long total = v_total(c->count, cs), mine = v_count(c->count, cr);
    size_t all = (size_t)total * L->ext, own = (size_t)mine * L->ext;
    int *counts = malloc(sizeof(int) * 2 * (size_t)cs), *displs = counts + cs;
    for (int q = 0; q < cs; q++) {
        counts[q] = (int)v_count(c->count, q);
        displs[q] = (int)v_displ(c->count, q, cs);
    }
    int *cnt_arg = isroot || !c->nullbuf ? counts : NULL, *dsp_arg = cnt_arg ? displs : NULL;
    buf_t *whole = gather ? r : s, *block = gather ? s : r;
    void *warg = NULL, *barg = NULL;
    if (isroot || !c->nullbuf) {
        *whole = balloc(all, CANARY);
        warg = whole->p;
    }
    if (!gather && isroot) {                        /* the root's blocks to scatter */
        memset(s->p, SENDGAP, all);
        gen_block(L, c->op, c->dseed, cr, 0, total * L->per, s->p);
    }
    if (inplace) {
        barg = MPI_IN_PLACE;
        if (gather)
            gen_block(L, c->op, c->dseed, cr, 0, mine * L->per, r->p + (size_t)displs[cr] * L->ext);
        else
            *res = s->p + (size_t)displs[cr] * L->ext;
    } else {
        *block = balloc(own, CANARY);
        barg = block->p;
        if (gather) {
            memset(s->p, SENDGAP, own);
            gen_block(L, c->op, c->dseed, cr, 0, mine * L->per, s->p);
        } else {
            *res = r->p;
            *nvec_recv = mine;
        }
    }
    if (s->p) {
        *scopy = balloc(s->n, 0);
        memcpy(scopy->p, s->p, s->n);
    }
    if (gather && isroot) {
        *res = r->p;
        *nres = total * L->per;
        *nvec_recv = total;
    } else if (!gather) {
        *nres = mine * L->per;
    }
    const void *sv = inplace ? MPI_IN_PLACE : barg;
    if (gather)
        o->rc = use_pmpi ? PMPI_Gatherv(sv, (int)mine, dt, warg, cnt_arg, dsp_arg, dt, root, comm)
                         : MPI_SIDE(MPI_Gatherv(sv, (int)mine, dt, warg, cnt_arg, dsp_arg, dt, root, comm),
                                    MPI_Igatherv(sv, (int)mine, dt, warg, cnt_arg, dsp_arg, dt, root, comm, &nb.req));
    else
        o->rc = use_pmpi ? PMPI_Scatterv(warg, cnt_arg, dsp_arg, dt, barg, (int)mine, dt, root, comm)
                         : MPI_SIDE(MPI_Scatterv(warg, cnt_arg, dsp_arg, dt, barg, (int)mine, dt, root, comm),
                                    MPI_Iscatterv(warg, cnt_arg, dsp_arg, dt, barg, (int)mine, dt, root, comm,
                                                  &nb.req));
    if (gather && !isroot && r->p)
        for (size_t i = 0; i < r->n; i++)
            if (r->p[i] != CANARY) {
                snprintf(o->err, sizeof o->err, "wrote into the receive buffer of a non-root rank (byte %zu)", i);
                break;
            }
    free(counts);
}

/* Run the collective once (MPI_ or PMPI_) with fresh buffers; check buffers;
 * compare with exp. */
static void run_once(const ccase *c, const layout_t *L, MPI_Comm comm, int root, int use_pmpi,
                     const unsigned char *exp, long nexp, outcome *o)
{
    int cr, cs;
    MPI_Comm_rank(comm, &cr);
    MPI_Comm_size(comm, &cs);
    memset(o, 0, sizeof *o);
    o->diff = -1;
    if (c->coll == BARRIER) {
        check_barrier(c, comm, use_pmpi, o);
        return;
    }
    MPI_Datatype dt = L->t->dt;
    MPI_Op op = c->op == OP_NONE ? MPI_OP_NULL : mpi_op(c->op);
    int cnt = (int)c->count;
    long n = c->count * L->per;
    size_t blk = (size_t)c->count * L->ext;
    buf_t s = {NULL, 0}, r = {NULL, 0}, scopy = {NULL, 0};
    const void *sarg = NULL;
    void *rarg = NULL;
    int isroot = cr == root;
    long nvec_recv = 0; /* vector elements in the receive region to gap-check */
    unsigned char *res = NULL;
    long nres = 0;

    switch (c->coll) {
    case BCAST:
        r = balloc(blk, CANARY);
        if (isroot) {
            memset(r.p, SENDGAP, blk);
            gen_block(L, c->op, c->dseed, cr, 0, n, r.p);
            scopy = balloc(blk, 0);
            memcpy(scopy.p, r.p, blk);
        } else {
            nvec_recv = c->count;
        }
        res = r.p;
        nres = n;
        o->rc = use_pmpi ? PMPI_Bcast(r.p, cnt, dt, root, comm)
                         : MPI_SIDE(MPI_Bcast(r.p, cnt, dt, root, comm), MPI_Ibcast(r.p, cnt, dt, root, comm, &nb.req));
        if (isroot && memcmp(scopy.p, r.p, blk))
            snprintf(o->err, sizeof o->err, "the root's buffer was modified");
        break;
    case ALLREDUCE: case REDUCE: case RSB: case RS: case SCAN: case EXSCAN: {
        int rsb = c->coll == RSB;
        size_t sbytes = rsb ? blk * (size_t)cs : blk;
        long sn = rsb ? n * cs : n;
        int *rcounts = NULL;
        if (c->coll == RS) {                /* irregular blocks in rank order: mine is v_count(cr) */
            rcounts = malloc(sizeof(int) * (size_t)cs);
            for (int q = 0; q < cs; q++) rcounts[q] = (int)v_count(c->count, q);
            sbytes = (size_t)v_total(c->count, cs) * L->ext;
            sn = v_total(c->count, cs) * L->per;
            blk = (size_t)rcounts[cr] * L->ext;
            n = rcounts[cr] * L->per;
            cnt = rcounts[cr];
        }
        int root_like = c->coll != REDUCE || isroot;
        int inplace = c->inplace && root_like;
        if (inplace) {
            r = balloc(sbytes, CANARY);
            gen_block(L, c->op, c->dseed, cr, 0, sn, r.p);
            sarg = MPI_IN_PLACE;
            rarg = r.p;
            nvec_recv = cnt;
        } else {
            s = balloc(sbytes, CANARY);
            memset(s.p, SENDGAP, sbytes);
            gen_block(L, c->op, c->dseed, cr, 0, sn, s.p);
            scopy = balloc(sbytes, 0);
            memcpy(scopy.p, s.p, sbytes);
            sarg = s.p;
            if (root_like) {
                r = balloc(blk, CANARY);
                rarg = r.p;
                nvec_recv = cnt;
            } else if (!c->nullbuf) {
                r = balloc(blk, CANARY); /* must stay untouched */
                rarg = r.p;
            }
        }
        if (c->coll == EXSCAN && cr == 0)
            nvec_recv = 0;                      /* undefined: neither its value nor its gaps checked */
        else if (root_like) { res = r.p; nres = n; }
        if (c->coll == SCAN)
            o->rc = use_pmpi ? PMPI_Scan(sarg, rarg, cnt, dt, op, comm)
                             : MPI_SIDE(MPI_Scan(sarg, rarg, cnt, dt, op, comm),
                                        MPI_Iscan(sarg, rarg, cnt, dt, op, comm, &nb.req));
        else if (c->coll == EXSCAN)
            o->rc = use_pmpi ? PMPI_Exscan(sarg, rarg, cnt, dt, op, comm)
                             : MPI_SIDE(MPI_Exscan(sarg, rarg, cnt, dt, op, comm),
                                        MPI_Iexscan(sarg, rarg, cnt, dt, op, comm, &nb.req));
        else if (c->coll == ALLREDUCE)
            o->rc = use_pmpi ? PMPI_Allreduce(sarg, rarg, cnt, dt, op, comm)
                             : MPI_SIDE(MPI_Allreduce(sarg, rarg, cnt, dt, op, comm),
                                        MPI_Iallreduce(sarg, rarg, cnt, dt, op, comm, &nb.req));
        else if (c->coll == REDUCE)
            o->rc = use_pmpi ? PMPI_Reduce(sarg, rarg, cnt, dt, op, root, comm)
                             : MPI_SIDE(MPI_Reduce(sarg, rarg, cnt, dt, op, root, comm),
                                        MPI_Ireduce(sarg, rarg, cnt, dt, op, root, comm, &nb.req));
        else if (c->coll == RS)
            o->rc = use_pmpi ? PMPI_Reduce_scatter(sarg, rarg, rcounts, dt, op, comm)
                             : MPI_SIDE(MPI_Reduce_scatter(sarg, rarg, rcounts, dt, op, comm),
                                        MPI_Ireduce_scatter(sarg, rarg, rcounts, dt, op, comm, &nb.req));
        else
            o->rc = use_pmpi ? PMPI_Reduce_scatter_block(sarg, rarg, cnt, dt, op, comm)
                             : MPI_SIDE(MPI_Reduce_scatter_block(sarg, rarg, cnt, dt, op, comm),
                                        MPI_Ireduce_scatter_block(sarg, rarg, cnt, dt, op, comm, &nb.req));
        free(rcounts);
        if (!root_like && r.p) {
            for (size_t i = 0; i < r.n; i++)
                if (r.p[i] != CANARY) {
                    snprintf(o->err, sizeof o->err, "wrote into the receive buffer of a "
                             "non-root rank (byte %zu)", i);
                    break;
                }
        }
        break;
    }
    case ALLGATHER: case GATHER: {
        int root_like = c->coll == ALLGATHER || isroot;
        int inplace = c->inplace && root_like;
        if (root_like || !c->nullbuf) {
            r = balloc(blk * (size_t)cs, CANARY);
            rarg = r.p;
        }
        if (inplace) {
            gen_block(L, c->op, c->dseed, cr, 0, n, r.p + blk * (size_t)cr);
            sarg = MPI_IN_PLACE;
        } else {
            s = balloc(blk, CANARY);
            memset(s.p, SENDGAP, blk);
            gen_block(L, c->op, c->dseed, cr, 0, n, s.p);
            scopy = balloc(blk, 0);
            memcpy(scopy.p, s.p, blk);
            sarg = s.p;
        }
        if (root_like) {
            res = r.p;
            nres = n * cs;
            nvec_recv = c->count * cs;
        }
        if (c->coll == ALLGATHER)
            o->rc = use_pmpi ? PMPI_Allgather(sarg, cnt, dt, rarg, cnt, dt, comm)
                             : MPI_SIDE(MPI_Allgather(sarg, cnt, dt, rarg, cnt, dt, comm),
                                        MPI_Iallgather(sarg, cnt, dt, rarg, cnt, dt, comm, &nb.req));
        else
            o->rc = use_pmpi ? PMPI_Gather(sarg, cnt, dt, rarg, cnt, dt, root, comm)
                             : MPI_SIDE(MPI_Gather(sarg, cnt, dt, rarg, cnt, dt, root, comm),
                                        MPI_Igather(sarg, cnt, dt, rarg, cnt, dt, root, comm, &nb.req));
        if (!root_like && r.p) {
            for (size_t i = 0; i < r.n; i++)
                if (r.p[i] != CANARY) {
                    snprintf(o->err, sizeof o->err, "wrote into the receive buffer of a "
                             "non-root rank (byte %zu)", i);
                    break;
                }
        }
        break;
    }
    case ALLGATHERV: {
        long total = v_total(c->count, cs), mine = v_count(c->count, cr);
        int *counts = malloc(sizeof(int) * 2 * (size_t)cs), *displs = counts + cs;
        for (int q = 0; q < cs; q++) {
            counts[q] = (int)v_count(c->count, q);
            displs[q] = (int)v_displ(c->count, q, cs);
        }
        r = balloc((size_t)total * L->ext, CANARY);
        rarg = r.p;
        if (c->inplace) {
            gen_block(L, c->op, c->dseed, cr, 0, mine * L->per, r.p + (size_t)displs[cr] * L->ext);
            sarg = MPI_IN_PLACE;
        } else {
            s = balloc((size_t)mine * L->ext, CANARY);
            memset(s.p, SENDGAP, (size_t)mine * L->ext);
            gen_block(L, c->op, c->dseed, cr, 0, mine * L->per, s.p);
            scopy = balloc((size_t)mine * L->ext, 0);
            memcpy(scopy.p, s.p, (size_t)mine * L->ext);
            sarg = s.p;
        }
        res = r.p;
        nres = total * L->per;
        nvec_recv = total;
        o->rc = use_pmpi ? PMPI_Allgatherv(sarg, (int)mine, dt, rarg, counts, displs, dt, comm)
                         : MPI_SIDE(MPI_Allgatherv(sarg, (int)mine, dt, rarg, counts, displs, dt, comm),
                                    MPI_Iallgatherv(sarg, (int)mine, dt, rarg, counts, displs, dt, comm, &nb.req));
        free(counts);
        break;
    }
    case GATHERV: case SCATTERV:
        run_rooted_v(c, L, comm, root, use_pmpi, o, &s, &r, &scopy, &res, &nres, &nvec_recv);
        break;
    case SCATTER: {
        int inplace = c->inplace && isroot;
        if (isroot || !c->nullbuf) {
            s = balloc(blk * (size_t)cs, CANARY);
            memset(s.p, SENDGAP, blk * (size_t)cs);
            if (isroot) gen_block(L, c->op, c->dseed, cr, 0, n * cs, s.p);
            scopy = balloc(blk * (size_t)cs, 0);
            memcpy(scopy.p, s.p, blk * (size_t)cs);
            sarg = s.p;
        }
        if (inplace) {
            rarg = MPI_IN_PLACE;
            res = s.p + blk * (size_t)cr;
        } else {
            r = balloc(blk, CANARY);
            rarg = r.p;
            res = r.p;
            nvec_recv = c->count;
        }
        nres = n;
        o->rc = use_pmpi ? PMPI_Scatter(sarg, cnt, dt, rarg, cnt, dt, root, comm)
                         : MPI_SIDE(MPI_Scatter(sarg, cnt, dt, rarg, cnt, dt, root, comm),
                                    MPI_Iscatter(sarg, cnt, dt, rarg, cnt, dt, root, comm, &nb.req));
        break;
    }
    }
    if (o->rc == MPI_SUCCESS && !o->err[0]) {
        if (scopy.p && s.p && memcmp(scopy.p, s.p, s.n))
            snprintf(o->err, sizeof o->err, "the send buffer was modified");
        else if (s.p && !guard_ok(&s))
            snprintf(o->err, sizeof o->err, "wrote past the end of the send buffer");
        else if (r.p && !guard_ok(&r))
            snprintf(o->err, sizeof o->err, "wrote past the end of the receive buffer "
                     "(%zu bytes)", r.n);
        else {
            long g = gaps_ok(L, res ? res : r.p, res ? nvec_recv : 0);
            if (g >= 0)
                snprintf(o->err, sizeof o->err, "wrote into a gap of the vector datatype "
                         "(byte %ld of the receive buffer)", g);
        }
    }
    if (o->rc == MPI_SUCCESS && res) {
        o->diff = cmp_elems(L, res, exp, nres < nexp ? nres : nexp);
        o->hash = hash_elems(L, res, nres);
        o->nres = nres;
        /* keep the result for the report */
        size_t bytes = nres ? off_of(L, nres - 1) + L->bsz : 0;
        o->res = malloc(bytes + 1);
        memcpy(o->res, res, bytes);
    }
    free(s.p);
    free(r.p);
    free(scopy.p);
}

static void run_case_root(const ccase *c, int root)
{
    MPI_Comm comm = comms[c->comm];
    int cr, cs;
    MPI_Comm_rank(comm, &cr);
    MPI_Comm_size(comm, &cs);
    const tinfo *t = &types[c->type];
    layout_t L = layout_of(t);
    long nexp = 0;
    unsigned char *exp = c->coll == BARRIER ? NULL : expected(c, &L, root, cr, cs, &nexp);
    outcome o[2];
    char desc[1024], pname[64];
    if (opt.nonblocking) nb_plan(c, comm, root);
    describe(c, root, comm, desc, sizeof desc);
    if (opt.nonblocking && opt.verbose && wrank == 0) {
        nb_describe(desc, sizeof desc); /* "; nonblocking: ..." */
        if (is_rooted(c->coll)) printf("  root %d:%s\n", root, desc + 1);
        else printf(" %s\n", desc + 1);
        describe(c, root, comm, desc, sizeof desc);
    }
    /* the names of the two sides: MPI_X (or MPI_IX) and PMPI_X */
    const char *mname = opt.nonblocking ? coll_impi[c->coll] : coll_mpi[c->coll];
    snprintf(pname, sizeof pname, "P%s", coll_mpi[c->coll]);
    for (int p = 0; p < 2; p++) {
        run_once(c, &L, comm, root, p, exp, nexp, &o[p]);
        if (o[p].rc != MPI_SUCCESS) {
            /* the other ranks may wait for this one forever: stop the job now */
            char es[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(o[p].rc, es, &len);
            fprintf(stderr, "collcheck: FAILED %s\ncollcheck:   %s returned an error: %s\n"
                    "collcheck: repeat it with --seed %llu --start %d%s\n", desc,
                    p ? pname : opt.nonblocking ? nb.call : mname, es, (unsigned long long)opt.seed, c->idx,
                    opt.nonblocking ? " --nonblocking" : "");
            fflush(stderr);
            usleep(200000);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (int p = 0; p < 2 && !failed; p++) {
        if (o[p].err[0]) {
            fail("collcheck: FAILED %s\ncollcheck:   %s: %s\n", desc, p ? pname : mname, o[p].err);
        }
    }
    if (!failed && exp && (o[0].diff >= 0 || o[1].diff >= 0)) {
        char e[256], g[256], ref[256];
        long k = o[0].diff >= 0 ? o[0].diff : o[1].diff;
        size_t off = off_of(&L, k);
        fmt_elem(t->cls, exp + off, e, sizeof e);
        fmt_elem(t->cls, o[0].res + off, g, sizeof g);
        fmt_elem(t->cls, o[1].res + off, ref, sizeof ref);
        const char *verdict;
        if (o[0].diff >= 0 && o[1].diff < 0)
            verdict = "MPI_ result is wrong; the PMPI_ reference agrees with the expected value";
        else if (o[0].diff < 0)
            verdict = "MPI_ result is right, but the PMPI_ reference (the MPI library's own "
                      "collective) is wrong";
        else if (elem_eq(t->cls, o[0].res + off, o[1].res + off))
            verdict = "MPI_ result and PMPI_ reference agree with each other but not with the "
                      "expected value: the MPI library's own collective is wrong here";
        else
            verdict = "MPI_ result and PMPI_ reference are both wrong, and differ";
        fail_as(2, "collcheck: FAILED %s\ncollcheck:   first differing index %ld: %s=%s "
             "%s=%s expected=%s\ncollcheck:   %s%s\n", desc, k, mname, g, pname, ref, e, verdict,
             (o[1].diff >= 0 && t->cls <= C_U16 && c->op == OP_SUM)
                 ? " (Open MPI 4.1's AVX op component saturates 8- and 16-bit integer sums "
                   "instead of wrapping, open-mpi/ompi#8045: run with --mca op ^avx)" : "");
    }
    /* every rank that holds the full result must hold the identical one */
    int allsame = c->coll == BCAST || c->coll == ALLREDUCE || c->coll == ALLGATHER || c->coll == ALLGATHERV;
    if (allsame) {
        uint64_t mine[2] = {o[0].hash, o[1].hash};
        uint64_t *all = malloc(sizeof(uint64_t) * 2 * (size_t)cs);
        PMPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, comm);
        for (int i = 0; i < cs && !failed; i++)
            for (int p = 0; p < 2; p++)
                if (all[2 * i + p] != all[p] && cr == 0) {
                    fail("collcheck: FAILED %s\ncollcheck:   %s: ranks 0 and %d of the "
                         "communicator hold different results\n", desc, p ? pname : mname, i);
                    break;
                }
        free(all);
    }
    free(exp);
    free(o[0].res);
    free(o[1].res);
}

static void run_case(const ccase *c)
{
    MPI_Comm comm = comms[c->comm];
    int cs;
    MPI_Comm_size(comm, &cs);
    if (c->sweep) {
        for (int root = 0; root < cs && !failed; root++)
            run_case_root(c, root);
    } else {
        run_case_root(c, (int)(c->rootraw % (uint64_t)cs));
    }
}

/* ---------- setup ---------- */

static void setup_types(void)
{
    add_type("MPI_CHAR", MPI_CHAR, C_I8, 0);
    add_type("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, C_I8, G_INT);
    add_type("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, C_U8, G_INT);
    add_type("MPI_BYTE", MPI_BYTE, C_U8, G_BYTE);
    add_type("MPI_SHORT", MPI_SHORT, C_I16, G_INT);
    add_type("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, C_U16, G_INT);
    add_type("MPI_INT", MPI_INT, C_I32, G_INT);
    add_type("MPI_UNSIGNED", MPI_UNSIGNED, C_U32, G_INT);
    add_type("MPI_LONG", MPI_LONG, sizeof(long) == 8 ? C_I64 : C_I32, G_INT);
    add_type("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, sizeof(long) == 8 ? C_U64 : C_U32, G_INT);
    add_type("MPI_LONG_LONG", MPI_LONG_LONG, C_I64, G_INT);
    add_type("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, C_U64, G_INT);
    add_type("MPI_INT8_T", MPI_INT8_T, C_I8, G_INT);
    add_type("MPI_UINT8_T", MPI_UINT8_T, C_U8, G_INT);
    add_type("MPI_INT16_T", MPI_INT16_T, C_I16, G_INT);
    add_type("MPI_UINT16_T", MPI_UINT16_T, C_U16, G_INT);
    add_type("MPI_INT32_T", MPI_INT32_T, C_I32, G_INT);
    add_type("MPI_UINT32_T", MPI_UINT32_T, C_U32, G_INT | G_PLUS1);
    add_type("MPI_INT64_T", MPI_INT64_T, C_I64, G_INT);
    add_type("MPI_UINT64_T", MPI_UINT64_T, C_U64, G_INT);
    add_type("MPI_AINT", MPI_AINT, C_I64, G_INT);
    add_type("MPI_OFFSET", MPI_OFFSET, C_I64, G_INT);
    add_type("MPI_COUNT", MPI_COUNT, C_I64, G_INT);
    add_type("MPI_C_BOOL", MPI_C_BOOL, C_BOOL, G_LOGICAL);
    add_type("MPI_FLOAT", MPI_FLOAT, C_F32, G_FLOAT);
    add_type("MPI_DOUBLE", MPI_DOUBLE, C_F64, G_FLOAT);
    add_type("MPI_LONG_DOUBLE", MPI_LONG_DOUBLE, C_F80, G_FLOAT);
    add_type("MPI_C_FLOAT_COMPLEX", MPI_C_FLOAT_COMPLEX, C_CF32, G_COMPLEX);
    add_type("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, C_CF64, G_COMPLEX);
    add_type("MPI_C_LONG_DOUBLE_COMPLEX", MPI_C_LONG_DOUBLE_COMPLEX, C_CF80, G_COMPLEX);
    add_type("MPI_FLOAT_INT", MPI_FLOAT_INT, C_FI, G_PAIR);
    add_type("MPI_DOUBLE_INT", MPI_DOUBLE_INT, C_DI, G_PAIR);
    add_type("MPI_LONG_INT", MPI_LONG_INT, C_LI, G_PAIR);
    add_type("MPI_2INT", MPI_2INT, C_II, G_PAIR);
    add_type("MPI_SHORT_INT", MPI_SHORT_INT, C_SI, G_PAIR);
    add_type("MPI_LONG_DOUBLE_INT", MPI_LONG_DOUBLE_INT, C_LDI, G_PAIR);
    /* Fortran types as seen from C (what the Fortran bindings pass down) */
    add_type("MPI_INTEGER", MPI_INTEGER, C_I32, G_FINT);
    add_type("MPI_REAL", MPI_REAL, C_F32, G_FLOAT);
    add_type("MPI_DOUBLE_PRECISION", MPI_DOUBLE_PRECISION, C_F64, G_FLOAT);
    add_type("MPI_COMPLEX", MPI_COMPLEX, C_CF32, G_COMPLEX);
    add_type("MPI_DOUBLE_COMPLEX", MPI_DOUBLE_COMPLEX, C_CF64, G_COMPLEX);
    add_type("MPI_2INTEGER", MPI_2INTEGER, C_II, G_PAIR);
    add_type("MPI_2REAL", MPI_2REAL, C_FF, G_PAIR);
    add_type("MPI_2DOUBLE_PRECISION", MPI_2DOUBLE_PRECISION, C_DD, G_PAIR);
    /* derived datatypes */
    MPI_Type_contiguous(2, MPI_UINT32_T, &aff_type);
    MPI_Type_commit(&aff_type);
    add_type("contiguous(2,MPI_UINT32_T)", aff_type, C_AFF, G_AFFINE);
    add_vector("vector(3,2,5,MPI_UINT32_T)", &vec_u32, MPI_UINT32_T, C_U32, G_PLUS1, 3, 2, 5);
    add_vector("vector(2,3,4,MPI_DOUBLE)", &vec_f64, MPI_DOUBLE, C_F64, 0, 2, 3, 4);
    add_vector("vector(2,1,3,MPI_SHORT_INT)", &vec_si, MPI_SHORT_INT, C_SI, 0, 2, 1, 3);
    MPI_Op_create(plus1_fn, 1, &user_op[0]);
    MPI_Op_create(affine_fn, 0, &user_op[1]);
    /* every base type's extent must match its C layout */
    for (int i = 0; i < ntypes; i++) {
        MPI_Aint lb, ext;
        MPI_Type_get_extent(types[i].base, &lb, &ext);
        if (lb != 0 || (size_t)ext != cls_size[types[i].cls]) {
            if (wrank == 0)
                fprintf(stderr, "collcheck: %s has extent %ld, expected %zu\n", types[i].name,
                        (long)ext, cls_size[types[i].cls]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
}

static int same_clock(void)
{
    /* one kernel (even across network namespaces): CLOCK_MONOTONIC is shared */
    char id[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(id, sizeof id, f)) id[0] = 0;
        fclose(f);
    }
    char *all = malloc(64 * (size_t)wsize);
    PMPI_Allgather(id, 64, MPI_CHAR, all, 64, MPI_CHAR, MPI_COMM_WORLD);
    int same = id[0] != 0;
    for (int i = 0; i < wsize; i++)
        if (strncmp(all + 64 * i, id, 64)) same = 0;
    free(all);
    return same;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: collcheck [--seed N] [--cases N] [--max-bytes N] [--only LIST] [--start N]\n"
            "                 [--known-bugs avoid|check] [--nonblocking] [--request-errors] [--verbose]\n"
            "  --seed N        seed of the case sequence (default 1)\n"
            "  --cases N       number of cases (default 200)\n"
            "  --max-bytes N   largest buffer of a case in bytes (default 4194304); K, M "
            "suffixes allowed\n"
            "  --only LIST     comma-separated collectives: bcast,allreduce,reduce,allgather,\n"
            "                  reduce_scatter_block (or rsb),barrier,gather,scatter,allgatherv,\n"
            "                  gatherv,scatterv,scan,exscan\n"
            "  --start N       skip the cases before case N (to repeat one failing case)\n"
            "  --known-bugs avoid|check  avoid (default) or run the cases the MPI library\n"
            "                  itself is known to get wrong\n"
            "  --nonblocking   the MPI_ side calls the nonblocking variant (MPI_Ibcast, ...) and\n"
            "                  completes it with MPI_Wait, MPI_Test, MPI_Waitall, MPI_Waitany,\n"
            "                  MPI_Waitsome, MPI_Testall, MPI_Testany, MPI_Testsome or\n"
            "                  MPI_Request_get_status, drawn per case, some among a point-to-point\n"
            "                  ring exchange, some behind a second nonblocking collective\n"
            "                  completed first; the PMPI_ side stays the blocking reference\n"
            "  --request-errors  first check that MPI_Request_free and MPI_Cancel of an active\n"
            "                  nonblocking collective fail with MPI_ERR_REQUEST and that it then\n"
            "                  completes normally; asserted only with\n"
            "                  WANMPI_EXPECT_REQUEST_ERRORS=1, else reported (--cases 0: only this)\n"
            "  --verbose       rank 0 prints each case before running it\n");
}

static int parse_num(const char *s, long *out, int suffix)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    if (suffix && (*end == 'K' || *end == 'k')) { v <<= 10; end++; }
    else if (suffix && (*end == 'M' || *end == 'm')) { v <<= 20; end++; }
    if (*end) return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, char *err, size_t n)
{
    int any_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (!strcmp(a, "--verbose")) { opt.verbose = 1; continue; }
        if (!strcmp(a, "--nonblocking")) { opt.nonblocking = 1; continue; }
        if (!strcmp(a, "--request-errors")) { opt.request_errors = 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        static const char *valued[] = {"--seed", "--cases", "--max-bytes", "--only", "--start",
                                       "--known-bugs"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
            known |= !strcmp(a, valued[k]);
        if (!known) {
            snprintf(err, n, "unknown option: %s", a);
            return 2;
        }
        if (i + 1 >= argc) {
            snprintf(err, n, "%s needs a value", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (errno || end == val || *end || val[0] == '-') {
                snprintf(err, n, "--seed needs a non-negative integer, not '%s'", val);
                return 2;
            }
            opt.seed = s;
        } else if (!strcmp(a, "--cases")) {
            if (parse_num(val, &v, 0)) {
                snprintf(err, n, "--cases needs a non-negative integer, not '%s'", val);
                return 2;
            }
            opt.cases = v;
        } else if (!strcmp(a, "--known-bugs")) {
            if (strcmp(val, "avoid") && strcmp(val, "check")) {
                snprintf(err, n, "--known-bugs is 'avoid' or 'check', not '%s'", val);
                return 2;
            }
            opt.avoid_bugs = !strcmp(val, "avoid");
        } else if (!strcmp(a, "--start")) {
            if (parse_num(val, &v, 0)) {
                snprintf(err, n, "--start needs a non-negative integer, not '%s'", val);
                return 2;
            }
            opt.start = v;
        } else if (!strcmp(a, "--max-bytes")) {
            if (parse_num(val, &v, 1) || v > (1L << 30)) {
                snprintf(err, n, "--max-bytes needs an integer from 0 to 1G, not '%s'", val);
                return 2;
            }
            opt.max_bytes = v;
        } else if (!strcmp(a, "--only")) {
            char *list = strdup(val), *save = NULL;
            for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int k = -1;
                for (int j = 0; j < NCOLL; j++)
                    if (!strcmp(tok, coll_name[j])) k = j;
                if (!strcmp(tok, "rsb")) k = RSB;
                if (k < 0) {
                    snprintf(err, n, "--only: unknown collective '%s' (known: bcast, allreduce, "
                             "reduce, allgather, reduce_scatter_block, barrier, gather, "
                             "scatter, allgatherv, gatherv, scatterv, scan, exscan, reduce_scatter)", tok);
                    free(list);
                    return 2;
                }
                opt.only[k] = 1;
                any_only = 1;
            }
            free(list);
            if (!any_only) {
                snprintf(err, n, "--only needs at least one collective");
                return 2;
            }
        } else {
            snprintf(err, n, "unknown option: %s", a);
            return 2;
        }
    }
    if (!any_only)
        for (int j = 0; j < NCOLL; j++) opt.only[j] = 1;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    char err[512] = "";
    int pr = parse_args(argc, argv, err, sizeof err);
    if (pr) {
        if (wrank == 0) {
            if (pr == 2) fprintf(stderr, "collcheck: %s\n", err);
            usage(pr == 2 ? stderr : stdout);
        }
        MPI_Finalize();
        return pr == 1 ? 0 : 2;
    }
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    MPI_Get_library_version(lib, &liblen);
    is_mpich = strstr(lib, "MPICH") != NULL && strstr(lib, "Open MPI") == NULL;
    setup_types();
    selftest_minmax();
    make_comms(opt.seed);
    opt.same_clock = same_clock();
    if (opt.verbose && wrank == 0 && !opt.same_clock)
        printf("collcheck: ranks do not share one clock: barrier timing not checked\n");
    if (opt.request_errors)
        request_errors();
    if (opt.nonblocking)
        nb_setup();

    rng_t r = {opt.seed};
    long done = 0;
    double t0 = MPI_Wtime();
    for (long i = 0; i < opt.cases; i++) {
        ccase c = make_case(&r, (int)i);
        if (i < opt.start)
            continue;
        if (opt.verbose && wrank == 0 && c.avoided >= 0)
            printf("case %ld: %s with %s and %s avoided (known bug: %s)\n", i,
                   coll_mpi[c.coll], types[c.avoided].name, op_name[c.op], known_bug(c.coll, c.avoided, c.op));
        if (opt.verbose && wrank == 0) {
            printf("case %ld: %s type=%s op=%s count=%ld root=%s in_place=%s comm=%s\n", i,
                   opt.nonblocking ? coll_impi[c.coll] : coll_mpi[c.coll], types[c.type].name, op_name[c.op], c.count,
                   !is_rooted(c.coll) ? "-" : c.sweep ? "all" : "random",
                   c.inplace ? "yes" : "no", comm_name[c.comm]);
            fflush(stdout);
        }
        run_case(&c);
        /* the report comes from the lowest rank that saw a wrong value, else
         * from the lowest rank that saw another problem */
        int kind = failed, worst, first, lowest, nfailed = failed != 0, count;
        PMPI_Allreduce(&kind, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!worst) {
            done++;
            continue;
        }
        first = failed == worst ? wrank : wsize;
        PMPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        PMPI_Allreduce(&nfailed, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (count) {
            if (wrank == lowest) {
                fputs(failmsg, stderr);
                fprintf(stderr, "collcheck: %d of %d ranks saw a mismatch in case %ld (the "
                        "report is world rank %d's); repeat it with --seed %llu --start %ld%s\n",
                        count, wsize, i, lowest, (unsigned long long)opt.seed, i,
                        opt.nonblocking ? " --nonblocking" : "");
                fflush(stderr);
            }
            PMPI_Barrier(MPI_COMM_WORLD);
            if (wrank == lowest) {
                usleep(200000); /* let the launcher forward the report */
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            sleep(30); /* the abort ends this rank */
            MPI_Abort(MPI_COMM_WORLD, 1);
            return 1;
        }
        done++;
    }
    if (opt.verbose && wrank == 0)
        printf("collcheck: %.2f s\n", MPI_Wtime() - t0);
    if (wrank == 0) {
        printf("collcheck: %ld cases ok (seed %llu%s)\n", done, (unsigned long long)opt.seed,
               opt.nonblocking ? ", nonblocking" : "");
        fflush(stdout);
    }
    if (opt.nonblocking)
        nb_teardown();
    for (int i = 1; i < NCOMM; i++)
        MPI_Comm_free(&comms[i]);
    MPI_Finalize();
    return 0;
}

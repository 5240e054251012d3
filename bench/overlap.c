/* overlap: how much of a nonblocking collective's time computation hides
 * (`wanmpi bench overlap`; docs/nonblocking.md, "Measured").
 *
 * Usage: overlap [--coll iallreduce|ibcast|ialltoall|iallgather] [--bytes N]
 *                [--reps R] [--test-every SECONDS] [--watch PID]
 * On MPI_COMM_WORLD, a collective of N bytes of doubles (default 8 MiB; K, M,
 * G suffixes are powers of 1024; ialltoall and iallgather: N is a rank's
 * whole receive buffer, N/ranks from each rank) is measured three ways in
 * every repetition (default 5), each after a barrier:
 *   comm:    MPI_I<coll>, then MPI_Wait, nothing in between;
 *   compute: a floating-point loop over a small array in cache (no memory
 *            traffic), calibrated once to take about the median comm time
 *            (every rank computing at once, the slowest rank's time; every
 *            rank computes the same amount);
 *   total:   MPI_I<coll>, the same compute in slices of --test-every seconds
 *            (default 0.001) with an MPI_Test after each (0: no MPI_Test, for
 *            a progress thread), then MPI_Wait.
 * A section's time is the slowest rank's. hidden = (compute + comm - total)
 * / comm, not clipped: 1 when the collective is hidden entirely, 0 when
 * nothing overlaps, below 0 when overlapping costs more than it hides.
 * Every result (warm-up, calibration, comm and total) is checked exactly
 * (integer-valued doubles); a wrong element aborts the job with status 3.
 * Harness traffic (barriers, the time reductions) uses PMPI, so a library
 * under test sees only the collective measured.
 * Rank 0 prints, per repetition,
 *   {"rep": K, "t_comm_s": .., "t_comp_s": .., "t_total_s": .., "hidden": .., "tests": N,
 *    "done_s": T, "wait_s": W, "test_gap_max_s": G, "cpu_..": .., "host_..": .., "check": "ok"}
 * (tests: rank 0's MPI_Test calls; done_s: when one of them found the
 * collective done, from its start, null if none did; wait_s: the slowest
 * rank's time in the final MPI_Wait, the part of the collective left over;
 * test_gap_max_s: the longest wall time between two MPI_Test calls on any
 * rank, a compute slice stretched by other processes on the cores).
 * CPU seconds, per section (comm, comp, total): cpu_<section>_s, the sum
 * over ranks of their process CPU time (every thread; without
 * CONFIG_IRQ_TIME_ACCOUNTING it includes the packet processing the kernel
 * did while the rank ran), cpu_<section>_max_s the largest rank's; for
 * total also cpu_total_system_s (system time, summed), cpu_other_threads_s
 * (threads other than the computing one: a progress thread) and
 * cpu_in_test_s / _max_s (the computing thread's CPU inside MPI_Test).
 * host_<section>_busy_s, _user_s, _system_s, _softirq_s, _idle_s, _steal_s:
 * the machine's, from /proc/stat (the testbed's nodes, its emulator and its
 * packet processing share the host's cores), and _watched_s the CPU time of
 * the process --watch names (`wanmpi bench overlap` passes the emulator's).
 * then {"bench": "overlap", ..., "hidden_median": .., "hidden_min": .., "check": "ok"}
 * (hidden_median from the medians of the three times, hidden_min from their
 * minima) and a readable summary. Bad arguments exit with status 2. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum coll { IALLREDUCE, IBCAST, IALLTOALL, IALLGATHER };
static const char *const COLLS[] = {"iallreduce", "ibcast", "ialltoall", "iallgather", NULL};

struct setup {
    int coll, rank, size;
    long n;                 /* doubles in the collective's buffer */
    long per;               /* ialltoall, iallgather: doubles per rank pair */
    double *a, *b;          /* send (ibcast: the buffer) and receive */
};

struct options {
    int coll, reps;
    long bytes;
    double test_every;
};

/* ---- the data: integer-valued doubles, exact under MPI_SUM ---------------------------- */

/* The element i that rank `from` sends to rank `to` in call number `seq` (< 2^53). */
static double pair_value(int from, int to, long i, long seq)
{
    return (double)(from * 1024L + to) * 67108864.0 + (double)(i + seq);
}

/* Fills the send buffer for call number `seq` and spoils the receive buffer. */
static void fill(const struct setup *s, long seq)
{
    for (long i = 0; i < s->n; i++) {
        switch (s->coll) {
        case IALLREDUCE: s->a[i] = (double)((i + seq) % 1000 + s->rank); break;
        case IBCAST: s->a[i] = s->rank == 0 ? (double)((i * 7 + seq) % 1000003) : -1.0; break;
        case IALLTOALL: s->a[i] = pair_value(s->rank, (int)(i / s->per), i % s->per, seq); break;
        default: if (i < s->per) s->a[i] = pair_value(s->rank, 0, i, seq);
        }
        s->b[i] = -1.0;
    }
}

static double expected(const struct setup *s, long i, long seq)
{
    switch (s->coll) {
    case IALLREDUCE: return (double)((i + seq) % 1000) * s->size + s->size * (s->size - 1) / 2.0;
    case IBCAST: return (double)((i * 7 + seq) % 1000003);
    case IALLTOALL: return pair_value((int)(i / s->per), s->rank, i % s->per, seq);
    default: return pair_value((int)(i / s->per), 0, i % s->per, seq);
    }
}

/* Aborts the job, saying where, if the result of call number `seq` is wrong. */
static void check(const struct setup *s, long seq, const char *what)
{
    const double *got = s->coll == IBCAST ? s->a : s->b;
    for (long i = 0; i < s->n; i++)
        if (got[i] != expected(s, i, seq)) {
            fprintf(stderr, "overlap: rank %d: %s gave a wrong result (%s, call %ld): element %ld is %.17g, "
                    "expected %.17g\n", s->rank, COLLS[s->coll], what, seq, i, got[i], expected(s, i, seq));
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
}

static void start(const struct setup *s, MPI_Request *req)
{
    MPI_Comm w = MPI_COMM_WORLD;
    switch (s->coll) {
    case IALLREDUCE: MPI_Iallreduce(s->a, s->b, (int)s->n, MPI_DOUBLE, MPI_SUM, w, req); break;
    case IBCAST: MPI_Ibcast(s->a, (int)s->n, MPI_DOUBLE, 0, w, req); break;
    case IALLTOALL: MPI_Ialltoall(s->a, (int)s->per, MPI_DOUBLE, s->b, (int)s->per, MPI_DOUBLE, w, req); break;
    default: MPI_Iallgather(s->a, (int)s->per, MPI_DOUBLE, s->b, (int)s->per, MPI_DOUBLE, w, req);
    }
}

/* ---- the compute: a few flops per element of an array in cache ------------------------ */
#define WORK 512
static double work[WORK];

static void compute(long passes)
{
    for (long p = 0; p < passes; p++) {
        for (int i = 0; i < WORK; i++)
            work[i] = work[i] * 0.999999 + 1e-6;
        __asm__ volatile("" ::: "memory");      /* every pass is done, none folded away */
    }
}

/* ---- timed sections (a section's time: the slowest rank's) ---------------------------- */
static double slowest(double mine)
{
    double worst;
    PMPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

/* CPU seconds (user + system) of the whole process, every thread (a
 * progress thread included), and of the calling thread alone. */
static double cpu_process(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static double cpu_system(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static double cpu_thread(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The machine's CPU seconds since boot by kind, from /proc/stat (every CPU;
 * the testbed's nodes share the host's cores): what the emulator, the
 * kernel's packet processing and the ranks took together in a section. */
enum { ST_USER, ST_NICE, ST_SYSTEM, ST_IDLE, ST_IOWAIT, ST_IRQ, ST_SOFTIRQ, ST_STEAL, ST_N };
struct machine {
    double t[ST_N];
    double watched;         /* CPU seconds of the process --watch names (the emulator), 0 without */
};

static long watch_pid;      /* --watch PID: also that process's CPU time (rank 0) */

/* utime + stime of process `pid` in clock ticks, from /proc/PID/stat; 0 if unreadable. */
static unsigned long long ticks_of(long pid)
{
    char path[64], line[1024];
    unsigned long long ut = 0, st = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char *rest = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    fclose(f);
    /* after "pid (comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!rest || sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return ut + st;
}

static struct machine machine_now(void)
{
    struct machine m = {{0}, 0};
    unsigned long long v[ST_N] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7]) != ST_N)
            memset(v, 0, sizeof v);
        fclose(f);
    }
    double hz = (double)sysconf(_SC_CLK_TCK);
    for (int k = 0; k < ST_N; k++)
        m.t[k] = (double)v[k] / hz;
    if (watch_pid > 0)
        m.watched = (double)ticks_of(watch_pid) / hz;
    return m;
}

static struct machine machine_since(struct machine a)
{
    struct machine b = machine_now();
    for (int k = 0; k < ST_N; k++)
        b.t[k] -= a.t[k];
    b.watched -= a.watched;
    return b;
}

/* The JSON members host_<name>_busy_s, _user_s, _system_s, _softirq_s (irq
 * included), _idle_s (iowait included), _steal_s and _watched_s, each after
 * ", ", into buf. */
static void machine_json(char *buf, size_t size, const char *name, const struct machine *m)
{
    double busy = m->t[ST_USER] + m->t[ST_NICE] + m->t[ST_SYSTEM] + m->t[ST_IRQ] + m->t[ST_SOFTIRQ] + m->t[ST_STEAL];
    snprintf(buf, size, ", \"host_%s_busy_s\": %.2f, \"host_%s_user_s\": %.2f, \"host_%s_system_s\": %.2f, "
             "\"host_%s_softirq_s\": %.2f, \"host_%s_idle_s\": %.2f, \"host_%s_steal_s\": %.2f, "
             "\"host_%s_watched_s\": %.2f", name, busy, name, m->t[ST_USER] + m->t[ST_NICE], name, m->t[ST_SYSTEM],
             name, m->t[ST_SOFTIRQ] + m->t[ST_IRQ], name, m->t[ST_IDLE] + m->t[ST_IOWAIT], name, m->t[ST_STEAL],
             name, m->watched);
}

static double sum_ranks(double mine)
{
    double all;
    PMPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

/* What every rank spent in CPU time in a section: the sum over ranks and
 * the largest rank's (process CPU: every thread of the rank). */
struct cpu {
    double sum, max;
};

static struct cpu cpu_of(double mine)
{
    return (struct cpu){sum_ranks(mine), slowest(mine)};
}

static struct machine host;    /* rank 0: the machine over the last section */

static double comm_alone(const struct setup *s, long seq, struct cpu *cpu)
{
    MPI_Request req;
    fill(s, seq);
    PMPI_Barrier(MPI_COMM_WORLD);
    struct machine h0 = machine_now();
    double c0 = cpu_process();
    double t0 = MPI_Wtime();
    start(s, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    double t = slowest(MPI_Wtime() - t0);
    host = machine_since(h0);
    struct cpu c = cpu_of(cpu_process() - c0);
    if (cpu)
        *cpu = c;
    check(s, seq, "alone");
    return t;
}

static double compute_alone(long passes, struct cpu *cpu)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    struct machine h0 = machine_now();
    double c0 = cpu_process();
    double t0 = MPI_Wtime();
    compute(passes);
    double t = slowest(MPI_Wtime() - t0);
    host = machine_since(h0);
    struct cpu c = cpu_of(cpu_process() - c0);
    if (cpu)
        *cpu = c;
    return t;
}

/* What rank 0 reports of an overlapped run besides its time. */
struct progress {
    int tests;              /* MPI_Test calls made */
    double done;            /* seconds from the start to the MPI_Test that saw the collective done; < 0: none did */
    double wait;            /* the slowest rank's seconds in the final MPI_Wait */
    struct cpu cpu;         /* every rank's process CPU seconds in the section */
    struct cpu other;       /* of that, the threads other than the one computing (a progress thread) */
    struct cpu in_test;     /* the computing thread's CPU seconds inside MPI_Test */
    struct cpu system;      /* of the process CPU, system time (the kernel's, packet processing charged to the rank included) */
    double gap;             /* the longest wall time between two MPI_Test calls (or the start and the first), any rank */
};

/* The collective started, `passes` of compute in slices of `slice` passes
 * with an MPI_Test after every slice but the last (until the collective is
 * done), then MPI_Wait. */
static double overlapped(const struct setup *s, long seq, long passes, long slice, struct progress *p)
{
    MPI_Request req;
    int done = 0;
    fill(s, seq);
    *p = (struct progress){0, -1, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0};
    double in_test = 0, gap = 0;
    PMPI_Barrier(MPI_COMM_WORLD);
    struct machine h0 = machine_now();
    double c0 = cpu_process(), m0 = cpu_thread(), s0 = cpu_system();
    double t0 = MPI_Wtime(), last = t0;
    start(s, &req);
    for (long left = passes; left > 0; left -= slice) {
        compute(left < slice ? left : slice);
        if (!done && left > slice) {
            double now = MPI_Wtime(), c = cpu_thread();
            if (now - last > gap)
                gap = now - last;
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            in_test += cpu_thread() - c;
            last = MPI_Wtime();
            p->tests++;
            if (done)
                p->done = last - t0;
        }
    }
    double waiting = MPI_Wtime();
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    double end = MPI_Wtime();
    double cpu = cpu_process() - c0, main_cpu = cpu_thread() - m0, sys = cpu_system() - s0;
    p->wait = slowest(end - waiting);
    double t = slowest(end - t0);
    host = machine_since(h0);
    p->cpu = cpu_of(cpu);
    p->other = cpu_of(cpu - main_cpu);
    p->in_test = cpu_of(in_test);
    p->system = cpu_of(sys);
    p->gap = slowest(gap);
    check(s, seq, "overlapped");
    return t;
}

/* Passes of compute that take `target` seconds, timed as compute_alone
 * times them: every rank computes at once and the slowest rank's time
 * counts (on shared cores a rank's own rate over a short trial is luck: the
 * luckiest rank's rate gave twice the compute). A trial of a doubling count
 * of passes until it takes long enough to measure gives a first count; one
 * run of that count corrects it. Every rank ends with the same count (the
 * largest, should rounding differ). */
static long calibrate(double target)
{
    double trial = target / 2 < 0.02 ? 0.02 : target / 2 > 1 ? 1 : target / 2, worst;
    long k = 16, passes, most;
    for (;; k *= 2) {
        PMPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        compute(k);
        if ((worst = slowest(MPI_Wtime() - t0)) >= trial)
            break;
    }
    passes = (long)(target * (double)k / worst) + 1;
    double full = compute_alone(passes, NULL);
    passes = (long)((double)passes * target / full) + 1;
    PMPI_Allreduce(&passes, &most, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    return most;
}

/* ---- statistics and output ------------------------------------------------------------ */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts `v` (n values); returns the median. */
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double hidden(double comm, double comp, double total)
{
    return (comp + comm - total) / comm;
}

static const char *thread_level(void)
{
    int level;
    MPI_Query_thread(&level);
    return level == MPI_THREAD_MULTIPLE ? "multiple" : level == MPI_THREAD_SERIALIZED ? "serialized"
         : level == MPI_THREAD_FUNNELED ? "funneled" : "single";
}

/* times: comm, compute and total of every repetition, reps apart (sorted here). */
static void summary(const struct setup *s, const struct options *o, double *times, double target, long passes,
                    long slice)
{
    double med[3], min[3];
    for (int k = 0; k < 3; k++) {
        med[k] = median(times + k * o->reps, o->reps);
        min[k] = times[k * o->reps];
    }
    double h_med = hidden(med[0], med[1], med[2]), h_min = hidden(min[0], min[1], min[2]);
    const char *level = thread_level();
    printf("{\"bench\": \"overlap\", \"coll\": \"%s\", \"bytes\": %ld, \"ranks\": %d, \"reps\": %d, "
           "\"test_every_s\": %g, \"target_s\": %.6f, \"passes\": %ld, \"slice_passes\": %ld, \"thread_level\": \"%s\", "
           "\"t_comm_min_s\": %.6f, \"t_comm_median_s\": %.6f, \"t_comp_min_s\": %.6f, \"t_comp_median_s\": %.6f, "
           "\"t_total_min_s\": %.6f, \"t_total_median_s\": %.6f, \"hidden_median\": %.4f, \"hidden_min\": %.4f, "
           "\"sink\": %.6f, \"check\": \"ok\"}\n", COLLS[s->coll], s->n * (long)sizeof(double), s->size, o->reps,
           o->test_every, target, passes, slice, level, min[0], med[0], min[1], med[1], min[2], med[2], h_med, h_min,
           work[0]);
    printf("overlap: %s of %ld B on %d ranks, %d repetitions, %s; MPI thread level %s\n", COLLS[s->coll],
           s->n * (long)sizeof(double), s->size, o->reps, o->test_every > 0 ? "MPI_Test between slices" : "no MPI_Test",
           level);
    printf("  %-8s %10s %10s\n  %-8s %10.3f %10.3f\n  %-8s %10.3f %10.3f\n  %-8s %10.3f %10.3f\n"
           "  %-8s %9.1f%% %9.1f%%\n", "ms", "min", "median", "comm", 1e3 * min[0], 1e3 * med[0], "compute",
           1e3 * min[1], 1e3 * med[1], "total", 1e3 * min[2], 1e3 * med[2], "hidden", 100 * h_min, 100 * h_med);
    fflush(stdout);
}

/* ---- arguments ------------------------------------------------------------------------ */
static long parse_size(const char *text)
{
    char *end;
    double v = strtod(text, &end);
    double scale = 1;
    if (*end == 'K' || *end == 'k') scale = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') scale = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') scale = 1073741824.0, end++;
    if (end == text || *end || !(v >= 0) || v * scale > 1073741824.0)
        return -1;
    return (long)(v * scale);
}

static int find_coll(const char *name)
{
    for (int i = 0; COLLS[i]; i++)
        if (!strcmp(name, COLLS[i])) return i;
    return -1;
}

/* Fills `o` from argv; NULL, or what is wrong. */
static const char *parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){IALLREDUCE, 5, 8L << 20, 0.001};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            return "every option needs a value";
        const char *v = argv[i + 1];
        char *end = NULL;
        if (!strcmp(argv[i], "--coll")) {
            if ((o->coll = find_coll(v)) < 0) return "--coll: unknown collective";
        } else if (!strcmp(argv[i], "--bytes")) {
            if ((o->bytes = parse_size(v)) < 8) return "--bytes: a size from 8 bytes to 1G";
        } else if (!strcmp(argv[i], "--reps")) {
            long r = strtol(v, &end, 10);
            if (*end || end == v || r < 1 || r > 10000) return "--reps: a count from 1 to 10000";
            o->reps = (int)r;
        } else if (!strcmp(argv[i], "--watch")) {
            watch_pid = strtol(v, &end, 10);
            if (*end || end == v || watch_pid < 1) return "--watch: a process id";
        } else if (!strcmp(argv[i], "--test-every")) {
            o->test_every = strtod(v, &end);
            if (*end || end == v || !(o->test_every >= 0) || o->test_every > 3600)
                return "--test-every: seconds of compute between MPI_Test calls, 0 (never) to 3600";
        } else {
            return "unknown option";
        }
    }
    return NULL;
}

static int usage(int rank, const char *why)
{
    if (rank == 0)
        fprintf(stderr, "overlap: %s\nusage: overlap [--coll iallreduce|ibcast|ialltoall|iallgather] "
                "[--bytes N[K|M|G]] [--reps R] [--test-every SECONDS] [--watch PID]\n", why);
    MPI_Finalize();
    return 2;
}

/* ---- the measurement ------------------------------------------------------------------ */

/* Warm-up, calibration, then every repetition; rank 0 prints. */
static void measure(const struct setup *s, const struct options *o)
{
    long seq = 0;
    double first[3];
    comm_alone(s, seq++, NULL);                               /* warm-up: connections, buffers */
    for (int k = 0; k < 3; k++)
        first[k] = comm_alone(s, seq++, NULL);
    double target = median(first, 3);
    for (int i = 0; i < WORK; i++)
        work[i] = (double)i / WORK;
    long passes = calibrate(target);
    double rate = (double)passes / target;                      /* passes per second */
    long slice = o->test_every > 0 ? (long)(rate * o->test_every + 0.5) : passes;
    if (slice < 1)
        slice = 1;
    double *times = malloc(sizeof(double) * 3 * (size_t)o->reps);
    for (int r = 0; r < o->reps; r++) {
        double *comm = times + r, *comp = times + o->reps + r, *total = times + 2 * o->reps + r;
        struct progress p;
        struct cpu c_comm, c_comp;
        char hosts[3][400];
        *comm = comm_alone(s, seq++, &c_comm);
        machine_json(hosts[0], sizeof hosts[0], "comm", &host);
        *comp = compute_alone(passes, &c_comp);
        machine_json(hosts[1], sizeof hosts[1], "comp", &host);
        *total = overlapped(s, seq++, passes, slice, &p);
        machine_json(hosts[2], sizeof hosts[2], "total", &host);
        if (s->rank == 0) {
            char done[32] = "null";
            if (p.done >= 0)
                snprintf(done, sizeof done, "%.6f", p.done);
            printf("{\"rep\": %d, \"t_comm_s\": %.6f, \"t_comp_s\": %.6f, \"t_total_s\": %.6f, \"hidden\": %.4f, "
                   "\"tests\": %d, \"done_s\": %s, \"wait_s\": %.6f, \"test_gap_max_s\": %.6f, "
                   "\"cpu_comm_s\": %.4f, \"cpu_comm_max_s\": %.4f, \"cpu_comp_s\": %.4f, \"cpu_comp_max_s\": %.4f, "
                   "\"cpu_total_s\": %.4f, \"cpu_total_max_s\": %.4f, \"cpu_total_system_s\": %.4f, \"cpu_other_threads_s\": %.4f, "
                   "\"cpu_in_test_s\": %.4f, \"cpu_in_test_max_s\": %.4f%s%s%s, \"check\": \"ok\"}\n", r + 1, *comm,
                   *comp, *total, hidden(*comm, *comp, *total), p.tests, done, p.wait, p.gap, c_comm.sum,
                   c_comm.max, c_comp.sum, c_comp.max, p.cpu.sum, p.cpu.max, p.system.sum, p.other.sum, p.in_test.sum,
                   p.in_test.max, hosts[0], hosts[1], hosts[2]);
            fflush(stdout);
        }
    }
    if (s->rank == 0)
        summary(s, o, times, target, passes, slice);
    free(times);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct setup s = {0};
    struct options o;
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    const char *wrong = parse(argc, argv, &o);
    if (wrong)
        return usage(s.rank, wrong);
    if (s.size > 1024)
        return usage(s.rank, "at most 1024 ranks");
    s.coll = o.coll;
    s.n = o.bytes / (long)sizeof(double);
    if (s.coll == IALLTOALL || s.coll == IALLGATHER) {
        s.per = s.n / s.size;
        s.n = s.per * s.size;
        if (s.per < 1)
            return usage(s.rank, "--bytes: too small for one double per rank");
    }
    s.a = malloc(sizeof(double) * (size_t)s.n);
    s.b = malloc(sizeof(double) * (size_t)s.n);
    if (!s.a || !s.b) {
        fprintf(stderr, "overlap: rank %d: cannot allocate 2 x %ld bytes\n", s.rank, o.bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    measure(&s, &o);
    free(s.a);
    free(s.b);
    MPI_Finalize();
    return 0;
}

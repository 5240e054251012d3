/* Prompt wakeups for ranks that yield by sleeping.
 *
 * `wanmpi run` makes idle MPICH ranks yield (MPIR_CVAR_ENABLE_HEAVY_YIELD,
 * against more ranks than cores starving each other): sched_yield, then
 * nanosleep of 1 ns. The kernel lets a sleep end up to the thread's timer
 * slack late, 50 us by default, so every wait for a message cost about 50 us
 * on each side: MPICH's ping-pong latency was 90 us on loopback and 140-150 us
 * inside a testbed cluster against 8-15 us for Open MPI, whose
 * mpi_yield_when_idle only calls sched_yield (strace: one clock_nanosleep
 * {0, 1} per sched_yield or two; docs/benchmarks.md). With the slack at 1 ns
 * the sleep returns at once and the wait costs a system call: 17 us on
 * loopback.
 *
 * WANMPI_TIMER_SLACK_NS (`wanmpi run -x WANMPI_TIMER_SLACK_NS=1`) sets this
 * process's slack when the library is loaded, before MPI_Init. It is not set
 * by default: with more ranks than cores (8 ranks on the testbed's 2) a
 * yield that really sleeps 50 us is what lets the others run, and with 1 ns
 * LU and CG took twice as long. A bad value is reported once and the slack
 * left as it was; nothing
 * else of the shim depends on it. */
#include "shim.h"
#include "../common/settings.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/prctl.h>

#define MAX_SLACK_NS 1000000UL          /* 1 ms: beyond that a "yield" is a nap */

__attribute__((constructor)) static void ws_set_timer_slack(void)
{
    const char *text = getenv(WM_ENV_TIMER_SLACK);
    if (!text || !*text)
        return;
    char *end;
    errno = 0;
    unsigned long ns = strtoul(text, &end, 10);
    if (errno || *end || text[0] == '-' || ns < 1 || ns > MAX_SLACK_NS) {
        ws_log("%s=%s: expected nanoseconds from 1 to %lu; the timer slack is left as it is",
               WM_ENV_TIMER_SLACK, text, MAX_SLACK_NS);
        return;
    }
    if (prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0) != 0)
        ws_log("%s=%s: prctl(PR_SET_TIMERSLACK) failed: errno %d", WM_ENV_TIMER_SLACK, text, errno);
}

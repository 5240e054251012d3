/* SMPI patch, force-included (-include) into coll/progress.c and coll/nb.c:
 * under the simulator sched_yield() neither yields to other simulated ranks
 * nor advances simulated time, so with --cfg=smpi/test:0 a Test + yield loop
 * never ends. A short simulated sleep (SMPI's usleep) instead. */
#include <sched.h>
#include <unistd.h>
#ifndef WANMPI_SMPI_YIELD_US
#define WANMPI_SMPI_YIELD_US 5
#endif
#define sched_yield() usleep(WANMPI_SMPI_YIELD_US)

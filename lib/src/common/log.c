/* wm_debug (log.h): above the settings, which hold its level. */
#include "log.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>

void wm_debug(int level, const char *fmt, ...)
{
    if (wm_settings()->debug < level)
        return;
    int rank = -1, initialized = 0;
    PMPI_Initialized(&initialized);
    if (initialized)
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "wanmpi[%d]", rank);
    va_list ap;
    va_start(ap, fmt);
    wm_log_vline(prefix, fmt, ap);
    va_end(ap);
}

void wm_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wm_log_vline("wanmpi", fmt, ap);
    va_end(ap);
}

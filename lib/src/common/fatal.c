/* wm_fatal (log.h): below the settings, which report bad values with it. */
#include "log.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>

void wm_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wm_log_vline("wanmpi", fmt, ap);
    va_end(ap);
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized && !finalized)
        PMPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

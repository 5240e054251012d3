#include "log.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void wm_fatal(const char *fmt, ...)
{
    va_list ap;
    char text[1024];
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "wanmpi: %s\n", text);
    fflush(stderr);
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized && !finalized)
        PMPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void wm_debug(int level, const char *fmt, ...)
{
    if (wm_settings()->debug < level)
        return;
    int rank = -1, initialized = 0;
    PMPI_Initialized(&initialized);
    if (initialized)
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    va_list ap;
    char text[1024];
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "wanmpi[%d]: %s\n", rank, text);
}

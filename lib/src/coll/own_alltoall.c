/* The MPI library's own all-to-all algorithm, for the paced path (alltoall.c).
 *
 * The pacing paper paces the MPI's own all-to-all at rates sized for every
 * flow of the call running at once. MPICH's default for blocks over 32 KiB is
 * the pairwise exchange: one flow per rank at a time, each at its paced
 * share, so the call ran at a fraction of the WAN (FT 0.50x of MPICH alone).
 * For the duration of a paced call, MPICH's own algorithm is therefore set to
 * "scattered" (every send and receive posted at once, MPIR_CVAR_ALLTOALL_THROTTLE
 * at a time) through the MPI tool interface (MPI_T control variable
 * MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM), and put back after the call.
 *
 * MPICH exposes that variable as an int without an MPI_T enumeration; its
 * values follow the order of the choices in the variable's description
 * ("auto - ...", "brucks - ...", ...), which is where the value of
 * "scattered" is looked up. Left alone: an MPI without the variable (Open
 * MPI), and a job that chose an algorithm itself (the variable not "auto"). */
#include "coll.h"
#include "../common/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CVAR "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM"
#define CONCURRENT "scattered"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int tool_open, usable, concurrent_value;
static MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;

/* The position of `choice` among the description's "NAME - text" lines after
 * the first, or -1. */
static int choice_value(const char *desc, const char *choice)
{
    const char *line = strchr(desc, '\n');
    for (int value = 0; line; value++) {
        line++;
        size_t n = strcspn(line, " \t-\n");
        if (n == strlen(choice) && !strncmp(line, choice, n))
            return value;
        line = strchr(line, '\n');
    }
    return -1;
}

static void setup(void)
{
    int provided, index, count, verbosity, bind, scope, name_len, desc_len;
    char name[128], desc[4096];
    MPI_Datatype type;
    MPI_T_enum enumtype;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    tool_open = 1;
    name_len = sizeof name;
    desc_len = sizeof desc;
    if (MPI_T_cvar_get_index(CVAR, &index) != MPI_SUCCESS ||
        MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind,
                            &scope) != MPI_SUCCESS || type != MPI_INT)
        return;
    desc[sizeof desc - 1] = 0;
    concurrent_value = choice_value(desc, CONCURRENT);
    if (concurrent_value <= 0 || MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) != MPI_SUCCESS ||
        count != 1)
        return;
    usable = 1;
}

int wm_own_alltoall_concurrent(int *saved)
{
    pthread_once(&once, setup);
    *saved = -1;
    int now;
    if (!usable || MPI_T_cvar_read(handle, &now) != MPI_SUCCESS || now != 0)
        return 0;
    if (MPI_T_cvar_write(handle, &concurrent_value) != MPI_SUCCESS)
        return 0;
    *saved = now;
    wm_debug(1, "alltoall: the MPI's own algorithm is %s for this paced call (%s=%d)", CONCURRENT, CVAR,
             concurrent_value);
    return 1;
}

void wm_own_alltoall_restore(int saved)
{
    if (saved >= 0)
        MPI_T_cvar_write(handle, &saved);
}

void wm_own_alltoall_finalize(void)
{
    if (handle != MPI_T_CVAR_HANDLE_NULL)
        MPI_T_cvar_handle_free(&handle);
    if (tool_open)
        MPI_T_finalize();
    tool_open = usable = 0;
}

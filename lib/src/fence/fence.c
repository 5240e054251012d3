/* The finalize fence.
 *
 * MPICH 5's ch4/ofi MPI_Finalize synchronises the ranks only for some
 * libfabric providers (verbs;ofi_rxm, psm2, psm3: a PMI barrier "to prevent
 * message loss"), not for the tcp provider wanmpi starts it with. With RMA
 * off (MPIR_CVAR_CH4_OFI_ENABLE_RMA=0, wanmpi's launch setting: without it
 * every send waits for the receiver's acknowledgement, a WAN round trip) a
 * send completes once it is handed to the provider, so a rank that sends its
 * last message and calls MPI_Finalize can close its connections before the
 * peer has taken that message in: the peer waits for it forever. Measured on
 * the testbed with 2 busy cores: 1 LU job in 7 hung that way (the receivers
 * on one side waiting in MPI_Waitall, every sender gone); with this barrier
 * first, 0 in 80 (docs/benchmarks.md, "MPICH: the finalize fence").
 *
 * Open MPI 4.1's MPI_Finalize already ends with a PMIx fence: nothing to do.
 * Built against MPI-5's standard ABI (mpi_abi.h) the MPI is known only at run
 * time: the fence is kept (MPICH 5 is the MPI here that implements the ABI). */
#include <mpi.h>

#include "fence.h"

void wm_finalize_fence(void)
{
#if (defined(MPICH_VERSION) && !defined(OMPI_MAJOR_VERSION)) || defined(MPI_ABI_VERSION)
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (initialized && !finalized)
        PMPI_Barrier(MPI_COMM_WORLD);   /* an error aborts under the default handler; else finalize anyway */
#endif
}

/* Barrier: the MPI library's barrier inside each cluster, then among one
 * leader per cluster, then inside each cluster again (which releases the
 * ranks once their leader is through). One WAN exchange instead of the
 * log2(P) rounds of a flat dissemination barrier, each of which may cross
 * the WAN. */
#include "coll.h"

int wm_barrier(const struct wm_comm *wc)
{
    int rc = PMPI_Barrier(wc->local);
    if (rc == MPI_SUCCESS && wc->leaders != MPI_COMM_NULL)
        rc = PMPI_Barrier(wc->leaders);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Barrier(wc->local);
    return rc;
}

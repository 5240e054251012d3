/* Barrier: the MPI library's barrier inside each cluster, then among one
 * leader per cluster (a message from each to each), then inside each
 * cluster again (which releases the ranks once their leader is through).
 * One WAN exchange instead of the log2(P) rounds of a flat dissemination
 * barrier, each of which may cross the WAN. */
#include "coll.h"

int wm_barrier(const struct wm_comm *wc)
{
    int rc = PMPI_Barrier(wc->local);
    if (rc == MPI_SUCCESS && wc->my_index == 0)
        rc = wm_leaders_barrier(wc);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Barrier(wc->local);
    return rc;
}

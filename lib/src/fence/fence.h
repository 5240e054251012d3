/* The finalize fence (docs/libwanmpi.md, "Finalize"): under MPICH, every rank
 * waits in MPI_Finalize until all ranks are there, so none exits while a
 * message it sent is still on its way. */
#ifndef WM_FENCE_H
#define WM_FENCE_H

/* A barrier over MPI_COMM_WORLD under an MPICH-derived MPI, nothing under
 * Open MPI; call it at the start of MPI_Finalize. */
void wm_finalize_fence(void);

#endif

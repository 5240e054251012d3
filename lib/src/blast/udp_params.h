/* The WANMPI_UDP_PARAMS attribute (udp_params.c): blast requests per pair of
 * ranks, applied by libwanshim's wanshim_request_blast. */
#ifndef WANMPI_UDP_PARAMS_H
#define WANMPI_UDP_PARAMS_H

#include <mpi.h>

/* Creates the keyval and error codes (MPI must be initialized). */
int wm_udp_init(void);
/* Is `keyval` WANMPI_UDP_PARAMS? */
int wm_udp_ours(int keyval);
/* MPI_Comm_set_attr / MPI_Attr_put of WANMPI_UDP_PARAMS: checks the values,
 * asks the shim, and stores a copy in the MPI library (get answers from it;
 * delete and MPI_Comm_free withdraw the request). */
int wm_udp_put(MPI_Comm comm, const void *attribute_val);
/* Called just before PMPI_Finalize: the attributes it deletes free their
 * values without withdrawing requests from connections about to close
 * (each withdrawal would cost a round trip to a relay). */
void wm_udp_finalizing(void);

#endif

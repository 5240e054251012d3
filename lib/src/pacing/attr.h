/* The pacing attributes (attr.c), shared by the C and Fortran bindings. */
#ifndef WANMPI_ATTR_H
#define WANMPI_ATTR_H

#include <mpi.h>

/* Creates the keyvals and error codes once MPI is initialized. */
int wm_attr_init(void);
/* Is `keyval` WANMPI_MAXRATE or WANMPI_MATB? */
int wm_attr_ours(int keyval);
/* The attribute's value in KB/s and whether it is set (our keyvals only). */
int wm_attr_value(MPI_Comm comm, int keyval, int *value, int *flag);
int wm_attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag);
int wm_attr_put(MPI_Comm comm, int keyval, long long value);
int wm_attr_put_pointer(MPI_Comm comm, int keyval, const void *attribute_val);
int wm_attr_delete(MPI_Comm comm, int keyval);
int wm_set_senders(MPI_Comm comm, int n);

#endif

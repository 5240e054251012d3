/* The pacing attributes, as in the pacing paper (YAMPI_PSP_MAXRATE and
 * YAMPI_PSP_MATB there), and wanmpi_set_senders():
 *
 *   WANMPI_MAXRATE  get: B, the inter-cluster bandwidth, in KB/s (1000 B/s)
 *   WANMPI_MATB     get: this rank's WAN pacing rate now, KB/s (0: not paced)
 *                   put: re-paces every WAN socket of the rank at once
 *                   delete: back to the rate the job started with
 *
 * The keyvals are real MPI keyvals (created at MPI_Init, or at the first
 * call that needs them), but their attributes are never stored in the MPI
 * library: get, put and delete are answered here, on any communicator, and
 * act on the whole process (pacing is per socket, sockets are per process).
 * C follows the convention of MPI's predefined attributes: get returns a
 * pointer to an int; put takes a pointer to an int. Fortran (MPI_COMM_*_ATTR,
 * MPI_ATTR_*) passes the values themselves; WANMPI_KEYVALS returns the two
 * keyvals to Fortran programs.
 *
 * A bad value (not positive, a put to the read-only WANMPI_MAXRATE, a NULL
 * pointer) is an MPI error of class MPI_ERR_ARG or MPI_ERR_KEYVAL with its
 * own error string, raised on the communicator's error handler. */
#include <mpi.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "attr.h"
#include "rate.h"
#include "../blast/udp_params.h"
#include "../common/log.h"
#include "../../include/wanmpi.h"

int WANMPI_MAXRATE = MPI_KEYVAL_INVALID;
int WANMPI_MATB = MPI_KEYVAL_INVALID;

static int err_rate = MPI_ERR_ARG, err_readonly = MPI_ERR_KEYVAL, err_unknown = MPI_ERR_OTHER;
static int maxrate_value, matb_value, matb_put;     /* KB/s, what get points to */

int wm_attr_init(void)
{
    if (WANMPI_MATB != MPI_KEYVAL_INVALID)      /* every attribute call passes here: cheap first */
        return MPI_SUCCESS;
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (!initialized || finalized)
        return MPI_ERR_OTHER;
    int rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &WANMPI_MAXRATE, NULL);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &WANMPI_MATB, NULL);
    if (rc == MPI_SUCCESS)
        rc = wm_udp_init();
    if (rc != MPI_SUCCESS)
        return rc;
    if (PMPI_Add_error_code(MPI_ERR_ARG, &err_rate) == MPI_SUCCESS)
        PMPI_Add_error_string(err_rate, "wanmpi: invalid pacing rate: WANMPI_MATB takes a positive "
                                        "number of KB/s, wanmpi_set_senders a positive count");
    if (PMPI_Add_error_code(MPI_ERR_KEYVAL, &err_readonly) == MPI_SUCCESS)
        PMPI_Add_error_string(err_readonly, "wanmpi: WANMPI_MAXRATE is read-only (it is the topology's "
                                            "WAN rate)");
    if (PMPI_Add_error_code(MPI_ERR_OTHER, &err_unknown) == MPI_SUCCESS)
        PMPI_Add_error_string(err_unknown, "wanmpi: the WAN rate B is unknown (WANMPI_WAN_RATE is not set; "
                                           "`wanmpi run` sets it from the topology)");
    return MPI_SUCCESS;
}

int wm_attr_ours(int keyval)
{
    if (keyval == MPI_KEYVAL_INVALID)
        return 0;
    wm_attr_init();
    return keyval == WANMPI_MAXRATE || keyval == WANMPI_MATB;
}

static int fail(MPI_Comm comm, int code, const char *what, long long value)
{
    fprintf(stderr, "wanmpi: %s: %lld refused\n", what, value);
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

static int valid_comm(MPI_Comm comm)
{
    int size;
    return comm != MPI_COMM_NULL && PMPI_Comm_size(comm, &size) == MPI_SUCCESS;
}

static int kb(uint64_t bytes_per_s)
{
    uint64_t k = (bytes_per_s + 999) / 1000;
    return k > INT_MAX ? INT_MAX : (int)k;
}

int wm_attr_value(MPI_Comm comm, int keyval, int *value, int *flag)
{
    (void)comm;
    if (keyval == WANMPI_MAXRATE) {
        *value = kb(wm_rate_maxrate());
        *flag = *value > 0;
    } else {
        *value = wm_rate_available() ? kb(wm_rate_wan()) : matb_put;
        *flag = 1;
    }
    return MPI_SUCCESS;
}

int wm_attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
    if (!valid_comm(comm))
        return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);    /* MPI reports it */
    int *storage = keyval == WANMPI_MAXRATE ? &maxrate_value : &matb_value;
    int rc = wm_attr_value(comm, keyval, storage, flag);
    if (rc == MPI_SUCCESS && *flag)
        *(int **)attribute_val = storage;
    return rc;
}

static int put_rate(MPI_Comm comm, long long kb_per_s, const char *what)
{
    if (kb_per_s <= 0 || kb_per_s > INT_MAX)
        return fail(comm, err_rate, what, kb_per_s);
    matb_put = (int)kb_per_s;
    if (wm_rate_set_wan((uint64_t)kb_per_s * 1000) != 0) {
        static int warned;
        if (!warned++)
            fprintf(stderr, "wanmpi: WANMPI_MATB = %lld KB/s kept but not applied: libwanshim is not "
                            "loaded or has no cluster map, so no socket can be paced\n", kb_per_s);
    }
    return MPI_SUCCESS;
}

int wm_attr_put(MPI_Comm comm, int keyval, long long value)
{
    if (keyval == WANMPI_MAXRATE)
        return fail(comm, err_readonly, "put of WANMPI_MAXRATE", value);
    return put_rate(comm, value, "WANMPI_MATB (KB/s)");
}

int wm_attr_put_pointer(MPI_Comm comm, int keyval, const void *attribute_val)
{
    if (!valid_comm(comm))
        return PMPI_Comm_set_attr(comm, keyval, (void *)attribute_val);
    if (!attribute_val)
        return fail(comm, keyval == WANMPI_MAXRATE ? err_readonly : err_rate,
                    "WANMPI_MATB put with a NULL pointer (pass &rate)", 0);
    return wm_attr_put(comm, keyval, *(const int *)attribute_val);
}

int wm_attr_delete(MPI_Comm comm, int keyval)
{
    if (!valid_comm(comm))
        return PMPI_Comm_delete_attr(comm, keyval);
    if (keyval == WANMPI_MAXRATE)
        return fail(comm, err_readonly, "delete of WANMPI_MAXRATE", 0);
    matb_put = 0;
    wm_rate_set_wan(wm_rate_initial());
    return MPI_SUCCESS;
}

int wm_set_senders(MPI_Comm comm, int n)
{
    wm_attr_init();
    if (!valid_comm(comm)) {
        PMPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_COMM);
        return MPI_ERR_COMM;
    }
    if (n <= 0)
        return fail(comm, err_rate, "wanmpi_set_senders: number of senders", n);
    uint64_t b = wm_rate_maxrate();
    if (!b)
        return fail(comm, err_unknown, "wanmpi_set_senders without a known WAN rate; senders", n);
    return put_rate(comm, kb(b / (uint64_t)n), "wanmpi_set_senders: MATB (KB/s)");
}

/* ---- C bindings ---- */

int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
    if (wm_attr_ours(keyval))
        return wm_attr_get(comm, keyval, attribute_val, flag);
    return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}

int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void *attribute_val)
{
    if (wm_attr_ours(keyval))
        return wm_attr_put_pointer(comm, keyval, attribute_val);
    if (wm_udp_ours(keyval))
        return wm_udp_put(comm, attribute_val);
    return PMPI_Comm_set_attr(comm, keyval, attribute_val);
}

int MPI_Comm_delete_attr(MPI_Comm comm, int keyval)
{
    if (wm_attr_ours(keyval))
        return wm_attr_delete(comm, keyval);
    return PMPI_Comm_delete_attr(comm, keyval);
}

/* The MPI-1 names (deprecated, still in both MPIs and in old codes). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
int MPI_Attr_get(MPI_Comm comm, int keyval, void *attribute_val, int *flag)
{
    if (wm_attr_ours(keyval))
        return wm_attr_get(comm, keyval, attribute_val, flag);
    return PMPI_Attr_get(comm, keyval, attribute_val, flag);
}

int MPI_Attr_put(MPI_Comm comm, int keyval, void *attribute_val)
{
    if (wm_attr_ours(keyval))
        return wm_attr_put_pointer(comm, keyval, attribute_val);
    if (wm_udp_ours(keyval))
        return wm_udp_put(comm, attribute_val);
    return PMPI_Attr_put(comm, keyval, attribute_val);
}

int MPI_Attr_delete(MPI_Comm comm, int keyval)
{
    if (wm_attr_ours(keyval))
        return wm_attr_delete(comm, keyval);
    return PMPI_Attr_delete(comm, keyval);
}

#pragma GCC diagnostic pop

int wanmpi_set_senders(MPI_Comm comm, int n)
{
    return wm_set_senders(comm, n);
}

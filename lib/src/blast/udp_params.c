/* WANMPI_UDP_PARAMS: reliable blast UDP between a pair of ranks, opted into
 * through a communicator attribute as in MPICH-G2 (MPICHX_UDPSOCKET_PARAMETERS
 * there; wanmpi.h shows the use, docs/libwanmpi.md "Blast transport" says
 * what it covers).
 *
 * A put checks the values, finds the partner's node address (its
 * MPI_COMM_WORLD rank in WANMPI_RANK_ADDRESSES, which `wanmpi run` sets) and
 * asks libwanshim (wanshim_request_blast) to send the connects to that node
 * with a blast request, which the relays honour. The values are then stored
 * in the MPI library as the attribute's value (a copy), so get is MPI's own
 * answer; the keyval's delete callback (MPI_Comm_delete_attr, a second put,
 * MPI_Comm_free, MPI_Finalize) withdraws the request, unless another
 * communicator still asks for the same node, whose request then applies.
 *
 * Bad values are MPI errors raised on the communicator's error handler:
 * partner not a rank of the communicator or the caller itself (MPI_ERR_RANK
 * class), payload or rate out of range or a NULL pointer (MPI_ERR_ARG), the
 * partner's node unknown (MPI_ERR_OTHER). What cannot take effect (no shim,
 * no relays, open connections the relays could not switch) is a warning on
 * stderr: the put succeeds, the program runs as before over TCP. Open
 * connections are switched by the shim (kind-4 preambles to their relays). */
#define _GNU_SOURCE
#include "udp_params.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/network.h"
#include "../common/settings.h"
#include "../../include/wanmpi.h"
#include "../../include/wanshim.h"

#define MAX_RATE_MBPS 1e6       /* 1 Tbit/s: anything above is a unit mistake */

int WANMPI_UDP_PARAMS = MPI_KEYVAL_INVALID;

static int err_partner = MPI_ERR_RANK, err_value = MPI_ERR_ARG, err_where = MPI_ERR_OTHER;

/* A request in force: the attribute's value is a pointer to one (params
 * first, so it reads as a struct wanmpi_udp_params *). */
struct active {
    struct wanmpi_udp_params params;
    struct sockaddr_storage node;
    socklen_t node_len;
    struct active *next;
};
static struct active *actives;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int finalizing;      /* MPI_Finalize deletes every attribute: nothing to withdraw then */

static uint64_t bytes_per_s(double mbps)
{
    return (uint64_t)(mbps * 1e6 / 8.0 + 0.5);
}

static int same_node(const struct active *a, const struct active *b)
{
    return a->node_len == b->node_len && !memcmp(&a->node, &b->node, a->node_len);
}

static wanshim_request_blast_fn *shim_request(void)
{
    return (wanshim_request_blast_fn *)dlsym(RTLD_DEFAULT, WANSHIM_REQUEST_BLAST);
}

/* Withdraws `gone`'s request, or hands the node to another communicator's. */
static int udp_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    struct active *gone = value, *other = NULL;
    pthread_mutex_lock(&lock);
    for (struct active **p = &actives; *p; p = &(*p)->next)
        if (*p == gone) {
            *p = gone->next;
            break;
        }
    for (struct active *a = actives; a; a = a->next)
        if (same_node(a, gone))
            other = a;
    wanshim_request_blast_fn *request = finalizing ? NULL : shim_request();
    if (request)
        request((struct sockaddr *)&gone->node, gone->node_len,
                other ? bytes_per_s(other->params.rate_mbps) : 0,
                other ? (unsigned)other->params.payload_size : 0);
    pthread_mutex_unlock(&lock);
    free(gone);
    return MPI_SUCCESS;
}

int wm_udp_init(void)
{
    if (WANMPI_UDP_PARAMS != MPI_KEYVAL_INVALID)
        return MPI_SUCCESS;
    int rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, udp_delete, &WANMPI_UDP_PARAMS, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    if (PMPI_Add_error_code(MPI_ERR_RANK, &err_partner) == MPI_SUCCESS)
        PMPI_Add_error_string(err_partner, "wanmpi: WANMPI_UDP_PARAMS: partner_rank is not another rank of "
                                           "the communicator");
    if (PMPI_Add_error_code(MPI_ERR_ARG, &err_value) == MPI_SUCCESS)
        PMPI_Add_error_string(err_value, "wanmpi: WANMPI_UDP_PARAMS: invalid value (payload_size must be "
                                         "64..65507 bytes, rate_mbps above 0 and at most 1e6, the pointer "
                                         "not NULL)");
    if (PMPI_Add_error_code(MPI_ERR_OTHER, &err_where) == MPI_SUCCESS)
        PMPI_Add_error_string(err_where, "wanmpi: WANMPI_UDP_PARAMS: the partner's node address is unknown "
                                         "(WANMPI_RANK_ADDRESSES, set by `wanmpi run`, is missing or does "
                                         "not list it)");
    return MPI_SUCCESS;
}

void wm_udp_finalizing(void)
{
    finalizing = 1;
}

int wm_udp_ours(int keyval)
{
    return keyval != MPI_KEYVAL_INVALID && keyval == WANMPI_UDP_PARAMS;
}

static int fail(MPI_Comm comm, int code, const char *fmt, double value)
{
    fprintf(stderr, "wanmpi: WANMPI_UDP_PARAMS: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n");
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* The node address of MPI_COMM_WORLD rank `rank` from "ip*n,ip*n,...".
 * 0, or -1 if the variable is missing, malformed or too short. */
static int rank_address(int rank, struct sockaddr_storage *out, socklen_t *len)
{
    const char *s = getenv(WM_ENV_RANK_ADDRESSES);
    if (!s || !*s)
        return -1;
    long first = 0;
    while (*s) {
        const char *end = s + strcspn(s, ",");
        const char *star = memchr(s, '*', (size_t)(end - s));
        size_t iplen = (size_t)((star ? star : end) - s);
        long count = 1;
        if (star) {
            char *stop;
            errno = 0;
            count = strtol(star + 1, &stop, 10);
            if (errno || stop != end || count < 1)
                return -1;
        }
        if (rank < first + count)
            return wm_address_parse(s, iplen, out, len);
        first += count;
        s = *end ? end + 1 : end;
    }
    return -1;
}

/* The partner's MPI_COMM_WORLD rank (MPI_UNDEFINED if it is not in it). */
static int world_rank(MPI_Comm comm, int partner, int *world, int *is_self)
{
    int inter = 0, size, me = MPI_PROC_NULL;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter)
        PMPI_Comm_remote_size(comm, &size);
    else {
        PMPI_Comm_size(comm, &size);
        PMPI_Comm_rank(comm, &me);
    }
    if (partner < 0 || partner >= size)
        return -1;
    *is_self = partner == me;
    MPI_Group group, world_group;
    if (inter)
        PMPI_Comm_remote_group(comm, &group);
    else
        PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Group_translate_ranks(group, 1, &partner, world_group, world);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world_group);
    return 0;
}

int wm_udp_put(MPI_Comm comm, const void *attribute_val)
{
    int size;
    if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return PMPI_Comm_set_attr(comm, WANMPI_UDP_PARAMS, (void *)attribute_val);     /* MPI reports it */
    const struct wanmpi_udp_params *up = attribute_val;
    if (!up)
        return fail(comm, err_value, "NULL pointer (pass &params)%.0f", 0);
    int world = MPI_UNDEFINED, self = 0;
    if (world_rank(comm, up->partner_rank, &world, &self) != 0)
        return fail(comm, err_partner, "partner_rank %.0f is not a rank of the communicator", up->partner_rank);
    if (self)
        return fail(comm, err_partner, "partner_rank %.0f is the calling rank itself", up->partner_rank);
    if (up->payload_size < 64 || up->payload_size > 65507)
        return fail(comm, err_value, "payload_size %.0f is not 64..65507 bytes", up->payload_size);
    if (!isfinite(up->rate_mbps) || up->rate_mbps <= 0 || up->rate_mbps > MAX_RATE_MBPS)
        return fail(comm, err_value, "rate_mbps %g is not above 0 and at most 1e6 Mbit/s", up->rate_mbps);
    struct active *a = calloc(1, sizeof *a);
    if (!a)
        return fail(comm, MPI_ERR_NO_MEM, "out of memory%.0f", 0);
    a->params = *up;
    if (world == MPI_UNDEFINED || rank_address(world, &a->node, &a->node_len) != 0) {
        free(a);
        return fail(comm, err_where, "no node address for partner_rank %.0f", up->partner_rank);
    }
    /* Store first: replacing an earlier value runs its delete callback, which
     * must not withdraw the request made below. */
    int rc = PMPI_Comm_set_attr(comm, WANMPI_UDP_PARAMS, a);
    if (rc != MPI_SUCCESS) {
        free(a);
        return rc;
    }
    pthread_mutex_lock(&lock);
    a->next = actives;
    actives = a;
    wanshim_request_blast_fn *request = shim_request();
    errno = 0;
    int stay = request ? request((struct sockaddr *)&a->node, a->node_len, bytes_per_s(up->rate_mbps),
                                 (unsigned)up->payload_size)
                       : (errno = ENOSYS, -1);
    int err = errno;
    pthread_mutex_unlock(&lock);
    char where[INET6_ADDRSTRLEN] = "?";
    inet_ntop(a->node.ss_family, a->node.ss_family == AF_INET
                                     ? (void *)&((struct sockaddr_in *)&a->node)->sin_addr
                                     : (void *)&((struct sockaddr_in6 *)&a->node)->sin6_addr,
              where, sizeof where);
    if (stay < 0 && err == EOPNOTSUPP)
        fprintf(stderr, "wanmpi: WANMPI_UDP_PARAMS for partner %d (%s) kept but not applied: this job's "
                        "connections do not go through relays, which carry the blasts (a topology with "
                        "`relays`, see docs/libwanmpi.md)\n", up->partner_rank, where);
    else if (stay < 0)
        fprintf(stderr, "wanmpi: WANMPI_UDP_PARAMS for partner %d (%s) kept but not applied: %s\n",
                up->partner_rank, where,
                err == ENOSYS ? "libwanshim is not loaded or is disabled" : strerror(err));
    else if (stay > 0)
        fprintf(stderr, "wanmpi: WANMPI_UDP_PARAMS for partner %d (%s): %d open connection(s) to or from that "
                        "node could not be switched to blasts and stay on TCP (libwanshim said why)\n",
                up->partner_rank, where, stay);
    return MPI_SUCCESS;
}

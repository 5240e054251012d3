/* Which cluster each rank of a communicator is in (built at its first
 * collective without a message: identity.h), and the communicators that the
 * algorithms use (built when one of ours first runs on it), cached on it as
 * an attribute.
 *
 * All of libwanmpi's own traffic goes over `shadow` (a duplicate of the user's
 * communicator) and the sub-communicators split from it, never over the
 * user's communicator: a user's MPI_ANY_TAG receive can never see our
 * messages, and ours never see the user's. */
#ifndef WANMPI_CLUSTER_H
#define WANMPI_CLUSTER_H

#include <mpi.h>
#include <stdint.h>

#include "identity.h"                  /* wm_cluster_name */

struct wm_comm {
    MPI_Comm user;             /* the communicator this is cached on */
    int flat;                  /* 1: one cluster, or an intercommunicator: use PMPI */
    int connected;             /* shadow and local exist (wm_comm_connect) */
    MPI_Comm shadow;           /* duplicate of `user`: our point-to-point traffic */
    MPI_Comm local;            /* the ranks of my cluster, in `user` rank order */
    int size, rank;
    int nclusters;             /* clusters numbered in order of their lowest rank */
    int my_cluster, my_index;
    int *cluster_of;           /* [size] cluster of each rank */
    int *index_of;             /* [size] position of each rank inside its cluster */
    int *cluster_size;         /* [nclusters] */
    int **members;             /* [nclusters][cluster_size] ranks of each cluster, ascending */
    int *cluster_global;       /* [nclusters] index in the job-wide cluster table (statistics) */
    uint32_t *address_of;      /* [size] each rank's address in its cluster's network (IPv4,
                                  network order; 0: unknown, e.g. clusters named by rank) */
    int *host_of;              /* [size] index of each rank's host in host_address; -1: unknown */
    uint32_t *host_address;    /* [nhosts] the distinct addresses, in order of their lowest rank */
    int nhosts;
    int lanes;                 /* k, WAN senders per cluster (WANMPI_LANES); 0: automatic */
    int tag_ub;                /* blocking calls use tags 0..tag_ub: the lower half of the MPI's */
    int mpi_tag_ub;            /* the MPI's MPI_TAG_UB: tags above tag_ub are the nonblocking
                                  calls' (nb.c) */
    unsigned nb_calls;         /* nonblocking collectives of ours started on it (nb.c) */
    unsigned persist_calls;    /* persistent collectives of ours created on it (nb.c) */
    int nb_active;             /* of which not yet ended: the entry outlives MPI_Comm_free until 0 */
    int rules_differ;          /* the ranks read different rules files */
    struct wm_comm_rules *rules;   /* rules.c: the rules that can apply here; NULL: none */
    struct wm_comm *next;      /* list of live entries (freed at MPI_Finalize) */
};

/* The cached entry of `comm`, built on first use: may be collective over
 * `comm` (identity.h), so only call it where every rank of `comm` calls it
 * (inside a collective). */
int wm_comm_get(MPI_Comm comm, struct wm_comm **out);
/* Creates the entry's communicators if not yet done: collective over the
 * communicator, so call it where every rank has chosen one of our
 * algorithms for the same call. */
int wm_comm_connect(struct wm_comm *wc);
/* The same with its duplicate already made (`shadow`, a duplicate of
 * wc->user; the entry owns it from now on, also on failure). */
int wm_comm_connect_dup(struct wm_comm *wc, MPI_Comm shadow);
/* The cached entry, or NULL if none was built yet (never collective: for
 * nonblocking calls, which must not wait for other ranks). */
struct wm_comm *wm_comm_cached(MPI_Comm comm);

/* Lanes of cluster c: min(k, size of c); automatic: every rank of c. */
int wm_lanes(const struct wm_comm *wc, int c);

/* B between my cluster and cluster c, bytes/s: WANMPI_WAN_RATES, else
 * WANMPI_WAN_RATE (0: unknown). */
double wm_link_rate(const struct wm_comm *wc, int c);

/* Frees every cached entry; called before PMPI_Finalize. */
void wm_comm_release_all(void);

#endif

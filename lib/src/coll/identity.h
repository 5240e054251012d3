/* Who each rank is: the cluster it is in, its address in that cluster's
 * network and the rules file it read (its fingerprint).
 *
 * Every rank of MPI_COMM_WORLD learns every other's once, at MPI_Init (one
 * allgather). A communicator's identities are then read from that table
 * without any message (its group translated to MPI_COMM_WORLD ranks), so a
 * new communicator costs nothing across the WAN until one of our algorithms
 * runs on it; only a communicator with ranks from outside MPI_COMM_WORLD
 * (MPI_Comm_spawn, MPI_Comm_connect) or a program that started the MPI
 * another way (MPI sessions) exchanges them, collectively over it. */
#ifndef WANMPI_IDENTITY_H
#define WANMPI_IDENTITY_H

#include <mpi.h>
#include <stdint.h>

struct wm_identity {
    int cluster;            /* index in the job-wide table of cluster names */
    uint32_t address;       /* IPv4, network order; 0: unknown (clusters named by rank) */
    uint64_t rules;         /* wm_rules_fingerprint() of the rank */
};

/* Collective over MPI_COMM_WORLD: the table of every rank's identity.
 * Called once the MPI has started (startup.c); idempotent. The exchange
 * may be posted first (wm_identity_world_start: a nonblocking allgather)
 * so that other collectives over MPI_COMM_WORLD cross the WAN beside it;
 * wm_identity_world then waits for it. */
int wm_identity_world_start(void);
int wm_identity_world(void);

/* The identity of each rank of `comm` (`size` of them) into `out`: from the
 * table where every rank is in MPI_COMM_WORLD (no communication; the same
 * outcome on every rank), else by an allgather over `comm` (collective). */
int wm_identities(MPI_Comm comm, int size, struct wm_identity *out);

/* Name of cluster `g` of the job-wide table; its number of names. */
const char *wm_cluster_name(int g);
int wm_cluster_count(void);

#endif

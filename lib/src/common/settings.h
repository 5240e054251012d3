/* Every environment variable libwanmpi reads, with its default and meaning.
 * This header is the one home of these names; docs/libwanmpi.md lists them for
 * users, and `wanmpi run` sets the topology-derived ones for every rank.
 *
 * The settings must be identical on every rank of a job (the launcher exports
 * them to all ranks): algorithm choices are made locally on each rank and
 * ranks that chose differently would wait for each other forever. */
#ifndef WANMPI_SETTINGS_H
#define WANMPI_SETTINGS_H

#include <stddef.h>

/* Where this process is. Checked in this order; the first one set decides. */
#define WM_ENV_CLUSTER        "WANMPI_CLUSTER"        /* this process's cluster name */
#define WM_ENV_RANK_CLUSTERS  "WANMPI_RANK_CLUSTERS"  /* "a:0-3,8;b:4-7": by MPI_COMM_WORLD rank */
#define WM_ENV_CLUSTER_MAP    "WANMPI_CLUSTER_MAP"    /* "a=198.18.0.0/24;b=198.18.1.0/24,10.1.0.0/16":
                                                         matched against this host's addresses */
/* Without any of them every process is in one cluster and every call goes
 * straight to the MPI library. */

/* Rates of the topology, bits/s (integers), for the statistics and pacing. */
#define WM_ENV_WAN_RATE       "WANMPI_WAN_RATE"
#define WM_ENV_NIC_RATE       "WANMPI_NIC_RATE"
/* The rate between two clusters where it differs from WANMPI_WAN_RATE (the
 * narrowest link on their route), bits/s: "a:b=200000000;b:c=100000000".
 * Pacing uses it per pair of clusters (pacing/rate.c). */
#define WM_ENV_WAN_RATES      "WANMPI_WAN_RATES"
/* The one-way WAN delay, microseconds (integer); unset: unknown. For the rules. */
#define WM_ENV_WAN_DELAY      "WANMPI_WAN_DELAY"

/* Which algorithm runs per call (coll/rules.h, docs/tuning.md): a rules file,
 * as written by `wanmpi tune`. An explicitly set WANMPI_<COLL> wins over it. */
#define WM_ENV_RULES          "WANMPI_RULES"

#define WM_ENV_LANES          "WANMPI_LANES"          /* k: ranks per cluster that send across
                                                         the WAN at the same time (>= 1). Unset:
                                                         what measured fastest per collective
                                                         (broadcast 1 chain, the others every
                                                         rank of the cluster; docs/libwanmpi.md) */
#define WM_ENV_LAN_LATENCY    "WANMPI_LAN_LATENCY"    /* one-way latency of a message between two
                                                         ranks of a cluster, microseconds (integer):
                                                         with WANMPI_NIC_RATE it chooses chains or
                                                         trees inside clusters (coll/tree.c) */
#define WM_DEFAULT_LAN_LATENCY 20                     /* MPI over TCP through one Ethernet switch
                                                         (the 2x4 testbed: 8-15 us) */
#define WM_ENV_FAN            "WANMPI_FAN"            /* the fan-out of the broadcast's and the
                                                         reductions' trees inside clusters, 1..16
                                                         (1: the chain); unset: chosen per call */
#define WM_ENV_WINDOW         "WANMPI_WINDOW"         /* bytes a rank of a multi-lane allreduce keeps
                                                         in the MPI library at once in sends to ranks
                                                         of its cluster (at least 2 pieces), oldest
                                                         piece first (coll/sendq.h); 0: no limit */
#define WM_DEFAULT_WINDOW     (256 * 1024)            /* SMPI, 16 MiB, 10 ms: 2 x 8 ranks best at
                                                         4-8 pieces of 32 KiB, 2 x 16 at 8-16, both
                                                         worse at 32; 1 MiB in 8 KiB pieces: 4 too
                                                         few, 8 and more alike (docs/scale.md) */
#define WM_ENV_CHUNK          "WANMPI_CHUNK"          /* pipeline chunk, bytes (>= 1024) */
#define WM_DEFAULT_CHUNK      32768                   /* under the 64 KB eager limit of Open MPI's
                                                         TCP transport: no handshake per chunk */
#define WM_ENV_SMALL          "WANMPI_SMALL"          /* messages up to this many bytes take the
                                                         latency-optimal (single-lane) path */
#define WM_DEFAULT_SMALL      8192
#define WM_ENV_RING           "WANMPI_ALLGATHER_RING" /* a multi-lane allgather(v) over two clusters
                                                         of this many bytes or more (the whole
                                                         result) runs as rings (coll/allgather.c) */
#define WM_DEFAULT_RING       (128 * 1024)            /* 2x4 testbed, 10 ms: rings from 128 KiB
                                                         (0.91-0.95x the tree's time; 256 KiB:
                                                         0.76-0.83x; 64 KiB: 1.1-1.2x) */

/* Algorithm per collective: "multilane" (default), "singlelane" (the grid-MPI
 * baseline: one node per cluster on the WAN) or "mpi" (the MPI library's own). */
#define WM_ENV_ALG_PREFIX     "WANMPI_"               /* + BCAST, ALLREDUCE, REDUCE, ALLGATHER(V),
                                                         REDUCE_SCATTER_BLOCK, BARRIER, GATHER(V),
                                                         SCATTER(V), SCAN, EXSCAN */
#define WM_ENV_DISABLE        "WANMPI_DISABLE"        /* 1: every collective goes to the MPI library */

/* Rate-managed all-to-all (coll/alltoall.c). WANMPI_ALLTOALL and
 * WANMPI_ALLTOALLV choose "scheduled" (default: our schedule, WAN blocks
 * first, eager-sized chunks, paced), "paced" (the paper: the MPI library's
 * own algorithm with the WAN sockets paced for its duration) or "mpi";
 * WANMPI_ALLTOALLW "scheduled" (default) or "mpi" (coll/alltoallw.c). */
#define WM_ENV_ALLTOALL_RATE  "WANMPI_ALLTOALL_RATE"  /* how the rate of an all-to-all is chosen:
                                                         "auto" (default: from the volumes the call
                                                         really sends and the receivers' NICs, local
                                                         flows paced too), "matb" (the paper:
                                                         B / (senders x divisor), WAN sockets only)
                                                         or "off" (not paced) */
#define WM_ENV_ALLREDUCE_RATE "WANMPI_ALLREDUCE_RATE" /* how the multi-lane allreduce paces its ring
                                                         and WAN sockets while it runs (coll/reduce.c):
                                                         "auto" (default) or "off" */
#define WM_ENV_MATB_DIVISOR   "WANMPI_MATB_DIVISOR"   /* d in MATB = B / (n x d), 1..64; the paper
                                                         found d = 2 better when receivers' switch
                                                         ports overflow. Default 1 */

/* Nonblocking collectives (coll/nb.c, docs/nonblocking.md). */
#define WM_ENV_NONBLOCKING    "WANMPI_NONBLOCKING"    /* "ours" (default: MPI_Ibcast, Iallreduce, ...
                                                         run our schedules where the blocking call
                                                         would run the multi-lane or scheduled
                                                         algorithm) or "mpi" (the MPI's own, always) */
#define WM_ENV_PROGRESS       "WANMPI_PROGRESS"       /* who advances them: "calls" (default: every
                                                         MPI_Test/Wait*, blocking point-to-point and
                                                         collective call) or "thread" (also a thread
                                                         while the program computes; MPI_Init then
                                                         asks for MPI_THREAD_MULTIPLE) */

/* Argument agreement (coll/agree.h): "1" makes the ranks of every blocking
 * collective agree on counts, datatypes, root and operation first (one small
 * allreduce per call), so an erroneous program gets an error on every rank,
 * never a hang; "all" the nonblocking ones and persistent inits too (whose
 * start then waits for every rank to start it); "0" (default) trusts the
 * program, as MPI does. */
#define WM_ENV_CHECK          "WANMPI_CHECK"

/* The node address of every MPI_COMM_WORLD rank, for WANMPI_UDP_PARAMS
 * (blast/udp_params.c): "10.1.0.1*2,10.2.0.1*2" = ranks 0-1 on 10.1.0.1,
 * ranks 2-3 on 10.2.0.1 (`wanmpi run` sets it from its placement). */
#define WM_ENV_RANK_ADDRESSES "WANMPI_RANK_ADDRESSES"

/* libwanshim (lib/src/shim, docs/libwanshim.md), the socket shim preloaded
 * beside libwanmpi, reads WANMPI_CLUSTER and WANMPI_CLUSTER_MAP above, and: */
#define WM_ENV_PACING_RATE    "WANMPI_PACING_RATE"    /* initial SO_MAX_PACING_RATE of every TCP
                                                         socket to another cluster: bytes/s, or
                                                         with a unit ("100Mbit", "12.5MB");
                                                         0 or unset: not paced */
#define WM_ENV_SHIM_DEBUG     "WANMPI_SHIM_DEBUG"     /* 1: sockets tracked and rates set,
                                                         2: every intercepted call; to stderr */
#define WM_ENV_RELAYS         "WANMPI_RELAYS"         /* this cluster's relays, "IP:PORT,IP:PORT"
                                                         (or every cluster's: "a=IP:PORT,...;b=...")
                                                         in relay-index order: every TCP connect to
                                                         another cluster goes to the one chosen by
                                                         destination host; a connection from one of
                                                         these IPs carries a delivery preamble.
                                                         Unset: no relaying */
#define WM_ENV_RELAY_SOURCES  "WANMPI_RELAY_SOURCES"  /* more IPs relays deliver from, "IP,IP" */
#define WM_ENV_RELAY_TIMEOUT  "WANMPI_RELAY_TIMEOUT"  /* seconds for the relay's connect and reply
                                                         (default 10; then ETIMEDOUT) */
#define WM_ENV_RELAY_SELECT   "WANMPI_RELAY_SELECT"   /* which relay serves a destination host:
                                                         "address" (default: IPv4 mod N) or "hash" */
#define WM_ENV_TCP_RTO_MAX    "WANMPI_TCP_RTO_MAX"    /* ms: the longest TCP retransmission interval
                                                         of a socket to another cluster (1000..120000;
                                                         default 1000; 0: the kernel's 120 s) */
#define WM_ENV_TCP_USER_TIMEOUT "WANMPI_TCP_USER_TIMEOUT" /* ms such a socket keeps retransmitting
                                                         before it gives up (default 900000; 0: the
                                                         kernel's tcp_retries2) */
#define WM_ENV_NAT_MAP        "WANMPI_NAT_MAP"        /* 1:1 NAT (cloud regions): "PRIVATE=PUBLIC,..."
                                                         IPv4 pairs; a connect to PRIVATE in another
                                                         cluster goes to PUBLIC, an accept or
                                                         getpeername of PUBLIC reports PRIVATE */

/* Output. The library prints nothing unless asked. */
#define WM_ENV_STATS          "WANMPI_STATS"          /* per-rank statistics at MPI_Finalize: a file
                                                         name (%r = world rank, %p = pid, %h = host)
                                                         or "stderr" */
#define WM_ENV_DEBUG          "WANMPI_DEBUG"          /* 1: decisions, 2: every message; to stderr */

enum wm_coll {
    WM_BCAST, WM_ALLREDUCE, WM_REDUCE, WM_ALLGATHER, WM_REDUCE_SCATTER_BLOCK,
    WM_BARRIER, WM_GATHER, WM_SCATTER, WM_ALLTOALL, WM_ALLTOALLV, WM_ALLGATHERV, WM_GATHERV, WM_SCATTERV,
    WM_SCAN, WM_EXSCAN, WM_REDUCE_SCATTER, WM_ALLTOALLW, WM_NCOLL
};

/* multilane/singlelane: bcast, reductions, allgather(v), barrier, gather(v),
 * scatter(v), scan, exscan (the last five: one algorithm, both names run it);
 * scheduled/paced: alltoall, alltoallv; scheduled: alltoallw; mpi: every collective. */
enum wm_alg { WM_ALG_MULTILANE, WM_ALG_SINGLELANE, WM_ALG_MPI, WM_ALG_SCHEDULED, WM_ALG_PACED, WM_NALG };

enum wm_rate_mode { WM_RATE_MATB, WM_RATE_AUTO, WM_RATE_OFF };

enum wm_check { WM_CHECK_OFF, WM_CHECK_BLOCKING, WM_CHECK_ALL };

struct wm_settings {
    const char *cluster;        /* from WANMPI_CLUSTER, or NULL */
    const char *rank_clusters;
    const char *cluster_map;
    double wan_rate, nic_rate;  /* bits/s, 0 if unknown */
    long long wan_delay_us;     /* one-way, -1 if unknown */
    const char *wan_rates;      /* WANMPI_WAN_RATES, or NULL */
    const char *rules;          /* WANMPI_RULES, or NULL */
    int lanes;                  /* 0: automatic */
    long long lan_latency_us;   /* WANMPI_LAN_LATENCY */
    int fan;                    /* WANMPI_FAN; 0: automatic */
    long long window;           /* WANMPI_WINDOW, bytes; 0: no limit */
    size_t chunk, small;
    size_t ring;                /* WANMPI_ALLGATHER_RING */
    enum wm_alg alg[WM_NCOLL];
    int alg_set[WM_NCOLL];      /* WANMPI_<COLL> given: it wins over the rules */
    int disabled;
    enum wm_rate_mode alltoall_rate;
    enum wm_rate_mode allreduce_rate;   /* WM_RATE_AUTO or WM_RATE_OFF */
    int matb_divisor;
    int nonblocking_ours;       /* WANMPI_NONBLOCKING=ours */
    int progress_thread;        /* WANMPI_PROGRESS=thread */
    enum wm_check check;        /* WANMPI_CHECK */
    const char *stats;
    int debug;
};

/* Parsed once, at the first call that needs them. A malformed value is
 * reported (naming the variable and the value) and the job is aborted: a
 * silently ignored setting would make a benchmark measure the wrong thing. */
const struct wm_settings *wm_settings(void);
const char *wm_coll_name(enum wm_coll c);          /* "bcast", "allreduce", ... */
const char *wm_alg_name(enum wm_alg a);
const char *wm_rate_mode_name(enum wm_rate_mode m);

#endif

/* Which cluster this process is in (WANMPI_CLUSTER, WANMPI_RANK_CLUSTERS or
 * WANMPI_CLUSTER_MAP), the job-wide table of cluster names and the table of
 * MPI_COMM_WORLD's identities (identity.h). */
#include "identity.h"
#include "rules.h"
#include "../common/cluster_map.h"
#include "../common/alloc.h"
#include "../common/log.h"
#include "../common/settings.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FOR_IDENTITIES "the ranks' identities"   /* what wm_calloc's memory is for */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- this process's cluster ------------------------------------------------ */

static char my_name[WM_CLUSTER_NAME_MAX];
static int my_name_known;
static uint32_t my_address;         /* network order: the address that matched the map; 0: unknown */

static void set_name(const char *source, const char *name, size_t len)
{
    if (!wm_cluster_name_valid(name, len))
        wm_fatal("%s: cluster name '%.*s' must have 1 to %d letters, digits, '_', '-' or '.'",
                 source, (int)len, name, WM_CLUSTER_NAME_MAX - 1);
    memcpy(my_name, name, len);
    my_name[len] = 0;
}

/* "a:0-3,8;b:4-7" -> the name of the cluster listing `rank`. */
static void name_from_rank_list(const char *spec, int rank)
{
    const char *p = spec;
    while (*p) {
        const char *colon = strchr(p, ':');
        const char *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        if (!colon || colon > end)
            wm_fatal("%s=%s: expected NAME:RANKS[;NAME:RANKS...], e.g. a:0-3;b:4-7",
                     WM_ENV_RANK_CLUSTERS, spec);
        const char *r = colon + 1;
        while (r < end) {
            char *stop;
            long lo = strtol(r, &stop, 10), hi = lo;
            if (stop == r || lo < 0)
                wm_fatal("%s=%s: '%.*s' is not a rank or range of ranks", WM_ENV_RANK_CLUSTERS, spec,
                         (int)(end - r), r);
            if (*stop == '-') {
                const char *h = stop + 1;
                hi = strtol(h, &stop, 10);
                if (stop == h || hi < lo)
                    wm_fatal("%s=%s: bad range in '%.*s'", WM_ENV_RANK_CLUSTERS, spec,
                             (int)(end - r), r);
            }
            if (stop < end && *stop != ',')
                wm_fatal("%s=%s: unexpected '%c'", WM_ENV_RANK_CLUSTERS, spec, *stop);
            if (rank >= lo && rank <= hi) {
                set_name(WM_ENV_RANK_CLUSTERS, p, (size_t)(colon - p));
                return;
            }
            r = stop < end ? stop + 1 : end;
        }
        p = *end ? end + 1 : end;
    }
    wm_fatal("%s=%s: MPI_COMM_WORLD rank %d is in none of the clusters", WM_ENV_RANK_CLUSTERS,
             spec, rank);
}

/* WANMPI_CLUSTER_MAP -> the cluster whose networks contain an address of this
 * host (lib/src/common/cluster_map.c, libwanshim's map too). */
static void name_from_address_map(const char *spec)
{
    struct wm_cluster_map map;
    char problem[640];
    int c;
    if (wm_cluster_map_parse(spec, &map, problem, sizeof problem) != 0
        || wm_cluster_map_host(&map, &c, &my_address, problem, sizeof problem) != 0)
        wm_fatal("%s=%s: %s", WM_ENV_CLUSTER_MAP, spec, problem);
    set_name(WM_ENV_CLUSTER_MAP, map.names[c], strlen(map.names[c]));
    wm_cluster_map_free(&map);
    char address[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &my_address, address, sizeof address);
    wm_debug(1, "cluster '%s' (address %s)", my_name, address);
}

static const char *process_cluster(void)
{
    if (my_name_known)
        return my_name;
    const struct wm_settings *s = wm_settings();
    if (s->cluster) {
        set_name(WM_ENV_CLUSTER, s->cluster, strlen(s->cluster));
    } else if (s->rank_clusters) {
        int rank;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        name_from_rank_list(s->rank_clusters, rank);
    } else if (s->cluster_map) {
        name_from_address_map(s->cluster_map);
    } else {
        my_name[0] = 0;     /* no map: one cluster */
    }
    my_name_known = 1;
    return my_name;
}

/* ---- the job-wide table of cluster names (statistics) ---------------------- */

static char (*global_names)[WM_CLUSTER_NAME_MAX];
static int global_count, global_cap;

static int global_index(const char *name)
{
    for (int i = 0; i < global_count; i++)
        if (!strcmp(global_names[i], name))
            return i;
    if (global_count == global_cap) {
        int cap = global_cap ? 2 * global_cap : 8;
        void *grown = realloc(global_names, (size_t)cap * sizeof *global_names);
        if (!grown)
            wm_fatal("out of memory (cluster table)");
        global_names = grown;
        global_cap = cap;
    }
    snprintf(global_names[global_count], WM_CLUSTER_NAME_MAX, "%s", name);
    return global_count++;
}

const char *wm_cluster_name(int g) { return g >= 0 && g < global_count ? global_names[g] : "?"; }
int wm_cluster_count(void) { return global_count; }

/* ---- identities ------------------------------------------------------------- */

struct wire {                   /* what the ranks exchange: the name, not its index */
    char name[WM_CLUSTER_NAME_MAX];
    uint32_t address;
    uint64_t rules;
};

/* An exchange of identities over a communicator, posted and then finished:
 * MPI_Init overlaps the world's with MPI_COMM_WORLD's duplicate (startup.c). */
struct exchange {
    struct wire mine, *who;
    int size;
    MPI_Request request;
};

static int exchange_start(struct exchange *x, MPI_Comm comm, int size)
{
    x->who = wm_calloc((size_t)size, sizeof *x->who, FOR_IDENTITIES);
    x->size = size;
    memset(&x->mine, 0, sizeof x->mine);
    snprintf(x->mine.name, sizeof x->mine.name, "%s", process_cluster());
    x->mine.address = my_address;
    x->mine.rules = wm_rules_fingerprint();
#ifdef WANMPI_SMPI
    /* SimGrid SMPI's Iallgather posts all N(N-1) messages at once, and the
     * simulator's cost grows with the flows in flight: minutes at 512 ranks.
     * Its blocking allgather takes the selector's algorithm (log N rounds). */
    x->request = MPI_REQUEST_NULL;
    int rc = PMPI_Allgather(&x->mine, (int)sizeof x->mine, MPI_BYTE, x->who, (int)sizeof x->mine, MPI_BYTE, comm);
#else
    int rc = PMPI_Iallgather(&x->mine, (int)sizeof x->mine, MPI_BYTE, x->who, (int)sizeof x->mine, MPI_BYTE,
                             comm, &x->request);
#endif
    if (rc != MPI_SUCCESS) {
        free(x->who);
        x->who = NULL;
    }
    return rc;
}

/* Waits for the exchange; every rank's identity into `out`, names numbered
 * in rank order. */
static int exchange_finish(struct exchange *x, struct wm_identity *out)
{
    int rc = PMPI_Wait(&x->request, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
        pthread_mutex_lock(&lock);
        for (int r = 0; r < x->size; r++) {
            x->who[r].name[WM_CLUSTER_NAME_MAX - 1] = 0;
            out[r].cluster = global_index(x->who[r].name);
            out[r].address = x->who[r].address;
            out[r].rules = x->who[r].rules;
        }
        pthread_mutex_unlock(&lock);
    }
    free(x->who);
    x->who = NULL;
    return rc;
}

/* Collective over comm: every rank's identity. */
static int exchange(MPI_Comm comm, int size, struct wm_identity *out)
{
    struct exchange x;
    int rc = exchange_start(&x, comm, size);
    return rc == MPI_SUCCESS ? exchange_finish(&x, out) : rc;
}

static struct wm_identity *world;   /* [world_size]; NULL: not known */
static int world_size;
static struct exchange world_exchange;
static int world_posted;

int wm_identity_world_start(void)
{
    if (world || world_posted)
        return MPI_SUCCESS;
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    int rc = exchange_start(&world_exchange, MPI_COMM_WORLD, world_size);
    world_posted = rc == MPI_SUCCESS;
    return rc;
}

int wm_identity_world(void)
{
    if (world)
        return MPI_SUCCESS;
    int rc = wm_identity_world_start();
    if (rc != MPI_SUCCESS)
        return rc;
    struct wm_identity *table = wm_calloc((size_t)world_size, sizeof *table, FOR_IDENTITIES);
    world_posted = 0;
    if ((rc = exchange_finish(&world_exchange, table)) != MPI_SUCCESS) {
        free(table);
        return rc;
    }
    world = table;
    return MPI_SUCCESS;
}

/* Each rank of comm as a rank of MPI_COMM_WORLD: 1 if all of them are. */
static int world_ranks(MPI_Comm comm, int size, int *rank_in_world)
{
    MPI_Group group, world_group;
    int *ranks = wm_calloc((size_t)size, sizeof(int), FOR_IDENTITIES), all = 0;
    for (int r = 0; r < size; r++)
        ranks[r] = r;
    if (PMPI_Comm_group(comm, &group) == MPI_SUCCESS) {
        if (PMPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS) {
            all = PMPI_Group_translate_ranks(group, size, ranks, world_group, rank_in_world) == MPI_SUCCESS;
            for (int r = 0; all && r < size; r++)
                all = rank_in_world[r] >= 0 && rank_in_world[r] < world_size;
            PMPI_Group_free(&world_group);
        }
        PMPI_Group_free(&group);
    }
    free(ranks);
    return all;
}

int wm_identities(MPI_Comm comm, int size, struct wm_identity *out)
{
    if (world) {
        int *in_world = wm_calloc((size_t)size, sizeof(int), FOR_IDENTITIES);
        int all = world_ranks(comm, size, in_world);
        for (int r = 0; all && r < size; r++)
            out[r] = world[in_world[r]];
        free(in_world);
        if (all)
            return MPI_SUCCESS;
    }
    return exchange(comm, size, out);
}

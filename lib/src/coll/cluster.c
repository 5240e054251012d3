#include "cluster.h"
#include "rules.h"
#include "../common/cluster_map.h"
#include "../common/log.h"
#include "../common/settings.h"
#include "../pacing/rate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the per-communicator cache -------------------------------------------- */

static int keyval = MPI_KEYVAL_INVALID;
static struct wm_comm *live;        /* entries attached to a user communicator */
static struct wm_comm *released;    /* detached by MPI_Comm_free, sub-communicators not yet freed */

static void destroy(struct wm_comm *wc)
{
    if (wc->leaders != MPI_COMM_NULL)
        PMPI_Comm_free(&wc->leaders);
    if (wc->local != MPI_COMM_NULL)
        PMPI_Comm_free(&wc->local);
    if (wc->shadow != MPI_COMM_NULL)
        PMPI_Comm_free(&wc->shadow);
    free(wc->cluster_of);
    free(wc->index_of);
    free(wc->cluster_size);
    if (wc->members)
        free(wc->members[0]);
    free(wc->members);
    free(wc->cluster_global);
    free(wc->address_of);
    free(wc->host_of);
    free(wc->host_address);
    wm_rules_release(wc);
    free(wc);
}

/* Called by MPI when the user frees (or MPI finalizes) a communicator. Freeing
 * communicators from inside an attribute callback can deadlock some MPIs, so
 * the entry is only moved to `released` and destroyed at our next call. */
static int on_comm_delete(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm; (void)key; (void)extra;
    struct wm_comm *wc = value;
    pthread_mutex_lock(&lock);
    for (struct wm_comm **p = &live; *p; p = &(*p)->next)
        if (*p == wc) {
            *p = wc->next;
            break;
        }
    wc->next = released;
    released = wc;
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

static void destroy_released(void)
{
    pthread_mutex_lock(&lock);
    struct wm_comm *list = released;
    released = NULL;
    pthread_mutex_unlock(&lock);
    while (list) {
        struct wm_comm *next = list->next;
        if (__atomic_load_n(&list->nb_active, __ATOMIC_ACQUIRE) > 0) {
            pthread_mutex_lock(&lock);      /* a nonblocking call of ours still runs on it */
            list->next = released;
            released = list;
            pthread_mutex_unlock(&lock);
        } else {
            destroy(list);
        }
        list = next;
    }
}

int wm_lanes(const struct wm_comm *wc, int c)
{
    return wc->lanes > 0 && wc->lanes < wc->cluster_size[c] ? wc->lanes : wc->cluster_size[c];
}

double wm_link_rate(const struct wm_comm *wc, int c)
{
    return (double)wm_rate_between(wm_cluster_name(wc->cluster_global[wc->my_cluster]),
                                   wm_cluster_name(wc->cluster_global[c]));
}

static void *checked_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        wm_fatal("out of memory (%zu bytes for a communicator's cluster map)", n * size);
    return p;
}

/* The distinct hosts of the ranks (host_of, host_address, nhosts), so
 * that the pacing of a collective can group its sockets by host in one
 * pass (several ranks of a node share its sockets' destination). Once per
 * communicator: P x hosts comparisons at most. */
static void index_hosts(struct wm_comm *wc)
{
    wc->host_of = checked_calloc((size_t)wc->size, sizeof(int));
    wc->host_address = checked_calloc((size_t)wc->size, sizeof(uint32_t));
    wc->nhosts = 0;
    for (int r = 0; r < wc->size; r++) {
        uint32_t a = wc->address_of[r];
        int h = 0;
        while (a && h < wc->nhosts && wc->host_address[h] != a)
            h++;
        if (a && h == wc->nhosts)
            wc->host_address[wc->nhosts++] = a;
        wc->host_of[r] = a ? h : -1;
    }
}

/* Each rank's cluster name (into `names`, [size]) and address, in one exchange. */
static int exchange_identities(MPI_Comm comm, struct wm_comm *wc, char (*names)[WM_CLUSTER_NAME_MAX])
{
    struct identity { char name[WM_CLUSTER_NAME_MAX]; uint32_t address; uint64_t rules; };
    struct identity *who = checked_calloc((size_t)wc->size, sizeof *who), mine;
    memset(&mine, 0, sizeof mine);
    snprintf(mine.name, sizeof mine.name, "%s", process_cluster());
    mine.address = my_address;
    mine.rules = wm_rules_fingerprint();
    int rc = PMPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, who, (int)sizeof mine, MPI_BYTE, comm);
    if (rc == MPI_SUCCESS) {
        wc->address_of = checked_calloc((size_t)wc->size, sizeof(uint32_t));
        for (int r = 0; r < wc->size; r++) {
            memcpy(names[r], who[r].name, WM_CLUSTER_NAME_MAX);
            names[r][WM_CLUSTER_NAME_MAX - 1] = 0;
            wc->address_of[r] = who[r].address;
            wc->rules_differ |= who[r].rules != mine.rules;
        }
        index_hosts(wc);
    }
    free(who);
    return rc;
}

/* Numbers the clusters in order of their lowest rank: cluster_of, index_of,
 * cluster_size; `first` ([size]) gets each cluster's lowest rank. */
static void number_clusters(struct wm_comm *wc, char (*names)[WM_CLUSTER_NAME_MAX], int *first)
{
    wc->cluster_of = checked_calloc((size_t)wc->size, sizeof(int));
    wc->index_of = checked_calloc((size_t)wc->size, sizeof(int));
    wc->cluster_size = checked_calloc((size_t)wc->size, sizeof(int));
    wc->nclusters = 0;
    for (int r = 0; r < wc->size; r++) {
        int c = 0;
        while (c < wc->nclusters && strcmp(names[first[c]], names[r]))
            c++;
        if (c == wc->nclusters)
            first[wc->nclusters++] = r;
        wc->cluster_of[r] = c;
        wc->index_of[r] = wc->cluster_size[c]++;
    }
}

/* members[c][i]: the ranks of each cluster; cluster_global: their job-wide index. */
static void list_members(struct wm_comm *wc, char (*names)[WM_CLUSTER_NAME_MAX], const int *first)
{
    wc->members = checked_calloc((size_t)wc->nclusters, sizeof(int *));
    wc->members[0] = checked_calloc((size_t)wc->size, sizeof(int));
    for (int c = 1; c < wc->nclusters; c++)
        wc->members[c] = wc->members[c - 1] + wc->cluster_size[c - 1];
    for (int r = 0; r < wc->size; r++)
        wc->members[wc->cluster_of[r]][wc->index_of[r]] = r;
    wc->cluster_global = checked_calloc((size_t)wc->nclusters, sizeof(int));
    pthread_mutex_lock(&lock);
    for (int c = 0; c < wc->nclusters; c++)
        wc->cluster_global[c] = global_index(names[first[c]]);
    pthread_mutex_unlock(&lock);
}

/* The shadow communicator, the cluster's and the leaders'. */
static int split_communicators(MPI_Comm comm, struct wm_comm *wc)
{
    int rc;
    if ((rc = PMPI_Comm_dup(comm, &wc->shadow)) != MPI_SUCCESS)
        return rc;
    if ((rc = PMPI_Comm_split(wc->shadow, wc->my_cluster, wc->rank, &wc->local)) != MPI_SUCCESS)
        return rc;
    rc = PMPI_Comm_split(wc->shadow, wc->my_index == 0 ? 0 : MPI_UNDEFINED, wc->my_cluster,
                         &wc->leaders);
    if (rc != MPI_SUCCESS)
        return rc;
    int *ub, flag;
    PMPI_Comm_get_attr(wc->shadow, MPI_TAG_UB, &ub, &flag);
    wc->mpi_tag_ub = flag ? *ub : 32767;
    wc->tag_ub = wc->mpi_tag_ub / 2;
    return MPI_SUCCESS;
}

static void debug_layout(const struct wm_comm *wc)
{
    char text[256];
    size_t used = 0;
    for (int c = 0; c < wc->nclusters && used < sizeof text - 32; c++)
        used += (size_t)snprintf(text + used, sizeof text - used, " %s:%d",
                                 wm_cluster_name(wc->cluster_global[c]), wc->cluster_size[c]);
    wm_debug(1, "communicator of %d ranks spans %d clusters:%s; lanes %d", wc->size, wc->nclusters,
             text, wc->lanes);
}

static int build(MPI_Comm comm, struct wm_comm *wc)
{
    int rc, inter;
    wc->user = comm;
    wc->shadow = wc->local = wc->leaders = MPI_COMM_NULL;
    if ((rc = PMPI_Comm_test_inter(comm, &inter)) != MPI_SUCCESS)
        return rc;
    PMPI_Comm_size(comm, &wc->size);
    PMPI_Comm_rank(comm, &wc->rank);
    if (inter || wc->size == 1) {
        wc->flat = 1;
        return MPI_SUCCESS;
    }
    char (*names)[WM_CLUSTER_NAME_MAX] = checked_calloc((size_t)wc->size, sizeof *names);
    if ((rc = exchange_identities(comm, wc, names)) != MPI_SUCCESS) {
        free(names);
        return rc;
    }
    int *first = checked_calloc((size_t)wc->size, sizeof(int));    /* lowest rank of each cluster */
    number_clusters(wc, names, first);
    if (wc->nclusters == 1)
        wc->flat = 1;
    else
        list_members(wc, names, first);
    free(first);
    free(names);
    if (wc->flat)
        return MPI_SUCCESS;
    wc->my_cluster = wc->cluster_of[wc->rank];
    wc->my_index = wc->index_of[wc->rank];
    wc->lanes = wm_settings()->lanes;
    if ((rc = split_communicators(comm, wc)) != MPI_SUCCESS)
        return rc;
    wm_rules_attach(wc);
    if (WM_DEBUG_ON(1))
        debug_layout(wc);
    return MPI_SUCCESS;
}

struct wm_comm *wm_comm_cached(MPI_Comm comm)
{
    struct wm_comm *wc;
    int flag = 0;
    if (keyval == MPI_KEYVAL_INVALID || PMPI_Comm_get_attr(comm, keyval, &wc, &flag) != MPI_SUCCESS || !flag)
        return NULL;
    return wc;
}

int wm_comm_get(MPI_Comm comm, struct wm_comm **out)
{
    int rc, flag;
    destroy_released();
    if (keyval == MPI_KEYVAL_INVALID) {
        wm_rate_read_pairs();       /* a malformed WANMPI_WAN_RATES ends the job here, not mid-run */
        rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_comm_delete, &keyval, NULL);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    struct wm_comm *wc;
    if ((rc = PMPI_Comm_get_attr(comm, keyval, &wc, &flag)) != MPI_SUCCESS)
        return rc;
    if (flag) {
        *out = wc;
        return MPI_SUCCESS;
    }
    wc = checked_calloc(1, sizeof *wc);
    if ((rc = build(comm, wc)) != MPI_SUCCESS) {
        destroy(wc);
        return rc;
    }
    if ((rc = PMPI_Comm_set_attr(comm, keyval, wc)) != MPI_SUCCESS) {
        destroy(wc);
        return rc;
    }
    pthread_mutex_lock(&lock);
    wc->next = live;
    live = wc;
    pthread_mutex_unlock(&lock);
    *out = wc;
    return MPI_SUCCESS;
}

void wm_comm_release_all(void)
{
    if (keyval == MPI_KEYVAL_INVALID)
        return;
    /* Deleting the attribute runs on_comm_delete, which moves the entry to `released`. */
    while (live) {
        struct wm_comm *wc = live;
        if (PMPI_Comm_delete_attr(wc->user, keyval) != MPI_SUCCESS || live == wc) {
            live = wc->next;        /* the MPI did not call back: detach it ourselves */
            wc->next = released;
            released = wc;
        }
    }
    destroy_released();
    PMPI_Comm_free_keyval(&keyval);
}

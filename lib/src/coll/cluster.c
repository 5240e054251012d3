#include "cluster.h"
#include "identity.h"
#include "rules.h"
#include "../common/alloc.h"
#include "../common/log.h"
#include "../common/settings.h"
#include "../pacing/rate.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FOR_MAP "a communicator's cluster map"   /* what wm_calloc's memory is for */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the per-communicator cache -------------------------------------------- */

static int keyval = MPI_KEYVAL_INVALID;
static struct wm_comm *live;        /* entries attached to a user communicator */
static struct wm_comm *released;    /* detached by MPI_Comm_free, sub-communicators not yet freed */

static void release_communicators(struct wm_comm *wc)
{
    if (wc->local != MPI_COMM_NULL)
        PMPI_Comm_free(&wc->local);
    if (wc->shadow != MPI_COMM_NULL)
        PMPI_Comm_free(&wc->shadow);
}

static void destroy(struct wm_comm *wc)
{
    release_communicators(wc);
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

/* The distinct hosts of the ranks (host_of, host_address, nhosts), so
 * that the pacing of a collective can group its sockets by host in one
 * pass (several ranks of a node share its sockets' destination). Once per
 * communicator: P x hosts comparisons at most. */
static void index_hosts(struct wm_comm *wc)
{
    wc->host_of = wm_calloc((size_t)wc->size, sizeof(int), FOR_MAP);
    wc->host_address = wm_calloc((size_t)wc->size, sizeof(uint32_t), FOR_MAP);
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

/* Numbers the clusters in order of their lowest rank: cluster_of, index_of,
 * cluster_size, cluster_global; and each rank's address. */
static void number_clusters(struct wm_comm *wc, const struct wm_identity *who)
{
    wc->cluster_of = wm_calloc((size_t)wc->size, sizeof(int), FOR_MAP);
    wc->index_of = wm_calloc((size_t)wc->size, sizeof(int), FOR_MAP);
    wc->cluster_size = wm_calloc((size_t)wc->size, sizeof(int), FOR_MAP);
    wc->cluster_global = wm_calloc((size_t)wc->size, sizeof(int), FOR_MAP);
    wc->address_of = wm_calloc((size_t)wc->size, sizeof(uint32_t), FOR_MAP);
    wc->nclusters = 0;
    for (int r = 0; r < wc->size; r++) {
        int c = 0;
        while (c < wc->nclusters && wc->cluster_global[c] != who[r].cluster)
            c++;
        if (c == wc->nclusters)
            wc->cluster_global[wc->nclusters++] = who[r].cluster;
        wc->cluster_of[r] = c;
        wc->index_of[r] = wc->cluster_size[c]++;
        wc->address_of[r] = who[r].address;
        wc->rules_differ |= who[r].rules != who[wc->rank].rules;
    }
}

/* members[c][i]: the ranks of each cluster. */
static void list_members(struct wm_comm *wc)
{
    wc->members = wm_calloc((size_t)wc->nclusters, sizeof(int *), FOR_MAP);
    wc->members[0] = wm_calloc((size_t)wc->size, sizeof(int), FOR_MAP);
    for (int c = 1; c < wc->nclusters; c++)
        wc->members[c] = wc->members[c - 1] + wc->cluster_size[c - 1];
    for (int r = 0; r < wc->size; r++)
        wc->members[wc->cluster_of[r]][wc->index_of[r]] = r;
}

/* A sub-communicator of `shadow` made of some of its ranks (`ranks`, n,
 * in that order), created only by them: nobody else waits. */
static int subset(struct wm_comm *wc, const int *ranks, int n, MPI_Comm *out)
{
    MPI_Group all, part;
    int rc = PMPI_Comm_group(wc->shadow, &all);
    if (rc != MPI_SUCCESS)
        return rc;
    if ((rc = PMPI_Group_incl(all, n, ranks, &part)) == MPI_SUCCESS) {
        rc = PMPI_Comm_create_group(wc->shadow, part, 0, out);
        PMPI_Group_free(&part);
    }
    PMPI_Group_free(&all);
    return rc;
}

/* The shadow communicator (made here unless given) and the cluster's. Only
 * the shadow (a duplicate) involves every rank and crosses the WAN; the
 * cluster's communicator is made by its ranks alone. */
static int connect(struct wm_comm *wc, MPI_Comm shadow)
{
    int rc = MPI_SUCCESS;
    if (shadow != MPI_COMM_NULL)
        wc->shadow = shadow;
    else if ((rc = PMPI_Comm_dup(wc->user, &wc->shadow)) != MPI_SUCCESS)
        return rc;
    return subset(wc, wc->members[wc->my_cluster], wc->cluster_size[wc->my_cluster], &wc->local);
}

int wm_comm_connect_dup(struct wm_comm *wc, MPI_Comm shadow)
{
    if (wc->connected) {
        if (shadow != MPI_COMM_NULL)
            PMPI_Comm_free(&shadow);
        return MPI_SUCCESS;
    }
    int rc = connect(wc, shadow);
    if (rc != MPI_SUCCESS) {
        release_communicators(wc);
        return rc;
    }
    wc->connected = 1;
    wm_debug(1, "communicator of %d ranks: its communicators made (a duplicate and one per cluster)", wc->size);
    return MPI_SUCCESS;
}

int wm_comm_connect(struct wm_comm *wc) { return wm_comm_connect_dup(wc, MPI_COMM_NULL); }

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

/* The map of `comm`: where its ranks are. No message is sent unless a rank
 * lies outside MPI_COMM_WORLD (identity.h); the communicators of ours come
 * later (wm_comm_connect), when one of our algorithms first runs on it. */
static int build(MPI_Comm comm, struct wm_comm *wc)
{
    int rc, inter, *ub, flag;
    wc->user = comm;
    wc->shadow = wc->local = MPI_COMM_NULL;
    if ((rc = PMPI_Comm_test_inter(comm, &inter)) != MPI_SUCCESS)
        return rc;
    PMPI_Comm_size(comm, &wc->size);
    PMPI_Comm_rank(comm, &wc->rank);
    if (inter || wc->size == 1) {
        wc->flat = 1;
        return MPI_SUCCESS;
    }
    struct wm_identity *who = wm_calloc((size_t)wc->size, sizeof *who, FOR_MAP);
    if ((rc = wm_identities(comm, wc->size, who)) != MPI_SUCCESS) {
        free(who);
        return rc;
    }
    number_clusters(wc, who);
    free(who);
    index_hosts(wc);
    if (wc->nclusters == 1) {
        wc->flat = 1;
        return MPI_SUCCESS;
    }
    list_members(wc);
    wc->my_cluster = wc->cluster_of[wc->rank];
    wc->my_index = wc->index_of[wc->rank];
    wc->lanes = wm_settings()->lanes;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    wc->mpi_tag_ub = flag ? *ub : 32767;
    wc->tag_ub = wc->mpi_tag_ub / 2;
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
    wc = wm_calloc(1, sizeof *wc, FOR_MAP);
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

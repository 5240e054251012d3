/* The engine of the nonblocking collectives (nb.h). Every outstanding one
 * is a `struct wm_nb` on one list, from MPI_I<coll> until the user's
 * Wait/Test has completed its request (MPI then calls free_fn). A mutex
 * guards the list: the progress thread and the program's threads may
 * advance schedules at the same time. */
#include "nb.h"
#include "../common/log.h"
#include "../common/settings.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct wm_nb {
    struct wm_sched s;
    struct wm_comm wc;          /* the user communicator's entry, with this call's tag range */
    struct wm_comm *owner;      /* the entry itself (its nb_active); NULL: the MPI's own call */
    MPI_Comm comm;
    MPI_Request request;
    int ended, rc;
    int freed;                  /* MPI has freed the request (free_fn) */
    struct wm_nb *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct wm_nb *list;      /* every one whose request is live, oldest first */
static int running;             /* of which not yet ended */

/* Slots of tags: at least MIN_SLOTS of at most SPAN tags, else none. */
#define SPAN        (1 << 20)
#define MIN_SLOTS   256
#define MIN_SPAN    1024

/* Tags per call (0: no room for nonblocking calls of ours); *slots. */
static int64_t span_of(const struct wm_comm *wc, int64_t *first, int64_t *slots)
{
    *first = (int64_t)wc->tag_ub + 1;
    int64_t room = (int64_t)wc->mpi_tag_ub - *first + 1;
    int64_t span = room / MIN_SLOTS < SPAN ? room / MIN_SLOTS : SPAN;
    if (span < MIN_SPAN)
        return 0;
    *slots = room / span;
    return span;
}

int wm_nb_room(const struct wm_comm *wc)
{
    int64_t first, slots;
    return span_of(wc, &first, &slots) > 0;
}

/* Of `slots`, the nonblocking calls' (the rest is the persistent ones'). */
static int64_t rotating(int64_t slots)
{
    return slots - slots / 4;
}

int64_t wm_nb_reserve(const struct wm_comm *wc)
{
    int64_t first, slots;
    if (span_of(wc, &first, &slots) == 0)
        return -1;
    struct wm_comm *entry = (struct wm_comm *)wc;   /* the per-communicator counters */
    return rotating(slots) + (int64_t)(entry->persist_calls++ % (unsigned)(slots - rotating(slots)));
}

struct wm_sched *wm_nb_begin(const struct wm_comm *wc, MPI_Comm comm, int64_t slot, const struct wm_comm **nbwc)
{
    int64_t first, slots, span = span_of(wc, &first, &slots);
    if (span == 0 || slot >= slots)
        return NULL;
    wm_sched_idle = wm_nb_progress;     /* blocking schedules advance ours while they wait */
    struct wm_nb *nb = calloc(1, sizeof *nb);
    if (!nb)
        wm_fatal("out of memory (nonblocking collective)");
    struct wm_comm *entry = (struct wm_comm *)wc;   /* the per-communicator counters */
    if (slot < 0)
        slot = (int64_t)(entry->nb_calls++ % (unsigned)rotating(slots));
    __atomic_add_fetch(&entry->nb_active, 1, __ATOMIC_ACQ_REL);
    nb->owner = entry;
    nb->wc = *wc;
    nb->wc.tag_ub = (int)(span - 1);
    nb->wc.next = NULL;
    nb->comm = comm;
    nb->request = MPI_REQUEST_NULL;
    wm_sched_init(&nb->s, &nb->wc, (int)(first + slot * span));
    *nbwc = &nb->wc;
    return &nb->s;
}

int wm_nb_adopt(MPI_Comm comm, MPI_Request inner, MPI_Request *request)
{
    struct wm_nb *nb = calloc(1, sizeof *nb);
    if (!nb)
        wm_fatal("out of memory (nonblocking collective)");
    nb->comm = comm;
    nb->request = MPI_REQUEST_NULL;
    nb->s.err = MPI_SUCCESS;
    wm_sched_adopt(&nb->s, inner);
    *request = inner;
    int rc = wm_nb_submit(&nb->s, MPI_SUCCESS, request);
    return rc;
}

int wm_nb_adopt_call(int rc, MPI_Comm comm, MPI_Request *request)
{
    const struct wm_settings *s = wm_settings();
    if (rc != MPI_SUCCESS || s->disabled || !s->nonblocking_ours)
        return rc;
    return wm_nb_adopt(comm, *request, request);
}

/* ---- the generalized request ---- */

static int query_fn(void *state, MPI_Status *status)
{
    struct wm_nb *nb = state;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return nb->rc;
}

/* After the user's Wait/Test completed the request (or at MPI_Finalize).
 * MPI may hold its own lock here, and the progress thread takes ours before
 * MPI's: so no lock here, only a mark; reap() frees it. */
static int free_fn(void *state)
{
    struct wm_nb *nb = state;
    __atomic_store_n(&nb->freed, 1, __ATOMIC_RELEASE);
    return MPI_SUCCESS;
}

/* Under the lock: drops the entries whose requests MPI has freed. */
static void reap(void)
{
    for (struct wm_nb **p = &list; *p;) {
        struct wm_nb *nb = *p;
        if (__atomic_load_n(&nb->freed, __ATOMIC_ACQUIRE)) {
            *p = nb->next;
            free(nb);
        } else {
            p = &nb->next;
        }
    }
}

/* Never reached: progress.c refuses MPI_Cancel of ours before the MPI sees it. */
static int cancel_fn(void *state, int complete)
{
    (void)state; (void)complete;
    return MPI_SUCCESS;
}

/* Under the lock: the schedule has ended; the request may complete. */
static void end(struct wm_nb *nb)
{
    nb->rc = wm_sched_end(&nb->s);
    nb->ended = 1;
    running--;
    if (nb->owner)
        __atomic_sub_fetch(&nb->owner->nb_active, 1, __ATOMIC_ACQ_REL);
    if (nb->rc != MPI_SUCCESS)
        wm_debug(1, "nonblocking collective failed: error %d", nb->rc);
    PMPI_Grequest_complete(nb->request);
}

int wm_nb_submit(struct wm_sched *s, int rc, MPI_Request *request)
{
    struct wm_nb *nb = (struct wm_nb *)((char *)s - offsetof(struct wm_nb, s));
    wm_sched_fail(s, rc);
    int grc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, nb, &nb->request);
    if (grc != MPI_SUCCESS) {
        if (!nb->owner) {       /* adopted: the user keeps the MPI's request (*request) */
            wm_sched_end(s);
            free(nb);
            return MPI_SUCCESS;
        }
        /* no request to give: finish here (a failed schedule ends at once) */
        while (!wm_sched_step(s))
            wm_nb_progress();
        wm_sched_end(s);
        if (nb->owner)
            __atomic_sub_fetch(&nb->owner->nb_active, 1, __ATOMIC_ACQ_REL);
        free(nb);
        return grc;
    }
    *request = nb->request;
    pthread_mutex_lock(&lock);
    reap();
    struct wm_nb **tail = &list;
    while (*tail)
        tail = &(*tail)->next;
    *tail = nb;
    running++;
    if (wm_sched_step(s))       /* nothing to wait for (an empty message), or failed */
        end(nb);
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    return MPI_SUCCESS;
}

int wm_nb_pending(void)
{
    return __atomic_load_n(&running, __ATOMIC_RELAXED) > 0;
}

/* Advances every outstanding schedule once; returns how many operations
 * completed (0 also when another thread is at it). */
static int advance(void)
{
    if (!wm_nb_pending() || pthread_mutex_trylock(&lock) != 0)
        return 0;               /* nothing to do, or another thread is at it */
    reap();
    int moved = 0;
    for (struct wm_nb *nb = list; nb; nb = nb->next)
        if (!nb->ended) {
            int done = wm_sched_step(&nb->s);
            moved += nb->s.completed;
            if (done) {
                end(nb);
                moved++;
            }
        }
    pthread_mutex_unlock(&lock);
    return moved;
}

void wm_nb_progress(void)
{
    advance();
}

MPI_Comm wm_nb_owner(MPI_Request request)
{
    MPI_Comm comm = MPI_COMM_NULL;
    if (request == MPI_REQUEST_NULL)
        return comm;
    pthread_mutex_lock(&lock);
    for (struct wm_nb *nb = list; nb; nb = nb->next)
        if (nb->request == request && !__atomic_load_n(&nb->freed, __ATOMIC_ACQUIRE))
            comm = nb->comm;
    pthread_mutex_unlock(&lock);
    return comm;
}

/* ---- the progress thread (WANMPI_PROGRESS=thread) ---- */

/* The thread advances every 200 us while operations complete, and backs
 * off to 2 ms while nothing does (a WAN round trip is 2-60 ms): polling at
 * a fixed 200 us cost 8 ranks on 2 cores more CPU than it saved (MPICH,
 * docs/benchmarks.md "What limits it"). */
#define THREAD_PERIOD_NS      200000L
#define THREAD_PERIOD_MAX_NS  2000000L

static pthread_t thread;
static int thread_on, stopping;

static void *progress_loop(void *arg)
{
    (void)arg;
    long period = THREAD_PERIOD_NS;
    pthread_mutex_lock(&lock);
    while (!stopping) {
        if (running == 0) {
            pthread_cond_wait(&wake, &lock);
            period = THREAD_PERIOD_NS;
            continue;
        }
        pthread_mutex_unlock(&lock);
        if (advance() > 0)
            period = THREAD_PERIOD_NS;
        else if ((period *= 2) > THREAD_PERIOD_MAX_NS)
            period = THREAD_PERIOD_MAX_NS;
        struct timespec t = { 0, period };
        nanosleep(&t, NULL);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

void wm_nb_thread_start(void)
{
    int provided = MPI_THREAD_SINGLE;
    if (!wm_settings()->progress_thread || thread_on)
        return;
    PMPI_Query_thread(&provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        wm_debug(1, "WANMPI_PROGRESS=thread: the MPI gave thread level %d, not MPI_THREAD_MULTIPLE; "
                    "nonblocking collectives advance inside MPI calls only", provided);
        return;
    }
    if (pthread_create(&thread, NULL, progress_loop, NULL) != 0) {
        wm_debug(1, "WANMPI_PROGRESS=thread: could not start the progress thread");
        return;
    }
    thread_on = 1;
    wm_debug(1, "WANMPI_PROGRESS=thread: progress thread started");
}

void wm_nb_thread_stop(void)
{
    if (!thread_on)
        return;
    pthread_mutex_lock(&lock);
    stopping = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    thread_on = 0;
}

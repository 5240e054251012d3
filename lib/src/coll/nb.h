/* Nonblocking collectives of ours (docs/nonblocking.md): the same schedules
 * as the blocking calls, started by MPI_Ibcast, MPI_Iallreduce, ... and
 * advanced step by step until done. The user holds a generalized request
 * (MPI_Grequest_start), which works in any MPI_Wait/Test* beside other
 * requests; progress.c advances the schedules inside those calls (and in a
 * thread with WANMPI_PROGRESS=thread).
 *
 * Tags: a nonblocking call runs on the communicator's shadow like a blocking
 * one, but in the upper half of the tag space (cluster.h), cut into slots of
 * `span` tags; the k-th nonblocking call of ours on a communicator takes slot
 * k mod (the first three quarters of the slots). Collectives start in the
 * same order on every rank, so every rank picks the same slot, and calls
 * outstanding at the same time never share tags unless 192 or more of them
 * are. The last quarter is the persistent collectives': the k-th one created
 * on a communicator (their inits come in the same order on every rank, their
 * starts need not) takes slot k mod (a quarter) for all its rounds, so two
 * share tags only if 64 or more are created on one communicator, and then
 * only the rounds of two of them started at the same time would meet. */
#ifndef WANMPI_NB_H
#define WANMPI_NB_H

#include <mpi.h>
#include <stdint.h>

#include "cluster.h"
#include "sched.h"

/* Whether nonblocking calls of ours fit in this communicator's tag space
 * (the same answer on every rank); else they go to the MPI's own. */
int wm_nb_room(const struct wm_comm *wc);
/* A schedule for a new nonblocking collective on wc (user communicator
 * `comm`), and in *nbwc the communicator entry its algorithm must use (a
 * copy with the call's tag range). NULL without wm_nb_room. */
struct wm_sched *wm_nb_begin(const struct wm_comm *wc, MPI_Comm comm, int64_t slot, const struct wm_comm **nbwc);
/* A persistent collective's slot (`slot` of wm_nb_begin for its rounds; -1
 * there: the next of the nonblocking calls'), at its init; wm_nb_room first. */
int64_t wm_nb_reserve(const struct wm_comm *wc);
/* Hands the schedule (filled by the algorithm; rc: what filling it
 * returned) to the engine and gives the user its request. */
int wm_nb_submit(struct wm_sched *s, int rc, MPI_Request *request);

/* The MPI's own nonblocking collective on `comm`, started with request
 * `inner`, held by the engine like ours: *request becomes a request of ours
 * (so MPI_Request_free and MPI_Cancel are refused alike, and the progress
 * thread advances it too). If that fails, *request is `inner`. */
int wm_nb_adopt(MPI_Comm comm, MPI_Request inner, MPI_Request *request);
/* After the MPI's own nonblocking call returned rc with its request in
 * *request: the engine holds it where nonblocking calls of ours are on. */
int wm_nb_adopt_call(int rc, MPI_Comm comm, MPI_Request *request);

/* Advances every outstanding schedule once; cheap when there is none. */
void wm_nb_progress(void);
/* Whether any schedule is outstanding. */
int wm_nb_pending(void);
/* The user communicator of an active nonblocking collective of ours whose
 * request this is (its request not yet completed by a Wait/Test), or
 * MPI_COMM_NULL. */
MPI_Comm wm_nb_owner(MPI_Request request);

/* Starts the progress thread if WANMPI_PROGRESS=thread and the MPI runs
 * MPI_THREAD_MULTIPLE; stops it (before MPI_Finalize). */
void wm_nb_thread_start(void);
void wm_nb_thread_stop(void);

#endif

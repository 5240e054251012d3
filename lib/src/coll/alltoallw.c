/* MPI_Alltoallw on the all-to-all schedule (alltoall.c): every peer's block
 * has its own datatype, on both sides, at a displacement in bytes.
 *
 * Both sides of a pair must cut the block alike, but neither knows the
 * other's datatype, only the block's size in bytes, which MPI requires to
 * agree. So the cut is by bytes:
 *
 *   block bytes          travels as
 *   0                    nothing
 *   under WANMPI_CHUNK,  one message, in the user's (count, datatype)
 *   or past INT_MAX
 *   the others           pieces of WANMPI_CHUNK bytes (MPI_BYTE, under the
 *                        eager limit like every other schedule's), the last
 *                        one shorter (empty if need be): straight from
 *                        (into) the user's buffer where the datatype is
 *                        contiguous, else packed before the sends (unpacked
 *                        by the end hook, after the receives)
 *
 * Every block ends with a message shorter than a piece, and a receiver
 * takes one piece at a time (wm_a2a_block.ends_short): where a sender and
 * its receiver disagree on a block's size (an erroneous program), the
 * receiver stops at the sender's last message (the MPI's own then succeeds
 * too) or sees a truncated message (an error, as from the MPI's own), and
 * never waits for a message that does not come. Only a block that one side
 * leaves empty and the other does not is not detected (no message at all;
 * the MPI's own waits as well).
 *
 * Bytes travel as bytes: a homogeneous job, as for the broadcast and the
 * allgather. The blocking call paces its sockets like the alltoallv, by the
 * bytes it sends to each rank. */
#include "coll.h"
#include "sched.h"
#include "../common/log.h"

#include <stdint.h>
#include <stdlib.h>

/* A block that travels packed: its bytes, and (receives) where they go. */
struct packed {
    char *data;
    int bytes;
    int unpack;                 /* a receive: unpack into (buf, count, type) at the end */
    char *buf;
    int count;
    MPI_Datatype type;
};

struct alltoallw {
    MPI_Comm comm;              /* for MPI_Pack/Unpack: the shadow */
    struct packed *packed;
    int npacked;
    struct wm_a2a_block *blocks;    /* [2 x size]: the sends, then the receives (read until the end) */
};

static int end(void *state, int rc)
{
    struct alltoallw *w = state;
    for (int i = 0; i < w->npacked; i++) {
        struct packed *p = &w->packed[i];
        int pos = 0;
        if (p->unpack && rc == MPI_SUCCESS)
            rc = PMPI_Unpack(p->data, p->bytes, &pos, p->buf, p->count, p->type, w->comm);
        free(p->data);
    }
    free(w->packed);
    free(w->blocks);
    free(w);
    return rc;
}

/* Bytes per piece of a block of `bytes`: WANMPI_CHUNK, more if the pieces
 * would outnumber the tags (a function of the block's size alone, so that
 * both sides of a pair agree). */
static int piece_bytes(const struct wm_comm *wc, int64_t bytes)
{
    int64_t piece = (int64_t)wm_chunk_bytes(), tags = wc->tag_ub > 0 ? wc->tag_ub : 32767;
    if (bytes / piece >= tags)
        piece = bytes / tags + 1;
    return piece > INT32_MAX ? INT32_MAX : (int)piece;
}

/* The block of `count` elements of `type` at `buf`, as the schedule moves it. */
static int describe(struct alltoallw *w, const struct wm_comm *wc, int send, char *buf, int count,
                    MPI_Datatype type, struct wm_a2a_block *b)
{
    struct wm_layout l;
    int rc = wm_layout(type, count, &l);
    if (rc != MPI_SUCCESS)
        return rc;
    int64_t bytes = (int64_t)count * wm_type_bytes(type);
    if (bytes == 0) {           /* zero elements, or elements of no data: no message on either side */
        *b = (struct wm_a2a_block){ buf, 0, 1, type, l.extent, 1 };
        return MPI_SUCCESS;
    }
    if (bytes < (int64_t)wm_chunk_bytes() || bytes > INT32_MAX) {
        *b = (struct wm_a2a_block){ buf, count, INT32_MAX, type, l.extent, 1 };
        return MPI_SUCCESS;
    }
    int piece = piece_bytes(wc, bytes);
    if (l.contiguous) {
        *b = (struct wm_a2a_block){ buf + l.true_lb, (int)bytes, piece, MPI_BYTE, 1, 1 };
        return MPI_SUCCESS;
    }
    struct packed *p = &w->packed[w->npacked];
    *p = (struct packed){ malloc((size_t)bytes), (int)bytes, !send, buf, count, type };
    if (!p->data)
        return MPI_ERR_NO_MEM;
    w->npacked++;
    int pos = 0;
    if (send && (rc = PMPI_Pack(buf, count, type, p->data, (int)bytes, &pos, w->comm)) != MPI_SUCCESS)
        return rc;
    *b = (struct wm_a2a_block){ p->data, (int)bytes, piece, MPI_BYTE, 1, 1 };
    return MPI_SUCCESS;
}

int wm_alltoallw_scheduled(struct wm_sched *s, const struct wm_comm *wc, const void *sendbuf,
                           const int *scounts, const int *sdispls, const MPI_Datatype *stypes, void *recvbuf,
                           const int *rcounts, const int *rdispls, const MPI_Datatype *rtypes)
{
    int n = wc->size;
    struct alltoallw *w = calloc(1, sizeof *w);
    if (w) {
        w->packed = malloc((size_t)n * 2 * sizeof *w->packed);
        w->blocks = malloc((size_t)n * 2 * sizeof *w->blocks);
    }
    if (!w || !w->packed || !w->blocks) {
        if (w) {
            free(w->packed);
            free(w->blocks);
        }
        free(w);
        return wm_sched_fail(s, MPI_ERR_NO_MEM);
    }
    struct wm_a2a_block *send = w->blocks, *recv = send + n;
    w->comm = wc->shadow;
    wm_sched_at_end(s, end, w);         /* frees w, also after a failure below */
    int rc = MPI_SUCCESS;
    for (int p = 0; p < n && rc == MPI_SUCCESS; p++) {
        rc = describe(w, wc, 0, (char *)recvbuf + rdispls[p], rcounts[p], rtypes[p], &recv[p]);
        if (rc == MPI_SUCCESS)
            rc = describe(w, wc, 1, (char *)sendbuf + sdispls[p], scounts[p], stypes[p], &send[p]);
    }
    if (rc == MPI_SUCCESS)
        rc = wm_alltoall_blocks(s, wc, send, recv);
    return wm_sched_fail(s, rc);
}

int wm_alltoallw_run(const struct wm_comm *wc, const void *sendbuf, const int *scounts, const int *sdispls,
                     const MPI_Datatype *stypes, void *recvbuf, const int *rcounts, const int *rdispls,
                     const MPI_Datatype *rtypes)
{
    double *bytes = malloc((size_t)wc->size * sizeof *bytes);
    if (!bytes)
        return MPI_ERR_NO_MEM;
    for (int p = 0; p < wc->size; p++)
        bytes[p] = (double)scounts[p] * (double)wm_type_bytes(stypes[p]);
    struct wm_pacing pc;
    int rc = wm_alltoall_pace(&pc, wc, bytes, wm_received_from(wc, rcounts, 0), 1);
    free(bytes);
    if (rc == MPI_SUCCESS) {
        struct wm_sched s;
        wm_sched_init(&s, wc, 0);
        wm_alltoallw_scheduled(&s, wc, sendbuf, scounts, sdispls, stypes, recvbuf, rcounts, rdispls, rtypes);
        rc = wm_sched_run(&s);
    }
    wm_alltoall_unpace(&pc);
    return rc;
}

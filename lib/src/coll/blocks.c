/* Where each rank's block of a v-collective (allgather(v), gather(v),
 * scatter(v)) lies, and moving blocks between a user buffer and the packed
 * bytes that travel: shared by allgather.c and gather.c. */
#include "coll.h"
#include "../common/log.h"

#include <stdlib.h>

void *wm_block_in(const void *buf, const int *displs, const struct wm_layout *l, int b)
{
    return (char *)buf + (MPI_Aint)displs[b] * l->extent;
}

int wm_must_pack(const struct wm_layout *l)
{
    return !(l->true_extent == l->size && l->extent == l->size);
}

int64_t wm_blocks(int n, const void *buf, const int *counts, const int *displs, const struct wm_layout *l,
                  int packed, int64_t *at, int64_t *len, char **data)
{
    int64_t total = 0;
    for (int b = 0; b < n; b++) {
        len[b] = (int64_t)counts[b] * l->size;
        at[b] = packed ? total : (int64_t)displs[b] * l->extent;
        total += len[b];
    }
    /* in place, buf may be NULL: MPI_BOTTOM, or no data at all (MPI_Gather(NULL, 0, ...)) */
    *data = packed ? malloc((size_t)(total ? total : 1)) : (char *)buf + l->true_lb;
    if (packed && !*data)
        wm_fatal("out of memory: %lld bytes for a collective's blocks", (long long)total);
    return total;
}

int wm_own_block(const struct wm_comm *wc, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int *recvcounts, const int *displs, MPI_Datatype recvtype,
                 const struct wm_layout *rl, char *data, const int64_t *at, const int64_t *len, int packed)
{
    int me = wc->rank, pos = 0;
    void *mine = wm_block_in(recvbuf, displs, rl, me);
    if (len[me] == 0)
        return MPI_SUCCESS;
    if (sendbuf == MPI_IN_PLACE)
        return packed ? PMPI_Pack(mine, recvcounts[me], recvtype, data + at[me], (int)len[me], &pos, wc->shadow)
                      : MPI_SUCCESS;
    if (packed)
        return PMPI_Pack(sendbuf, sendcount, sendtype, data + at[me], (int)len[me], &pos, wc->shadow);
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, 0, 0, mine, recvcounts[me], recvtype, 0, 0,
                         MPI_COMM_SELF, MPI_STATUS_IGNORE);
}

/* Packs (to_packed) or unpacks every block between buf and data. */
static int move_blocks(const struct wm_comm *wc, int to_packed, char *data, const int64_t *at,
                       const int64_t *len, const void *buf, const int *counts, const int *displs,
                       MPI_Datatype type, const struct wm_layout *l)
{
    int rc = MPI_SUCCESS;
    for (int b = 0; b < wc->size && rc == MPI_SUCCESS; b++) {
        int pos = 0;
        if (len[b] == 0)
            continue;
        if (to_packed)
            rc = PMPI_Pack(wm_block_in(buf, displs, l, b), counts[b], type, data + at[b], (int)len[b], &pos,
                           wc->shadow);
        else
            rc = PMPI_Unpack(data + at[b], (int)len[b], &pos, wm_block_in(buf, displs, l, b), counts[b], type,
                             wc->shadow);
    }
    return rc;
}

int wm_unpack_blocks(const struct wm_comm *wc, char *data, const int64_t *at, const int64_t *len, void *recvbuf,
                     const int *recvcounts, const int *displs, MPI_Datatype recvtype, const struct wm_layout *rl)
{
    return move_blocks(wc, 0, data, at, len, recvbuf, recvcounts, displs, recvtype, rl);
}

int wm_pack_blocks(const struct wm_comm *wc, char *data, const int64_t *at, const int64_t *len, const void *sendbuf,
                   const int *sendcounts, const int *displs, MPI_Datatype sendtype, const struct wm_layout *sl)
{
    return move_blocks(wc, 1, data, at, len, sendbuf, sendcounts, displs, sendtype, sl);
}

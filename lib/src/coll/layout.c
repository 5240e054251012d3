/* Datatype layout, temporary buffers and the lane / piece arithmetic shared by
 * the algorithms. */
#include "coll.h"
#include "../common/log.h"
#include "../common/settings.h"

#include <stdlib.h>
#include <string.h>

int wm_layout(MPI_Datatype type, int count, struct wm_layout *l)
{
    int rc;
    MPI_Aint lb;
    if ((rc = PMPI_Type_size(type, &l->size)) != MPI_SUCCESS)
        return rc;
    if ((rc = PMPI_Type_get_extent(type, &lb, &l->extent)) != MPI_SUCCESS)
        return rc;
    if ((rc = PMPI_Type_get_true_extent(type, &l->true_lb, &l->true_extent)) != MPI_SUCCESS)
        return rc;
    l->contiguous = l->true_extent == l->size && (count <= 1 || l->extent == l->size);
    return MPI_SUCCESS;
}

int64_t wm_type_bytes(MPI_Datatype type)
{
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS)
        return -1;
#if MPI_VERSION >= 4
    if (size == MPI_UNDEFINED) {        /* more than INT_MAX bytes: a type made for a large-count call */
        MPI_Count large = 0;
        return PMPI_Type_size_c(type, &large) == MPI_SUCCESS ? (int64_t)large : -1;
    }
#endif
    return size < 0 ? -1 : size;
}

void *wm_alloc_elements(const struct wm_layout *l, int64_t count, void **base)
{
    size_t bytes = count > 0 ? (size_t)l->true_extent + (size_t)(count - 1) * (size_t)l->extent : 1;
    *base = malloc(bytes ? bytes : 1);
    if (!*base)
        wm_fatal("out of memory: %zu bytes for a collective's temporary buffer", bytes);
    return (char *)*base - l->true_lb;
}

int wm_copy_elements(void *dst, const void *src, int count, MPI_Datatype type, const struct wm_layout *l)
{
    if (count <= 0 || dst == src)
        return MPI_SUCCESS;
    if (l->contiguous) {
        memcpy((char *)dst + l->true_lb, (const char *)src + l->true_lb, (size_t)count * (size_t)l->size);
        return MPI_SUCCESS;
    }
    return PMPI_Sendrecv(src, count, type, 0, 0, dst, count, type, 0, 0, MPI_COMM_SELF,
                         MPI_STATUS_IGNORE);
}

int wm_lane_rank(const struct wm_comm *wc, int c, int j)
{
    int lanes = wm_lanes(wc, c);
    return wc->members[c][(int)((int64_t)j * wc->cluster_size[c] / lanes)];
}

size_t wm_chunk_bytes(void)
{
    return wm_settings()->chunk;
}

int64_t wm_fill_chunk(int64_t total, int ranks, int share)
{
    int64_t chunk = (int64_t)wm_chunk_bytes(), fill = total / (share * (int64_t)(ranks > 1 ? ranks - 1 : 1));
    if (fill < 8192)
        fill = 8192;
    return fill < chunk ? fill : chunk;
}

int wm_window_pieces(long long piece_bytes)
{
    long long window = wm_settings()->window, pieces = window / (piece_bytes > 0 ? piece_bytes : 1);
    if (window == 0)
        return 0;
    return pieces < 2 ? 2 : pieces > (1 << 20) ? 1 << 20 : (int)pieces;
}

int wm_link_times(int64_t bytes, double *nic_s, double *wan_s, double *delay_s)
{
    const struct wm_settings *st = wm_settings();
    if (st->nic_rate <= 0 || st->wan_delay_us < 0)
        return 0;
    *nic_s = (double)bytes * 8.0 / st->nic_rate;
    *wan_s = st->wan_rate > 0 ? (double)bytes * 8.0 / st->wan_rate : 0;
    *delay_s = (double)st->wan_delay_us * 1e-6;
    return 1;
}

int64_t wm_pieces(const struct wm_comm *wc, int64_t total, int64_t chunk, int64_t groups,
                  int64_t *per_piece)
{
    if (chunk < 1)
        chunk = 1;
    /* groups * pieces-per-group must stay below the tag bound and a size that
     * keeps the bookkeeping small */
    int64_t limit = wc->tag_ub < (1 << 20) ? wc->tag_ub : (1 << 20);
    int64_t per_group_max = limit / (groups > 0 ? groups : 1);
    if (per_group_max < 1)
        per_group_max = 1;
    int64_t pieces = (total + chunk - 1) / chunk;
    if (pieces > per_group_max)
        chunk = (total + per_group_max - 1) / per_group_max;
    *per_piece = chunk;
    return total > 0 ? (total + chunk - 1) / chunk : 0;
}

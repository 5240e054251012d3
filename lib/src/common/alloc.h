/* Allocation that cannot fail quietly: out of memory ends the process with
 * a message naming what the memory was for. */
#ifndef WANMPI_ALLOC_H
#define WANMPI_ALLOC_H

#include <stddef.h>

/* calloc(n, size), n 0 counting as 1 (a valid pointer either way); on
 * failure wm_fatal "out of memory (N bytes for WHAT)". */
void *wm_calloc(size_t n, size_t size, const char *what);

#endif

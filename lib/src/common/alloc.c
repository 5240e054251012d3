/* Allocation that cannot fail quietly (alloc.h). */
#include "alloc.h"
#include "log.h"

#include <stdlib.h>

void *wm_calloc(size_t n, size_t size, const char *what)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        wm_fatal("out of memory (%zu bytes for %s)", n * size, what);
    return p;
}

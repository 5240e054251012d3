/* libwanshim's diagnostics: "wanshim[pid]: ..." lines on stderr (one
 * write(2) each, lib/src/common/log_line.c), shown by WANMPI_SHIM_DEBUG. */
#include "shim.h"
#include "../common/log_line.h"
#include "../common/settings.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int ws_debug;

void ws_log(const char *fmt, ...)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "wanshim[%d]", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    wm_log_vline(prefix, fmt, ap);
    va_end(ap);
}

/* The debug level is read when the library is loaded, so that level 2 also
 * shows the calls made before the first connect; ws_init (init.c) checks the
 * value and turns the shim off if it is bad. */
__attribute__((constructor)) static void read_debug_level(void)
{
    const char *v = getenv(WM_ENV_SHIM_DEBUG);
    if (v && v[0] >= '0' && v[0] <= '2' && v[1] == 0)
        ws_debug = v[0] - '0';
}

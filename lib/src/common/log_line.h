/* One diagnostic line on stderr, MPI-free: the bottom of both libraries'
 * logging (libwanmpi's wm_fatal/wm_debug in log.h, libwanshim's ws_log). */
#ifndef WANMPI_LOG_LINE_H
#define WANMPI_LOG_LINE_H

#include <stdarg.h>

#if defined(__GNUC__)
#define WM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WM_PRINTF(a, b)
#endif

/* Writes "<prefix>: <message>\n" to stderr in one write(2), so that lines of
 * different ranks and threads never mix; long messages are cut. errno is
 * left as it was. */
void wm_log_vline(const char *prefix, const char *fmt, va_list ap) WM_PRINTF(2, 0);

#endif

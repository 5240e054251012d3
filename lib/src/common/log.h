/* libwanmpi's diagnostics. Nothing is printed unless WANMPI_DEBUG asks for it,
 * except a fatal configuration error, which ends the job with a message
 * naming it. wm_fatal (fatal.c) sits below the settings, which report bad
 * values with it; wm_debug (log.c) above them, since its level is one. */
#ifndef WANMPI_LOG_H
#define WANMPI_LOG_H

#include "log_line.h"
#include "settings.h"

/* Prints "wanmpi: <message>" to stderr and aborts the MPI job. */
void wm_fatal(const char *fmt, ...) WM_PRINTF(1, 2) __attribute__((noreturn));

/* Prints "wanmpi: <message>" to stderr, always (a problem the job survives). */
void wm_warn(const char *fmt, ...) WM_PRINTF(1, 2);

/* Prints "wanmpi[rank]: <message>" to stderr when WANMPI_DEBUG >= level. */
void wm_debug(int level, const char *fmt, ...) WM_PRINTF(2, 3);

#define WM_DEBUG_ON(level) (wm_settings()->debug >= (level))

#endif

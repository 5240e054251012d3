#include "log_line.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

void wm_log_vline(const char *prefix, const char *fmt, va_list ap)
{
    int saved = errno;
    char line[1152];
    int n = snprintf(line, sizeof line, "%s: ", prefix);
    if (n < 0 || n > (int)sizeof line - 2)
        n = 0;
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m > 0)
        n += m;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
    errno = saved;
}

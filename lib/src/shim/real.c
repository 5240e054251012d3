/* The real socket calls, next after the shim in the lookup order. Darshan's
 * forward declaration: a pointer to the real function, resolved lazily with
 * dlsym(RTLD_NEXT). A missing symbol is fatal: a shim that cannot call the
 * real function cannot do anything correct. The wrappers (wrappers.c) call
 * these after their own work; the shim's parts call them for their own
 * sockets (calling the wrappers would classify, relay and log the shim's own
 * connection to a relay). */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <stdlib.h>

#define WS_FORWARD_DECL(name, ret, args) static ret(*real_##name) args
#define WS_MAP_OR_FAIL(name)                                                       \
    do {                                                                           \
        if (!__atomic_load_n(&real_##name, __ATOMIC_ACQUIRE))                      \
            __atomic_store_n(&real_##name, (__typeof__(real_##name))resolve(#name), \
                             __ATOMIC_RELEASE);                                    \
    } while (0)

static void *resolve(const char *name)
{
    void *real = dlsym(RTLD_NEXT, name);
    if (!real) {
        const char *why = dlerror();
        ws_log("cannot find the real %s() (dlsym: %s); aborting", name, why ? why : "not found");
        abort();
    }
    return real;
}

WS_FORWARD_DECL(connect, int, (int, const struct sockaddr *, socklen_t));
WS_FORWARD_DECL(accept, int, (int, struct sockaddr *, socklen_t *));
WS_FORWARD_DECL(accept4, int, (int, struct sockaddr *, socklen_t *, int));
WS_FORWARD_DECL(close, int, (int));
WS_FORWARD_DECL(dup, int, (int));
WS_FORWARD_DECL(dup2, int, (int, int));
WS_FORWARD_DECL(dup3, int, (int, int, int));
WS_FORWARD_DECL(getpeername, int, (int, struct sockaddr *, socklen_t *));
WS_FORWARD_DECL(getsockopt, int, (int, int, int, void *, socklen_t *));

int ws_real_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    WS_MAP_OR_FAIL(connect);
    return real_connect(fd, addr, len);
}

int ws_real_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    WS_MAP_OR_FAIL(accept);
    return real_accept(fd, addr, len);
}

int ws_real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    WS_MAP_OR_FAIL(accept4);
    return real_accept4(fd, addr, len, flags);
}

int ws_real_close(int fd)
{
    WS_MAP_OR_FAIL(close);
    return real_close(fd);
}

int ws_real_dup(int oldfd)
{
    WS_MAP_OR_FAIL(dup);
    return real_dup(oldfd);
}

int ws_real_dup2(int oldfd, int newfd)
{
    WS_MAP_OR_FAIL(dup2);
    return real_dup2(oldfd, newfd);
}

int ws_real_dup3(int oldfd, int newfd, int flags)
{
    WS_MAP_OR_FAIL(dup3);
    return real_dup3(oldfd, newfd, flags);
}

int ws_real_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
    WS_MAP_OR_FAIL(getpeername);
    return real_getpeername(fd, addr, len);
}

int ws_real_getsockopt(int fd, int level, int name, void *value, socklen_t *len)
{
    WS_MAP_OR_FAIL(getsockopt);
    return real_getsockopt(fd, level, name, value, len);
}

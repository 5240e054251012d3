/* The LD_PRELOAD wrappers. Every wrapper has the same shape (after Darshan's
 * darshan-posix.c): resolve the real function, call it, record what happened
 * while errno is saved, restore errno and return the real result unchanged.
 *
 * Which calls, and why these (measured with WANMPI_SHIM_DEBUG=2 and the
 * libraries' imported symbols, docs/libwanshim.md):
 *   connect           Open MPI's TCP BTL and libfabric's tcp provider open
 *                     their data connections with a non-blocking connect
 *   accept, accept4   the other end of those (both MPIs call accept; accept4
 *                     for other programs)
 *   close             forget the socket
 *   dup, dup2, dup3   a WAN socket under a second number (MPICH imports dup2)
 * Sockets are classified from the address given to connect and from
 * getpeername after accept, so a socket's creation (socket(), bind()) needs no
 * wrapper. */
#define _GNU_SOURCE
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Darshan's forward declaration: a pointer to the real function, resolved
 * lazily with dlsym(RTLD_NEXT). A missing symbol is fatal: a shim that cannot
 * call the real function cannot do anything correct. */
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

static const char *errno_name(int ret, int err)
{
    if (ret >= 0)
        return "";
    const char *name = strerrorname_np(err);
    return name ? name : "?";
}

WS_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    WS_MAP_OR_FAIL(connect);
    enum ws_state state = ws_init();
    /* Where the connection goes: always `addr` for now. Relaying (a later
     * issue) decides here, from ws_peer_cluster(addr), to connect to the
     * local relay instead and send it a preamble naming `addr`. */
    int ret = real_connect(fd, addr, len);
    int saved = errno;
    if (state == WS_ACTIVE && (ret == 0 || saved == EINPROGRESS || saved == EINTR))
        ws_socket_connected(fd, addr, len, "connected to");
    if (ws_debug >= 2) {
        char where[80] = "(unreadable)";     /* EFAULT: the kernel could not read it either */
        if (ret == 0 || saved != EFAULT)
            ws_format_address(addr, len, where, sizeof where);
        ws_log("connect(%d, %s) = %d %s", fd, where, ret, errno_name(ret, saved));
    }
    errno = saved;
    return ret;
}

/* The new socket's peer decides. getpeername is the real one: when relaying
 * comes, the shim's own getpeername will report the original source instead. */
static void accepted(int listener, int fd, const char *call)
{
    enum ws_state state = ws_init();
    if (state != WS_ACTIVE && ws_debug < 2)
        return;
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0)
        len = 0;
    if (state == WS_ACTIVE && len > 0)
        ws_socket_connected(fd, (struct sockaddr *)&peer, len, "accepted from");
    if (ws_debug >= 2) {
        char where[80];
        ws_log("%s(%d) = %d from %s", call, listener, fd,
               ws_format_address(len ? (struct sockaddr *)&peer : NULL, len, where, sizeof where));
    }
}

WS_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    WS_MAP_OR_FAIL(accept);
    int ret = real_accept(fd, addr, len);
    int saved = errno;
    if (ret >= 0)
        accepted(fd, ret, "accept");
    else if (ws_debug >= 2 && saved != EAGAIN && saved != EWOULDBLOCK)
        ws_log("accept(%d) = -1 %s", fd, errno_name(ret, saved));
    errno = saved;
    return ret;
}

WS_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    WS_MAP_OR_FAIL(accept4);
    int ret = real_accept4(fd, addr, len, flags);
    int saved = errno;
    if (ret >= 0)
        accepted(fd, ret, "accept4");
    else if (ws_debug >= 2 && saved != EAGAIN && saved != EWOULDBLOCK)
        ws_log("accept4(%d) = -1 %s", fd, errno_name(ret, saved));
    errno = saved;
    return ret;
}

WS_EXPORT int close(int fd)
{
    WS_MAP_OR_FAIL(close);
    int socket = 0;
    if (ws_debug >= 2) {            /* only sockets: every file's close would drown the log */
        int saved = errno;
        struct stat st;
        socket = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
        errno = saved;
    }
    /* Forget first: once the number is closed another thread may reuse it. */
    ws_socket_closing(fd);
    int ret = real_close(fd);
    if (socket) {
        int saved = errno;
        ws_log("close(%d) = %d %s", fd, ret, errno_name(ret, saved));
        errno = saved;
    }
    return ret;
}

static int duplicated(const char *call, int oldfd, int ret)
{
    int saved = errno;
    if (ret >= 0)
        ws_socket_duplicated(oldfd, ret);
    if (ws_debug >= 2)
        ws_log("%s(%d) = %d %s", call, oldfd, ret, errno_name(ret, saved));
    errno = saved;
    return ret;
}

WS_EXPORT int dup(int oldfd)
{
    WS_MAP_OR_FAIL(dup);
    return duplicated("dup", oldfd, real_dup(oldfd));
}

WS_EXPORT int dup2(int oldfd, int newfd)
{
    WS_MAP_OR_FAIL(dup2);
    return duplicated("dup2", oldfd, real_dup2(oldfd, newfd));
}

WS_EXPORT int dup3(int oldfd, int newfd, int flags)
{
    WS_MAP_OR_FAIL(dup3);
    return duplicated("dup3", oldfd, real_dup3(oldfd, newfd, flags));
}

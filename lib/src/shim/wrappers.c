/* The LD_PRELOAD wrappers. Every wrapper has the same shape (after Darshan's
 * darshan-posix.c): resolve the real function, call it, record what happened
 * while errno is saved, restore errno and return the real result unchanged.
 *
 * Which calls, and why these (measured with WANMPI_SHIM_DEBUG=2 and the
 * libraries' imported symbols, docs/libwanshim.md):
 *   connect           Open MPI's TCP BTL and libfabric's tcp provider open
 *                     their data connections with a non-blocking connect;
 *                     with relays, one to another cluster goes to a relay
 *   accept, accept4   the other end of those (both MPIs call accept; accept4
 *                     for other programs); a connection from a relay has its
 *                     delivery preamble stripped
 *   getpeername       a relayed socket's peer is the original one (MPICH
 *                     asks right after accept(fd, NULL, NULL)); behind 1:1
 *                     NAT, the private address of a public one (nat.c)
 *   getsockopt        SO_ERROR of a non-blocking relayed connect that failed
 *   close             forget the socket
 *   dup, dup2, dup3   a WAN socket under a second number (MPICH imports dup2)
 * Sockets are classified from the address given to connect and from
 * getpeername after accept, so a socket's creation (socket(), bind()) needs no
 * wrapper. Relaying is relay.c; these wrappers only call it. The real
 * functions are resolved in real.c. */
#define _GNU_SOURCE
#include "shim.h"
#include "relay.h"
#include "../common/network.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *errno_name(int ret, int err)
{
    if (ret >= 0)
        return "";
    const char *name = strerrorname_np(err);
    return name ? name : "?";
}

WS_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    enum ws_state state = ws_init();
    int ret;
    /* With relays, a TCP connect to another cluster goes to a relay of this
     * cluster instead: relay.c does it all and says what the application sees. */
    if (state == WS_ACTIVE && ws_relay_connect(fd, addr, len, &ret)) {
        if (ws_debug >= 2) {
            int saved = errno;
            char where[80];
            ws_log("connect(%d, %s) = %d %s (relayed)", fd,
                   wm_format_address(addr, len, where, sizeof where), ret, errno_name(ret, saved));
            errno = saved;
        }
        return ret;
    }
    /* 1:1 NAT: a node of another cluster is reached at its public address */
    struct sockaddr_storage public;
    int translated = state == WS_ACTIVE && ws_nat_public(addr, len, &public);
    ret = ws_real_connect(fd, translated ? (struct sockaddr *)&public : addr, len);
    int saved = errno;
    if (state == WS_ACTIVE && (ret == 0 || saved == EINPROGRESS || saved == EINTR))
        ws_socket_connected(fd, addr, len, "connected to");
    if (ws_debug >= 2) {
        char where[80] = "(unreadable)";     /* EFAULT: the kernel could not read it either */
        if (ret == 0 || saved != EFAULT)
            wm_format_address(addr, len, where, sizeof where);
        ws_log("connect(%d, %s) = %d %s%s", fd, where, ret, errno_name(ret, saved),
               translated ? " (to its public address)" : "");
    }
    errno = saved;
    return ret;
}

/* The new socket's peer decides: a connection from a relay is repaired
 * first (its delivery preamble read and stripped, `addr` rewritten with the
 * original source), then classified by that original source. Returns `fd`, or
 * -1 if it was from a relay, malformed, and has been closed. */
static int accepted(int listener, int fd, struct sockaddr *addr, socklen_t *len, socklen_t room,
                    const char *call)
{
    enum ws_state state = ws_init();
    if (state != WS_ACTIVE && ws_debug < 2)
        return fd;
    struct sockaddr_storage peer;
    socklen_t plen = sizeof peer;
    if (ws_real_getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
        plen = 0;
    int relayed = 0;
    if (state == WS_ACTIVE && plen > 0) {
        relayed = ws_relay_accepted(fd, addr, len, room, &peer, &plen);
        if (relayed < 0) {
            WS_DEBUG(2, "%s(%d) = %d: dropped", call, listener, fd);
            return -1;
        }
        if (!relayed && ws_nat_private((struct sockaddr *)&peer, plen) && addr && len) {
            memcpy(addr, &peer, room < plen ? room : plen);     /* the private address, as the MPI expects */
            *len = plen;
        }
        ws_socket_connected(fd, (struct sockaddr *)&peer, plen, "accepted from");
    }
    if (ws_debug >= 2) {
        char where[80];
        ws_log("%s(%d) = %d from %s%s", call, listener, fd,
               wm_format_address(plen ? (struct sockaddr *)&peer : NULL, plen, where, sizeof where),
               relayed ? " (through a relay)" : "");
    }
    return fd;
}

/* A connection from a relay whose preamble was bad is gone: a blocking
 * listener waits for the next connection, a non-blocking one says EAGAIN. */
static int accept_again(int listener)
{
    int flags = fcntl(listener, F_GETFL);
    if (flags >= 0 && !(flags & O_NONBLOCK))
        return 1;
    errno = EAGAIN;
    return 0;
}

/* accept and accept4: the real call, then the relay repair of what it
 * returned; a relayed connection with a bad preamble is dropped and the
 * next one taken (or EAGAIN on a non-blocking listener). */
static int accept_repaired(int fd, struct sockaddr *addr, socklen_t *len, int flags, int four)
{
    const char *name = four ? "accept4" : "accept";
    socklen_t room = addr && len ? *len : 0;
    int ret, saved;
    do {
        if (addr && len)
            *len = room;
        ret = four ? ws_real_accept4(fd, addr, len, flags) : ws_real_accept(fd, addr, len);
        saved = errno;
        if (ret >= 0 && accepted(fd, ret, addr, len, room, name) < 0) {
            ret = -1;
            if (accept_again(fd))
                continue;
            saved = EAGAIN;
        }
        break;
    } while (1);
    if (ret < 0 && ws_debug >= 2 && saved != EAGAIN && saved != EWOULDBLOCK)
        ws_log("%s(%d) = -1 %s", name, fd, errno_name(ret, saved));
    errno = saved;
    return ret;
}

WS_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    return accept_repaired(fd, addr, len, 0, 0);
}

WS_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    return accept_repaired(fd, addr, len, flags, 1);
}

/* Neither calls ws_init: until something is relayed both are one atomic
 * load away from the real call. */
WS_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
    int ret;
    socklen_t room = len ? *len : 0;
    if (ws_relay_getpeername(fd, addr, len, &ret))
        return ret;
    ret = ws_real_getpeername(fd, addr, len);
    if (ret == 0)
        ws_nat_private(addr, room < *len ? room : *len);
    return ret;
}

WS_EXPORT int getsockopt(int fd, int level, int name, void *value, socklen_t *len)
{
    int err;
    if (level == SOL_SOCKET && name == SO_ERROR && value && len && *len >= (socklen_t)sizeof err
        && ws_relay_take_error(fd, &err)) {
        memcpy(value, &err, sizeof err);
        *len = sizeof err;
        WS_DEBUG(2, "getsockopt(%d, SO_ERROR) = %s (relayed connect)", fd, strerrorname_np(err));
        return 0;
    }
    return ws_real_getsockopt(fd, level, name, value, len);
}

WS_EXPORT int close(int fd)
{
    int socket = 0;
    if (ws_debug >= 2) {            /* only sockets: every file's close would drown the log */
        int saved = errno;
        struct stat st;
        socket = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
        errno = saved;
    }
    /* Forget first: once the number is closed another thread may reuse it. */
    ws_socket_closing(fd);
    ws_relay_closing(fd);
    int ret = ws_real_close(fd);
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
    if (ret >= 0) {
        ws_socket_duplicated(oldfd, ret);
        ws_relay_duplicated(oldfd, ret);
    }
    if (ws_debug >= 2)
        ws_log("%s(%d) = %d %s", call, oldfd, ret, errno_name(ret, saved));
    errno = saved;
    return ret;
}

WS_EXPORT int dup(int oldfd)
{
    return duplicated("dup", oldfd, ws_real_dup(oldfd));
}

WS_EXPORT int dup2(int oldfd, int newfd)
{
    return duplicated("dup2", oldfd, ws_real_dup2(oldfd, newfd));
}

WS_EXPORT int dup3(int oldfd, int newfd, int flags)
{
    return duplicated("dup3", oldfd, ws_real_dup3(oldfd, newfd, flags));
}

/* Relaying: settings, the connect redirect, the accept repair, and the table
 * of sockets whose peer the shim reports instead of the kernel.
 *
 * connect() to another cluster (docs/libwanshim.md, "Relaying"): the same
 * descriptor is connected to the relay that ws_relay_select picks for the
 * destination host (so the application's bind() and socket options stay),
 * the connect preamble names the destination and the socket's own address,
 * and the relay's 4-byte reply is read, all inside connect() with one
 * deadline (WANMPI_RELAY_TIMEOUT). Then the application sees what a direct
 * connect would have shown:
 *
 *   socket        reply ok                       refused / relay failed
 *   blocking      0                              -1, errno of the reason
 *   non-blocking  -1 EINPROGRESS; writable;      -1 EINPROGRESS; writable;
 *                 SO_ERROR 0                     SO_ERROR = errno of the reason
 *
 * A failed relayed socket is disconnected (connect(AF_UNSPEC)), as a socket
 * whose connect failed is; its error is kept here for the next
 * getsockopt(SO_ERROR) or connect(), which take it once, as the kernel's.
 * getpeername() reports the destination the application asked for.
 *
 * accept(): a connection whose peer is a relay (an address of WANMPI_RELAYS
 * or WANMPI_RELAY_SOURCES) starts with the delivery preamble; it is read
 * (waiting at most DELIVERY_WAIT_MS: the far relay writes it right after
 * its connect completes) and stripped, and accept() and getpeername()
 * report its source. A connection whose preamble is malformed or late is
 * closed and never reaches the application.
 *
 * The table is indexed by descriptor and records each socket's identity
 * (device, inode), as pacing.c's does: a descriptor closed behind the shim's
 * back and reused is detected before its entry is believed. */
#define _GNU_SOURCE
#include "shim.h"
#include "relay.h"
#include "../common/network.h"
#include "../common/settings.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define WS_MAX_RELAYS 256
#define WS_MAX_RELAY_SOURCES 256
#define DEFAULT_TIMEOUT_MS 10000    /* below the 30 s in which a job must end when a relay dies */
#define DELIVERY_WAIT_MS 2000       /* for a preamble written right after the far relay's connect */

struct relay {
    struct sockaddr_storage addr;
    socklen_t len;
    uint8_t host[16];
    size_t host_len;
    char text[64];
    int reported;           /* its failure was printed (once per process) */
};
struct source { uint8_t host[16]; size_t len; };

/* Written once under ws_init's pthread_once, read-only afterwards. */
static struct relay *relays;
static int nrelay;
static struct source *sources;
static int nsource;
static int timeout_ms = DEFAULT_TIMEOUT_MS;
static int by_hash;                 /* WANMPI_RELAY_SELECT=hash: wanproto's host hash, not the address */
static int upgrade_reported;        /* a failed blast update was printed (once per process) */

struct relayed {
    dev_t dev;
    ino_t ino;
    struct sockaddr_storage peer;   /* what getpeername() reports */
    socklen_t peer_len;
    int error;                      /* a failed non-blocking connect's errno, not yet taken */
    unsigned char used;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct relayed *table;
static int table_size;
static int used_count;              /* read without the lock by the wrappers' fast path */

void ws_relay_atfork_prepare(void) { pthread_mutex_lock(&lock); }
void ws_relay_atfork_release(void) { pthread_mutex_unlock(&lock); }

/* ---- settings ---- */

static void relaying_off(const char *name, const char *value, const char *fmt, ...) WS_PRINTF(3, 4);
static void relaying_off(const char *name, const char *value, const char *fmt, ...)
{
    char problem[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    ws_log("%s=%s: %s; relaying is off in this process (connects to other clusters go direct)",
           name, value, problem);
    free(relays);
    free(sources);
    relays = NULL;
    sources = NULL;
    nrelay = nsource = 0;
}

/* "1.2.3.4:7000" or "[::1]:7000"; 0 or -1. */
static int parse_endpoint(const char *s, size_t n, struct sockaddr_storage *out, socklen_t *len)
{
    const char *colon = NULL;
    for (size_t i = n; i-- > 0;)
        if (s[i] == ':') {
            colon = s + i;
            break;
        }
    if (!colon || colon == s || (s[0] == '[' && colon[-1] != ']') || (s[0] != '[' && memchr(s, ':', (size_t)(colon - s))))
        return -1;
    long port = 0;
    const char *p = colon + 1;
    if (p == s + n)
        return -1;
    for (; p < s + n; p++) {
        if (*p < '0' || *p > '9' || (port = port * 10 + (*p - '0')) > 65535)
            return -1;
    }
    if (port == 0 || wm_address_parse(s, (size_t)(colon - s), out, len) != 0)
        return -1;
    uint16_t net = htons((uint16_t)port);
    if (out->ss_family == AF_INET)
        ((struct sockaddr_in *)out)->sin_port = net;
    else
        ((struct sockaddr_in6 *)out)->sin6_port = net;
    return 0;
}

/* Calls `item` for each comma-separated, space-trimmed element; -1 at the first failure. */
static int each_item(const char *list, int (*item)(const char *, size_t, void *), void *arg)
{
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (item(a, (size_t)(b - a), arg) != 0)
            return -1;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

static char bad_item[128];

static int add_relay(const char *s, size_t n, void *arg)
{
    (void)arg;
    snprintf(bad_item, sizeof bad_item, "%.*s", (int)n, s);
    if (nrelay == WS_MAX_RELAYS)
        return -1;
    struct relay *r = &relays[nrelay];
    memset(r, 0, sizeof *r);
    if (parse_endpoint(s, n, &r->addr, &r->len) != 0)
        return -1;
    r->host_len = ws_host_bytes((struct sockaddr *)&r->addr, r->len, r->host);
    if (r->host_len == 0 || !memcmp(r->host, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", r->host_len))
        return -1;
    wm_format_address((struct sockaddr *)&r->addr, r->len, r->text, sizeof r->text);
    nrelay++;
    return 0;
}

static int add_source(const char *s, size_t n, void *arg)
{
    (void)arg;
    snprintf(bad_item, sizeof bad_item, "%.*s", (int)n, s);
    struct sockaddr_storage a;
    socklen_t len;
    if (nsource == WS_MAX_RELAY_SOURCES || wm_address_parse(s, n, &a, &len) != 0)
        return -1;
    sources[nsource].len = ws_host_bytes((struct sockaddr *)&a, len, sources[nsource].host);
    nsource++;
    return 0;
}

/* Seconds, > 0 and <= 3600, decimals allowed. */
static int parse_timeout(const char *text, int *ms)
{
    char *end;
    errno = 0;
    double s = strtod(text, &end);
    while (*end == ' ')
        end++;
    if (errno || end == text || *end || !isfinite(s) || s <= 0 || s > 3600)
        return -1;
    *ms = (int)ceil(s * 1000);
    return 0;
}

/* WANMPI_RELAYS in its per-cluster form, "a=IP:PORT,IP:PORT;b=IP:PORT" (one
 * setting for every process of a job, whatever its cluster): copies this
 * process's cluster's list into `out`. 1: found, 0: no entry for this cluster
 * (or this process is in no cluster), -1: malformed (an entry without '=', a
 * name repeated, or a list longer than `size`). */
static int own_relays(const char *spec, char *out, size_t size)
{
    int self = ws_self_cluster();
    const char *name = self >= 0 ? ws_cluster_name(self) : NULL;
    int found = 0;
    out[0] = 0;
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end && !*end)
            break;                          /* a trailing ';' */
        if (!eq || eq == p)
            return -1;
        const char *n_end = eq;
        while (n_end > p && (n_end[-1] == ' ' || n_end[-1] == '\t'))
            n_end--;
        if (name && strlen(name) == (size_t)(n_end - p) && !memcmp(p, name, (size_t)(n_end - p))) {
            size_t len = (size_t)(end - eq - 1);
            if (found || len >= size)
                return -1;
            memcpy(out, eq + 1, len);
            out[len] = 0;
            found = 1;
        }
        p = *end ? end + 1 : end;
    }
    return found;
}

void ws_relay_init(void)
{
    const char *list = getenv(WM_ENV_RELAYS);
    const char *from = getenv(WM_ENV_RELAY_SOURCES);
    const char *timeout = getenv(WM_ENV_RELAY_TIMEOUT);
    if (timeout && *timeout && parse_timeout(timeout, &timeout_ms) != 0) {
        relaying_off(WM_ENV_RELAY_TIMEOUT, timeout, "expected seconds, more than 0 and at most 3600");
        return;
    }
    const char *select = getenv(WM_ENV_RELAY_SELECT);
    if (select && *select && strcmp(select, "address") && strcmp(select, "hash")) {
        relaying_off(WM_ENV_RELAY_SELECT, select, "expected 'address' or 'hash'");
        return;
    }
    by_hash = select && !strcmp(select, "hash");
    relays = calloc(WS_MAX_RELAYS, sizeof *relays);
    sources = calloc(WS_MAX_RELAY_SOURCES, sizeof *sources);
    if (!relays || !sources) {
        relaying_off(WM_ENV_RELAYS, list ? list : "", "out of memory");
        return;
    }
    char own[1024];
    if (list && strchr(list, '=')) {
        int found = own_relays(list, own, sizeof own);
        if (found < 0) {
            relaying_off(WM_ENV_RELAYS, list, "expected CLUSTER=IP:PORT,...;CLUSTER=IP:PORT,... (one "
                         "entry per cluster, at most %zu bytes each) or IP:PORT,...", sizeof own - 1);
            return;
        }
        if (found == 0)
            WS_DEBUG(1, "%s names no relays of this process's cluster '%s': nothing is relayed",
                     WM_ENV_RELAYS, ws_cluster_name(ws_self_cluster()));
        list = own;
    }
    if (list && *list && each_item(list, add_relay, NULL) != 0) {
        relaying_off(WM_ENV_RELAYS, list, "'%s' is not IP:PORT (an IPv4 address or [IPv6], a port "
                     "1-65535; relays are given by address, in their index order; at most %d)",
                     bad_item, WS_MAX_RELAYS);
        return;
    }
    if (from && *from && each_item(from, add_source, NULL) != 0) {
        relaying_off(WM_ENV_RELAY_SOURCES, from, "'%s' is not an IP address (at most %d)", bad_item,
                     WS_MAX_RELAY_SOURCES);
        return;
    }
    if (nrelay || nsource)
        WS_DEBUG(1, "relaying through %d relays (timeout %d ms); connections from %d relay "
                 "addresses carry a delivery preamble", nrelay, timeout_ms, nrelay + nsource);
}

static int is_relay_address(const struct sockaddr *sa, socklen_t len, char *text, size_t size)
{
    uint8_t host[16];
    size_t n = ws_host_bytes(sa, len, host);
    if (n == 0)
        return 0;
    for (int i = 0; i < nrelay; i++)
        if (relays[i].host_len == n && !memcmp(relays[i].host, host, n)) {
            snprintf(text, size, "relay %d (%s)", i, relays[i].text);
            return 1;
        }
    for (int i = 0; i < nsource; i++)
        if (sources[i].len == n && !memcmp(sources[i].host, host, n)) {
            wm_format_address(sa, len, text, size);
            return 1;
        }
    return 0;
}

/* ---- the table ---- */

static int same_socket(int fd, const struct relayed *e)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == e->ino && st.st_dev == e->dev;
}

static void drop(int fd)
{
    table[fd].used = 0;
    __atomic_sub_fetch(&used_count, 1, __ATOMIC_RELEASE);
}

static void remember(int fd, const struct sockaddr *peer, socklen_t len, int error)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || len > sizeof(struct sockaddr_storage))
        return;
    pthread_mutex_lock(&lock);
    if (fd >= table_size) {
        int size = table_size ? table_size : 64;
        while (size <= fd)
            size *= 2;
        struct relayed *bigger = realloc(table, (size_t)size * sizeof *table);
        if (!bigger) {
            pthread_mutex_unlock(&lock);
            WS_DEBUG(1, "fd %d: out of memory, its relayed peer is not remembered", fd);
            return;
        }
        memset(bigger + table_size, 0, (size_t)(size - table_size) * sizeof *table);
        table = bigger;
        table_size = size;
    }
    struct relayed *e = &table[fd];
    if (!e->used)
        __atomic_add_fetch(&used_count, 1, __ATOMIC_RELEASE);
    *e = (struct relayed){ .dev = st.st_dev, .ino = st.st_ino, .peer_len = len, .error = error,
                           .used = 1 };
    memcpy(&e->peer, peer, len);
    pthread_mutex_unlock(&lock);
}

/* The entry of `fd` if it is still the same socket (called with the lock). */
static struct relayed *lookup(int fd)
{
    if (fd < 0 || fd >= table_size || !table[fd].used)
        return NULL;
    if (!same_socket(fd, &table[fd])) {
        drop(fd);
        return NULL;
    }
    return &table[fd];
}

int ws_relaying(void)
{
    return nrelay > 0;
}

int ws_relay_take_error(int fd, int *err)
{
    if (__atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return 0;
    int saved = errno, found = 0;
    pthread_mutex_lock(&lock);
    struct relayed *e = lookup(fd);
    if (e && e->error) {
        *err = e->error;
        drop(fd);           /* taken once; the socket is disconnected, the kernel answers from now on */
        found = 1;
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return found;
}

/* A relayed socket that is connected: the kernel answers a second connect
 * (0 once after a non-blocking connect completed, then EISCONN: the
 * address is not even looked at). */
static int connected_through_relay(int fd)
{
    if (__atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return 0;
    pthread_mutex_lock(&lock);
    struct relayed *e = lookup(fd);
    int found = e && !e->error;
    pthread_mutex_unlock(&lock);
    return found;
}

int ws_relay_getpeername(int fd, struct sockaddr *addr, socklen_t *len, int *ret)
{
    if (__atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return 0;
    int saved = errno;
    struct sockaddr_storage peer;
    socklen_t peer_len = 0;
    pthread_mutex_lock(&lock);
    struct relayed *e = lookup(fd);
    if (e && !e->error) {
        peer = e->peer;
        peer_len = e->peer_len;
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    if (!peer_len)
        return 0;
    /* The kernel still decides whether there is a peer at all (ENOTCONN
     * after a reset, EFAULT, EINVAL): only the address is ours. */
    struct sockaddr_storage real;
    socklen_t real_len = sizeof real;
    if (!len || ws_real_getpeername(fd, (struct sockaddr *)&real, &real_len) != 0
        || (addr == NULL && *len > 0)) {
        *ret = ws_real_getpeername(fd, addr, len);
        return 1;
    }
    socklen_t room = *len;
    memcpy(addr, &peer, room < peer_len ? room : peer_len);
    *len = peer_len;
    *ret = 0;
    return 1;
}

void ws_relay_closing(int fd)
{
    if (__atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&lock);
    if (fd >= 0 && fd < table_size && table[fd].used)
        drop(fd);
    pthread_mutex_unlock(&lock);
}

void ws_relay_duplicated(int oldfd, int newfd)
{
    if (oldfd == newfd || newfd < 0 || __atomic_load_n(&used_count, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&lock);
    if (newfd < table_size && table[newfd].used)
        drop(newfd);        /* dup2/dup3 replaced it */
    struct relayed *e = lookup(oldfd);
    struct relayed copy;
    int found = e != NULL;
    if (found)
        copy = *e;
    pthread_mutex_unlock(&lock);
    if (found)
        remember(newfd, (struct sockaddr *)&copy.peer, copy.peer_len, copy.error);
}

/* ---- connect ---- */

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for `events` on `fd` until `deadline`: 0, ETIMEDOUT or poll's errno. */
static int wait_for(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return errno;
    }
}

/* Reads exactly `n` bytes (no more: the rest is the application's) by
 * `deadline`. 0, ETIMEDOUT, ECONNRESET at end of stream, or recv's errno.
 * `check` rejects a bad prefix as soon as it has arrived. */
static int read_exactly(int fd, uint8_t *buf, size_t n, long long deadline,
                        int (*check)(const uint8_t *, size_t))
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, MSG_DONTWAIT);
        if (r > 0) {
            got += (size_t)r;
            if (check && check(buf, got) != 0)
                return EPROTO;
            continue;
        }
        if (r == 0)
            return ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return errno;
        int err = wait_for(fd, POLLIN, deadline);
        if (err)
            return err;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t n, long long deadline)
{
    size_t sent = 0;
    while (sent < n) {
        ssize_t w = send(fd, buf + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return errno;
        int err = wait_for(fd, POLLOUT, deadline);
        if (err)
            return err;
    }
    return 0;
}

/* The relay's address in the family of the socket: an IPv4 relay from an
 * IPv6 socket is its IPv4-mapped address. 0 or -1. */
static int relay_address(int k, int family, struct sockaddr_storage *out, socklen_t *len)
{
    const struct relay *r = &relays[k];
    if (r->addr.ss_family == family) {
        *out = r->addr;
        *len = r->len;
        return 0;
    }
    if (family != AF_INET6)
        return -1;
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)&r->addr;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
    memset(out, 0, sizeof *out);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = s4->sin_port;
    s6->sin6_addr.s6_addr[10] = s6->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&s6->sin6_addr.s6_addr[12], &s4->sin_addr, 4);
    *len = sizeof *s6;
    return 0;
}

enum stage { CONNECTING_NOW, CONNECTING, PREAMBLE, REPLY, REFUSED };
static const char *stage_names[] = {
    "connect()", "connecting", "sending the preamble", "waiting for the reply", "refused",
};

/* The relay handshake on `fd` (non-blocking now): a preamble of `kind` for
 * `dst` from `src` (NULL: the socket's own address once connected) with the
 * 16-byte extension `ext` (kinds 3 and 4), then the relay's reply. 0 or an
 * errno; `*stage` says where it stopped, `*reason` the relay's reason code
 * if it refused. */
static int handshake(int fd, const struct sockaddr *relay, socklen_t rlen, int kind, const struct sockaddr *dst,
                     socklen_t dlen, const struct sockaddr *src, socklen_t slen, const uint8_t *ext,
                     long long deadline, enum stage *stage, int *reason)
{
    *stage = CONNECTING_NOW;
    if (ws_real_connect(fd, relay, rlen) != 0) {
        if (errno != EINPROGRESS)
            return errno;
        *stage = CONNECTING;
        int err = wait_for(fd, POLLOUT, deadline);
        if (err)
            return err;
        socklen_t elen = sizeof err;
        if (ws_real_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
            return errno;
        if (err)
            return err;
    }
    *stage = PREAMBLE;
    struct sockaddr_storage own;
    if (!src) {
        slen = sizeof own;
        if (getsockname(fd, (struct sockaddr *)&own, &slen) != 0)
            return errno;
        src = (struct sockaddr *)&own;
    }
    uint8_t preamble[WS_PREAMBLE_BLAST_LEN];
    if (ws_preamble_encode(preamble, kind, dst, dlen, src, slen) != 0)
        return EINVAL;
    size_t plen = WS_PREAMBLE_LEN;
    if (ext) {
        memcpy(preamble + WS_PREAMBLE_LEN, ext, WS_BLAST_EXT_LEN);
        plen = WS_PREAMBLE_BLAST_LEN;
    }
    int err = write_all(fd, preamble, plen, deadline);
    if (err)
        return err;
    *stage = REPLY;
    uint8_t reply[WS_REPLY_LEN];
    err = read_exactly(fd, reply, sizeof reply, deadline, NULL);
    if (err)
        return err;
    err = ws_reply_errno(reply, reason);
    if (err && *reason > 0)
        *stage = REFUSED;
    return err;
}

/* Whether connect(fd, addr) goes through a relay: a TCP socket of the
 * address's family, toward another cluster and a real port, not already
 * connected through one. 1 with the socket's `*domain` and file status
 * `*flags`, else 0 (the real connect gives the kernel's answer). */
static int relayable(int fd, const struct sockaddr *addr, socklen_t len, int *domain, int *flags)
{
    int cluster = ws_peer_cluster(addr, len);
    if (cluster < 0 || connected_through_relay(fd))
        return 0;
    int proto = 0;
    socklen_t olen = sizeof proto;
    if (ws_real_getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &olen) != 0 || proto != IPPROTO_TCP)
        return 0;
    olen = sizeof *domain;
    if (ws_real_getsockopt(fd, SOL_SOCKET, SO_DOMAIN, domain, &olen) != 0 || *domain != addr->sa_family)
        return 0;                       /* the kernel's answer (EAFNOSUPPORT, ...) */
    uint16_t port = addr->sa_family == AF_INET ? ((const struct sockaddr_in *)addr)->sin_port
                                               : ((const struct sockaddr_in6 *)addr)->sin6_port;
    if (port == 0)
        return 0;
    *flags = fcntl(fd, F_GETFL);
    return *flags >= 0;
}

/* One relayed connect, from the choice of the relay to its outcome. */
struct attempt {
    int fd, k, nonblocking;
    const struct sockaddr *addr;        /* the destination the application asked for */
    socklen_t len;
    char where[80];                     /* `addr` for messages */
    long long took;                     /* ms */
    enum stage stage;
    int reason;                         /* the relay's refusal reason, if it refused */
    int blast;                          /* a blast request went with the preamble */
    uint64_t rate;
    unsigned payload;
};

/* The handshake with relay `a->k` at `relay` on the socket, non-blocking
 * against one deadline; a blocking socket gets its `flags` back, settled as
 * a blocking connect leaves it. 0 or an errno. */
static int relay_handshake(struct attempt *a, const struct sockaddr *relay, socklen_t rlen, int flags)
{
    uint8_t ext[WS_BLAST_EXT_LEN];
    a->blast = ws_blast_lookup(a->addr, a->len, &a->rate, &a->payload)
               && ws_blast_extension_encode(ext, a->rate, a->payload) == 0;
    long long start = now_ms();
    int err = handshake(a->fd, relay, rlen, a->blast ? WS_KIND_CONNECT_BLAST : WS_KIND_CONNECT,
                        a->addr, a->len, NULL, 0, a->blast ? ext : NULL, start + timeout_ms,
                        &a->stage, &a->reason);
    if (!a->nonblocking) {
        /* A connect that completed while non-blocking leaves the socket
         * "connecting" until connect is called again (then 0, later EISCONN);
         * a blocking connect leaves it connected: settle it as one. */
        if (err == 0)
            ws_real_connect(a->fd, relay, rlen);
        fcntl(a->fd, F_SETFL, flags);
    }
    a->took = now_ms() - start;
    return err;
}

static void relayed(const struct attempt *a)
{
    remember(a->fd, a->addr, a->len, 0);
    if (a->blast)
        WS_DEBUG(1, "fd %d to %s relayed through relay %d (%s) in %lld ms, blast requested at %llu B/s, "
                 "payload %u", a->fd, a->where, a->k, relays[a->k].text, a->took,
                 (unsigned long long)a->rate, a->payload);
    else
        WS_DEBUG(1, "fd %d to %s relayed through relay %d (%s) in %lld ms", a->fd, a->where, a->k,
                 relays[a->k].text, a->took);
    ws_socket_connected(a->fd, a->addr, a->len, "relayed to");
}

/* Says why a relayed connect failed: the relay's refusal at debug level 1,
 * a relay's own failure once per relay unprompted (the MPI library will only
 * report the destination, which is not what failed). */
static void report_failure(const struct attempt *a, int err)
{
    const struct relay *r = &relays[a->k];
    if (a->stage == REFUSED) {
        WS_DEBUG(1, "fd %d to %s: relay %d (%s) refused: %s (%d), %s", a->fd, a->where, a->k, r->text,
                 ws_reason_name(a->reason), a->reason, strerrorname_np(err));
    } else if (!__atomic_exchange_n(&relays[a->k].reported, 1, __ATOMIC_RELAXED)) {
        ws_log("relay %d (%s) failed while %s for %s after %lld ms: %s%s; connects through it fail "
               "with that error", a->k, r->text, stage_names[a->stage], a->where, a->took,
               err == EPROTO ? "malformed reply" : strerror(err),
               err == ETIMEDOUT ? " (" WM_ENV_RELAY_TIMEOUT ")" : "");
    } else {
        WS_DEBUG(1, "fd %d to %s: relay %d (%s) failed while %s: %s", a->fd, a->where, a->k, r->text,
                 stage_names[a->stage], strerrorname_np(err));
    }
}

/* A relayed connect failed with `err`: leaves the socket as a failed connect
 * leaves it and returns the errno connect() reports. */
static int relay_failed(const struct attempt *a, int err)
{
    if (a->stage == CONNECTING_NOW && (err == EISCONN || err == EALREADY || err == EBADF
                                        || err == EADDRINUSE || err == EINVAL))
        return err;                     /* the socket's state, not the relay: the kernel's answer */
    report_failure(a, err);
    if (a->stage == CONNECTING_NOW)     /* never connected: nothing to undo */
        return err;
    /* Undo the connection to the relay, as a failed connect leaves the socket. */
    struct sockaddr unspec = { .sa_family = AF_UNSPEC };
    ws_real_connect(a->fd, &unspec, sizeof unspec);
    int reset;                          /* the disconnect's own ECONNRESET is not the application's */
    socklen_t rlen = sizeof reset;
    ws_real_getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &reset, &rlen);
    if (!a->nonblocking)
        return err;
    remember(a->fd, a->addr, a->len, err);
    return EINPROGRESS;
}

int ws_relay_connect(int fd, const struct sockaddr *addr, socklen_t len, int *ret)
{
    if (nrelay == 0)
        return 0;
    int caller_errno = errno, err, domain = 0, flags = 0;
    if (ws_relay_take_error(fd, &err)) {        /* connect again after a failed one: its error */
        *ret = -1;
        errno = err;
        return 1;
    }
    if (!relayable(fd, addr, len, &domain, &flags)) {
        errno = caller_errno;
        return 0;
    }
    struct attempt a = { .fd = fd, .addr = addr, .len = len, .nonblocking = (flags & O_NONBLOCK) != 0 };
    a.k = by_hash ? ws_relay_select(nrelay, addr, len) : ws_relay_select_address(nrelay, addr, len);
    wm_format_address(addr, len, a.where, sizeof a.where);
    struct sockaddr_storage relay;
    socklen_t rlen;
    if (relay_address(a.k, domain, &relay, &rlen) != 0) {
        ws_log("cannot relay %s: relay %d (%s) is IPv6 and the socket IPv4", a.where, a.k,
               relays[a.k].text);
        *ret = -1;
        errno = EAFNOSUPPORT;
        return 1;
    }
    if (!a.nonblocking && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        errno = caller_errno;
        return 0;
    }
    err = relay_handshake(&a, (struct sockaddr *)&relay, rlen, flags);
    if (err == 0) {
        relayed(&a);
        *ret = a.nonblocking ? -1 : 0;
        errno = a.nonblocking ? EINPROGRESS : caller_errno;
        return 1;
    }
    *ret = -1;
    errno = relay_failed(&a, err);
    return 1;
}

/* ---- accept ---- */

/* Closes a socket of the shim's own (never the application's), forgetting
 * whatever pacing knew of its number. */
static void close_own(int fd)
{
    ws_socket_closing(fd);
    ws_real_close(fd);
}

static int check_delivery(const uint8_t *buf, size_t n)
{
    const char *why;
    return ws_preamble_check(buf, n, WS_KIND_DELIVER, &why);
}

/* The original source in the family of the accepted socket; 0 or -1. */
static int in_family(int family, struct sockaddr_storage *a, socklen_t *len)
{
    if (a->ss_family == family)
        return 0;
    if (family == AF_INET6) {           /* an IPv4 source on a dual-stack socket */
        struct sockaddr_in s4 = *(struct sockaddr_in *)a;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)a;
        memset(a, 0, sizeof *a);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = s4.sin_port;
        s6->sin6_addr.s6_addr[10] = s6->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&s6->sin6_addr.s6_addr[12], &s4.sin_addr, 4);
        *len = sizeof *s6;
        return 0;
    }
    return -1;                          /* an IPv6 source cannot show on an IPv4 socket */
}

int ws_relay_accepted(int fd, struct sockaddr *addr, socklen_t *len, socklen_t room,
                      struct sockaddr_storage *peer, socklen_t *peer_len)
{
    char relay[96];
    if ((nrelay == 0 && nsource == 0)
        || !is_relay_address((struct sockaddr *)peer, *peer_len, relay, sizeof relay))
        return 0;
    int saved = errno;
    uint8_t buf[WS_PREAMBLE_LEN] = { 0 };
    long long start = now_ms();
    int err = read_exactly(fd, buf, sizeof buf, start + DELIVERY_WAIT_MS, check_delivery);
    const char *why = NULL;
    struct sockaddr_storage dst, src;
    socklen_t dlen, slen;
    if (err == 0 && ws_preamble_decode(buf, WS_KIND_DELIVER, &dst, &dlen, &src, &slen, &why) == 0
        && in_family(peer->ss_family, &src, &slen) != 0)
        why = "an IPv6 source on an IPv4 socket";
    if (err || why) {
        if (err == EPROTO)
            ws_preamble_check(buf, sizeof buf, WS_KIND_DELIVER, &why);
        WS_DEBUG(1, "fd %d from %s dropped: %s", fd, relay,
                 why ? why : err == ETIMEDOUT ? "no delivery preamble within 2 s"
                 : err == ECONNRESET ? "closed before the end of the delivery preamble"
                                     : strerror(err));
        close_own(fd);
        errno = saved;
        return -1;
    }
    remember(fd, (struct sockaddr *)&src, slen, 0);
    if (addr && len) {
        memcpy(addr, &src, room < slen ? room : slen);
        *len = slen;
    }
    *peer = src;
    *peer_len = slen;
    if (ws_debug >= 1) {
        char original[80];
        ws_log("fd %d from %s: delivered from %s", fd, relay,
               wm_format_address((struct sockaddr *)&src, slen, original, sizeof original));
    }
    errno = saved;
    return 1;
}

/* ---- blast requests for open connections ---- */

/* The relay whose inside address is `host` (connections it delivered come
 * from there), or -1. */
static int relay_of_host(const struct sockaddr *sa, socklen_t len)
{
    uint8_t host[16];
    size_t n = ws_host_bytes(sa, len, host);
    for (int k = 0; n && k < nrelay; k++)
        if (relays[k].host_len == n && !memcmp(relays[k].host, host, n))
            return k;
    return -1;
}

/* Sends a kind-4 preamble for one open connection: `node` and `far` are its
 * two ends (this socket's address, the relay's). 0 or an errno. */
static int upgrade_one(const struct sockaddr *node, socklen_t nlen, const struct sockaddr *far, socklen_t flen,
                       const uint8_t ext[WS_BLAST_EXT_LEN], int *reason)
{
    int k = relay_of_host(far, flen);
    if (k < 0)
        return EHOSTUNREACH;            /* a relay this process does not know (WANMPI_RELAY_SOURCES) */
    struct sockaddr_storage relay;
    socklen_t rlen;
    if (relay_address(k, node->sa_family, &relay, &rlen) != 0)
        return EAFNOSUPPORT;
    int fd = socket(node->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    /* from the node's address: the relay checks the control connection's
     * address against the connection it names */
    struct sockaddr_storage from;
    memcpy(&from, node, nlen);
    if (from.ss_family == AF_INET)
        ((struct sockaddr_in *)&from)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&from)->sin6_port = 0;
    int err = 0;
    enum stage stage;
    if (bind(fd, (struct sockaddr *)&from, nlen) != 0)
        err = errno;
    else
        err = handshake(fd, (struct sockaddr *)&relay, rlen, WS_KIND_UPDATE_BLAST, far, flen, node, nlen, ext,
                        now_ms() + timeout_ms, &stage, reason);
    close_own(fd);
    return err;
}

int ws_relay_upgrade_host(const uint8_t *host, size_t n, uint64_t rate, unsigned payload)
{
    uint8_t ext[WS_BLAST_EXT_LEN] = { 0 };     /* rate 0, payload 0: withdraw */
    if (rate && ws_blast_extension_encode(ext, rate, payload) != 0)
        return 0;
    int *fds = NULL, count = 0, failed = 0;
    pthread_mutex_lock(&lock);
    for (int fd = 0; fd < table_size; fd++) {
        uint8_t peer[16];
        struct relayed *e = lookup(fd);
        if (e && !e->error && ws_host_bytes((struct sockaddr *)&e->peer, e->peer_len, peer) == n
            && !memcmp(peer, host, n)) {
            int *more = realloc(fds, (size_t)(count + 1) * sizeof *fds);
            if (!more) {
                failed++;
                continue;
            }
            fds = more;
            fds[count++] = fd;
        }
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < count; i++) {
        struct sockaddr_storage node, far;
        socklen_t nlen = sizeof node, flen = sizeof far;
        int reason = 0, err;
        if (getsockname(fds[i], (struct sockaddr *)&node, &nlen) != 0
            || ws_real_getpeername(fds[i], (struct sockaddr *)&far, &flen) != 0)
            err = errno;
        else
            err = upgrade_one((struct sockaddr *)&node, nlen, (struct sockaddr *)&far, flen, ext, &reason);
        if (err) {
            failed++;
            char where[80];
            wm_format_address((struct sockaddr *)&far, flen, where, sizeof where);
            if (!__atomic_exchange_n(&upgrade_reported, 1, __ATOMIC_RELAXED))
                ws_log("an open connection (fd %d, relay side %s) could not be switched %s blasts: %s%s%s; it "
                       "keeps its transport", fds[i], where, rate ? "to" : "off", strerror(err),
                       reason > 0 ? ", relay reason " : "", reason > 0 ? ws_reason_name(reason) : "");
            else
                WS_DEBUG(1, "fd %d (relay side %s): blast update failed: %s", fds[i], where, strerror(err));
        } else {
            WS_DEBUG(1, "fd %d: blasts %s for the open connection", fds[i], rate ? "requested" : "withdrawn");
        }
    }
    free(fds);
    return failed;
}

/* The table of blast requests (wanshim_request_blast in api.c,
 * docs/libwanshim.md "Blast requests"): per destination host, connects
 * relayed from now on ask the relays to carry the connection's bulk data by RBUDP at a given rate and
 * UDP payload (connect preamble kind 3, docs/wanproto.md), and the relays
 * of connections already open switch them (preamble kind 4, sent by
 * relay.c's ws_relay_upgrade_host). relay.c's connect asks ws_blast_lookup
 * which preamble to send.
 *
 * The table is small and bounded (a process has few partners: libwanmpi's
 * WANMPI_UDP_PARAMS attribute names one per communicator); lookups take the
 * lock only when some request exists. */
#define _GNU_SOURCE
#include "shim.h"
#include "relay.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define WS_MAX_BLAST_REQUESTS 1024

struct request {
    uint8_t host[16];
    size_t len;
    uint64_t rate;          /* bytes/s on the wire */
    unsigned payload;       /* UDP payload of a full datagram */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct request requests[WS_MAX_BLAST_REQUESTS];
static int count;           /* read without the lock by the fast path */

void ws_blast_atfork_prepare(void) { pthread_mutex_lock(&lock); }
void ws_blast_atfork_release(void) { pthread_mutex_unlock(&lock); }

static int find(const uint8_t *host, size_t len)
{
    for (int i = 0; i < count; i++)
        if (requests[i].len == len && !memcmp(requests[i].host, host, len))
            return i;
    return -1;
}

int ws_blast_lookup(const struct sockaddr *dst, socklen_t len, uint64_t *rate, unsigned *payload)
{
    if (__atomic_load_n(&count, __ATOMIC_ACQUIRE) == 0)
        return 0;
    uint8_t host[16];
    size_t n = ws_host_bytes(dst, len, host);
    if (n == 0)
        return 0;
    pthread_mutex_lock(&lock);
    int i = find(host, n);
    if (i >= 0) {
        *rate = requests[i].rate;
        *payload = requests[i].payload;
    }
    pthread_mutex_unlock(&lock);
    return i >= 0;
}

int ws_blast_set(const uint8_t *host, size_t n, uint64_t bytes_per_s, unsigned payload)
{
    pthread_mutex_lock(&lock);
    int i = find(host, n), err = 0;
    if (bytes_per_s == 0) {
        if (i >= 0) {
            requests[i] = requests[count - 1];
            __atomic_sub_fetch(&count, 1, __ATOMIC_RELEASE);
        }
    } else if (i >= 0) {
        requests[i].rate = bytes_per_s;
        requests[i].payload = payload;
    } else if (count == WS_MAX_BLAST_REQUESTS) {
        err = ENOSPC;
    } else {
        struct request *r = &requests[count];
        memcpy(r->host, host, n);
        r->len = n;
        r->rate = bytes_per_s;
        r->payload = payload;
        __atomic_add_fetch(&count, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return err;
}

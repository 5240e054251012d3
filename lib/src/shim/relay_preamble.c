/* The bytes of relaying (docs/wanproto.md sections 1 and 4): the connect and
 * delivery preambles, the relay's reply, its reason codes and the relay
 * selection hash. No I/O, no state, no logging: tests/programs/relaycheck
 * compiles this file on its own to check the documented test vectors. */
#include "relay.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

static const uint8_t preamble_magic[4] = { 'W', 'S', 'H', 'P' };
static const uint8_t reply_magic[2] = { 'W', 'R' };
#define WS_VERSION 1

uint64_t ws_fnv1a64(const uint8_t *bytes, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= bytes[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t ws_mix64(uint64_t z)         /* SplitMix64's finalizer */
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

size_t ws_host_bytes(const struct sockaddr *sa, socklen_t len, uint8_t out[16])
{
    if (!sa || len < sizeof(sa_family_t))
        return 0;
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            memcpy(out, &a->s6_addr[12], 4);
            return 4;
        }
        memcpy(out, a->s6_addr, 16);
        return 16;
    }
    return 0;
}

uint64_t ws_relay_score(uint64_t key, const uint8_t *host, size_t n)
{
    return ws_mix64(ws_fnv1a64(host, n) ^ ws_mix64(key));
}

int ws_relay_select(int nrelay, const struct sockaddr *dst, socklen_t len)
{
    uint8_t host[16];
    size_t n = ws_host_bytes(dst, len, host);
    if (n == 0 || nrelay <= 0)
        return -1;
    int best = 0;
    uint64_t best_score = ws_relay_score(0, host, n);
    for (int k = 1; k < nrelay; k++) {
        uint64_t s = ws_relay_score((uint64_t)k, host, n);
        if (s > best_score) {           /* strictly: ties go to the first */
            best = k;
            best_score = s;
        }
    }
    return best;
}

int ws_relay_select_address(int nrelay, const struct sockaddr *dst, socklen_t len)
{
    uint8_t host[16];
    size_t n = ws_host_bytes(dst, len, host);
    if (n == 0 || nrelay <= 0)
        return -1;
    if (n != 4)                         /* IPv4-mapped IPv6 comes back as its 4 bytes */
        return ws_relay_select(nrelay, dst, len);
    uint32_t a = (uint32_t)host[0] << 24 | (uint32_t)host[1] << 16 | (uint32_t)host[2] << 8 | host[3];
    return (int)(a % (uint32_t)nrelay);
}

/* Family byte, port and address of one endpoint; -1 if not encodable. */
static int put_endpoint(uint8_t *family, uint8_t *port, uint8_t *addr, const struct sockaddr *sa,
                        socklen_t len)
{
    uint8_t host[16];
    size_t n = ws_host_bytes(sa, len, host);
    if (n == 0)
        return -1;
    const uint8_t *p = sa->sa_family == AF_INET
                           ? (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_port
                           : (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_port;
    static const uint8_t zero[16];
    if ((p[0] | p[1]) == 0 || !memcmp(host, zero, n))
        return -1;
    *family = n == 4 ? 4 : 6;           /* an IPv4-mapped address goes as family 4 */
    memcpy(port, p, 2);                 /* already in network order */
    memcpy(addr, host, n);
    return 0;
}

int ws_preamble_encode(uint8_t out[WS_PREAMBLE_LEN], int kind, const struct sockaddr *dst,
                       socklen_t dlen, const struct sockaddr *src, socklen_t slen)
{
    memset(out, 0, WS_PREAMBLE_LEN);
    memcpy(out, preamble_magic, 4);
    out[4] = WS_VERSION;
    out[5] = (uint8_t)kind;
    if (put_endpoint(out + 8, out + 10, out + 16, dst, dlen) != 0
        || put_endpoint(out + 9, out + 12, out + 32, src, slen) != 0)
        return -1;
    return 0;
}

int ws_blast_extension_encode(uint8_t out[WS_BLAST_EXT_LEN], uint64_t rate, unsigned payload)
{
    memset(out, 0, WS_BLAST_EXT_LEN);
    if (rate == 0 || payload < WS_MIN_DATAGRAM || payload > WS_MAX_DATAGRAM)
        return -1;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(rate >> (56 - 8 * i));
    out[8] = (uint8_t)(payload >> 8);
    out[9] = (uint8_t)payload;
    return 0;
}

int ws_preamble_check(const uint8_t *in, size_t n, int kind, const char **why)
{
    if (n > WS_PREAMBLE_LEN)
        n = WS_PREAMBLE_LEN;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = in[i];
        if (i < 4 && b != preamble_magic[i]) {
            *why = "bad magic (not a relay preamble)";
            return -1;
        }
        if (i == 4 && b != WS_VERSION) {
            *why = "unsupported version";
            return -1;
        }
        if (i == 5 && b != kind) {
            *why = "wrong kind";
            return -1;
        }
        if ((i == 6 || i == 7 || i == 14 || i == 15) && b != 0) {
            *why = "non-zero reserved byte";
            return -1;
        }
        if ((i == 8 || i == 9) && b != 4 && b != 6) {
            *why = "address family is not 4 or 6";
            return -1;
        }
        if (((i >= 20 && i < 32 && in[8] == 4) || (i >= 36 && in[9] == 4)) && b != 0) {
            *why = "non-zero IPv4 padding";
            return -1;
        }
    }
    return 0;
}

static int get_endpoint(uint8_t family, const uint8_t *port, const uint8_t *addr,
                        struct sockaddr_storage *out, socklen_t *len, const char **why)
{
    static const uint8_t zero[16];
    memset(out, 0, sizeof *out);
    if ((port[0] | port[1]) == 0) {
        *why = "port 0";
        return -1;
    }
    if (!memcmp(addr, zero, family == 4 ? 4 : 16)) {
        *why = "unspecified address";
        return -1;
    }
    if (family == 4) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)out;
        s4->sin_family = AF_INET;
        memcpy(&s4->sin_port, port, 2);
        memcpy(&s4->sin_addr, addr, 4);
        *len = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
        s6->sin6_family = AF_INET6;
        memcpy(&s6->sin6_port, port, 2);
        memcpy(&s6->sin6_addr, addr, 16);
        *len = sizeof *s6;
    }
    return 0;
}

int ws_preamble_decode(const uint8_t in[WS_PREAMBLE_LEN], int kind, struct sockaddr_storage *dst,
                       socklen_t *dlen, struct sockaddr_storage *src, socklen_t *slen,
                       const char **why)
{
    if (ws_preamble_check(in, WS_PREAMBLE_LEN, kind, why) != 0)
        return -1;
    if (get_endpoint(in[8], in + 10, in + 16, dst, dlen, why) != 0
        || get_endpoint(in[9], in + 12, in + 32, src, slen, why) != 0)
        return -1;
    return 0;
}

/* docs/wanproto.md, "Reason codes" */
static const struct { const char *name; int err; } reasons[] = {
    [1] = { "Refused", ECONNREFUSED },        [2] = { "Unreachable", EHOSTUNREACH },
    [3] = { "TimedOut", ETIMEDOUT },          [4] = { "NotMember", ECONNREFUSED },
    [5] = { "SourceMismatch", EACCES },       [6] = { "NoRoute", ENETUNREACH },
    [7] = { "ConnectionReset", ECONNRESET },  [8] = { "Overloaded", EAGAIN },
    [9] = { "ShuttingDown", ECONNREFUSED },   [10] = { "Protocol", EPROTO },
    [11] = { "UnsupportedVersion", EPROTO },  [12] = { "TrunkLost", ECONNABORTED },
    [13] = { "Internal", EIO },               [14] = { "NoSuchConnection", ENOENT },
};
#define NREASON ((int)(sizeof reasons / sizeof reasons[0]))

int ws_reason_errno(int reason)
{
    return reason > 0 && reason < NREASON ? reasons[reason].err : EIO;
}

const char *ws_reason_name(int reason)
{
    return reason > 0 && reason < NREASON ? reasons[reason].name : "unknown reason";
}

int ws_reply_errno(const uint8_t reply[WS_REPLY_LEN], int *reason)
{
    if (memcmp(reply, reply_magic, 2) || reply[2] != WS_VERSION) {
        *reason = -1;
        return EPROTO;
    }
    *reason = reply[3];
    return reply[3] == 0 ? 0 : ws_reason_errno(reply[3]);
}

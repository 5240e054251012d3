/* libwanshim relaying: connects to another cluster go to a relay of this
 * process's cluster; connections delivered by a relay report their original
 * source. docs/libwanshim.md ("Relaying") describes the behaviour,
 * docs/wanproto.md sections 1 and 4 the bytes.
 *
 *   relay_preamble.c   the preambles, the reply and the relay selection hash:
 *                      bytes only, no I/O (the C twin of crates/wanproto's
 *                      preamble/ and select.rs; tests/programs/relaycheck
 *                      links it directly to check the documented vectors)
 *   relay.c            settings, the connect redirect, the accept repair and
 *                      the table of sockets whose peer the shim reports */
#ifndef WANSHIM_RELAY_H
#define WANSHIM_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define WS_PREAMBLE_LEN 48
#define WS_REPLY_LEN 4
#define WS_KIND_CONNECT 1           /* shim -> local relay */
#define WS_KIND_DELIVER 2           /* far relay -> destination */
#define WS_KIND_CONNECT_BLAST 3     /* shim -> local relay, with a blast request */
#define WS_KIND_UPDATE_BLAST 4      /* shim -> local relay: blast request for an open connection */
#define WS_BLAST_EXT_LEN 16         /* kind 3: rate (8), payload (2), reserved (6) */
#define WS_PREAMBLE_BLAST_LEN (WS_PREAMBLE_LEN + WS_BLAST_EXT_LEN)
#define WS_MIN_DATAGRAM 64          /* wanproto::rbudp::MIN_DATAGRAM ..= MAX_DATAGRAM */
#define WS_MAX_DATAGRAM 65507

/* ---- relay_preamble.c ---- */
uint64_t ws_fnv1a64(const uint8_t *bytes, size_t n);
uint64_t ws_mix64(uint64_t z);
/* The host bytes of an IP address: its 4 octets for IPv4 and IPv4-mapped
 * IPv6, its 16 for other IPv6. Returns 4, 16, or 0 if `sa` is not IP. */
size_t ws_host_bytes(const struct sockaddr *sa, socklen_t len, uint8_t out[16]);
/* score(k, host) = mix64(fnv1a64(host bytes) ^ mix64(k)) */
uint64_t ws_relay_score(uint64_t key, const uint8_t *host, size_t n);
/* Which of `nrelay` relays (keys 0..nrelay-1) serves `dst`: the highest
 * score, ties to the first. -1 if `dst` is not IP or there is no relay. */
int ws_relay_select(int nrelay, const struct sockaddr *dst, socklen_t len);
/* Relay by address (WANMPI_RELAY_SELECT=address, the default): an IPv4
 * destination (or IPv4-mapped IPv6) goes to relay (address as a 32-bit number)
 * mod nrelay, so consecutive node addresses spread evenly over the relays (IMPI
 * trunking scheme #1: node i through trunk i mod N); other IPv6 by the hash. */
int ws_relay_select_address(int nrelay, const struct sockaddr *dst, socklen_t len);
/* Encodes a preamble of `kind`. 0, or -1 if an address is not IP or has
 * port 0 / the unspecified address (which the relay would refuse). */
int ws_preamble_encode(uint8_t out[WS_PREAMBLE_LEN], int kind, const struct sockaddr *dst,
                       socklen_t dlen, const struct sockaddr *src, socklen_t slen);
/* The 16 bytes after a kind-3 preamble: the requested blast rate (bytes/s on
 * the wire, > 0) and UDP payload (WS_MIN_DATAGRAM..WS_MAX_DATAGRAM). 0, or -1
 * if a value is out of range. */
int ws_blast_extension_encode(uint8_t out[WS_BLAST_EXT_LEN], uint64_t rate, unsigned payload);
/* Checks the first `n` bytes of a preamble of `kind` (as strictly as
 * wanproto: magic, version, kind, reserved and padding bytes, families).
 * 0 if nothing is wrong so far, -1 with `*why` otherwise. */
int ws_preamble_check(const uint8_t *in, size_t n, int kind, const char **why);
/* Decodes a complete preamble: endpoints as sockaddr_in (family 4) or
 * sockaddr_in6 (family 6). 0, or -1 with `*why`. */
int ws_preamble_decode(const uint8_t in[WS_PREAMBLE_LEN], int kind, struct sockaddr_storage *dst,
                       socklen_t *dlen, struct sockaddr_storage *src, socklen_t *slen,
                       const char **why);
/* A reply: 0 if ok, else the errno a direct connect would have given
 * (reason table of docs/wanproto.md); `*reason` is its status byte, or -1
 * if the reply is malformed (EPROTO). */
int ws_reply_errno(const uint8_t reply[WS_REPLY_LEN], int *reason);
int ws_reason_errno(int reason);
const char *ws_reason_name(int reason);

/* ---- blast.c: blast requests (wanshim_request_blast) ---- */
/* The request for connects to `dst`'s host: 1 and its rate and payload, or 0. */
int ws_blast_lookup(const struct sockaddr *dst, socklen_t len, uint64_t *rate, unsigned *payload);
/* Sets (rate > 0) or withdraws (rate 0) the request for `host` (n bytes,
 * ws_host_bytes). 0, or ENOSPC if the table is full. */
int ws_blast_set(const uint8_t *host, size_t n, uint64_t bytes_per_s, unsigned payload);
void ws_blast_atfork_prepare(void);
void ws_blast_atfork_release(void);

/* ---- relay.c ---- */
/* Whether connects to other clusters go through relays (WANMPI_RELAYS). */
int ws_relaying(void);
/* Sends a blast request (rate 0: withdraw) for every open relayed
 * connection (connected or accepted) whose peer is `host` to the relay at
 * its other end (preamble kind 4). Returns how many could not be switched
 * (the first failure is printed). */
int ws_relay_upgrade_host(const uint8_t *host, size_t n, uint64_t rate, unsigned payload);
/* Reads WANMPI_RELAYS, WANMPI_RELAY_SOURCES and WANMPI_RELAY_TIMEOUT
 * (called by ws_init once the cluster map is loaded). A bad value is
 * reported on stderr and turns relaying off, nothing else. */
void ws_relay_init(void);
/* connect(): 1 if the shim relayed (or failed relaying) `fd`; the
 * application's result is then in `*ret` and errno. 0: call the real connect. */
int ws_relay_connect(int fd, const struct sockaddr *addr, socklen_t len, int *ret);
/* accept() returned `fd` from `peer`. A connection from a relay: reads and
 * strips the delivery preamble, rewrites `addr`/`*len` (the caller's, may be
 * NULL; `room` is the caller's *len before the call) and `peer` with the
 * original source and returns 1; returns -1 after closing a connection whose
 * preamble is malformed or late; 0 if `fd` is not from a relay. */
int ws_relay_accepted(int fd, struct sockaddr *addr, socklen_t *len, socklen_t room,
                      struct sockaddr_storage *peer, socklen_t *peer_len);
/* getpeername(): 1 if the shim answers for `fd` (result in `*ret`). */
int ws_relay_getpeername(int fd, struct sockaddr *addr, socklen_t *len, int *ret);
/* getsockopt(SO_ERROR): 1 and the error of a failed non-blocking relayed
 * connect (once: reading it clears it, as for the kernel's own). */
int ws_relay_take_error(int fd, int *err);
void ws_relay_closing(int fd);
void ws_relay_duplicated(int oldfd, int newfd);
void ws_relay_atfork_prepare(void);
void ws_relay_atfork_release(void);

#endif

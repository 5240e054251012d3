#include "network.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NOT_IPV4 = -1, BAD_PREFIX = -2 };

int wm_network_parse(const char *s, size_t len, struct wm_network *out)
{
    char text[64];
    if (len >= sizeof text)
        return NOT_IPV4;
    memcpy(text, s, len);
    text[len] = 0;
    char *slash = strchr(text, '/');
    long bits = 32;
    if (slash) {
        char *stop;
        *slash = 0;
        bits = strtol(slash + 1, &stop, 10);
        if (stop == slash + 1 || *stop || bits < 0 || bits > 32)
            return BAD_PREFIX;
    }
    struct in_addr a;
    if (inet_pton(AF_INET, text, &a) != 1)
        return NOT_IPV4;
    uint32_t mask = bits == 0 ? 0 : htonl(~0u << (32 - bits));
    *out = (struct wm_network){ a.s_addr & mask, mask, (int)bits };
    return 0;
}

const char *wm_network_problem(int code)
{
    return code == BAD_PREFIX ? "has a bad prefix length" : "is not an IPv4 network";
}

int wm_address_parse(const char *s, size_t n, struct sockaddr_storage *out, socklen_t *len)
{
    char text[INET6_ADDRSTRLEN + 2];
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof text)
        return -1;
    memcpy(text, s, n);
    text[n] = 0;
    memset(out, 0, sizeof *out);
    struct sockaddr_in *s4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, text, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        *len = sizeof *s4;
        return 0;
    }
    if (inet_pton(AF_INET6, text, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        *len = sizeof *s6;
        return 0;
    }
    return -1;
}

const char *wm_format_address(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN];
    if (!sa || len < sizeof(sa_family_t)) {
        snprintf(buf, size, "(none)");
    } else if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else if (sa->sa_family == AF_UNIX) {
        snprintf(buf, size, "unix");
    } else if (sa->sa_family == AF_UNSPEC) {
        snprintf(buf, size, "unspec");
    } else {
        snprintf(buf, size, "family %d", sa->sa_family);
    }
    return buf;
}

int wm_ipv4(const struct sockaddr *sa, socklen_t len, uint32_t *addr)
{
    if (!sa || len < sizeof(sa_family_t))
        return -1;
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        *addr = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (!IN6_IS_ADDR_V4MAPPED(a6))
            return -1;
        memcpy(addr, &a6->s6_addr[12], sizeof *addr);
        return 0;
    }
    return -1;
}

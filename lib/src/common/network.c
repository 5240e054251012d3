#include "network.h"

#include <arpa/inet.h>
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

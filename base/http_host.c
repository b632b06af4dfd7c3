/* base/http_host.c - the Host rule of weft's local HTTP servers (http_host.h).
 *
 * A Host value is split into its name and an optional ":PORT" before anything is compared, so
 * that "localhost.attacker.example" or "127.0.0.1.attacker.example" can never pass as a prefix
 * match, and a value that is not NAME[:DIGITS] (spaces, a path, a second colon outside
 * brackets) is refused rather than guessed at. The port is not compared with the server's own:
 * a rebinding page cannot change the name, whatever port it uses.
 */
#include "base/http_host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define MAX_NAME 253 /* the longest DNS name */

/* The name part of @p host into *name, *len; false when @p host is not NAME[:PORT]. */
static bool
split_host(const char *host, const char **name, size_t *len)
{
    const char *rest = NULL;
    size_t digits = 0;

    if (host == NULL || host[0] == '\0') {
        return false;
    }
    if (host[0] == '[') {
        const char *close = strchr(host, ']');
        if (close == NULL) {
            return false;
        }
        rest = close + 1;
    } else {
        rest = host + strcspn(host, ":");
    }
    *name = host;
    *len = (size_t)(rest - host);
    if (*len == 0 || *len > MAX_NAME + 2) {
        return false;
    }
    if (rest[0] == '\0') {
        return true;
    }
    /* ":PORT": one to five digits, nothing after them. */
    if (rest[0] != ':') {
        return false;
    }
    digits = strspn(rest + 1, "0123456789");
    return digits >= 1 && digits <= 5 && rest[1 + digits] == '\0';
}

bool
weft__http_ipv4_is_loopback(uint32_t addr_be)
{
    return (ntohl(addr_be) >> 24) == 127;
}

bool
weft__http_host_is_loopback(const char *host)
{
    const char *name = NULL;
    size_t len = 0;
    char buf[MAX_NAME + 3];

    if (!split_host(host, &name, &len)) {
        return false;
    }
    if (len == strlen("localhost") && strncasecmp(name, "localhost", len) == 0) {
        return true;
    }
    if (name[0] == '[') {
        struct in6_addr a6;
        /* Without the brackets: inet_pton takes every spelling of ::1 ("[0:0::1]" too). */
        memcpy(buf, name + 1, len - 2);
        buf[len - 2] = '\0';
        return inet_pton(AF_INET6, buf, &a6) == 1 && memcmp(&a6, &in6addr_loopback, 16) == 0;
    } else {
        struct in_addr a4;
        memcpy(buf, name, len);
        buf[len] = '\0';
        /* A dotted quad only: inet_pton refuses "127.1", octal and hex forms. */
        return inet_pton(AF_INET, buf, &a4) == 1 && weft__http_ipv4_is_loopback(a4.s_addr);
    }
}

bool
weft__http_host_is_allowed(const char *host, const char *const *allowed, size_t count)
{
    const char *name = NULL;
    size_t len = 0;

    if (weft__http_host_is_loopback(host)) {
        return true;
    }
    if (!split_host(host, &name, &len)) {
        return false;
    }
    for (size_t i = 0; allowed != NULL && i < count; i++) {
        if (allowed[i] != NULL && strlen(allowed[i]) == len &&
            strncasecmp(name, allowed[i], len) == 0) {
            return true;
        }
    }
    return false;
}

char *
weft__http_host_for_log(const char *host, char *out, size_t len)
{
    size_t n = 0;

    if (host == NULL) {
        host = "(none)";
    }
    for (; host[n] != '\0' && n + 1 < len; n++) {
        out[n] = host[n] > ' ' && host[n] < 0x7f ? host[n] : '?';
    }
    out[n] = '\0';
    return out;
}

bool
weft__http_host_name_ok(const char *name)
{
    size_t len = name != NULL ? strlen(name) : 0;

    if (len == 0 || len > MAX_NAME) {
        return false;
    }
    if (name[0] == '[') {
        return len > 2 && name[len - 1] == ']' &&
               strspn(name + 1, "0123456789abcdefABCDEF:.") == len - 2;
    }
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == len;
}

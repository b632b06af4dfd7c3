/* base/http_host.h - the Host rule of weft's local HTTP servers (`weft serve`, serve/http.c;
 * `weft mcp serve --http`, runtime/mcp_server/serve_http.c): on a loopback address they answer only
 * requests whose Host header names loopback, or a name the user allowed.
 *
 * Why: a web page the user visits can make its own DNS name resolve to 127.0.0.1 (DNS
 * rebinding); the browser then treats the local server as the page's own origin and lets the
 * page read it. What the browser cannot change is the Host header, which carries the page's
 * name: a server that answers only to "localhost", "127.x.y.z" and "[::1]" is out of reach.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_HTTP_HOST_H
#define WEFT_BASE_HTTP_HOST_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Is @p host (a Host header value: NAME or NAME:PORT, NAME an IPv6 address in brackets or not)
 * a loopback name: "localhost", an IPv4 address in 127.0.0.0/8 or the IPv6 loopback address
 * ("[::1]" however spelled), compared case-insensitively, with or without a port? NULL, an
 * empty name and a malformed port are false. */
bool weft__http_host_is_loopback(const char *host);

/* Is @p host a loopback name (weft__http_host_is_loopback()), or is its name, without the
 * port, one of the @p count names of @p allowed (compared case-insensitively)? NULL @p host (a
 * request without a Host header) is false. Ownership: borrows everything for the call. */
bool weft__http_host_is_allowed(const char *host, const char *const *allowed, size_t count);

/* Can @p name be an allowed host name: a DNS name or IPv4 address (letters, digits, '.', '-'
 * and '_'), or an IPv6 address in brackets; no port; 1 to 253 characters? */
bool weft__http_host_name_ok(const char *name);

/* @p host as a log line may show it: cut to @p len - 1 bytes (@p len > 0), every byte that is
 * not printable ASCII or is a space replaced with '?', "(none)" for NULL. It is the name a
 * client asked for, not a credential, and what the user passes to --allow-host; it is the
 * sender's text, hence the cleaning. @return @p out. */
char *weft__http_host_for_log(const char *host, char *out, size_t len);

/* Is the IPv4 address @p addr_be (network byte order, as in struct in_addr) in 127.0.0.0/8? */
bool weft__http_ipv4_is_loopback(uint32_t addr_be);

#endif /* WEFT_BASE_HTTP_HOST_H */

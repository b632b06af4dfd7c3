/* serve/http.h - `weft serve`'s HTTP server: the trace explorer (web UI at /, its JSON API at
 * /api/v1/), OTLP/HTTP ingest (POST /v1/traces, exporters/ingest.h), Prometheus /metrics and
 * /healthz, on one port (docs/explorer.md, docs/serve.md): routes on the embedded HTTP server
 * (net/http_server.h), before the metrics server's (exporters/metrics_server.h).
 *
 * Security: every response carries a Content-Security-Policy that allows only the server's own
 * scripts, styles and API (no inline script, no other origin), nosniff and no-referrer. The
 * explorer (UI and API) shows prompts and outputs, and ingest writes the store: with a token,
 * their requests must carry it (`Authorization: Bearer TOKEN`, or the HttpOnly cookie a browser
 * gets by opening /?token=TOKEN once; else 401), and without one they are on only when the
 * server listens on loopback (else 403). On a loopback address they also answer only requests
 * whose Host header names loopback ("localhost", 127.x.y.z, "[::1]", any port) or one of
 * allow_hosts (else 421, base/http_host.h): a page that rebinds its DNS name to 127.0.0.1 cannot
 * read them. /metrics and /healthz hold aggregates only and stay open whatever the Host and the
 * token, so a Prometheus in another container scrapes as before. Every refusal is counted
 * (weft__serve_observe()).
 *
 * GET /api/v1/session says what the page may do ({"can_fork"}); POST /api/v1/runs/ID/fork
 * (serve/fork.h) needs the token (the server has one: else 403), a JSON body (Content-Type
 * application/json: else 415, which a cross-site form cannot send, and the login cookie is
 * SameSite=Strict) of at most WEFT__SERVE_FORK_MAX_BODY bytes (else 413).
 */
#ifndef WEFT_SERVE_HTTP_H
#define WEFT_SERVE_HTTP_H

#include "api.h"

#include "exporters/ingest.h"

#include <stdbool.h>
#include <weft/metrics.h>

struct weft__serve;

struct weft__serve_config {
    const char *addr;     /* HOST:PORT (IPv4; port 0 picks one) */
    const char *token;    /* NULL: none needed */
    bool is_explorer_off; /* not loopback and no token: UI and API answer 403 */
    /* On a loopback address, Host names served besides the loopback ones (no port; compared
     * case-insensitively); NULL with 0: none. */
    const char *const *allow_hosts;
    size_t allow_host_count;
    struct weft__api_config api;
    weft_metrics_source_fn metrics; /* renders /metrics */
    void *metrics_data;
    struct weft__ingest *ingest; /* POST /v1/traces; NULL: no ingest */
    /* GET /api/v1/events: how often a stream reads the state store and how long it stays
     * silent before a heartbeat, in ms; 0: 1,000 and 15,000 (serve/events.h). */
    uint64_t events_poll_ms;
    uint64_t events_heartbeat_ms;
    /* POST /api/v1/runs/ID/fork runs this weft binary (serve/fork.h); NULL: no such route.
     * The route answers only with a token (403 without one). */
    const char *fork_exe;
};

/* Start serving. @p cfg and what it points to are borrowed until weft__serve_stop().
 * @return WEFT_OK, WEFT_EINVAL (bad address), WEFT_EIO (cannot listen), WEFT_ENOMEM. */
weft_err weft__serve_start(const struct weft__serve_config *cfg, struct weft__serve **out);
unsigned short weft__serve_port(const struct weft__serve *srv);

/* Add the access rule's refusals to @p meter: weft.serve.access.denied{reason} (Prometheus
 * weft_serve_access_denied_total), reason "host" (421), "token" (401) or "off" (403), each
 * since the server started. NULL @p srv adds the family at zero (a scrape before the server
 * is known). @return WEFT_OK, WEFT_EINVAL (NULL @p meter), WEFT_ENOMEM.
 * Ownership: borrows both for the call. Thread-safety: any thread. */
weft_err weft__serve_observe(const struct weft__serve *srv, struct weft_meter *meter);
void weft__serve_stop(struct weft__serve *srv);

#endif /* WEFT_SERVE_HTTP_H */

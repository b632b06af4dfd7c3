/* serve/events.h - GET /api/v1/events: the runs of the state store pushed to the explorer as
 * Server-Sent Events (events.c, docs/serve.md "Live runs"), so the runs list need not poll.
 * Internal to serve/.
 *
 * Thread-safety: weft__serve_events_reply() and the streams it makes run on the server's
 * threads, concurrently; new/stop/free on the thread that starts and stops the server.
 */
#ifndef WEFT_SERVE_EVENTS_H
#define WEFT_SERVE_EVENTS_H

#include "net/http_server.h"

#include <stdint.h>
#include <weft/common.h>

/* Streams at once; the next clients get 503 (the route's admission, http.c). */
#define WEFT__EVENTS_MAX_CLIENTS  16
#define WEFT__EVENTS_POLL_MS      1000  /* how often a stream reads the state store */
#define WEFT__EVENTS_HEARTBEAT_MS 15000 /* a comment line when nothing else was sent */
#define WEFT__EVENTS_RUNS         100   /* the newest runs a stream follows */

struct weft__serve_events;

/* The shared part of the streams: where runs are read (@p state_path, NULL: the default,
 * borrowed until free), and the intervals (0: the defaults above).
 * @return WEFT_OK or WEFT_ENOMEM. Ownership: free with weft__serve_events_free(). */
weft_err weft__serve_events_new(const char *state_path,
                                uint64_t poll_ms,
                                uint64_t heartbeat_ms,
                                struct weft__serve_events **out);

/* Answer a GET of the stream into @p reply (200 text/event-stream, or 503 out of memory). */
void weft__serve_events_reply(struct weft__serve_events *ev, struct weft__http_reply *reply);

/* End every stream at once (each returns the end of its body) and any later one at its
 * start; call before the server stops, which waits for its requests. NULL is a no-op. */
void weft__serve_events_stop(struct weft__serve_events *ev);

/* Free, once the server stopped (no stream left). NULL is a no-op. */
void weft__serve_events_free(struct weft__serve_events *ev);

#endif /* WEFT_SERVE_EVENTS_H */

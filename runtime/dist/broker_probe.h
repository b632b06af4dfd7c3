/* runtime/dist/broker_probe.h - `weft serve`'s view of the broker: at each /metrics scrape it
 * asks RabbitMQ for the depth of the deployment's three queues and the consumers of the
 * dispatch queue, and records weft.broker.queue.depth{queue}, weft.workers.live and
 * weft.broker.up (1 when the broker answered this scrape, 0 when not: an outage shows as a
 * series at 0, not as series that vanish).
 *
 * The connection is opened at the first scrape and kept (an observer connection: no topology
 * is declared, no heartbeats; broker.h); after a failure the next scrape connects again. A
 * scrape never waits on the broker longer than the probe's budget: the TCP connect, the login
 * and each request are bounded by what is left of it. Scrapes less than a second apart share
 * one answer, so the two threads that serve /metrics never queue two budgets behind each other.
 *
 * Thread-safety: weft__broker_probe_observe() may be called from any thread (one mutex
 * serialises the broker, whose connection is not thread-safe); new and free from one thread.
 */
#ifndef WEFT_RUNTIME_DIST_BROKER_PROBE_H
#define WEFT_RUNTIME_DIST_BROKER_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

struct weft_meter;
struct weft__broker_probe;

#define WEFT__BROKER_PROBE_BUDGET_MS 2000 /* default bound of one scrape's questions */

struct weft__broker_probe_config {
    const char *url;    /* amqp://user:pass@host:port/vhost; NULL: $WEFT_BROKER_URL */
    const char *prefix; /* the deployment's queue prefix; NULL: $WEFT_QUEUE_PREFIX or none */
    unsigned budget_ms; /* 0: WEFT__BROKER_PROBE_BUDGET_MS */
};

/* A probe for @p cfg's broker, not connected yet (the first scrape connects). The URL and the
 * prefix are checked here: WEFT_EINVAL with the reason in @p err (the password is never
 * written there). @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM; *out is NULL on failure.
 * Ownership: copies @p cfg's strings; caller owns *out (weft__broker_probe_free). */
weft_err weft__broker_probe_new(const struct weft__broker_probe_config *cfg,
                                struct weft__broker_probe **out,
                                char *err,
                                size_t err_len);

/* Close the connection and free. NULL is a no-op. */
void weft__broker_probe_free(struct weft__broker_probe *p);

/* The broker URL with its password masked, for logs. Borrowed from @p p. */
const char *weft__broker_probe_url_safe(const struct weft__broker_probe *p);

/* Ask the broker (or reuse an answer under a second old) and record the answer on @p meter:
 * weft.broker.up always, the depths and live workers when the broker answered. Waits at most
 * the budget (plus, on the second of two simultaneous scrapes, the first one's wait). Logs a
 * warning when the broker stops answering and a note when it answers again, not at every
 * scrape. @return WEFT_OK when the broker answered, WEFT_EIO when not (recorded as
 * weft.broker.up 0), WEFT_EINVAL for a NULL argument. */
weft_err weft__broker_probe_observe(struct weft__broker_probe *p, struct weft_meter *meter);

/* The queues of a deployment, asked of the broker (weft serve's probe and the orchestrator). */
struct weft__broker;
struct weft__dist_metrics;
struct weft__dist_queues;

/* Ask @p broker (connected; the caller's thread owns it) for the depth of its three queues
 * and the consumers of the dispatch queue. A queue the broker does not have (nothing declared
 * it yet) counts as empty, with no consumer. @return WEFT_OK (*out->is_up), WEFT_EIO (the
 * broker did not answer; the connection is closed; *out->is_up false). */
weft_err weft__dist_queues_ask(struct weft__broker *broker, struct weft__dist_queues *out);

/* weft__dist_queues_ask() then weft__dist_metrics_record_queues(). */
void weft__dist_metrics_queues(struct weft__dist_metrics *m, struct weft__broker *broker);

#endif /* WEFT_RUNTIME_DIST_BROKER_PROBE_H */

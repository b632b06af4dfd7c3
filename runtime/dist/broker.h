/* runtime/dist/broker.h - one AMQP 0-9-1 connection to RabbitMQ (librabbitmq), as the
 * distributed executor and `weft worker` use it.
 *
 * Topology (names prefixed with the deployment's prefix, docs/distributed.md):
 *   agent_exchange          direct; routes "task" to the dispatch queue, "result" to results
 *   task_dispatch_queue     quorum queue of task messages; x-delivery-limit = max_redeliveries,
 *                           dead letters to agent_dlx with routing key "dead.task"
 *   task_results_queue      quorum queue of result messages; dead letters as "dead.result"
 *   agent_dlx               direct; "dead.task" and "dead.result" go to task_dead_letter_queue,
 *                           and "dead.task" also to task_results_queue, so the orchestrator
 *                           learns at once that one of its tasks was dead-lettered
 *   task_dead_letter_queue  quorum queue an operator inspects (nothing consumes it)
 *   results.{run_id}        one per run, declared by its orchestrator
 * (weft__broker_declare_results): quorum queue of that run's results, which workers publish to
 * through the default exchange (the task's reply_to); dead letters as "dead.result", bound to
 * agent_dlx with "dead.task" too, and removed by the broker after an idle period (x-expires) when
 * its orchestrator is gone for good. Every queue is durable, every message persistent; the channel
 * is in confirm mode, so a publish is known safe when its confirm arrives (WEFT__BROKER_CONFIRM
 * events).
 *
 * Threads: a broker belongs to one thread (librabbitmq connections are not thread-safe),
 * except weft__broker_wake(), which any thread may call to end a weft__broker_wait().
 * Memory: a delivery's body and headers are valid until the next wait on the broker.
 */
#ifndef WEFT_RUNTIME_DIST_BROKER_H
#define WEFT_RUNTIME_DIST_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

#define WEFT__BROKER_NAME_MAX 200

struct weft__broker_names {
    char exchange[WEFT__BROKER_NAME_MAX];
    char dlx[WEFT__BROKER_NAME_MAX];
    char dispatch[WEFT__BROKER_NAME_MAX];
    char results[WEFT__BROKER_NAME_MAX];
    char dead[WEFT__BROKER_NAME_MAX];
};

struct weft__broker_config {
    const char *url;           /* amqp://user:pass@host:port/vhost; NULL: $WEFT_BROKER_URL */
    const char *prefix;        /* prepended to every name; NULL: $WEFT_QUEUE_PREFIX or none */
    unsigned heartbeat_s;      /* 0: 30 */
    unsigned prefetch;         /* basic.qos; 0: no limit */
    unsigned max_redeliveries; /* quorum x-delivery-limit; 0: 5 */
    const char *name;          /* connection_name shown by the broker and in logs */
    /* Bound in ms on the TCP connect, the login handshake and each synchronous request (RPC)
     * of a connection; weft__broker_set_timeout() changes it. 0: 10 s to connect, no bound on
     * the rest (a worker or an orchestrator waits on heartbeats instead). */
    unsigned timeout_ms;
    /* An observer (`weft serve`) only asks for queue statistics: its connect opens the RPC
     * channel and nothing else (no confirm mode, no topology: it must not create the queues
     * with its own arguments before the deployment does) and sends no heartbeats, so an idle
     * connection between two scrapes is not closed by the broker. */
    bool is_observer;
};

struct weft__broker;

/* A message property set. Strings are borrowed for the call (publish) or the delivery. */
struct weft__broker_msg {
    const char *message_id;
    const char *correlation_id;
    const char *type;
    const char *reply_to;
    const char *traceparent; /* headers */
    const char *tracestate;
    int64_t attempt;       /* header x-weft-attempt; 0: absent */
    uint64_t timestamp_ms; /* header x-weft-sent-ms (AMQP's timestamp has seconds only) */
    int64_t bounces;       /* header x-weft-bounces: times an orchestrator put it back */
    const char *signature; /* header weft-signature (runtime/dist/sign.h); NULL: unsigned */
    /* Publish only: basic.publish's mandatory flag. A message no queue takes comes back as a
     * WEFT__BROKER_RETURNED event before its confirm (which is then a plain ack). */
    bool is_mandatory;
    /* Deliveries only. */
    int64_t delivery_count; /* x-delivery-count: earlier deliveries of this message */
    bool is_redelivered;
    const char *death_reason; /* x-death[0].reason for dead-lettered messages, else NULL */
    const char *death_queue;  /* x-death[0].queue */
    int64_t death_count;      /* x-death[0].count */
    const char *routing_key;
};

typedef enum {
    WEFT__BROKER_TIMEOUT = 0,
    WEFT__BROKER_WOKEN,    /* weft__broker_wake() was called */
    WEFT__BROKER_DELIVERY, /* a message from a consumed queue */
    WEFT__BROKER_CONFIRM,  /* the broker confirmed (or refused) published messages */
    WEFT__BROKER_CLOSED,   /* the connection is gone: reconnect */
    WEFT__BROKER_RETURNED  /* a mandatory publish no queue took (msg: its properties) */
} weft__broker_event_kind;

struct weft__broker_event {
    weft__broker_event_kind kind;
    /* DELIVERY */
    uint64_t delivery_tag;
    const void *body;
    size_t body_len;
    struct weft__broker_msg msg;
    /* CONFIRM: publishes up to and including seq (is_multiple) or exactly seq. */
    uint64_t seq;
    bool is_multiple;
    bool is_nack;
};

/* Fill @p names from @p prefix (NULL or "" for none). @return WEFT_OK, WEFT_EINVAL (a name
 * would be too long or the prefix holds a character other than [A-Za-z0-9._:-]). */
weft_err weft__broker_names_make(const char *prefix, struct weft__broker_names *names);

/* The results queue of run @p run_id: "{prefix}results.{run_id}" into @p out.
 * @return WEFT_OK, WEFT_EINVAL (the run id holds a character other than [A-Za-z0-9._:-], or
 * the name would be longer than WEFT__BROKER_NAME_MAX - 1). */
weft_err weft__broker_results_name(const struct weft__broker *b,
                                   const char *run_id,
                                   char *out,
                                   size_t out_len);

/* Whether @p queue is a run's results queue of this deployment, as weft__broker_results_name()
 * names them (NULL: false). */
bool weft__broker_is_results_name(const struct weft__broker *b, const char *queue);

/* Declare the run results queue @p queue (when missing: an existing one keeps its messages and
 * arguments): a durable quorum queue dead-lettering to agent_dlx as "dead.result", removed by
 * the broker once unused for @p expires_ms, and bound to agent_dlx with "dead.task" (every
 * run's queue gets a copy of each dead-lettered task; its orchestrator keeps its own).
 * @return WEFT_OK, WEFT_EIO (reason in @p err; the connection is closed). */
weft_err weft__broker_declare_results(
    struct weft__broker *b, const char *queue, uint32_t expires_ms, char *err, size_t err_len);

/* Delete @p queue with whatever it holds. @return WEFT_OK, WEFT_EIO. */
weft_err weft__broker_delete_queue(struct weft__broker *b, const char *queue);

/* A broker handle, not connected yet. @p cfg's strings are copied. The URL is checked here:
 * WEFT_EINVAL with the reason in @p err (the password is never written there).
 * Ownership: caller owns *out (weft__broker_free). */
weft_err weft__broker_new(const struct weft__broker_config *cfg,
                          struct weft__broker **out,
                          char *err,
                          size_t err_len);
void weft__broker_free(struct weft__broker *b);

const struct weft__broker_names *weft__broker_names(const struct weft__broker *b);

/* The URL with its password replaced by "***", for logs. Borrowed from @p b. */
const char *weft__broker_url_safe(const struct weft__broker *b);

/* Connect, log in, open the channel, enter confirm mode, declare the topology and set the
 * prefetch. A connected broker is closed first. @return WEFT_OK, WEFT_EIO (reason in @p err,
 * e.g. "connection refused", "login refused"). */
weft_err weft__broker_connect(struct weft__broker *b, char *err, size_t err_len);
bool weft__broker_is_connected(const struct weft__broker *b);
/* Close the connection (a no-op when not connected). */
void weft__broker_close(struct weft__broker *b);

/* Consume @p queue with manual acknowledgements. @return WEFT_OK, WEFT_EIO. */
weft_err weft__broker_consume(struct weft__broker *b, const char *queue);

/* Publish a persistent JSON message to the exchange with @p routing_key ("task", "result" or
 * a queue name through the default exchange when @p to_queue). *seq receives its confirm
 * number (1, 2, ... per connection). @return WEFT_OK, WEFT_EIO (the connection is gone). */
weft_err weft__broker_publish(struct weft__broker *b,
                              const char *routing_key,
                              bool to_queue,
                              const struct weft__broker_msg *msg,
                              const void *body,
                              size_t body_len,
                              uint64_t *seq);

/* Acknowledge a delivery, or reject it (@p requeue false: to the dead-letter exchange).
 * @return WEFT_OK, WEFT_EIO. */
weft_err weft__broker_ack(struct weft__broker *b, uint64_t delivery_tag);
weft_err weft__broker_reject(struct weft__broker *b, uint64_t delivery_tag, bool requeue);

/* Wait at most @p timeout_ms for the next event. Heartbeats are kept while waiting.
 * @return WEFT_OK with *ev filled (its strings and body valid until the next call). */
weft_err
weft__broker_wait(struct weft__broker *b, uint32_t timeout_ms, struct weft__broker_event *ev);

/* Thread-safe: make the current or next weft__broker_wait() return WEFT__BROKER_WOKEN. */
void weft__broker_wake(struct weft__broker *b);

/* From now on, connect and weft__broker_queue_stats() wait no later than @p deadline_ns
 * (weft__monotonic_ns() time; 0: no deadline, only weft__broker_config.timeout_ms): each wait
 * is cut to what is left, and once it has passed they fail at once (WEFT_EIO). */
void weft__broker_set_deadline(struct weft__broker *b, uint64_t deadline_ns);

/* Messages ready and consumers of @p queue (a passive declare). @return WEFT_OK,
 * WEFT_ENOTFOUND (the broker has no such queue; the connection stays usable), WEFT_EIO (no
 * answer within the timeout, or the connection is gone: it is closed, connect again). */
weft_err weft__broker_queue_stats(struct weft__broker *b,
                                  const char *queue,
                                  uint64_t *messages,
                                  uint64_t *consumers);

#endif /* WEFT_RUNTIME_DIST_BROKER_H */

/* runtime/dist/dist_telemetry.h - the metrics of distributed runs (docs/metrics.md, the
 * "Distributed" rows): task dispatch, redeliveries, dead letters, duplicates, latencies, queue
 * depths and live workers on the orchestrator; tasks by outcome and busy slots on a worker.
 *
 * Every function is a no-op when the meter is NULL. Thread-safe (the meter is).
 */
#ifndef WEFT_RUNTIME_DIST_DIST_TELEMETRY_H
#define WEFT_RUNTIME_DIST_DIST_TELEMETRY_H

#include "runtime/dist/broker.h"
#include "runtime/dist/message.h"

struct weft_meter;
struct weft_instrument;

struct weft__dist_metrics {
    struct weft_meter *meter;
    const struct weft__broker_names *names;
    struct weft_instrument *dispatched, *redeliveries, *dead, *duplicates, *in_flight;
    struct weft_instrument *dispatch_to_start, *start_to_end, *depth, *live;
    struct weft_instrument *worker_tasks, *worker_busy, *worker_concurrency;
};

/* Register the instruments on @p meter (NULL: none). @p names is borrowed. */
void weft__dist_metrics_init(struct weft__dist_metrics *m,
                             struct weft_meter *meter,
                             const struct weft__broker_names *names);
void weft__dist_metrics_cleanup(struct weft__dist_metrics *m);

void weft__dist_metrics_dispatched(struct weft__dist_metrics *m, const char *workflow);
/* @p reason: delivery_limit, rejected or malformed. */
void weft__dist_metrics_dead_lettered(struct weft__dist_metrics *m,
                                      const char *workflow,
                                      const char *reason);
void weft__dist_metrics_duplicate(struct weft__dist_metrics *m, const char *workflow);
/* A result taken: redeliveries, dispatch→start (from @p sent_ns) and start→end latencies. */
void weft__dist_metrics_result(struct weft__dist_metrics *m,
                               const char *workflow,
                               const struct weft__result_msg *r,
                               uint64_t sent_ns);
void weft__dist_metrics_in_flight(struct weft__dist_metrics *m, const char *workflow, size_t n);
/* Queue depths and consumers of the dispatch queue, asked from the broker (the caller's
 * thread owns @p broker). */
void weft__dist_metrics_queues(struct weft__dist_metrics *m, struct weft__broker *broker);

/* Worker side. @p outcome: success, failed, requeued or rejected. */
void weft__dist_metrics_worker_task(struct weft__dist_metrics *m, const char *outcome);
void weft__dist_metrics_worker_busy(struct weft__dist_metrics *m, size_t busy, size_t concurrency);

#endif /* WEFT_RUNTIME_DIST_DIST_TELEMETRY_H */

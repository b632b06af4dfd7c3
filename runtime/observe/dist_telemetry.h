/* runtime/observe/dist_telemetry.h - the metrics of distributed runs (docs/metrics.md, the
 * "Distributed" rows): task dispatch, redeliveries, dead letters, duplicates, latencies, queue
 * depths and live workers on the orchestrator; tasks by outcome and busy slots on a worker.
 *
 * Families are registered in groups, so that each meter holds the ones its process owns: the
 * orchestrator's task families (weft.tasks.*, weft.task.*) go to the caller's meter and to the
 * run's own meter (metrics_store.h), which is persisted and which `weft serve` folds; the broker
 * gauges (weft.broker.queue.depth, weft.workers.live, weft.broker.up) are asked live and never
 * persisted (a stored queue depth means nothing a minute later); the weft.worker.* families
 * belong to a worker's own meter.
 *
 * Every function is a no-op when the meter is NULL or the family is not registered.
 * Thread-safe (the meter is), except weft__dist_metrics_tee(), which the caller serialises
 * with the recording calls.
 */
#ifndef WEFT_RUNTIME_DIST_DIST_TELEMETRY_H
#define WEFT_RUNTIME_DIST_DIST_TELEMETRY_H

#include "runtime/dist/broker.h"
#include "runtime/dist/message.h"

struct weft_meter;
struct weft_instrument;

/* Family groups for weft__dist_metrics_init(). */
#define WEFT__DIST_TASKS  1u /* weft.tasks.*, weft.task.*: an orchestrator's, per run */
#define WEFT__DIST_BROKER 2u /* weft.broker.queue.depth, weft.workers.live, weft.broker.up */
#define WEFT__DIST_WORKER 4u /* weft.worker.*: a worker's own */
#define WEFT__DIST_TRUST  8u /* weft.dist.messages.refused: a process's own, worker or not */

struct weft__dist_metrics {
    struct weft_meter *meter;
    struct weft_instrument *dispatched, *redeliveries, *dead, *duplicates, *in_flight;
    struct weft_instrument *dispatch_to_start, *start_to_end, *depth, *live, *up;
    struct weft_instrument *worker_tasks, *worker_busy, *worker_concurrency;
    struct weft_instrument *refused, *commands_refused, *result_fallbacks;
    /* The task measurements are recorded here too when set (weft__dist_metrics_tee). */
    struct weft__dist_metrics *also;
};

/* Register the @p families (WEFT__DIST_* bits) on @p meter (NULL: none). A worker's task
 * counter gets its four outcomes at 0 at once. */
void
weft__dist_metrics_init(struct weft__dist_metrics *m, struct weft_meter *meter, unsigned families);
void weft__dist_metrics_cleanup(struct weft__dist_metrics *m);

/* Record the task measurements of @p m into @p also as well (NULL: stop). Borrowed until
 * replaced; not thread-safe against the recording calls. */
void weft__dist_metrics_tee(struct weft__dist_metrics *m, struct weft__dist_metrics *also);

/* Give @p workflow's task counters a series at 0 (dispatched, redeliveries, duplicates, and
 * dead letters per reason), so that a rate or increase over them reads 0, not nothing, until
 * the first event, and its first increment is seen (Prometheus counts increments between
 * samples). Not forwarded to m->also. */
void weft__dist_metrics_zero(struct weft__dist_metrics *m, const char *workflow);

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

/* What the broker said about the deployment's queues at one moment. */
struct weft__dist_queues {
    bool is_up;         /* the broker answered every question */
    uint64_t depth[3];  /* messages ready: dispatch, results, dead letters */
    uint64_t consumers; /* consumers of the dispatch queue */
};

/* Record @p q: weft.broker.up, and when it is up the depths and live workers. */
void weft__dist_metrics_record_queues(struct weft__dist_metrics *m,
                                      const struct weft__dist_queues *q);

/* Worker side. @p outcome: success, failed, requeued or rejected. */
void weft__dist_metrics_worker_task(struct weft__dist_metrics *m, const char *outcome);
void weft__dist_metrics_worker_busy(struct weft__dist_metrics *m, size_t busy, size_t concurrency);
/* A task command refused by the worker's allow-list (weft.worker.commands.refused; no label:
 * the command comes from the message and would make the series unbounded). */
void weft__dist_metrics_command_refused(struct weft__dist_metrics *m);
/* A worker's result went to the shared results queue instead of its task's run queue. */
void weft__dist_metrics_result_fallback(struct weft__dist_metrics *m);

/* A message refused for its signature; @p reason: weft__verify_reason() (a bounded set). */
void weft__dist_metrics_refused(struct weft__dist_metrics *m, const char *reason);

#endif /* WEFT_RUNTIME_DIST_DIST_TELEMETRY_H */

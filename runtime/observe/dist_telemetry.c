/* runtime/observe/dist_telemetry.c - metrics of distributed runs (dist_telemetry.h).
 *
 * Instruments of a family group that was not registered stay NULL, and every recording
 * function tests its instrument, so one struct serves the orchestrator, a run's meter, a
 * worker and `weft serve` alike. The task measurements are forwarded to m->also (the run's
 * own meter) by the same calls, so no call site can record into one meter and forget the
 * other.
 */
#include "runtime/observe/dist_telemetry.h"

#include <string.h>
#include <weft/metrics.h>
#include <weft/trace.h>

/* Latency buckets in seconds: from 1 ms (a warm worker on the same host) to 5 minutes. */
static const double latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25,
                                        0.5,   1,      2.5,   5,    10,   30,   60,  300};

/* The values of the bounded labels (docs/metrics.md). */
static const char *const worker_outcomes[] = {"success", "failed", "requeued", "rejected"};
static const char *const dead_reasons[] = {"delivery_limit", "malformed", "rejected"};
static const char *const refused_reasons[] = {"unsigned", "forged", "unknown_key",
                                              "malformed_signature"};

static struct weft_instrument *
make(struct weft__dist_metrics *m,
     weft_instrument_kind kind,
     const char *name,
     const char *unit,
     const char *description)
{
    struct weft_instrument *inst = NULL;
    bool is_histogram = kind == WEFT_INSTRUMENT_HISTOGRAM;

    (void)weft_meter_instrument(
        m->meter, kind, name, unit, description, is_histogram ? latency_bounds : NULL,
        is_histogram ? sizeof(latency_bounds) / sizeof(*latency_bounds) : 0, &inst);
    return inst;
}

static void
init_tasks(struct weft__dist_metrics *m)
{
    m->dispatched = make(m, WEFT_INSTRUMENT_COUNTER, "weft.tasks.dispatched", "{task}",
                         "Task messages published to the dispatch queue");
    m->redeliveries = make(m, WEFT_INSTRUMENT_COUNTER, "weft.tasks.redeliveries", "{delivery}",
                           "Deliveries of task messages before the one that produced the result");
    m->dead = make(m, WEFT_INSTRUMENT_COUNTER, "weft.tasks.dead_lettered", "{task}",
                   "Task messages that went to the dead-letter queue");
    m->duplicates = make(m, WEFT_INSTRUMENT_COUNTER, "weft.tasks.duplicate_results", "{result}",
                         "Results for a task already answered (ignored)");
    m->in_flight = make(m, WEFT_INSTRUMENT_GAUGE, "weft.tasks.in_flight", "{task}",
                        "Tasks dispatched and not answered yet");
    m->dispatch_to_start = make(m, WEFT_INSTRUMENT_HISTOGRAM, "weft.task.dispatch_to_start", "s",
                                "From publishing a task to a worker starting it");
    m->start_to_end = make(m, WEFT_INSTRUMENT_HISTOGRAM, "weft.task.start_to_end", "s",
                           "From a worker starting a task to its result");
}

void
weft__dist_metrics_init(struct weft__dist_metrics *m, struct weft_meter *meter, unsigned families)
{
    memset(m, 0, sizeof(*m));
    m->meter = meter;
    if (meter == NULL) {
        return;
    }
    if ((families & WEFT__DIST_TASKS) != 0) {
        init_tasks(m);
    }
    if ((families & WEFT__DIST_BROKER) != 0) {
        m->depth = make(m, WEFT_INSTRUMENT_GAUGE, "weft.broker.queue.depth", "{message}",
                        "Messages ready in the queue");
        m->live = make(m, WEFT_INSTRUMENT_GAUGE, "weft.workers.live", "{worker}",
                       "Consumers of the dispatch queue, as the broker reports");
        m->up = make(m, WEFT_INSTRUMENT_GAUGE, "weft.broker.up", "",
                     "1 when the broker answered the last question about its queues, else 0");
    }
    if ((families & WEFT__DIST_WORKER) != 0) {
        m->worker_tasks = make(m, WEFT_INSTRUMENT_COUNTER, "weft.worker.tasks", "{task}",
                               "Tasks a worker finished, by outcome");
        m->worker_busy = make(m, WEFT_INSTRUMENT_GAUGE, "weft.worker.busy", "{task}",
                              "Tasks executing on the worker now");
        m->worker_concurrency = make(m, WEFT_INSTRUMENT_GAUGE, "weft.worker.concurrency", "{task}",
                                     "Tasks the worker runs at once at most");
        m->commands_refused =
            make(m, WEFT_INSTRUMENT_COUNTER, "weft.worker.commands.refused", "{command}",
                 "Task programs the worker's command allow-list refused");
        m->result_fallbacks =
            make(m, WEFT_INSTRUMENT_COUNTER, "weft.worker.results.fallback", "{result}",
                 "Results published to the shared results queue instead of the run queue the "
                 "task named (not a results queue, or gone)");
        for (size_t i = 0; i < sizeof(worker_outcomes) / sizeof(worker_outcomes[0]); i++) {
            struct weft_attr a = weft_attr_str("outcome", worker_outcomes[i]);
            if (m->worker_tasks != NULL) {
                (void)weft_counter_add(m->worker_tasks, 0, &a, 1);
            }
        }
        if (m->commands_refused != NULL) {
            (void)weft_counter_add(m->commands_refused, 0, NULL, 0);
        }
        if (m->result_fallbacks != NULL) {
            (void)weft_counter_add(m->result_fallbacks, 0, NULL, 0);
        }
    }
    if ((families & WEFT__DIST_TRUST) != 0) {
        /* Every reason at 0 from the start: an alert on increase() sees the first refusal. */
        m->refused = make(m, WEFT_INSTRUMENT_COUNTER, "weft.dist.messages.refused", "{message}",
                          "Task and result messages refused for their signature, by reason");
        for (size_t i = 0; i < sizeof(refused_reasons) / sizeof(refused_reasons[0]); i++) {
            struct weft_attr a = weft_attr_str("reason", refused_reasons[i]);
            if (m->refused != NULL) {
                (void)weft_counter_add(m->refused, 0, &a, 1);
            }
        }
    }
}

void
weft__dist_metrics_zero(struct weft__dist_metrics *m, const char *workflow)
{
    struct weft_attr a[2];

    if (m->dispatched == NULL) {
        return;
    }
    a[0] = weft_attr_str("workflow", workflow);
    (void)weft_counter_add(m->dispatched, 0, a, 1);
    (void)weft_counter_add(m->redeliveries, 0, a, 1);
    (void)weft_counter_add(m->duplicates, 0, a, 1);
    for (size_t i = 0; i < sizeof(dead_reasons) / sizeof(dead_reasons[0]); i++) {
        a[1] = weft_attr_str("reason", dead_reasons[i]);
        (void)weft_counter_add(m->dead, 0, a, 2);
    }
}

void
weft__dist_metrics_cleanup(struct weft__dist_metrics *m)
{
    memset(m, 0, sizeof(*m)); /* the meter owns the instruments */
}

void
weft__dist_metrics_tee(struct weft__dist_metrics *m, struct weft__dist_metrics *also)
{
    m->also = also != m ? also : NULL; /* never a loop */
}

void
weft__dist_metrics_dispatched(struct weft__dist_metrics *m, const char *workflow)
{
    struct weft_attr a = weft_attr_str("workflow", workflow);

    if (m->dispatched != NULL) {
        (void)weft_counter_add(m->dispatched, 1, &a, 1);
    }
    if (m->also != NULL) {
        weft__dist_metrics_dispatched(m->also, workflow);
    }
}

void
weft__dist_metrics_dead_lettered(struct weft__dist_metrics *m,
                                 const char *workflow,
                                 const char *reason)
{
    struct weft_attr a[2] = {weft_attr_str("workflow", workflow), weft_attr_str("reason", reason)};

    if (m->dead != NULL) {
        (void)weft_counter_add(m->dead, 1, a, 2);
    }
    if (m->also != NULL) {
        weft__dist_metrics_dead_lettered(m->also, workflow, reason);
    }
}

void
weft__dist_metrics_duplicate(struct weft__dist_metrics *m, const char *workflow)
{
    struct weft_attr a = weft_attr_str("workflow", workflow);

    if (m->duplicates != NULL) {
        (void)weft_counter_add(m->duplicates, 1, &a, 1);
    }
    if (m->also != NULL) {
        weft__dist_metrics_duplicate(m->also, workflow);
    }
}

void
weft__dist_metrics_result(struct weft__dist_metrics *m,
                          const char *workflow,
                          const struct weft__result_msg *r,
                          uint64_t sent_ns)
{
    struct weft_attr a[2] = {weft_attr_str("workflow", workflow),
                             weft_attr_str("outcome", r->is_success ? "success" : "failed")};

    if (m->also != NULL) {
        weft__dist_metrics_result(m->also, workflow, r, sent_ns);
    }
    if (m->dispatched == NULL) {
        return; /* the task families are not registered here */
    }
    if (r->delivery_count > 0) {
        (void)weft_counter_add(m->redeliveries, (double)r->delivery_count, a, 1);
    }
    if (r->started_ns >= sent_ns && sent_ns > 0) {
        (void)weft_histogram_record(m->dispatch_to_start, (double)(r->started_ns - sent_ns) / 1e9,
                                    a, 1);
    }
    if (r->ended_ns >= r->started_ns && r->started_ns > 0) {
        (void)weft_histogram_record(m->start_to_end, (double)(r->ended_ns - r->started_ns) / 1e9, a,
                                    2);
    }
}

void
weft__dist_metrics_in_flight(struct weft__dist_metrics *m, const char *workflow, size_t n)
{
    struct weft_attr a = weft_attr_str("workflow", workflow);

    if (m->in_flight != NULL) {
        (void)weft_gauge_set(m->in_flight, (double)n, &a, 1);
    }
    if (m->also != NULL) {
        weft__dist_metrics_in_flight(m->also, workflow, n);
    }
}

void
weft__dist_metrics_record_queues(struct weft__dist_metrics *m, const struct weft__dist_queues *q)
{
    static const char *const labels[3] = {"dispatch", "results", "dead_letter"};

    if (m->up != NULL) {
        (void)weft_gauge_set(m->up, q->is_up ? 1 : 0, NULL, 0);
    }
    /* Down: no depth rather than a stale or invented one; weft_broker_up says why. */
    if (!q->is_up || m->depth == NULL) {
        return;
    }
    for (size_t i = 0; i < 3; i++) {
        struct weft_attr a = weft_attr_str("queue", labels[i]);
        (void)weft_gauge_set(m->depth, (double)q->depth[i], &a, 1);
    }
    (void)weft_gauge_set(m->live, (double)q->consumers, NULL, 0);
}

void
weft__dist_metrics_worker_task(struct weft__dist_metrics *m, const char *outcome)
{
    struct weft_attr a = weft_attr_str("outcome", outcome);

    if (m->worker_tasks != NULL) {
        (void)weft_counter_add(m->worker_tasks, 1, &a, 1);
    }
}

void
weft__dist_metrics_worker_busy(struct weft__dist_metrics *m, size_t busy, size_t concurrency)
{
    if (m->worker_busy != NULL) {
        (void)weft_gauge_set(m->worker_busy, (double)busy, NULL, 0);
        (void)weft_gauge_set(m->worker_concurrency, (double)concurrency, NULL, 0);
    }
}

void
weft__dist_metrics_command_refused(struct weft__dist_metrics *m)
{
    if (m->commands_refused != NULL) {
        (void)weft_counter_add(m->commands_refused, 1, NULL, 0);
    }
}

void
weft__dist_metrics_result_fallback(struct weft__dist_metrics *m)
{
    if (m->result_fallbacks != NULL) {
        (void)weft_counter_add(m->result_fallbacks, 1, NULL, 0);
    }
}

void
weft__dist_metrics_refused(struct weft__dist_metrics *m, const char *reason)
{
    struct weft_attr a = weft_attr_str("reason", reason);

    if (m->refused != NULL) {
        (void)weft_counter_add(m->refused, 1, &a, 1);
    }
}

/* runtime/dist/worker.h - `weft worker`: a long-running executor process that consumes task
 * messages from RabbitMQ, runs each step as the in-process executor would, and publishes its
 * result (docs/distributed.md).
 *
 * Delivery: manual acknowledgements, sent only after the result's publish is confirmed by the
 * broker, so a worker that dies mid-task loses nothing (the broker delivers the task again);
 * basic.qos prefetch equals the concurrency. A message that is not a task message is rejected
 * (no requeue: it goes to the dead-letter queue) and logged with the reason. When the broker
 * goes away the worker reconnects with backoff; tasks running then still publish their results
 * (the orchestrator keeps the first per task and attempt).
 *
 * Results: each goes to the queue its task names in reply_to (the run's own results queue),
 * through the default exchange, mandatory: when the broker returns it (the queue is gone), or
 * the reply_to is not a results queue, it goes to the shared task_results_queue and is counted
 * (fallbacks). A task whose reply_to names the shared queue or nothing (an older
 * orchestrator's) is answered there, not counted.
 *
 * Trust (docs/distributed.md, "Trust"): with a key in the environment (runtime/dist/sign.h)
 * a task whose signature is missing or does not verify is rejected without requeue (to the
 * dead letters), logged with its reason and task id, counted in weft.dist.messages.refused
 * and never decoded further; results are signed. Without a key tasks run as before, and the
 * worker says once at start that they are not authenticated. An allow-list of programs
 * (allow_commands) fails, as a step failure, any task whose step would start another program.
 *
 * Shutdown: when *stop becomes non-zero (SIGTERM), the worker takes no new task, gives back
 * the ones it received but did not start, lets the running ones finish (at most grace_ms, then
 * they are aborted and left unacknowledged, so the broker redelivers them), publishes their
 * results and returns.
 */
#ifndef WEFT_RUNTIME_DIST_WORKER_H
#define WEFT_RUNTIME_DIST_WORKER_H

#include <signal.h>
#include <stdint.h>
#include <weft/common.h>

struct weft_meter;
struct weft_provider;

struct weft__worker_config {
    const char *url;           /* NULL: $WEFT_BROKER_URL */
    const char *prefix;        /* NULL: $WEFT_QUEUE_PREFIX */
    unsigned concurrency;      /* tasks at once; 0: 4; at most 256 */
    unsigned max_redeliveries; /* the dispatch queue's delivery limit when it is created; 0: 5 */
    unsigned grace_ms;         /* 0: 30000 */
    const char *id;            /* weft.worker.id on spans and logs; NULL: "host/pid" */
    struct weft_provider *provider; /* the worker's spans; NULL: not traced */
    struct weft_meter *meter;       /* weft.worker.* metrics; NULL: none */
    const volatile sig_atomic_t *stop;
    /* Give up when no connection could be made for this long (0: keep trying). */
    uint32_t connect_timeout_ms;
    /* Programs a task may start, comma-separated, each compared with argv[0] exactly: "sh"
     * allows sh looked up in the worker's PATH, "/usr/bin/sh" that path and nothing else.
     * NULL: $WEFT_WORKER_ALLOW_COMMANDS; unset or empty: any program. */
    const char *allow_commands;
};

struct weft__worker_stats {
    uint64_t received;
    uint64_t succeeded; /* results published and acknowledged, by task outcome */
    uint64_t failed;
    uint64_t rejected; /* malformed or foreign messages sent to the dead letters */
    uint64_t requeued; /* given back at shutdown without running */
    uint64_t reconnects;
    uint64_t refused;          /* tasks refused for their signature (unsigned, forged, ...) */
    uint64_t commands_refused; /* tasks failed by the command allow-list */
    /* Results published to the shared results queue although their task named a reply_to
     * queue: that queue was gone (its run ended or expired) or the name was not one of this
     * deployment's results queues. Tasks without a reply_to (older orchestrators) use the
     * shared queue as before and are not counted. */
    uint64_t fallbacks;
};

/* Run until *cfg->stop. @return WEFT_OK after a graceful stop, WEFT_EINVAL (bad URL or prefix,
 * an unusable key or key file, an allow-list too long: reason in @p err), WEFT_EIO (no connection
 * within connect_timeout_ms: reason in @p err), WEFT_ENOMEM. @p stats (may be NULL) receives the
 * counts. */
weft_err weft__worker_run(const struct weft__worker_config *cfg,
                          struct weft__worker_stats *stats,
                          char *err,
                          size_t err_len);

#endif /* WEFT_RUNTIME_DIST_WORKER_H */

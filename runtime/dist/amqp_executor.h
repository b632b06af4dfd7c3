/* runtime/dist/amqp_executor.h - the executor interface (runtime/engine/executor.h) over RabbitMQ:
 * each task becomes a persistent message on task_dispatch_queue, `weft worker` processes run
 * it, and their results come back on the run's own results queue, {prefix}results.{run_id},
 * which the task names in reply_to (docs/distributed.md).
 *
 * The run's queue: declared (durable quorum queue, removed by the broker after 30 minutes
 * without a consumer) and consumed once the run id is known, before the first task goes out;
 * deleted by destroy() when nothing is in flight any more, kept otherwise (a run stopped early
 * or a crashed orchestrator) so a resume finds the results that came meanwhile. Concurrent runs
 * (several executors in a process, several processes on a prefix) never see each other's
 * results there. The executor also consumes the shared task_results_queue, where older workers
 * and returned results land: another run's result there goes back to the queue's tail (at most
 * 20 times, then dropped and counted as foreign); one in the run's own queue is never put back.
 *
 * An I/O thread owns the connection: it publishes submitted tasks (confirmed by the broker),
 * consumes results with manual acknowledgement, reconnects with backoff when the broker goes
 * away and then publishes again every task not confirmed yet. poll() hands the results that
 * arrived to the engine. Delivery is at least once: the first result per (task, attempt) is
 * taken, later ones are counted as duplicates and dropped; a task the broker dead-letters
 * (its message was delivered more than max_redeliveries times, or a worker rejected it) fails
 * with a note saying so.
 *
 * Resume (docs/distributed.md, "When the orchestrator dies"): a resumed run submits the tasks
 * that were in flight again with their ids and attempts. A result of the run that comes before
 * its task is submitted again (the worker finished while no orchestrator ran) is kept aside,
 * at most 256 of them, and taken by that submit: the task does not run again.
 *
 * Trust (docs/distributed.md, "Trust"): with a key in the environment (runtime/dist/sign.h)
 * every task is signed, and a result whose signature is missing or wrong is refused (to the
 * dead letters, logged and counted in weft.dist.messages.refused) without touching its task,
 * which then waits for a genuine result or the run's timeout.
 *
 * Spans: a PRODUCER span `publish {exchange}` per task, under the step's parent, whose context
 * travels as the message's traceparent (the worker's spans nest under it), and a CONSUMER span
 * `process {results queue}` per result, both with the OTel messaging attributes.
 */
#ifndef WEFT_RUNTIME_DIST_AMQP_EXECUTOR_H
#define WEFT_RUNTIME_DIST_AMQP_EXECUTOR_H

#include "runtime/engine/executor.h"

struct weft_meter;
struct weft_provider;

struct weft__amqp_executor_config {
    const char *url;                /* NULL: $WEFT_BROKER_URL */
    const char *prefix;             /* NULL: $WEFT_QUEUE_PREFIX */
    unsigned max_in_flight;         /* 0: 64; at most 256 */
    unsigned max_redeliveries;      /* 0: 5 */
    struct weft_provider *provider; /* producer/consumer spans; NULL: none */
    struct weft_meter *meter;       /* weft.tasks.* metrics; NULL: none */
    /* The run served, when known before its first task (`weft resume`): its results are kept
     * for the tasks submitted again. NULL: learnt from the first task. */
    const char *run_id;
};

/* Connect (waiting at most @p connect_timeout_ms for the broker) and start the I/O thread.
 * @return WEFT_OK, WEFT_EINVAL (bad URL or prefix, reason in @p err), WEFT_EIO (the broker
 * could not be reached in time: reason in @p err), WEFT_ENOMEM. The workflow is borrowed for
 * the executor's life: its document travels in every task message.
 * Ownership: caller owns *out; release with (*out)->ops->destroy(*out). */
weft_err weft__amqp_executor_new(const struct weft__amqp_executor_config *cfg,
                                 const struct weft_workflow *wf,
                                 uint32_t connect_timeout_ms,
                                 struct weft__executor **out,
                                 char *err,
                                 size_t err_len);

/* Counts since the executor started (tests and the run summary). */
struct weft__amqp_executor_stats {
    uint64_t published;     /* task messages confirmed by the broker (republishes included) */
    uint64_t results;       /* results taken */
    uint64_t duplicates;    /* results for a task already answered */
    uint64_t foreign;       /* results of other runs: put back on the shared queue, or rejected
                               to the dead letters from the run's own queue (misaddressed) */
    uint64_t dead_lettered; /* tasks failed because the broker dead-lettered them */
    uint64_t malformed;     /* unreadable messages on the results queue (to the dead letters) */
    uint64_t redeliveries;  /* deliveries before the one that ran, summed over results */
    uint64_t reconnects;
    uint64_t reclaimed; /* tasks submitted again after a resume whose result was waiting */
    uint64_t refused;   /* results (and dead-lettered tasks) refused for their signature */
    /* Results taken (counted in results too) from the shared results queue rather than the
     * run's own: an older worker's, or one whose publish to the run's queue came back. */
    uint64_t shared_results;
    /* Where the I/O thread's time goes (monotonic nanoseconds, summed): in publish calls
     * (encoding frames and writing them to the socket), from submit to the broker's confirm
     * (queueing + publish + the broker's fsync of a persistent message), and handling results
     * (decode, match, acknowledge). */
    uint64_t publish_ns;
    uint64_t confirm_wait_ns;
    uint64_t result_ns;
};
void weft__amqp_executor_stats(struct weft__executor *ex, struct weft__amqp_executor_stats *out);

#endif /* WEFT_RUNTIME_DIST_AMQP_EXECUTOR_H */

/* runtime/observe/webhook.h - stuck-loop alerts POSTed to a webhook, off the engine thread.
 *
 * When the watchdog (watchdog.h) detects a stuck loop, the runtime may POST an alert to one
 * optional URL. weft__rt_webhook_post() renders the alert's JSON body and appends it to a bounded
 * queue; one sender thread per webhook, with its own libcurl handles, delivers the queue in
 * order. The engine thread never waits on the network: a full queue drops the alert and counts
 * it (WEFT_ELIMIT), exactly like the span pipeline.
 *
 * Payloads (Content-Type: application/json):
 * - RT_WEBHOOK_GENERIC: one object
 *   {"type":"weft.stuck_loop","kind","evidence","policy","workflow","run_id","trace_id",
 *    "span_id","agent","time"}, time in RFC 3339 UTC with milliseconds; an absent field is null.
 * - RT_WEBHOOK_ALERTMANAGER: the Alertmanager v2 body (POST /api/v2/alerts), an array of one
 *   postableAlert: labels {alertname="WeftStuckLoop", kind, workflow, severity, run_id},
 *   annotations {summary, description (the evidence), policy, trace_id, span_id, run_id, agent},
 *   startsAt, and generatorURL when trace_url is set. severity is "warning" for policy warn and
 *   "critical" for break and abort. Labels stay low-cardinality (no trace, span or agent); the
 *   run id is a label because each alert is a distinct run. endsAt is left to Alertmanager
 *   (now + resolve_timeout): a stuck loop is an event, not a state weft will resolve.
 *
 * Delivery: 2xx is success. A transport failure (refused, reset, timeout, DNS) and 429, 502,
 * 503, 504 are retried up to max_retries times with exponential backoff and jitter
 * (initial_backoff_ms doubling up to max_backoff_ms, each wait drawn from [b/2, b]). A
 * Retry-After of delta-seconds or an HTTP-date on 429/503 replaces the backoff, capped at 30 s
 * and, while draining, at what is left of the drain. Any other status is a final failure.
 * Failures and drops are counted; a log line marks the start of a run of failures (or drops)
 * and the recovery, not every alert.
 *
 * Secrets: header values are never logged, and log lines show the URL as scheme://host[:port]
 * only, because webhook URLs (Slack, Discord, ...) often carry their token in the path.
 *
 * Thread-safety: weft__rt_webhook_post() and weft__rt_webhook_stats() may be called from any
 * thread, concurrently. weft__rt_webhook_new() and weft__rt_webhook_free() must not race with any
 * other call on the same webhook.
 */
#ifndef WEFT_RUNTIME_WEBHOOK_H
#define WEFT_RUNTIME_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

#define RT_WEBHOOK_GENERIC      0
#define RT_WEBHOOK_ALERTMANAGER 1

#define RT_WEBHOOK_DEFAULT_TIMEOUT_MS     5000u
#define RT_WEBHOOK_DEFAULT_RETRIES        3u
#define RT_WEBHOOK_DEFAULT_QUEUE          64u
#define RT_WEBHOOK_MAX_QUEUE              4096u
#define RT_WEBHOOK_DEFAULT_BACKOFF_MS     500u /* first retry wait */
#define RT_WEBHOOK_DEFAULT_MAX_BACKOFF_MS 10000u
#define RT_WEBHOOK_MAX_RETRY_AFTER_MS     30000u /* a longer Retry-After is cut to this */
/* max_retries value that turns retries off (0 means the default). */
#define RT_WEBHOOK_NO_RETRIES UINT32_MAX

/* A zero field takes its default. */
struct rt_webhook_config {
    const char *url;             /* http:// or https:// only; required */
    int format;                  /* RT_WEBHOOK_GENERIC (default) or RT_WEBHOOK_ALERTMANAGER */
    uint32_t timeout_ms;         /* per request; default 5000 */
    uint32_t max_retries;        /* retries after the first attempt; default 3 */
    size_t queue_cap;            /* alerts waiting to be sent; default 64, at most 4096 */
    uint32_t initial_backoff_ms; /* default 500 */
    uint32_t max_backoff_ms;     /* default 10000 (never below initial_backoff_ms) */
    const char *const *headers;  /* "Name: value" lines, e.g. "Authorization: Bearer ..." */
    size_t header_count;
    const char *trace_url; /* optional prefix + trace id = a link to the trace, sent as
                              generatorURL (Alertmanager) or "trace_url" (generic) */
};

/* One detection, borrowed for the call. Only kind and policy are required. */
struct rt_webhook_alert {
    const char *kind;     /* handoff, tool, route, reflection, flow, stall, token_budget, ... */
    const char *evidence; /* a sentence */
    const char *policy;   /* "warn", "break" or "abort" */
    const char *workflow;
    const char *run_id;
    const char *trace_id;  /* 32 lowercase hex digits */
    const char *span_id;   /* 16 lowercase hex digits */
    const char *agent;     /* may be NULL */
    uint64_t time_unix_ns; /* 0: now */
};

struct weft__rt_webhook_stats {
    uint64_t sent;    /* delivered (2xx) */
    uint64_t failed;  /* final status, non-retryable transport error, or retries exhausted */
    uint64_t dropped; /* queue full, or still unsent when weft__rt_webhook_free() gave up */
    uint64_t retries; /* attempts after the first, over all alerts */
};

struct rt_webhook;

/** Validate @p cfg, copy it, and start the sender thread.
 * @param cfg the configuration (see struct rt_webhook_config)
 * @param out receives the webhook
 * @return WEFT_OK; WEFT_EINVAL (NULL argument, a URL that is not http(s)://, an unknown format,
 *         queue_cap over 4096, a malformed header line; logged at ERROR naming the field, never
 *         a header value); WEFT_ENOMEM (allocation, thread or libcurl handle); WEFT_EIO (libcurl
 *         could not be initialised). *out is NULL on failure.
 * Ownership: copies every string of @p cfg; caller owns *out, release with weft__rt_webhook_free().
 */
weft_err weft__rt_webhook_new(const struct rt_webhook_config *cfg, struct rt_webhook **out);

/** Queue @p alert for delivery without waiting on anything but a short internal lock.
 * @param wh the webhook
 * @param alert the detection
 * @return WEFT_OK (queued); WEFT_ELIMIT (queue full: dropped and counted); WEFT_EINVAL (NULL
 *         argument, empty kind, policy not warn/break/abort); WEFT_ENOMEM (counted as dropped).
 * Ownership: borrows @p alert for the call (its text is rendered into the queued body).
 * Thread notes: any thread. */
weft_err weft__rt_webhook_post(struct rt_webhook *wh, const struct rt_webhook_alert *alert);

/** Counters so far. @param wh the webhook (NULL gives zeros) @param out receives them.
 * Thread notes: any thread; the four values are read together under the lock. */
void weft__rt_webhook_stats(struct rt_webhook *wh, struct weft__rt_webhook_stats *out);

/** Deliver what is queued for at most @p drain_ms, then stop the sender and free everything.
 * An in-flight request or backoff wait is cut at the bound; what is still unsent is counted
 * as dropped and logged once. Returns within about drain_ms (plus thread join). NULL is a
 * no-op.
 * @param wh the webhook
 * @param drain_ms time allowed for delivering the queue; 0 drops it at once */
void weft__rt_webhook_free(struct rt_webhook *wh, uint32_t drain_ms);

#endif /* WEFT_RUNTIME_WEBHOOK_H */

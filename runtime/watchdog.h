/* runtime/watchdog.h - the stuck-loop watchdog: detectors that run on the engine thread at
 * each supervisor decision and each tool call.
 *
 * Detections (kind):
 * - iteration_budget: 80 % of max_iterations spent (a warning, once per run);
 * - repeated_agent: the same agent with the same normalised task N times in a row (default 3);
 * - repeated_tool: the same tool with the same arguments N times in a row (default 5);
 * - ping_pong: two agents alternating over 6 steps without a completed step;
 * - no_progress: N decisions in a row without any plan change or completed step (default 5);
 * - stall: no LLM answer, tool result, step or decision for stall_s seconds (default 300), found
 *   by a timer thread of the run's own, so a hung model or tool is reported while it hangs;
 * - token_budget, cost_budget: 80 % of the supervisor's max_tokens / max_cost_usd spent (a
 *   warning), then the budget crossed (the run ends as budget_exhausted).
 * A legitimate review-fix cycle is not stuck: its steps complete and its tasks differ.
 *
 * On detection: a `weft.stuck_loop` event with ERROR status on the span at hand, the
 * weft.stuck_loops{kind} counter, a log line, an optional webhook alert (webhook.h: generic
 * JSON or Alertmanager v2, sent from its own thread), and the workflow's policy: warn (go on),
 * break (route to the final step, or end) or abort (end the run as aborted). The budget
 * warnings and crossings alert but do not apply the policy: the budget itself ends the run.
 *
 * Threads: spans belong to the engine thread, so a stall found by the timer is logged,
 * counted and alerted at once, and its span event is added (and its policy applied) by the
 * engine thread at its next watchdog call, on the span at hand (a hung call's own span when
 * it returns). A hung call is not interrupted: abort takes effect when the call returns or
 * times out.
 */
#ifndef WEFT_RUNTIME_WATCHDOG_H
#define WEFT_RUNTIME_WATCHDOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/trace.h>

struct run;
struct rt_webhook;

typedef enum watchdog_policy { WATCHDOG_WARN = 0, WATCHDOG_BREAK, WATCHDOG_ABORT } watchdog_policy;

struct watchdog_config {
    watchdog_policy policy;
    unsigned same_agent;  /* default 3 */
    unsigned same_tool;   /* default 5 */
    unsigned no_progress; /* default 5 */
    uint32_t stall_ms;    /* default 300000; 0: no stall detection */
    char *webhook_url;    /* NULL: WEFT_WATCHDOG_WEBHOOK_URL, else no webhook */
    int webhook_format;   /* RT_WEBHOOK_GENERIC or RT_WEBHOOK_ALERTMANAGER; -1 from the env */
};

#define WATCHDOG_HISTORY 8

struct watchdog {
    uint64_t agent_keys[WATCHDOG_HISTORY]; /* hash of agent + normalised task, newest last */
    size_t agents[WATCHDOG_HISTORY];       /* agent index per executed step */
    bool completed[WATCHDOG_HISTORY];      /* did that step complete */
    size_t step_count;
    uint64_t tool_key;
    unsigned tool_repeats;
    unsigned stalled_decisions;
    bool is_budget_warned;
    bool is_break; /* policy break fired: route to the final step */
    bool is_abort; /* policy abort fired */
    char abort_reason[256];
    size_t detections;
    bool is_tokens_warned;
    bool is_tokens_crossed;
    bool is_cost_warned;
    bool is_cost_crossed;
    char trace_hex[33]; /* the run's trace and root span, for alerts */
    char root_hex[17];
    struct rt_webhook *webhook; /* NULL: none */
    /* The stall timer. */
    pthread_t timer;
    bool has_timer;
    pthread_mutex_t timer_lock;
    pthread_cond_t timer_cond;
    bool is_timer_stopping;             /* under timer_lock */
    atomic_uint_fast64_t last_progress; /* CLOCK_MONOTONIC ns */
    char activity[120];                 /* under timer_lock: what the run waits on */
    bool is_stall_pending;              /* under timer_lock: for the engine thread */
    char stall_evidence[200];           /* under timer_lock */
};

/* At run start (root span open): the stall timer and the webhook. Failures are logged; the run
 * goes on without them. */
void rt_watchdog_start(struct run *run);
/* At run end: stop the timer, deliver queued alerts for at most 2 s, free the webhook. */
void rt_watchdog_stop(struct run *run);
/* A blocking call starts (@p what: "chat gpt-4o for coder", "tool search"): progress. */
void rt_watchdog_activity(struct run *run, const char *what);
/* A call returned or a step or decision happened: progress. */
void rt_watchdog_progress(struct run *run);
/* On the engine thread: report a stall the timer found on @p span, apply the policy. */
void rt_watchdog_poll(struct run *run, struct weft_span *span);
/* After usage was added to the run's totals: the token and cost budget detectors. */
void rt_watchdog_budget(struct run *run, struct weft_span *span);

/* Before a step runs (its decision span still open). */
void rt_watchdog_step(struct run *run, struct weft_span *decision, size_t step);
/* After the step ran. */
void rt_watchdog_step_done(struct run *run, size_t step);
/* At each decision; @p is_progress: the plan changed or a step completed since the last. */
void rt_watchdog_decision(struct run *run, struct weft_span *decision, bool is_progress);
/* At each tool call (its span still open), with the canonical arguments text. */
void rt_watchdog_tool(struct run *run, struct weft_span *span, const char *tool, const char *args);

#endif /* WEFT_RUNTIME_WATCHDOG_H */

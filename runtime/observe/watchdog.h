/* runtime/observe/watchdog.h - the stuck-loop watchdog: detectors that run on the engine thread at
 * each supervisor decision, hand-off, tool call, reflection verdict and flow loop-back.
 *
 * Repetition detectors (docs/workflow.md, "Stuck loops"). Each occurrence of a loop-prone
 * action gets a signature, a 64-bit FNV-1a hash of its kind and normalised text (runs of
 * white space folded to one space, ASCII case folded, ends trimmed):
 * - handoff: (from agent -> to agent, task) when a step starts; from is the previous step's
 *   agent, or the supervisor for the first;
 * - tool: (tool, arguments) when a call returns;
 * - route: (next agent) for a supervisor decision that started no step;
 * - reflection: (agent, feedback) for a REJECTED verdict;
 * - flow: (node, loop_back_to) when a flow loops back.
 * A signature that recurs `repeats` times (default 3) among the last `window` occurrences of
 * its kind (default 10) while the run makes no progress is a stuck loop. Progress is a new
 * fact: a step output, tool result, written file or plan state not seen before in this run
 * (a bounded set of hashes). The check spans the repetitions after the first, so the first
 * pass of a loop body, which necessarily produces new outputs, does not hide the loop, and
 * cycles of any length up to window / repeats (A->B->A, A->B->C->A) are found like self-repeats.
 *
 * Other detectors: iteration_budget (80 % of max_iterations spent, a warning); stall (no
 * LLM answer, tool result, step or decision for stall_s seconds, found by a timer thread and
 * naming the step and agent that hold the run); token_budget and cost_budget (80 % warning,
 * then the crossing, which ends the run as budget_exhausted).
 *
 * On detection, once per loop (signature): a `weft.stuck_loop` event (kind, signature,
 * evidence, repetitions, agents, policy, span ids) on the span at hand and on the root span,
 * span links from both to the repeated occurrences, the weft.stuck_loops{kind} counter, a log
 * line, an optional webhook alert (webhook.h, from its own thread), and the policy: warn (go
 * on), break (route to the final step if there is one, then end the run as stuck), escalate
 * (hand the loop to escalate_to, once; a loop after that ends the run as stuck) or fail (end
 * the run as stuck now). Budget warnings and stalls alert but apply no repetition policy
 * (a budget ends the run itself; a stall applies the policy: the run cannot go on).
 *
 * Threads: spans belong to the engine thread, so a stall found by the timer is logged,
 * counted and alerted at once, and its span event is added (and its policy applied) by the
 * engine thread at its next watchdog call. A hung call is not interrupted: a policy takes
 * effect when the call returns or times out.
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

typedef enum watchdog_policy {
    WATCHDOG_WARN = 0,
    WATCHDOG_BREAK,
    WATCHDOG_ESCALATE,
    WATCHDOG_FAIL
} watchdog_policy;

/* The repetition kinds (weft.stuck_loop.kind). */
typedef enum watchdog_kind {
    WD_HANDOFF = 0,
    WD_TOOL,
    WD_ROUTE,
    WD_REFLECTION,
    WD_FLOW,
    WD_KIND_COUNT
} watchdog_kind;

#define WATCHDOG_WINDOW_MAX 32  /* occurrences kept per kind */
#define WATCHDOG_FACTS      256 /* progress facts remembered (oldest forgotten first) */
#define WATCHDOG_LOOPS      32  /* loops reported per run; more are counted and logged only */

struct watchdog_config {
    watchdog_policy policy;
    unsigned repeats;   /* 0: WEFT_WATCHDOG_REPEATS, else 3 */
    unsigned window;    /* 0: WEFT_WATCHDOG_WINDOW, else 10 */
    size_t escalate_to; /* agent for policy escalate; WF_NONE: final agent or clarification */
    uint32_t stall_ms;  /* default 300000; 0: no stall detection */
    char *webhook_url;  /* NULL: WEFT_WATCHDOG_WEBHOOK_URL, else no webhook */
    int webhook_format; /* RT_WEBHOOK_GENERIC or RT_WEBHOOK_ALERTMANAGER; -1 from the env */
};

/* One occurrence of a loop-prone action. */
struct wd_occurrence {
    uint64_t sig;
    uint64_t epoch;                /* facts learnt when it happened (after its own result) */
    struct weft_span_context span; /* where it happened */
    size_t from;                   /* agents involved (WF_NONE: none, the supervisor) */
    size_t to;
};

struct wd_ring {
    struct wd_occurrence items[WATCHDOG_WINDOW_MAX];
    size_t count; /* ever pushed; the newest is items[(count - 1) % WATCHDOG_WINDOW_MAX] */
};

struct watchdog {
    unsigned repeats; /* resolved at start */
    unsigned window;
    struct wd_ring rings[WD_KIND_COUNT];
    uint64_t facts[WATCHDOG_FACTS]; /* ring of fact hashes */
    size_t fact_count;              /* ever added (new ones) */
    uint64_t epoch;                 /* new facts so far */
    uint64_t loops[WATCHDOG_LOOPS]; /* reported loop signatures (kind mixed in) */
    size_t loop_count;
    bool is_budget_warned;
    bool is_break;            /* policy break fired: route to the final step, then stuck */
    bool is_break_routed;     /* ... and the route was taken */
    bool is_fail;             /* end the run as stuck now */
    bool is_escalate_pending; /* policy escalate fired: the next decision hands over */
    bool has_escalated;
    /* a fork going over its reused steps (runtime/engine/fork.c): a loop among them was reported by
     * the original; it is remembered and its policy applies, but it is not announced again */
    bool is_catching_up;
    uint64_t escalated_epoch;
    char stuck_reason[320]; /* the loop that ended or escalated the run */
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
    char activity[160];                 /* under timer_lock: what the run waits on */
    char activity_agent[64];            /* under timer_lock: the agent that holds it */
    char activity_step[48];             /* under timer_lock: its step */
    bool is_stall_pending;              /* under timer_lock: for the engine thread */
    char stall_evidence[320];           /* under timer_lock */
};

/* At run start (root span open): the stall timer and the webhook. Failures are logged; the run
 * goes on without them. */
void weft__rt_watchdog_start(struct run *run);
/* At run end: stop the timer, deliver queued alerts for at most 2 s, free the webhook. */
void weft__rt_watchdog_stop(struct run *run);
/* A blocking call or a step starts (@p what: "chat gpt-4o", "tool search"): progress. @p agent
 * and @p step (NULL: unchanged) name who holds the run, for a stall report. */
void
weft__rt_watchdog_activity(struct run *run, const char *what, const char *agent, const char *step);
/* A call returned or a step or decision happened: progress. */
void weft__rt_watchdog_progress(struct run *run);
/* On the engine thread: report a stall the timer found on @p span, apply the policy. */
void weft__rt_watchdog_poll(struct run *run, struct weft_span *span);
/* After usage was added to the run's totals: the token and cost budget detectors. */
void weft__rt_watchdog_budget(struct run *run, struct weft_span *span);

/* Before a step runs (its decision span still open): the hand-off detector. */
void weft__rt_watchdog_step(struct run *run, struct weft_span *decision, size_t step);
/* After the step ran: its output is a fact (progress when new). */
void weft__rt_watchdog_step_done(struct run *run, size_t step);
/* At each decision; @p is_step: it starts a step (else the route detector looks at it). */
void weft__rt_watchdog_decision(struct run *run,
                                struct weft_span *decision,
                                const char *next,
                                bool is_step);
/* At each tool call (its span still open), with the arguments and the result text. */
void weft__rt_watchdog_tool(struct run *run,
                            struct weft_span *span,
                            const char *tool,
                            const char *args,
                            const char *result);
/* A REJECTED reflection verdict (its span still open) on @p output with @p feedback. */
void weft__rt_watchdog_reflection(struct run *run,
                                  struct weft_span *span,
                                  size_t agent,
                                  const char *feedback,
                                  const char *output);
/* A flow loops back from @p node to @p back_to (its loop span open); @p result is the node's. */
void weft__rt_watchdog_flow(struct run *run,
                            struct weft_span *span,
                            const char *node,
                            const char *back_to,
                            size_t agent,
                            size_t back_to_agent,
                            const char *result);
/* A text that is progress when it was not seen before (a flow step's output, ...). */
void weft__rt_watchdog_fact(struct run *run, const char *text);
/* Should the current step or loop stop now (policy break, escalate or fail fired)? */
bool weft__rt_watchdog_should_stop(const struct run *run);

#endif /* WEFT_RUNTIME_WATCHDOG_H */

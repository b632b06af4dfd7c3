/* runtime/watchdog.h - the stuck-loop watchdog: detectors that run on the engine thread at
 * each supervisor decision and each tool call.
 *
 * Detections (kind):
 * - iteration_budget: 80 % of max_iterations spent (a warning, once per run);
 * - repeated_agent: the same agent with the same normalised task N times in a row (default 3);
 * - repeated_tool: the same tool with the same arguments N times in a row (default 5);
 * - ping_pong: two agents alternating over 6 steps without a completed step;
 * - no_progress: N decisions in a row without any plan change or completed step (default 5).
 * A legitimate review-fix cycle is not stuck: its steps complete and its tasks differ.
 *
 * On detection: a `weft.stuck_loop` event with ERROR status on the span at hand, the
 * weft.stuck_loops{kind} counter, a log line, and the workflow's policy: warn (go on), break
 * (route to the final step, or end) or abort (end the run as aborted).
 */
#ifndef WEFT_RUNTIME_WATCHDOG_H
#define WEFT_RUNTIME_WATCHDOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/trace.h>

struct run;

typedef enum watchdog_policy { WATCHDOG_WARN = 0, WATCHDOG_BREAK, WATCHDOG_ABORT } watchdog_policy;

struct watchdog_config {
    watchdog_policy policy;
    unsigned same_agent;  /* default 3 */
    unsigned same_tool;   /* default 5 */
    unsigned no_progress; /* default 5 */
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
};

/* Before a step runs (its decision span still open). */
void rt_watchdog_step(struct run *run, struct weft_span *decision, size_t step);
/* After the step ran. */
void rt_watchdog_step_done(struct run *run, size_t step);
/* At each decision; @p is_progress: the plan changed or a step completed since the last. */
void rt_watchdog_decision(struct run *run, struct weft_span *decision, bool is_progress);
/* At each tool call (its span still open), with the canonical arguments text. */
void rt_watchdog_tool(struct run *run, struct weft_span *span, const char *tool, const char *args);

#endif /* WEFT_RUNTIME_WATCHDOG_H */

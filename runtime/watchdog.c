/* runtime/watchdog.c - the stuck-loop watchdog (see watchdog.h). Everything here runs on the
 * engine thread under the run lock; detectors keep a short bounded history. */
#include "engine.h"

#include "../tracing/util.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static uint64_t
hash_text(uint64_t h, const char *s, bool is_normalised)
{
    bool was_space = false;

    for (; s != NULL && *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (is_normalised) {
            if (isspace(c)) {
                if (was_space) {
                    continue;
                }
                was_space = true;
                c = ' ';
            } else {
                was_space = false;
                c = (unsigned char)tolower(c);
            }
        }
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

static void
detect(struct run *run, struct weft_span *span, const char *kind, const char *evidence)
{
    struct watchdog *wd = &run->watchdog;
    struct weft_attr a[3];

    wd->detections++;
    a[0] = weft_attr_str("weft.stuck_loop.kind", kind);
    a[1] = weft_attr_str("weft.stuck_loop.evidence", evidence);
    a[2] = weft_attr_str("weft.stuck_loop.policy",
                         run->wf->supervisor.watchdog.policy == WATCHDOG_ABORT   ? "abort"
                         : run->wf->supervisor.watchdog.policy == WATCHDOG_BREAK ? "break"
                                                                                 : "warn");
    weft_span_add_event(span, "weft.stuck_loop", a, 3, 0);
    weft_span_set_str(span, "error.type", "stuck_loop");
    weft_span_set_status(span, WEFT_STATUS_ERROR, evidence);
    rt_metrics_stuck(run->metrics, kind);
    WEFT_LOG(WEFT_LOG_WARN, "run %s: stuck loop (%s): %s", run->run_id, kind, evidence);
    if (strcmp(kind, "iteration_budget") == 0) {
        return; /* a warning ahead of the budget itself */
    }
    if (run->wf->supervisor.watchdog.policy == WATCHDOG_BREAK) {
        wd->is_break = true;
    } else if (run->wf->supervisor.watchdog.policy == WATCHDOG_ABORT) {
        wd->is_abort = true;
        snprintf(wd->abort_reason, sizeof(wd->abort_reason), "stuck loop (%s): %.200s", kind,
                 evidence);
    }
}

void
rt_watchdog_step(struct run *run, struct weft_span *decision, size_t step)
{
    struct watchdog *wd = &run->watchdog;
    const struct plan_step *s = &run->plan.steps[step];
    const struct watchdog_config *cfg = &run->wf->supervisor.watchdog;
    uint64_t key =
        hash_text(hash_text(1469598103934665603ull, rt_step_actor(run, s), false), s->task, true);
    size_t n = wd->step_count < WATCHDOG_HISTORY ? wd->step_count : WATCHDOG_HISTORY;
    unsigned same = 1;
    char evidence[200];

    for (size_t i = 0; i < n && same < cfg->same_agent; i++) {
        if (wd->agent_keys[(wd->step_count - 1 - i) % WATCHDOG_HISTORY] != key) {
            break;
        }
        same++;
    }
    if (same >= cfg->same_agent) {
        snprintf(evidence, sizeof(evidence), "%.60s called %u times in a row with the same task",
                 rt_step_actor(run, s), same);
        detect(run, decision, "repeated_agent", evidence);
    }
    wd->agent_keys[wd->step_count % WATCHDOG_HISTORY] = key;
    wd->agents[wd->step_count % WATCHDOG_HISTORY] = s->agent;
    wd->completed[wd->step_count % WATCHDOG_HISTORY] = false;
    wd->step_count++;
    /* Ping-pong: A B A B A B over the last 6 steps, none of the first five completed. */
    if (wd->step_count >= 6) {
        bool is_pong = true;
        size_t a = wd->agents[(wd->step_count - 1) % WATCHDOG_HISTORY];
        size_t b = wd->agents[(wd->step_count - 2) % WATCHDOG_HISTORY];
        for (size_t i = 0; i < 6 && is_pong; i++) {
            size_t idx = (wd->step_count - 1 - i) % WATCHDOG_HISTORY;
            is_pong = a != b && wd->agents[idx] == (i % 2 == 0 ? a : b) &&
                      (i == 0 || !wd->completed[idx]);
        }
        if (is_pong) {
            snprintf(evidence, sizeof(evidence),
                     "%.60s and %.60s alternated over 6 steps without completing one",
                     run->wf->agents[a].name, run->wf->agents[b].name);
            detect(run, decision, "ping_pong", evidence);
        }
    }
}

void
rt_watchdog_step_done(struct run *run, size_t step)
{
    struct watchdog *wd = &run->watchdog;

    if (wd->step_count > 0) {
        wd->completed[(wd->step_count - 1) % WATCHDOG_HISTORY] =
            run->plan.steps[step].status == STEP_COMPLETED;
    }
}

void
rt_watchdog_decision(struct run *run, struct weft_span *decision, bool is_progress)
{
    struct watchdog *wd = &run->watchdog;
    const struct wf_supervisor *sup = &run->wf->supervisor;
    char evidence[200];

    if (!wd->is_budget_warned && run->result->iterations * 5 >= (size_t)sup->max_iterations * 4) {
        wd->is_budget_warned = true;
        snprintf(evidence, sizeof(evidence), "%zu of %u iterations spent", run->result->iterations,
                 sup->max_iterations);
        detect(run, decision, "iteration_budget", evidence);
    }
    wd->stalled_decisions = is_progress ? 0 : wd->stalled_decisions + 1;
    if (wd->stalled_decisions >= sup->watchdog.no_progress) {
        snprintf(evidence, sizeof(evidence),
                 "%u decisions without a plan change or a completed step", wd->stalled_decisions);
        wd->stalled_decisions = 0;
        detect(run, decision, "no_progress", evidence);
    }
}

void
rt_watchdog_tool(struct run *run, struct weft_span *span, const char *tool, const char *args)
{
    struct watchdog *wd = &run->watchdog;
    uint64_t key = hash_text(hash_text(1469598103934665603ull, tool, false), args, true);
    char evidence[200];

    wd->tool_repeats = key == wd->tool_key ? wd->tool_repeats + 1 : 1;
    wd->tool_key = key;
    if (wd->tool_repeats >= run->wf->supervisor.watchdog.same_tool) {
        snprintf(evidence, sizeof(evidence),
                 "%.60s called %u times in a row with the same arguments", tool, wd->tool_repeats);
        wd->tool_repeats = 0;
        detect(run, span, "repeated_tool", evidence);
    }
}

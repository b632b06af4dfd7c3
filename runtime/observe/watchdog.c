/* runtime/observe/watchdog.c - the stuck-loop watchdog (see watchdog.h). Everything here runs on
 * the engine thread under the run lock; detectors keep a short bounded history. */
#include "runtime/common/attr_keys.h"
#include "runtime/observe/webhook.h"
#include "runtime/run/run.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FNV_OFFSET 1469598103934665603ull
#define FNV_PRIME  1099511628211ull

static const char *const kind_names[WD_KIND_COUNT] = {"handoff", "tool", "route", "reflection",
                                                      "flow"};

/* FNV-1a over @p s; normalised: runs of white space folded to one space, ASCII letters
 * lower-cased, leading and trailing white space ignored. A 0 byte separates fields. */
static uint64_t
hash_text(uint64_t h, const char *s, bool is_normalised)
{
    bool is_pending_space = false;
    bool has_text = false;

    for (; s != NULL && *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (is_normalised) {
            if (isspace(c)) {
                is_pending_space = has_text;
                continue;
            }
            if (is_pending_space) {
                h ^= ' ';
                h *= FNV_PRIME;
                is_pending_space = false;
            }
            has_text = true;
            c = (unsigned char)tolower(c);
        }
        h ^= c;
        h *= FNV_PRIME;
    }
    h ^= 0;
    return h * FNV_PRIME;
}

static const char *
policy_name(const struct run *run)
{
    switch (run->cfg.wf->supervisor.watchdog.policy) {
    case WATCHDOG_FAIL:
        return "fail";
    case WATCHDOG_BREAK:
        return "break";
    case WATCHDOG_ESCALATE:
        return "escalate";
    default:
        return "warn";
    }
}

/* The budget detectors warn and alert; the budget itself ends the run. */
static bool
is_budget_kind(const char *kind)
{
    return strcmp(kind, "iteration_budget") == 0 || strcmp(kind, "token_budget") == 0 ||
           strcmp(kind, "cost_budget") == 0;
}

static const char *
agent_name(const struct run *run, size_t agent)
{
    const struct wf_agent *a = weft__rt_agent(run, agent);

    return a != NULL ? a->name : run->cfg.wf->supervisor.name;
}

/* Counted, logged and alerted: thread-safe, so the stall timer uses it too. @p span_hex is
 * the span the detection is about (NULL: the root). */
static void
announce(struct run *run,
         const char *kind,
         const char *evidence,
         const char *span_hex,
         const char *agent)
{
    struct watchdog *wd = &run->watchdog;

    weft__rt_metrics_stuck(run->tel.metrics, kind);
    WEFT_LOG(WEFT_LOG_WARN, "run %s: stuck loop (%s): %s", run->store.run_id, kind, evidence);
    if (wd->webhook != NULL) {
        struct rt_webhook_alert alert = {
            .kind = kind,
            .evidence = evidence,
            .policy = is_budget_kind(kind) ? "warn" : policy_name(run),
            .workflow = run->cfg.wf->name,
            .run_id = run->store.run_id,
            .trace_id = wd->trace_hex[0] != '\0' ? wd->trace_hex : NULL,
            .span_id = span_hex != NULL          ? span_hex
                       : wd->root_hex[0] != '\0' ? wd->root_hex
                                                 : NULL,
            .agent = agent,
        };
        (void)weft__rt_webhook_post(wd->webhook, &alert); /* a full queue is counted there */
    }
}

/* Apply the policy to a loop (not to a budget warning). */
static void
apply_policy(struct run *run, const char *kind, const char *evidence)
{
    struct watchdog *wd = &run->watchdog;
    watchdog_policy policy = run->cfg.wf->supervisor.watchdog.policy;

    if (is_budget_kind(kind) || policy == WATCHDOG_WARN || wd->is_fail) {
        return;
    }
    if (policy == WATCHDOG_ESCALATE && wd->has_escalated) {
        /* The loop came back after the hand-over: nobody could resolve it. */
        snprintf(wd->stuck_reason, sizeof(wd->stuck_reason),
                 "stuck loop (%s) after escalation: %.240s", kind, evidence);
        wd->is_fail = true;
        return;
    }
    snprintf(wd->stuck_reason, sizeof(wd->stuck_reason), "stuck loop (%s): %.280s", kind, evidence);
    if (policy == WATCHDOG_BREAK) {
        wd->is_break = true;
    } else if (policy == WATCHDOG_ESCALATE && run->cfg.wf->flow == NULL) {
        wd->is_escalate_pending = true;
    } else {
        wd->is_fail = true; /* fail, or escalate in a flow (refused at load; kept safe) */
    }
}

/* The span side of a detection (engine thread): event and ERROR status on @p span, the same
 * event on the root span, and the policy. @p extra: more event attributes (may be NULL). */
static void
mark(struct run *run,
     struct weft_span *span,
     const char *kind,
     const char *evidence,
     const struct weft_attr *extra,
     size_t extra_count)
{
    struct watchdog *wd = &run->watchdog;
    struct weft_attr a[10];
    size_t n = 0;

    wd->detections++;
    a[n++] = weft_attr_str("weft.stuck_loop.kind", kind);
    a[n++] = weft_attr_str("weft.stuck_loop.evidence", evidence);
    a[n++] =
        weft_attr_str("weft.stuck_loop.policy", is_budget_kind(kind) ? "warn" : policy_name(run));
    for (size_t i = 0; i < extra_count && n < sizeof(a) / sizeof(a[0]); i++) {
        a[n++] = extra[i];
    }
    weft_span_add_event(span, "weft.stuck_loop", a, n, 0);
    weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "stuck_loop");
    weft_span_set_status(span, WEFT_STATUS_ERROR, evidence);
    if (run->tel.root != NULL && run->tel.root != span) {
        weft_span_add_event(run->tel.root, "weft.stuck_loop", a, n, 0);
    }
    apply_policy(run, kind, evidence);
}

static void
span_hex_of(const struct weft_span_context *ctx, char out[2 * WEFT_SPAN_ID_SIZE + 1])
{
    out[0] = '\0';
    if (weft_span_context_is_valid(ctx)) {
        weft_hex_encode(ctx->span_id, WEFT_SPAN_ID_SIZE, out);
    }
}

static void
detect(struct run *run,
       struct weft_span *span,
       const char *kind,
       const char *evidence,
       const char *agent)
{
    struct weft_span_context ctx;
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];

    weft_span_context_of(span, &ctx);
    span_hex_of(&ctx, span_hex);
    announce(run, kind, evidence, span_hex[0] != '\0' ? span_hex : NULL, agent);
    mark(run, span, kind, evidence, NULL, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Progress facts and repetitions                                                              */

/* Remember @p h; @return true when it is new (the run made progress). */
static bool
learn(struct watchdog *wd, uint64_t h)
{
    size_t n = wd->fact_count < WATCHDOG_FACTS ? wd->fact_count : WATCHDOG_FACTS;

    for (size_t i = 0; i < n; i++) {
        if (wd->facts[i] == h) {
            return false;
        }
    }
    wd->facts[wd->fact_count % WATCHDOG_FACTS] = h;
    wd->fact_count++;
    wd->epoch++;
    return true;
}

void
weft__rt_watchdog_fact(struct run *run, const char *text)
{
    if (text != NULL) {
        (void)learn(&run->watchdog, hash_text(FNV_OFFSET, text, true));
    }
}

static bool
is_reported(const struct watchdog *wd, uint64_t loop)
{
    size_t n = wd->loop_count < WATCHDOG_LOOPS ? wd->loop_count : WATCHDOG_LOOPS;

    for (size_t i = 0; i < n; i++) {
        if (wd->loops[i] == loop) {
            return true;
        }
    }
    return false;
}

/* Append the distinct names of the agents involved in occurrences [@p oldest, newest]. */
static void
agents_of(const struct run *run, const struct wd_ring *ring, size_t oldest, char *out, size_t len)
{
    size_t seen[2 * WATCHDOG_WINDOW_MAX];
    size_t count = 0;
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = oldest; i < ring->count; i++) {
        const struct wd_occurrence *o = &ring->items[i % WATCHDOG_WINDOW_MAX];
        size_t both[2] = {o->from, o->to};
        for (size_t k = 0; k < 2; k++) {
            bool is_known = both[k] == WF_NONE && k == 1; /* no second agent */
            for (size_t j = 0; j < count && !is_known; j++) {
                is_known = seen[j] == both[k];
            }
            if (is_known || count == sizeof(seen) / sizeof(seen[0])) {
                continue;
            }
            seen[count++] = both[k];
            used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s",
                                     used > 0 ? "," : "", agent_name(run, both[k]));
            if (used >= len) {
                out[len - 1] = '\0';
                return;
            }
        }
    }
}

/* Push an occurrence of @p sig at @p span (steps @p from -> @p to) onto @p ring, stamped with
 * the current epoch. */
static void
push_occurrence(const struct watchdog *wd,
                struct wd_ring *ring,
                uint64_t sig,
                size_t from,
                size_t to,
                struct weft_span *span)
{
    struct wd_occurrence *o = &ring->items[ring->count % WATCHDOG_WINDOW_MAX];

    o->sig = sig;
    o->epoch = wd->epoch;
    o->from = from;
    o->to = to;
    weft_span_context_of(span, &o->span);
    o->span.trace_state = NULL;
    ring->count++;
}

/* The ring positions of @p sig among the last `window` occurrences of @p ring, newest first,
 * into @p hits; at most `repeats` of them. @return how many. */
static size_t
find_repeats(const struct watchdog *wd,
             const struct wd_ring *ring,
             uint64_t sig,
             size_t hits[WATCHDOG_WINDOW_MAX])
{
    size_t look = ring->count < wd->window ? ring->count : wd->window;
    size_t hit_count = 0;

    for (size_t i = 0; i < look && hit_count < wd->repeats; i++) {
        size_t pos = ring->count - 1 - i;
        if (ring->items[pos % WATCHDOG_WINDOW_MAX].sig == sig) {
            hits[hit_count++] = pos;
        }
    }
    return hit_count;
}

/* One report per loop: every signature of the cycle (A -> B and B -> A), from ring position
 * @p first on, is remembered as this loop. */
static void
remember_loop(struct watchdog *wd, const struct wd_ring *ring, watchdog_kind kind, size_t first)
{
    for (size_t pos = first; pos < ring->count; pos++) {
        uint64_t member =
            ring->items[pos % WATCHDOG_WINDOW_MAX].sig ^ ((uint64_t)kind + 1) * FNV_PRIME;
        if (!is_reported(wd, member)) {
            wd->loops[wd->loop_count % WATCHDOG_LOOPS] = member;
            wd->loop_count++;
        }
    }
}

/* Link the detection @p span and the run's root to each repetition (@p hits, newest first),
 * and list their span ids, oldest first and comma-separated, in @p ids. */
static void
link_repetitions(struct run *run,
                 struct weft_span *span,
                 const struct wd_ring *ring,
                 const size_t *hits,
                 char *ids,
                 size_t ids_len)
{
    unsigned repeats = run->watchdog.repeats;
    size_t used = 0;

    ids[0] = '\0';
    for (size_t i = repeats; i-- > 0;) {
        const struct wd_occurrence *r = &ring->items[hits[i] % WATCHDOG_WINDOW_MAX];
        char hex[2 * WEFT_SPAN_ID_SIZE + 1];
        struct weft_attr la = weft_attr_int("weft.stuck_loop.repetition", (int64_t)(repeats - i));
        span_hex_of(&r->span, hex);
        if (hex[0] == '\0') {
            continue;
        }
        used += (size_t)snprintf(ids + used, ids_len - used, "%s%s", used > 0 ? "," : "", hex);
        /* Links from the detection and from the root to each repetition. */
        if (i != 0) {
            (void)weft_span_add_link(span, &r->span, &la, 1);
        }
        if (run->tel.root != NULL && run->tel.root != span) {
            (void)weft_span_add_link(run->tel.root, &r->span, &la, 1);
        }
    }
}

/* Report the loop of @p sig found at @p span (its repetitions at @p hits in @p ring): the
 * evidence, the agents involved, the links to the repetitions; announced and marked on the
 * span. */
static void
report_loop(struct run *run,
            struct weft_span *span,
            watchdog_kind kind,
            uint64_t sig,
            const struct wd_ring *ring,
            const size_t *hits,
            const char *what)
{
    const struct watchdog *wd = &run->watchdog;
    char evidence[300];
    char agents[160];
    char sig_hex[17];
    char ids[WATCHDOG_WINDOW_MAX * 17 + 1];
    struct weft_attr extra[4];
    struct weft_span_context here;
    char here_hex[2 * WEFT_SPAN_ID_SIZE + 1];

    snprintf(evidence, sizeof(evidence), "%s %.240s, %u times without progress", kind_names[kind],
             what, wd->repeats);
    agents_of(run, ring, hits[wd->repeats - 1], agents, sizeof(agents));
    snprintf(sig_hex, sizeof(sig_hex), "%016llx", (unsigned long long)sig);
    link_repetitions(run, span, ring, hits, ids, sizeof(ids));
    extra[0] = weft_attr_str("weft.stuck_loop.signature", sig_hex);
    extra[1] = weft_attr_int("weft.stuck_loop.repetitions", wd->repeats);
    extra[2] = weft_attr_str("weft.stuck_loop.agents", agents);
    extra[3] = weft_attr_str("weft.stuck_loop.span_ids", ids);
    if (wd->is_catching_up) {
        apply_policy(run, kind_names[kind], evidence);
        return;
    }
    weft_span_context_of(span, &here);
    span_hex_of(&here, here_hex);
    announce(run, kind_names[kind], evidence, here_hex[0] != '\0' ? here_hex : NULL, agents);
    mark(run, span, kind_names[kind], evidence, extra, 4);
}

/* Record an occurrence of @p sig (kind @p kind) at @p span, after its own fact (if any) was
 * learnt. A loop when the signature recurs `repeats` times among the last `window`
 * occurrences of its kind and no new fact was learnt since its second occurrence of those.
 * @p what describes one occurrence ("tester -> coder 'make the test pass'"). */
static void
occur(struct run *run,
      struct weft_span *span,
      watchdog_kind kind,
      uint64_t sig,
      size_t from,
      size_t to,
      const char *what)
{
    struct watchdog *wd = &run->watchdog;
    struct wd_ring *ring = &wd->rings[kind];
    size_t hits[WATCHDOG_WINDOW_MAX]; /* ring positions of the signature, newest first */
    uint64_t loop = sig ^ ((uint64_t)kind + 1) * FNV_PRIME;

    push_occurrence(wd, ring, sig, from, to, span);
    if (find_repeats(wd, ring, sig, hits) < wd->repeats) {
        return;
    }
    /* hits[repeats - 1] is the first of the repetitions, hits[repeats - 2] the second. */
    if (ring->items[hits[wd->repeats - 2] % WATCHDOG_WINDOW_MAX].epoch != wd->epoch) {
        return; /* something new came out of the repetitions: the loop makes progress */
    }
    if (wd->has_escalated &&
        ring->items[hits[wd->repeats - 2] % WATCHDOG_WINDOW_MAX].epoch < wd->escalated_epoch) {
        return; /* the escalation's own output is progress; count afresh after it */
    }
    if (is_reported(wd, loop)) {
        if (wd->has_escalated && !wd->is_fail &&
            run->cfg.wf->supervisor.watchdog.policy == WATCHDOG_ESCALATE) {
            char evidence[300];
            snprintf(evidence, sizeof(evidence), "%.200s repeated after escalation", what);
            apply_policy(run, kind_names[kind], evidence);
        }
        return; /* one report per loop */
    }
    remember_loop(wd, ring, kind, hits[wd->repeats - 1]);
    report_loop(run, span, kind, sig, ring, hits, what);
}

void
weft__rt_watchdog_step(struct run *run, struct weft_span *decision, size_t step)
{
    const struct plan_step *s = &run->ps.plan.steps[step];
    size_t from =
        run->ps.last_actor != NULL ? weft__rt_find_agent(run, run->ps.last_actor) : WF_NONE;
    const char *to = weft__rt_step_actor(run, s);
    uint64_t sig = hash_text(
        hash_text(hash_text(FNV_OFFSET, agent_name(run, from), false), to, false), s->task, true);
    char what[240];

    if (s->executor != EXEC_AGENT && s->spec != NULL) {
        /* A command, HTTP or file step is told what to do by its parameters, not by a task
         * text (its task is the executor's name): four different commands in a row are four
         * hand-offs, not one repeated, while the same command run again is the same. */
        char *params = json_dumps(s->spec, JSON_COMPACT | JSON_SORT_KEYS);
        sig = hash_text(sig, params, false);
        free(params);
    }

    snprintf(what, sizeof(what), "%.48s \xe2\x86\x92 %.48s '%.100s'", agent_name(run, from), to,
             s->task != NULL ? s->task : "");
    occur(run, decision, WD_HANDOFF, sig, from, s->agent, what);
}

void
weft__rt_watchdog_step_done(struct run *run, size_t step)
{
    const struct plan_step *s = &run->ps.plan.steps[step];

    /* A step's outcome is a fact: its output, or its failure text. */
    weft__rt_watchdog_fact(run, s->status == STEP_COMPLETED ? s->result : s->feedback);
}

void
weft__rt_watchdog_decision(struct run *run,
                           struct weft_span *decision,
                           const char *next,
                           bool is_step)
{
    struct watchdog *wd = &run->watchdog;
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;
    char evidence[200];

    if (!wd->is_budget_warned &&
        run->tel.result->iterations * 5 >= (size_t)sup->max_iterations * 4) {
        wd->is_budget_warned = true;
        snprintf(evidence, sizeof(evidence), "%zu of %u iterations spent",
                 run->tel.result->iterations, sup->max_iterations);
        detect(run, decision, "iteration_budget", evidence, NULL);
    }
    if (!is_step && next != NULL && strcmp(next, "end") != 0) {
        /* A route that started nothing: the plan's state is its only outcome. */
        char what[160];
        char state[96];
        snprintf(state, sizeof(state), "plan v%u, %zu steps, %zu completed", run->ps.plan.version,
                 run->ps.plan.count, weft__plan_count_status(&run->ps.plan, STEP_COMPLETED));
        weft__rt_watchdog_fact(run, state);
        snprintf(what, sizeof(what), "%.48s \xe2\x86\x92 %.64s", sup->name, next);
        occur(run, decision, WD_ROUTE, hash_text(FNV_OFFSET, next, false), WF_NONE,
              weft__rt_find_agent(run, next), what);
    }
}

void
weft__rt_watchdog_tool(
    struct run *run, struct weft_span *span, const char *tool, const char *args, const char *result)
{
    uint64_t sig = hash_text(hash_text(FNV_OFFSET, tool, false), args, true);
    char what[200];
    size_t agent = WF_NONE;

    (void)learn(&run->watchdog, hash_text(sig, result, true));
    if (run->ps.last_actor != NULL) {
        agent = weft__rt_find_agent(run, run->ps.last_actor);
    }
    snprintf(what, sizeof(what), "%.48s %.120s", tool, args != NULL ? args : "");
    occur(run, span, WD_TOOL, sig, agent, WF_NONE, what);
}

void
weft__rt_watchdog_reflection(
    struct run *run, struct weft_span *span, size_t agent, const char *feedback, const char *output)
{
    uint64_t sig = hash_text(hash_text(FNV_OFFSET, agent_name(run, agent), false), feedback, true);
    char what[240];

    (void)learn(&run->watchdog, hash_text(sig, output, true));
    snprintf(what, sizeof(what), "%.48s rejected with '%.140s'", agent_name(run, agent),
             feedback != NULL ? feedback : "");
    occur(run, span, WD_REFLECTION, sig, agent, WF_NONE, what);
}

void
weft__rt_watchdog_flow(struct run *run,
                       struct weft_span *span,
                       const char *node,
                       const char *back_to,
                       size_t agent,
                       size_t back_to_agent,
                       const char *result)
{
    uint64_t sig = hash_text(hash_text(FNV_OFFSET, node, false), back_to, false);
    char what[200];

    (void)learn(&run->watchdog, hash_text(sig, result, true));
    snprintf(what, sizeof(what), "%.64s \xe2\x86\x92 %.64s", node, back_to);
    occur(run, span, WD_FLOW, sig, agent, back_to_agent, what);
}

bool
weft__rt_watchdog_should_stop(const struct run *run)
{
    const struct watchdog *wd = &run->watchdog;

    return wd->is_fail || wd->is_break || wd->is_escalate_pending;
}

/* ------------------------------------------------------------------------------------------ */
/* Budgets                                                                                      */

/* One budget: a warning at 80 %, then the crossing; each once per run. */
static void
check_budget(struct run *run,
             struct weft_span *span,
             const char *kind,
             double spent,
             double budget,
             const char *unit,
             bool *is_warned,
             bool *is_crossed)
{
    char evidence[200];

    if (budget <= 0) {
        return;
    }
    if (!*is_crossed && spent >= budget) {
        *is_crossed = true;
        *is_warned = true;
        snprintf(evidence, sizeof(evidence), "%.6g of %.6g %s spent: budget crossed", spent, budget,
                 unit);
        detect(run, span, kind, evidence, NULL);
    } else if (!*is_warned && spent * 5 >= budget * 4) {
        *is_warned = true;
        snprintf(evidence, sizeof(evidence), "%.6g of %.6g %s spent (80 %% of the budget)", spent,
                 budget, unit);
        detect(run, span, kind, evidence, NULL);
    }
}

void
weft__rt_watchdog_budget(struct run *run, struct weft_span *span)
{
    struct watchdog *wd = &run->watchdog;
    const struct wf_supervisor *sup = &run->cfg.wf->supervisor;
    const struct weft_run_result *r = run->tel.result;

    check_budget(run, span, "token_budget", (double)(r->input_tokens + r->output_tokens),
                 (double)sup->max_tokens, "tokens", &wd->is_tokens_warned, &wd->is_tokens_crossed);
    check_budget(run, span, "cost_budget", r->cost_usd, sup->max_cost_usd, "USD",
                 &wd->is_cost_warned, &wd->is_cost_crossed);
}

/* ------------------------------------------------------------------------------------------ */
/* Wall-clock stalls                                                                            */

static struct timespec
mono_in(uint64_t ns)
{
    struct timespec ts;
    uint64_t sum = 0;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    sum = (uint64_t)ts.tv_nsec + ns % 1000000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u + sum / 1000000000u);
    ts.tv_nsec = (long)(sum % 1000000000u);
    return ts;
}

/* The timer: checks the time since the last progress a few times per stall period (at most
 * every second) and reports each stall once; progress re-arms it. */
static void *
timer_main(void *arg)
{
    struct run *run = arg;
    struct watchdog *wd = &run->watchdog;
    uint64_t stall_ns = (uint64_t)run->cfg.wf->supervisor.watchdog.stall_ms * 1000000u;
    uint64_t period = stall_ns / 4 < 1000000000u ? stall_ns / 4 : 1000000000u;
    uint64_t reported = 0; /* the progress mark a stall was reported for */

    if (period < 1000000u) {
        period = 1000000u;
    }
    pthread_mutex_lock(&wd->timer_lock);
    while (!wd->is_timer_stopping) {
        struct timespec until = mono_in(period);
        uint64_t last = 0;
        uint64_t now = 0;

        while (!wd->is_timer_stopping &&
               pthread_cond_timedwait(&wd->timer_cond, &wd->timer_lock, &until) != ETIMEDOUT) {
        }
        if (wd->is_timer_stopping) {
            break;
        }
        last = atomic_load(&wd->last_progress);
        now = weft__monotonic_ns();
        if (now - last >= stall_ns && last != reported) {
            char evidence[sizeof(wd->stall_evidence)];
            char agent[sizeof(wd->activity_agent)];

            reported = last;
            if (wd->activity_step[0] != '\0') {
                snprintf(evidence, sizeof(evidence),
                         "no progress for %.0f s in step %.40s (agent %.48s) while waiting on "
                         "%.100s",
                         (double)(now - last) / 1e9, wd->activity_step, wd->activity_agent,
                         wd->activity[0] != '\0' ? wd->activity : "its work");
            } else {
                snprintf(evidence, sizeof(evidence),
                         "no progress for %.0f s while waiting on %.120s",
                         (double)(now - last) / 1e9,
                         wd->activity[0] != '\0' ? wd->activity : "the supervisor");
            }
            snprintf(agent, sizeof(agent), "%s", wd->activity_agent);
            memcpy(wd->stall_evidence, evidence, sizeof(evidence));
            wd->is_stall_pending = true;
            pthread_mutex_unlock(&wd->timer_lock);
            announce(run, "stall", evidence, NULL, agent[0] != '\0' ? agent : NULL);
            pthread_mutex_lock(&wd->timer_lock);
        }
    }
    pthread_mutex_unlock(&wd->timer_lock);
    return NULL;
}

static void
start_webhook(struct run *run)
{
    const struct watchdog_config *cfg = &run->cfg.wf->supervisor.watchdog;
    struct rt_webhook_config hc;
    const char *format = getenv("WEFT_WATCHDOG_WEBHOOK_FORMAT");
    const char *auth = getenv("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION");
    char *header = NULL;
    const char *headers[1];

    memset(&hc, 0, sizeof(hc));
    hc.url = cfg->webhook_url != NULL ? cfg->webhook_url : getenv("WEFT_WATCHDOG_WEBHOOK_URL");
    if (hc.url == NULL || hc.url[0] == '\0') {
        return;
    }
    hc.format = cfg->webhook_format;
    if (hc.format < 0) {
        hc.format = format != NULL && strcmp(format, "alertmanager") == 0 ? RT_WEBHOOK_ALERTMANAGER
                                                                          : RT_WEBHOOK_GENERIC;
        if (format != NULL && format[0] != '\0' && strcmp(format, "alertmanager") != 0 &&
            strcmp(format, "generic") != 0) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "WEFT_WATCHDOG_WEBHOOK_FORMAT=%.40s: expected generic or alertmanager; "
                     "sending generic",
                     format);
        }
    }
    /* A credential comes from the environment only, never from the workflow file. */
    if (auth != NULL && auth[0] != '\0') {
        header = weft__malloc(strlen(auth) + sizeof("Authorization: "));
        if (header != NULL) {
            sprintf(header, "Authorization: %s", auth);
            headers[0] = header;
            hc.headers = headers;
            hc.header_count = 1;
        }
    }
    if (weft__rt_webhook_new(&hc, &run->watchdog.webhook) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "run %s: the watchdog webhook is off (see the error above)",
                 run->store.run_id);
    }
    if (header != NULL) {
        memset(header, 0, strlen(header)); /* the copy in the webhook is the only one left */
        weft__free(header);
    }
}

/* A watchdog setting: the workflow's, else the environment's, else @p fallback. A bad value
 * in the environment is reported and the fallback used. */
static unsigned
setting(unsigned configured, const char *env, unsigned fallback, unsigned lo, unsigned hi)
{
    const char *text = getenv(env);
    char *end = NULL;
    unsigned long v = 0;

    if (configured != 0) {
        return configured;
    }
    if (text == NULL || text[0] == '\0') {
        return fallback;
    }
    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        WEFT_LOG(WEFT_LOG_ERROR, "%s=%.40s: expected an integer from %u to %u; using %u", env, text,
                 lo, hi, fallback);
        return fallback;
    }
    return (unsigned)v;
}

void
weft__rt_watchdog_start(struct run *run)
{
    struct watchdog *wd = &run->watchdog;
    struct weft_span_context ctx;
    pthread_condattr_t attr;

    weft_span_context_of(run->tel.root, &ctx);
    if (weft_span_context_is_valid(&ctx)) {
        weft_hex_encode(ctx.trace_id, WEFT_TRACE_ID_SIZE, wd->trace_hex);
        weft_hex_encode(ctx.span_id, WEFT_SPAN_ID_SIZE, wd->root_hex);
    }
    wd->repeats = setting(run->cfg.wf->supervisor.watchdog.repeats, "WEFT_WATCHDOG_REPEATS", 3, 2,
                          WATCHDOG_WINDOW_MAX);
    wd->window = setting(run->cfg.wf->supervisor.watchdog.window, "WEFT_WATCHDOG_WINDOW", 10, 2,
                         WATCHDOG_WINDOW_MAX);
    if (wd->window < wd->repeats) {
        wd->window = wd->repeats; /* a window holds at least the repetitions it looks for */
    }
    atomic_store(&wd->last_progress, weft__monotonic_ns());
    start_webhook(run);
    if (run->cfg.wf->supervisor.watchdog.stall_ms == 0) {
        return;
    }
    pthread_mutex_init(&wd->timer_lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->timer_cond, &attr);
    pthread_condattr_destroy(&attr);
    wd->has_timer = pthread_create(&wd->timer, NULL, timer_main, run) == 0;
    if (!wd->has_timer) {
        WEFT_LOG(WEFT_LOG_ERROR, "run %s: no stall detection (cannot start its thread)",
                 run->store.run_id);
        pthread_cond_destroy(&wd->timer_cond);
        pthread_mutex_destroy(&wd->timer_lock);
    }
}

void
weft__rt_watchdog_stop(struct run *run)
{
    struct watchdog *wd = &run->watchdog;

    if (wd->has_timer) {
        pthread_mutex_lock(&wd->timer_lock);
        wd->is_timer_stopping = true;
        pthread_cond_signal(&wd->timer_cond);
        pthread_mutex_unlock(&wd->timer_lock);
        pthread_join(wd->timer, NULL);
        pthread_cond_destroy(&wd->timer_cond);
        pthread_mutex_destroy(&wd->timer_lock);
        wd->has_timer = false;
    }
    weft__rt_webhook_free(wd->webhook, 2000);
    wd->webhook = NULL;
}

/* snprintf(dst, cap, "%s", s) without the formatting machinery: this runs three times a
 * step. */
static void
copy_text(char *dst, size_t cap, const char *s)
{
    size_t len = strnlen(s, cap - 1);

    memcpy(dst, s, len);
    dst[len] = '\0';
}

void
weft__rt_watchdog_activity(struct run *run, const char *what, const char *agent, const char *step)
{
    struct watchdog *wd = &run->watchdog;

    atomic_store(&wd->last_progress, weft__monotonic_ns());
    if (wd->has_timer) {
        pthread_mutex_lock(&wd->timer_lock);
        copy_text(wd->activity, sizeof(wd->activity), what);
        if (agent != NULL) {
            copy_text(wd->activity_agent, sizeof(wd->activity_agent), agent);
        }
        if (step != NULL) {
            copy_text(wd->activity_step, sizeof(wd->activity_step), step);
        }
        pthread_mutex_unlock(&wd->timer_lock);
    }
}

void
weft__rt_watchdog_progress(struct run *run)
{
    atomic_store(&run->watchdog.last_progress, weft__monotonic_ns());
}

void
weft__rt_watchdog_poll(struct run *run, struct weft_span *span)
{
    struct watchdog *wd = &run->watchdog;
    char evidence[sizeof(wd->stall_evidence)];
    bool is_pending = false;

    if (!wd->has_timer) {
        return;
    }
    pthread_mutex_lock(&wd->timer_lock);
    is_pending = wd->is_stall_pending;
    wd->is_stall_pending = false;
    memcpy(evidence, wd->stall_evidence, sizeof(evidence));
    pthread_mutex_unlock(&wd->timer_lock);
    if (is_pending) {
        mark(run, span, "stall", evidence, NULL, 0);
    }
}

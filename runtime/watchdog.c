/* runtime/watchdog.c - the stuck-loop watchdog (see watchdog.h). Everything here runs on the
 * engine thread under the run lock; detectors keep a short bounded history. */
#include "engine.h"
#include "webhook.h"

#include "../tracing/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static const char *
policy_name(const struct run *run)
{
    switch (run->wf->supervisor.watchdog.policy) {
    case WATCHDOG_ABORT:
        return "abort";
    case WATCHDOG_BREAK:
        return "break";
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

    rt_metrics_stuck(run->metrics, kind);
    WEFT_LOG(WEFT_LOG_WARN, "run %s: stuck loop (%s): %s", run->run_id, kind, evidence);
    if (wd->webhook != NULL) {
        struct rt_webhook_alert alert = {
            .kind = kind,
            .evidence = evidence,
            .policy = is_budget_kind(kind) ? "warn" : policy_name(run),
            .workflow = run->wf->name,
            .run_id = run->run_id,
            .trace_id = wd->trace_hex[0] != '\0' ? wd->trace_hex : NULL,
            .span_id = span_hex != NULL          ? span_hex
                       : wd->root_hex[0] != '\0' ? wd->root_hex
                                                 : NULL,
            .agent = agent,
        };
        (void)rt_webhook_post(wd->webhook, &alert); /* a full queue is counted there */
    }
}

/* The span side of a detection (engine thread): event, ERROR status and the policy. */
static void
mark(struct run *run, struct weft_span *span, const char *kind, const char *evidence)
{
    struct watchdog *wd = &run->watchdog;
    struct weft_attr a[3];

    wd->detections++;
    a[0] = weft_attr_str("weft.stuck_loop.kind", kind);
    a[1] = weft_attr_str("weft.stuck_loop.evidence", evidence);
    a[2] = weft_attr_str("weft.stuck_loop.policy", policy_name(run));
    weft_span_add_event(span, "weft.stuck_loop", a, 3, 0);
    weft_span_set_str(span, "error.type", "stuck_loop");
    weft_span_set_status(span, WEFT_STATUS_ERROR, evidence);
    if (is_budget_kind(kind)) {
        return; /* a warning ahead of the budget, or the budget that ends the run anyway */
    }
    if (run->wf->supervisor.watchdog.policy == WATCHDOG_BREAK) {
        wd->is_break = true;
    } else if (run->wf->supervisor.watchdog.policy == WATCHDOG_ABORT) {
        wd->is_abort = true;
        snprintf(wd->abort_reason, sizeof(wd->abort_reason), "stuck loop (%s): %.200s", kind,
                 evidence);
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
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1] = "";

    weft_span_context_of(span, &ctx);
    if (weft_span_context_is_valid(&ctx)) {
        weft_hex_encode(ctx.span_id, WEFT_SPAN_ID_SIZE, span_hex);
    }
    announce(run, kind, evidence, span_hex[0] != '\0' ? span_hex : NULL, agent);
    mark(run, span, kind, evidence);
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
        detect(run, decision, "repeated_agent", evidence, rt_step_actor(run, s));
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
            detect(run, decision, "ping_pong", evidence, run->wf->agents[a].name);
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
        detect(run, decision, "iteration_budget", evidence, NULL);
    }
    wd->stalled_decisions = is_progress ? 0 : wd->stalled_decisions + 1;
    if (wd->stalled_decisions >= sup->watchdog.no_progress) {
        snprintf(evidence, sizeof(evidence),
                 "%u decisions without a plan change or a completed step", wd->stalled_decisions);
        wd->stalled_decisions = 0;
        detect(run, decision, "no_progress", evidence, NULL);
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
        detect(run, span, "repeated_tool", evidence, NULL);
    }
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
rt_watchdog_budget(struct run *run, struct weft_span *span)
{
    struct watchdog *wd = &run->watchdog;
    const struct wf_supervisor *sup = &run->wf->supervisor;
    const struct weft_run_result *r = run->result;

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
    uint64_t stall_ns = (uint64_t)run->wf->supervisor.watchdog.stall_ms * 1000000u;
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

            reported = last;
            snprintf(evidence, sizeof(evidence), "no progress for %.0f s while waiting on %.120s",
                     (double)(now - last) / 1e9,
                     wd->activity[0] != '\0' ? wd->activity : "the supervisor");
            memcpy(wd->stall_evidence, evidence, sizeof(evidence));
            wd->is_stall_pending = true;
            pthread_mutex_unlock(&wd->timer_lock);
            announce(run, "stall", evidence, NULL, NULL);
            pthread_mutex_lock(&wd->timer_lock);
        }
    }
    pthread_mutex_unlock(&wd->timer_lock);
    return NULL;
}

static void
start_webhook(struct run *run)
{
    const struct watchdog_config *cfg = &run->wf->supervisor.watchdog;
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
    if (rt_webhook_new(&hc, &run->watchdog.webhook) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "run %s: the watchdog webhook is off (see the error above)",
                 run->run_id);
    }
    if (header != NULL) {
        memset(header, 0, strlen(header)); /* the copy in the webhook is the only one left */
        weft__free(header);
    }
}

void
rt_watchdog_start(struct run *run)
{
    struct watchdog *wd = &run->watchdog;
    struct weft_span_context ctx;
    pthread_condattr_t attr;

    weft_span_context_of(run->root, &ctx);
    if (weft_span_context_is_valid(&ctx)) {
        weft_hex_encode(ctx.trace_id, WEFT_TRACE_ID_SIZE, wd->trace_hex);
        weft_hex_encode(ctx.span_id, WEFT_SPAN_ID_SIZE, wd->root_hex);
    }
    atomic_store(&wd->last_progress, weft__monotonic_ns());
    start_webhook(run);
    if (run->wf->supervisor.watchdog.stall_ms == 0) {
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
                 run->run_id);
        pthread_cond_destroy(&wd->timer_cond);
        pthread_mutex_destroy(&wd->timer_lock);
    }
}

void
rt_watchdog_stop(struct run *run)
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
    rt_webhook_free(wd->webhook, 2000);
    wd->webhook = NULL;
}

void
rt_watchdog_activity(struct run *run, const char *what)
{
    struct watchdog *wd = &run->watchdog;

    atomic_store(&wd->last_progress, weft__monotonic_ns());
    if (wd->has_timer) {
        pthread_mutex_lock(&wd->timer_lock);
        snprintf(wd->activity, sizeof(wd->activity), "%s", what);
        pthread_mutex_unlock(&wd->timer_lock);
    }
}

void
rt_watchdog_progress(struct run *run)
{
    atomic_store(&run->watchdog.last_progress, weft__monotonic_ns());
}

void
rt_watchdog_poll(struct run *run, struct weft_span *span)
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
        mark(run, span, "stall", evidence);
    }
}

/* runtime/observe/metrics.c - collaboration metrics (see metrics.h). Names follow the OTel GenAI
 * semantic conventions where they exist (gen_ai.client.token.usage, gen_ai.client.operation.
 * duration, gen_ai.invoke_agent.duration, gen_ai.execute_tool.duration, with their bucket
 * advice) and use the weft. prefix elsewhere. */
#include "runtime/observe/metrics.h"
#include "runtime/observe/semconv.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define MAX_ACTIVE 1024

struct rt_metrics {
    char *workflow;
    struct rt_metrics *tee;  /* records the same measurements, or NULL (weft__rt_metrics_new_tee) */
    _Atomic uint64_t events; /* measurements so far: a snapshot with nothing new is skipped */
    struct weft_instrument *invocations;
    struct weft_instrument *step_duration;
    struct weft_instrument *loops;
    struct weft_instrument *run_loops;
    struct weft_instrument *handoffs;
    struct weft_instrument *verdicts;
    struct weft_instrument *breaker;
    struct weft_instrument *corrections;
    struct weft_instrument *reward;
    struct weft_instrument *runs;
    struct weft_instrument *run_duration;
    struct weft_instrument *active;
    struct weft_instrument *oldest;
    struct weft_instrument *tokens;
    struct weft_instrument *op_duration;
    struct weft_instrument *agent_duration;
    struct weft_instrument *tool_duration;
    struct weft_instrument *tool_calls;
    struct weft_instrument *mcp_calls;
    struct weft_instrument *tool_errors;
    struct weft_instrument *skill_lookups;
    struct weft_instrument *skills_saved;
    struct weft_instrument *skill_outcomes;
    struct weft_instrument *embeddings;
    struct weft_instrument *embedding_errors;
    struct weft_instrument *lessons;
    struct weft_instrument *mistakes;
    struct weft_instrument *mcp_truncated;
    struct weft_instrument *cost;
    struct weft_instrument *stuck;
    struct weft_instrument *traces_kept;
    struct weft_instrument *traces_dropped;
};

/* Active runs of this process (start times), for the oldest-active-run gauge. */
static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t active_start[MAX_ACTIVE];
static uint64_t active_token[MAX_ACTIVE];
static size_t active_count;
static uint64_t next_token = 1;

static void
observe_oldest(struct weft_instrument *gauge, void *user_data)
{
    uint64_t now = weft__now_ns();
    uint64_t oldest = now;

    (void)user_data;
    pthread_mutex_lock(&active_lock);
    for (size_t i = 0; i < active_count; i++) {
        if (active_start[i] < oldest) {
            oldest = active_start[i];
        }
    }
    pthread_mutex_unlock(&active_lock);
    weft_gauge_observe(gauge, (double)(now - oldest) / 1e9, NULL, 0);
}

static struct weft_instrument *
make(struct weft_meter *meter,
     weft_instrument_kind kind,
     const char *name,
     const char *unit,
     const char *description,
     const double *bounds,
     size_t bound_count,
     bool *is_ok)
{
    struct weft_instrument *in = NULL;

    if (weft_meter_instrument(meter, kind, name, unit, description, bounds, bound_count, &in) !=
        WEFT_OK) {
        *is_ok = false;
    }
    return in;
}

struct rt_metrics *
weft__rt_metrics_new(struct weft_meter *meter, const char *workflow)
{
    /* GenAI bucket advice: tokens in powers of 4, durations doubling from 10 ms. */
    static const double token_bounds[] = {
        1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
    static const double duration_bounds[] = {0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                             1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
    static const double count_bounds[] = {0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89};
    static const double reward_bounds[] = {-5, -2, -1, -0.5, 0, 0.5, 1, 2, 5, 10, 20};
    struct rt_metrics *m = NULL;
    bool is_ok = true;

    if (meter == NULL) {
        return NULL;
    }
    m = weft__calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->workflow = weft__strdup(workflow);
    m->invocations = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.agent.invocations", "{invocation}",
                          "Agent steps by outcome", NULL, 0, &is_ok);
    m->step_duration = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "weft.step.duration", "s",
                            "Agent step duration", duration_bounds, 14, &is_ok);
    m->loops = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.loop.iterations", "{iteration}",
                    "Loop iterations by kind", NULL, 0, &is_ok);
    m->run_loops = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "weft.run.loop_iterations", "{iteration}",
                        "Loop iterations per run", count_bounds, 11, &is_ok);
    m->handoffs = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.handoffs", "{handoff}",
                       "Hand-offs between agents", NULL, 0, &is_ok);
    m->verdicts = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.reflection.verdicts", "{verdict}",
                       "Reflection verdicts", NULL, 0, &is_ok);
    m->breaker = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.circuit_breaker.trips", "{trip}",
                      "Circuit-breaker trips", NULL, 0, &is_ok);
    m->corrections = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.corrections", "{correction}",
                          "Correction attempts by outcome", NULL, 0, &is_ok);
    m->reward = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "weft.run.reward", "1", "Run reward",
                     reward_bounds, 11, &is_ok);
    m->runs = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.runs", "{run}", "Runs by final status",
                   NULL, 0, &is_ok);
    m->traces_kept = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.traces.kept", "{trace}",
                          "Run traces a sampling policy kept, by rule", NULL, 0, &is_ok);
    m->traces_dropped = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.traces.dropped", "{trace}",
                             "Run traces a sampling policy dropped, by rule", NULL, 0, &is_ok);
    m->run_duration = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "weft.run.duration", "s",
                           "Run duration", duration_bounds, 14, &is_ok);
    m->active = make(meter, WEFT_INSTRUMENT_UPDOWN_COUNTER, "weft.runs.active", "{run}",
                     "Runs in progress", NULL, 0, &is_ok);
    m->oldest = make(meter, WEFT_INSTRUMENT_GAUGE, "weft.runs.oldest_active_age", "s",
                     "Age of the oldest run in progress", NULL, 0, &is_ok);
    m->tokens = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "gen_ai.client.token.usage", "{token}",
                     "Tokens used per LLM call", token_bounds, 14, &is_ok);
    m->op_duration = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "gen_ai.client.operation.duration", "s",
                          "LLM call duration", duration_bounds, 14, &is_ok);
    m->agent_duration = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "gen_ai.invoke_agent.duration", "s",
                             "Agent invocation duration", duration_bounds, 14, &is_ok);
    m->tool_duration = make(meter, WEFT_INSTRUMENT_HISTOGRAM, "gen_ai.execute_tool.duration", "s",
                            "Tool call duration", duration_bounds, 14, &is_ok);
    m->tool_calls = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.tool.calls", "{call}",
                         "Tool calls by outcome", NULL, 0, &is_ok);
    m->mcp_calls = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.mcp.calls", "{call}",
                        "MCP tool calls by server and outcome", NULL, 0, &is_ok);
    m->tool_errors =
        make(meter, WEFT_INSTRUMENT_COUNTER, "weft.tool.errors", "{error}",
             "Tool calls that failed, by agent and error.type (a fixed set)", NULL, 0, &is_ok);
    m->skill_lookups = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.skills.lookups", "{lookup}",
                            "Skill memory lookups by outcome (hit, miss)", NULL, 0, &is_ok);
    m->skills_saved =
        make(meter, WEFT_INSTRUMENT_COUNTER, "weft.skills.saved", "{skill}",
             "Skills kept (new, or an existing one updated or kept)", NULL, 0, &is_ok);
    m->skill_outcomes =
        make(meter, WEFT_INSTRUMENT_COUNTER, "weft.skills.step_outcomes", "{step}",
             "Agent steps by outcome, with and without injected skills", NULL, 0, &is_ok);
    m->embeddings = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.skills.embeddings", "{call}",
                         "Embeddings calls of skill memory by operation (lookup, save) and outcome",
                         NULL, 0, &is_ok);
    m->embedding_errors = make(
        meter, WEFT_INSTRUMENT_COUNTER, "weft.skills.embedding_errors", "{error}",
        "Embeddings calls that failed (text ranking used instead) by error.type", NULL, 0, &is_ok);
    m->lessons = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.lessons", "{lesson}",
                      "Lessons learned from corrections and used (guided, preempted, planned)",
                      NULL, 0, &is_ok);
    m->mistakes =
        make(meter, WEFT_INSTRUMENT_COUNTER, "weft.lessons.mistakes", "{failure}",
             "Step failures, repeated when a lesson already covered them", NULL, 0, &is_ok);
    m->mcp_truncated =
        make(meter, WEFT_INSTRUMENT_COUNTER, "weft.mcp.truncated_results", "{result}",
             "MCP tool results cut at the server's max_output_bytes", NULL, 0, &is_ok);
    m->cost = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.llm.cost", "USD",
                   "LLM cost from the workflow's price table", NULL, 0, &is_ok);
    m->stuck = make(meter, WEFT_INSTRUMENT_COUNTER, "weft.stuck_loops", "{detection}",
                    "Stuck-loop detections by kind", NULL, 0, &is_ok);
    if (!is_ok || m->workflow == NULL) {
        WEFT_LOG(WEFT_LOG_WARN, "metrics: some weft instruments could not be created");
    }
    if (m->oldest != NULL) {
        weft_gauge_set_callback(m->oldest, observe_oldest, NULL);
    }
    return m;
}

struct rt_metrics *
weft__rt_metrics_new_tee(struct weft_meter *run_meter,
                         struct weft_meter *meter,
                         const char *workflow)
{
    struct rt_metrics *m = NULL;

    if (run_meter == NULL) {
        m = weft__rt_metrics_new(meter, workflow);
        weft__rt_metrics_zero_known(m);
        return m;
    }
    m = weft__rt_metrics_new(run_meter, workflow);
    if (m != NULL && meter != NULL) {
        m->tee = weft__rt_metrics_new(meter, workflow);
    }
    /* The caller's meter shows the workflow's known series at 0 from the run's start (the run's
     * own meter need not: its snapshots leave zeros out). */
    weft__rt_metrics_zero_known(m != NULL ? m->tee : NULL);
    return m;
}

uint64_t
weft__rt_metrics_events(struct rt_metrics *m)
{
    return m != NULL ? atomic_load_explicit(&m->events, memory_order_relaxed) : 0;
}

const char *
weft__rt_metrics_workflow(const struct rt_metrics *m)
{
    return m != NULL && m->workflow != NULL ? m->workflow : "";
}

void
weft__rt_metrics_free(struct rt_metrics *m)
{
    if (m == NULL) {
        return;
    }
    weft__rt_metrics_free(m->tee);
    weft__free(m->workflow);
    weft__free(m);
}

#define WF(m) weft_attr_str("workflow", (m)->workflow != NULL ? (m)->workflow : "")

/* Every kind the stuck-loop watchdog reports (watchdog.c: its repetition kinds, the stall timer
 * and the three budget warnings; docs/metrics.md lists them). */
static const char *const stuck_kinds[] = {"handoff",          "tool",         "route",
                                          "reflection",       "flow",         "stall",
                                          "iteration_budget", "token_budget", "cost_budget"};

/* A counter series that appears at 1 between two scrapes has no increase() in Prometheus, so an
 * alert on the first stuck loop or breaker trip of a workflow would miss it if the series did
 * not exist before (the alert rules also count a new series, dashboards/weft-alerts.yml; with
 * these zeros the first event is an ordinary increase wherever the workflow was seen before).
 * Adding 0 creates a series without counting an event; snapshots skip sums at 0. */
void
weft__rt_metrics_zero_known(struct rt_metrics *m)
{
    struct weft_attr a[2];

    if (m == NULL || m->workflow == NULL || m->workflow[0] == '\0') {
        return; /* the families alone (weft_runtime_metrics_register) */
    }
    a[0] = WF(m);
    (void)weft_counter_add(m->breaker, 0, a, 1);
    for (size_t i = 0; i < sizeof(stuck_kinds) / sizeof(stuck_kinds[0]); i++) {
        a[1] = weft_attr_str("kind", stuck_kinds[i]);
        (void)weft_counter_add(m->stuck, 0, a, 2);
    }
}

void
weft__rt_metrics_run_start(struct rt_metrics *m, uint64_t *token)
{
    struct weft_attr a[1];

    *token = 0;
    if (m == NULL) {
        return;
    }
    a[0] = WF(m);
    weft_counter_add(m->active, 1, a, 1);
    if (m->tee != NULL) {
        weft_counter_add(m->tee->active, 1, a, 1);
    }
    pthread_mutex_lock(&active_lock);
    if (active_count < MAX_ACTIVE) {
        *token = next_token++;
        active_start[active_count] = weft__now_ns();
        active_token[active_count] = *token;
        active_count++;
    }
    pthread_mutex_unlock(&active_lock);
}

void
weft__rt_metrics_run_end(struct rt_metrics *m, uint64_t token, const struct weft_run_result *r)
{
    struct weft_attr a[2];
    size_t total = 0;

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    a[0] = WF(m);
    a[1] = weft_attr_str("status", weft_run_status_name(r->status));
    weft_counter_add(m->active, -1, a, 1);
    weft_counter_add(m->runs, 1, a, 2);
    weft_histogram_record(m->run_duration, (double)r->duration_ns / 1e9, a, 1);
    weft_histogram_record(m->reward, r->reward, a, 1);
    for (int k = 0; k < WEFT_LOOP_KIND_COUNT; k++) {
        total += r->loops[k];
    }
    weft_histogram_record(m->run_loops, (double)total, a, 1);
    if (r->is_trace_sampled) {
        a[1] = weft_attr_str("rule", r->sampling_rule);
        weft_counter_add(r->is_trace_kept ? m->traces_kept : m->traces_dropped, 1, a, 2);
        if (m->tee != NULL) {
            weft_counter_add(r->is_trace_kept ? m->tee->traces_kept : m->tee->traces_dropped, 1, a,
                             2);
        }
        a[1] = weft_attr_str("status", weft_run_status_name(r->status));
    }
    if (m->tee != NULL) {
        weft_counter_add(m->tee->active, -1, a, 1);
        weft_counter_add(m->tee->runs, 1, a, 2);
        weft_histogram_record(m->tee->run_duration, (double)r->duration_ns / 1e9, a, 1);
        weft_histogram_record(m->tee->reward, r->reward, a, 1);
        weft_histogram_record(m->tee->run_loops, (double)total, a, 1);
    }
    pthread_mutex_lock(&active_lock);
    for (size_t i = 0; i < active_count; i++) {
        if (active_token[i] == token) {
            active_start[i] = active_start[active_count - 1];
            active_token[i] = active_token[active_count - 1];
            active_count--;
            break;
        }
    }
    pthread_mutex_unlock(&active_lock);
}

void
weft__rt_metrics_agent(struct rt_metrics *m, const char *agent, bool is_success, double seconds)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_agent(m->tee, agent, is_success, seconds);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str("outcome", is_success ? "success" : "failure");
    weft_counter_add(m->invocations, 1, a, 3);
    weft_histogram_record(m->step_duration, seconds, a, 2);
    weft_histogram_record(m->agent_duration, seconds, a, 2);
}

void
weft__rt_metrics_handoff(struct rt_metrics *m, const char *from, const char *to)
{
    struct weft_attr a[3];

    if (m == NULL || from == NULL || to == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_handoff(m->tee, from, to);
    a[0] = WF(m);
    a[1] = weft_attr_str("from", from);
    a[2] = weft_attr_str("to", to);
    weft_counter_add(m->handoffs, 1, a, 3);
}

void
weft__rt_metrics_loop(struct rt_metrics *m, weft_loop_kind kind)
{
    struct weft_attr a[2];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_loop(m->tee, kind);
    a[0] = WF(m);
    a[1] = weft_attr_str("kind", weft_loop_kind_name(kind));
    weft_counter_add(m->loops, 1, a, 2);
    if (kind == WEFT_LOOP_CIRCUIT_BREAKER) {
        weft_counter_add(m->breaker, 1, a, 1);
    }
}

void
weft__rt_metrics_verdict(struct rt_metrics *m, const char *agent, const char *verdict)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_verdict(m->tee, agent, verdict);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str("verdict", verdict);
    weft_counter_add(m->verdicts, 1, a, 3);
}

void
weft__rt_metrics_tool(struct rt_metrics *m, const char *tool, bool is_success, double seconds)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_tool(m->tee, tool, is_success, seconds);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_TOOL_NAME, tool);
    a[2] = weft_attr_str("outcome", is_success ? "success" : "failure");
    weft_counter_add(m->tool_calls, 1, a, 3);
    weft_histogram_record(m->tool_duration, seconds, a, 2);
}

void
weft__rt_metrics_tool_error(struct rt_metrics *m, const char *agent, const char *kind)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_tool_error(m->tee, agent, kind);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str(WEFT__ERROR_TYPE, kind);
    weft_counter_add(m->tool_errors, 1, a, 3);
}

void
weft__rt_metrics_mcp(struct rt_metrics *m, const char *server, const char *outcome, bool is_cut)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_mcp(m->tee, server, outcome, is_cut);
    a[0] = WF(m);
    a[1] = weft_attr_str("server", server);
    a[2] = weft_attr_str("outcome", outcome);
    weft_counter_add(m->mcp_calls, 1, a, 3);
    if (is_cut) {
        weft_counter_add(m->mcp_truncated, 1, a, 2);
    }
}

void
weft__rt_metrics_skill_lookup(struct rt_metrics *m, const char *agent, bool is_hit)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_skill_lookup(m->tee, agent, is_hit);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str("outcome", is_hit ? "hit" : "miss");
    weft_counter_add(m->skill_lookups, 1, a, 3);
}

void
weft__rt_metrics_skill_saved(struct rt_metrics *m, const char *agent, bool is_new)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_skill_saved(m->tee, agent, is_new);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str("outcome", is_new ? "new" : "existing");
    weft_counter_add(m->skills_saved, 1, a, 3);
}

void
weft__rt_metrics_skill_outcome(struct rt_metrics *m,
                               const char *agent,
                               bool had_skill,
                               bool is_success)
{
    struct weft_attr a[4];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_skill_outcome(m->tee, agent, had_skill, is_success);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str("with_skill", had_skill ? "true" : "false");
    a[3] = weft_attr_str("outcome", is_success ? "success" : "failure");
    weft_counter_add(m->skill_outcomes, 1, a, 4);
}

void
weft__rt_metrics_embedding(struct rt_metrics *m, const char *operation, const char *error_type)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_embedding(m->tee, operation, error_type);
    a[0] = WF(m);
    a[1] = weft_attr_str("operation", operation);
    a[2] = weft_attr_str("outcome", error_type == NULL ? "ok" : "error");
    weft_counter_add(m->embeddings, 1, a, 3);
    if (error_type != NULL) {
        a[2] = weft_attr_str(WEFT__ERROR_TYPE, error_type);
        weft_counter_add(m->embedding_errors, 1, a, 3);
    }
}

void
weft__rt_metrics_lesson(struct rt_metrics *m, const char *outcome)
{
    struct weft_attr a[2];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_lesson(m->tee, outcome);
    a[0] = WF(m);
    a[1] = weft_attr_str("outcome", outcome);
    weft_counter_add(m->lessons, 1, a, 2);
}

void
weft__rt_metrics_mistake(struct rt_metrics *m, const char *error_type, bool is_repeated)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_mistake(m->tee, error_type, is_repeated);
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__ERROR_TYPE, error_type);
    a[2] = weft_attr_str("repeated", is_repeated ? "true" : "false");
    weft_counter_add(m->mistakes, 1, a, 3);
}

void
weft__rt_metrics_correction(struct rt_metrics *m, bool is_rewired)
{
    struct weft_attr a[2];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_correction(m->tee, is_rewired);
    a[0] = WF(m);
    a[1] = weft_attr_str("outcome", is_rewired ? "rewired" : "invalid");
    weft_counter_add(m->corrections, 1, a, 2);
}

void
weft__rt_metrics_stuck(struct rt_metrics *m, const char *kind)
{
    struct weft_attr a[2];

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_stuck(m->tee, kind);
    a[0] = WF(m);
    a[1] = weft_attr_str("kind", kind);
    weft_counter_add(m->stuck, 1, a, 2);
}

void
weft__rt_metrics_llm(struct rt_metrics *m,
                     const char *provider,
                     const char *model,
                     const char *purpose,
                     int64_t input_tokens,
                     int64_t output_tokens,
                     double cost_usd,
                     double seconds,
                     const char *error_type)
{
    struct weft_attr a[5];
    size_t n = 0;

    if (m == NULL) {
        return;
    }
    atomic_fetch_add_explicit(&m->events, 1, memory_order_relaxed);
    weft__rt_metrics_llm(m->tee, provider, model, purpose, input_tokens, output_tokens, cost_usd,
                         seconds, error_type);
    a[n++] = weft_attr_str(WEFT__GENAI_OPERATION_NAME, "chat");
    a[n++] = weft_attr_str(WEFT__GENAI_PROVIDER_NAME, provider);
    a[n++] = weft_attr_str(WEFT__GENAI_REQUEST_MODEL, model);
    if (error_type != NULL) {
        a[n++] = weft_attr_str(WEFT__ERROR_TYPE, error_type);
    }
    weft_histogram_record(m->op_duration, seconds, a, n);
    (void)purpose;
    if (input_tokens >= 0) {
        struct weft_attr t[4] = {a[0], a[1], a[2], weft_attr_str("gen_ai.token.type", "input")};
        weft_histogram_record(m->tokens, (double)input_tokens, t, 4);
    }
    if (output_tokens >= 0) {
        struct weft_attr t[4] = {a[0], a[1], a[2], weft_attr_str("gen_ai.token.type", "output")};
        weft_histogram_record(m->tokens, (double)output_tokens, t, 4);
    }
    if (cost_usd > 0) {
        struct weft_attr c[2] = {WF(m), weft_attr_str(WEFT__GENAI_REQUEST_MODEL, model)};
        weft_counter_add(m->cost, cost_usd, c, 2);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* What the state store knows (weft serve)                                                     */

void
weft__rt_metrics_stored_run(struct rt_metrics *m, const struct weft_run_info *info)
{
    struct weft_attr a[2];
    json_t *loops = NULL;
    const char *kind = NULL;
    json_t *count = NULL;
    double total = 0;

    if (m == NULL) {
        return;
    }
    a[0] = WF(m);
    /* A finished run adds 0: its workflow's series shows "none in progress", not a gap. */
    weft_counter_add(m->active, info->ended_ns == 0 ? 1 : 0, a, 1);
    if (info->ended_ns == 0) {
        return;
    }
    a[1] = weft_attr_str("status", info->status != NULL ? info->status : "unknown");
    weft_counter_add(m->runs, 1, a, 2);
    weft_histogram_record(
        m->run_duration,
        info->ended_ns > info->started_ns ? (double)(info->ended_ns - info->started_ns) / 1e9 : 0.0,
        a, 1);
    weft_histogram_record(m->reward, info->reward, a, 1);
    if (info->cost_usd > 0) {
        weft_counter_add(m->cost, info->cost_usd, a, 1);
    }
    loops = info->loops != NULL ? json_loads(info->loops, 0, NULL) : NULL;
    json_object_foreach(loops, kind, count)
    {
        struct weft_attr k[2] = {a[0], weft_attr_str("kind", kind)};
        double n = json_is_integer(count) ? (double)json_integer_value(count) : 0;

        if (n > 0 && strcmp(kind, "stuck") != 0) { /* stuck loops: not a loop kind */
            weft_counter_add(m->loops, n, k, 2);
            if (strcmp(kind, weft_loop_kind_name(WEFT_LOOP_CIRCUIT_BREAKER)) == 0) {
                weft_counter_add(m->breaker, n, a, 1);
            }
            total += n;
        }
    }
    json_decref(loops);
    weft_histogram_record(m->run_loops, total, a, 1);
}

void
weft__rt_metrics_stored_end(struct rt_metrics *m,
                            const struct weft_run_info *info,
                            bool is_end_missing)
{
    struct weft_attr a[2];
    json_t *loops = NULL;
    const char *kind = NULL;
    json_t *count = NULL;
    double total = 0;

    if (m == NULL) {
        return;
    }
    a[0] = WF(m);
    weft_counter_add(m->active, info->ended_ns == 0 ? 1 : 0, a, 1);
    if (info->ended_ns == 0 || !is_end_missing) {
        return;
    }
    /* The run's snapshots stop before its end (it was killed, then marked by another
     * process): its end-of-run families come from the row. */
    a[1] = weft_attr_str("status", info->status != NULL ? info->status : "unknown");
    weft_counter_add(m->runs, 1, a, 2);
    weft_histogram_record(
        m->run_duration,
        info->ended_ns > info->started_ns ? (double)(info->ended_ns - info->started_ns) / 1e9 : 0.0,
        a, 1);
    weft_histogram_record(m->reward, info->reward, a, 1);
    loops = info->loops != NULL ? json_loads(info->loops, 0, NULL) : NULL;
    json_object_foreach(loops, kind, count)
    {
        total += json_is_integer(count) ? (double)json_integer_value(count) : 0;
    }
    json_decref(loops);
    weft_histogram_record(m->run_loops, total, a, 1);
}

void
weft__rt_metrics_stored_agents(struct rt_metrics *m,
                               const char *agent,
                               bool is_success,
                               uint64_t count)
{
    struct weft_attr a[3];

    if (m == NULL) {
        return;
    }
    a[0] = WF(m);
    a[1] = weft_attr_str(WEFT__GENAI_AGENT_NAME, agent);
    a[2] = weft_attr_str("outcome", is_success ? "success" : "failure");
    weft_counter_add(m->invocations, (double)count, a, 3);
}

void
weft__rt_metrics_stored_oldest(struct rt_metrics *m, double age_s)
{
    if (m == NULL || m->oldest == NULL) {
        return;
    }
    /* The process's own active runs do not matter here: the store's do. */
    weft_gauge_set_callback(m->oldest, NULL, NULL);
    weft_gauge_set(m->oldest, age_s, NULL, 0);
}

weft_err
weft_runtime_metrics_register(struct weft_meter *meter)
{
    struct rt_metrics *m = NULL;

    if (meter == NULL) {
        return WEFT_EINVAL;
    }
    m = weft__rt_metrics_new(meter, "");
    if (m == NULL) {
        return WEFT_ENOMEM;
    }
    weft__rt_metrics_free(m);
    return WEFT_OK;
}

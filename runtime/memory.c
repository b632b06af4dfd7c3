/* runtime/memory.c - skill memory in a run (memory.h).
 *
 * A lookup is one full-text search of the state store for the step's agent and task, as a
 * GenAI retrieval span (`retrieval weft.skills`, gen_ai.operation.name retrieval,
 * gen_ai.data_source.id weft.skills, gen_ai.retrieval.top_k, gen_ai.retrieval.documents with
 * each hit's id and score; the query text only when content is captured). Hits above the
 * workflow's min_score are shown to the agent as worked examples in its instructions, each cut
 * to a share of a fixed budget (SHOWN_MAX), so memory never crowds out the task.
 *
 * A skill is kept after the step, not after each attempt: an attempt that reflection rejected
 * and a later one fixed is one success (the fixed output is the solution).
 */
#include "memory.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"
#include "evaluate.h"
#include "metrics.h"
#include "spans.h"
#include "state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_SOURCE "weft.skills"
#define SHOWN_MAX   6000u /* bytes of worked examples shown to an agent at most, all included */
#define TOOLS_MAX   16u   /* tool calls kept in a solution */

/* The store skills live in: the run's state, or a task run's own handle on the shared one. */
static struct rt_state *
memory_store(const struct run *run)
{
    return run->store.memory != NULL ? run->store.memory : run->store.state;
}

void
weft__rt_recall_cleanup(struct rt_recall *r)
{
    if (r == NULL) {
        return;
    }
    weft__free(r->text);
    json_decref(r->ids);
    memset(r, 0, sizeof(*r));
}

/* The worked examples for the agent's instructions, each cut to its share of SHOWN_MAX. */
static char *
shown_text(const struct weft__skill *hits, size_t n)
{
    struct weft__buf b;
    size_t share = n > 0 ? SHOWN_MAX / n : SHOWN_MAX;

    weft__buf_init(&b, SHOWN_MAX + 512);
    (void)weft__buf_append_str(&b, "\n\nSolutions that worked for similar tasks before (reuse "
                                   "what applies; the task in front of you comes first):");
    for (size_t i = 0; i < n; i++) {
        size_t task_len = strlen(hits[i].task);
        size_t sol_len = strlen(hits[i].solution);
        size_t task_cut = task_len < share / 4 ? task_len : share / 4;
        size_t sol_cut = sol_len < share - task_cut ? sol_len : share - task_cut;
        (void)weft__buf_printf(&b, "\n\n[%zu] Task: %.*s%s\nSolution: %.*s%s", i + 1, (int)task_cut,
                               hits[i].task, task_cut < task_len ? " [...]" : "", (int)sol_cut,
                               hits[i].solution, sol_cut < sol_len ? " [...]" : "");
    }
    if (b.data == NULL) {
        return weft__strdup("");
    }
    return b.data;
}

/* The retrieval span's documents: [{"id", "score"}] as JSON text (new). */
static char *
documents_json(const struct weft__skill *hits, size_t n)
{
    json_t *docs = json_array();
    char *text = NULL;
    char *owned = NULL;

    for (size_t i = 0; docs != NULL && i < n; i++) {
        json_array_append_new(docs,
                              json_pack("{s:s, s:f}", "id", hits[i].id, "score", hits[i].score));
    }
    text = docs != NULL ? json_dumps(docs, JSON_COMPACT) : NULL;
    owned = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    json_decref(docs);
    return owned;
}

/* Words of @p text (lowercase ASCII letters and digits, and any byte of a UTF-8 sequence),
 * distinct, at most WORDS_MAX, into @p words (each NUL-terminated in @p store). */
#define WORDS_MAX 64
#define WORD_MAX  48

struct words {
    size_t count;
    char w[WORDS_MAX][WORD_MAX];
};

static bool
is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static void
words_of(const char *text, struct words *out)
{
    const unsigned char *p = (const unsigned char *)text;

    out->count = 0;
    while (*p != '\0' && out->count < WORDS_MAX) {
        char word[WORD_MAX];
        size_t len = 0;
        bool is_seen = false;
        while (*p != '\0' && !is_word_byte(*p)) {
            p++;
        }
        while (*p != '\0' && is_word_byte(*p)) {
            if (len + 1 < sizeof(word)) {
                word[len++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + ('a' - 'A') : *p);
            }
            p++;
        }
        word[len] = '\0';
        for (size_t i = 0; i < out->count && !is_seen; i++) {
            is_seen = strcmp(out->w[i], word) == 0;
        }
        if (len > 0 && !is_seen) {
            memcpy(out->w[out->count++], word, len + 1);
        }
    }
}

/* The share of @p query's distinct words that @p task has, in [0, 1]: how much of the new task
 * an old one covers. Unlike BM25, it does not depend on how many skills are stored, so one
 * threshold means the same with 1 skill or 100,000. */
static double
coverage(const struct words *query, const char *task)
{
    struct words t;
    size_t hit = 0;

    if (query->count == 0) {
        return 0;
    }
    words_of(task, &t);
    for (size_t i = 0; i < query->count; i++) {
        bool is_hit = false;
        for (size_t j = 0; j < t.count && !is_hit; j++) {
            is_hit = strcmp(query->w[i], t.w[j]) == 0;
        }
        hit += is_hit ? 1 : 0;
    }
    return (double)hit / (double)query->count;
}

static int
by_score(const void *a, const void *b)
{
    double x = ((const struct weft__skill *)a)->score;
    double y = ((const struct weft__skill *)b)->score;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* The store's full-text candidates (4 k, any rank) rescored by coverage(), those at or above
 * @p min_score kept, best first, at most @p k; the rest freed. */
static void
rescore(struct weft__skill *hits, size_t *n, const char *query, size_t k, double min_score)
{
    struct words q;
    size_t kept = 0;

    if (*n == 0) {
        return; /* hits is NULL */
    }
    words_of(query, &q);
    for (size_t i = 0; i < *n; i++) {
        hits[i].score = coverage(&q, hits[i].task);
    }
    qsort(hits, *n, sizeof(*hits), by_score);
    for (size_t i = 0; i < *n; i++) {
        if (kept < k && hits[i].score >= min_score) {
            kept++;
        } else {
            weft__skill_cleanup(&hits[i]);
        }
    }
    *n = kept;
}

weft_err
weft__rt_memory_search(struct run *run,
                       const char *agent,
                       const char *query,
                       size_t k,
                       double min_score,
                       struct weft__skill **hits,
                       size_t *n)
{
    weft_err err = WEFT_OK;

    *hits = NULL;
    *n = 0;
    if (memory_store(run) == NULL) {
        return WEFT_OK;
    }
    err = weft__state_skills_search(memory_store(run), agent, query, 4 * k, 0.0, hits, n);
    if (err == WEFT_OK) {
        rescore(*hits, n, query, k, min_score);
    }
    return err;
}

void
weft__rt_skills_recall(struct run *run,
                       size_t index,
                       struct weft_span *agent_span,
                       struct rt_recall *out)
{
    const struct wf_memory *mem = &run->cfg.wf->memory;
    const struct plan_step *step = &run->ps.plan.steps[index];
    const char *agent = weft__rt_step_actor(run, step);
    struct weft__skill *hits = NULL;
    size_t n = 0;
    struct weft_span *span = NULL;
    char *docs = NULL;
    weft_err err = WEFT_OK;

    memset(out, 0, sizeof(*out));
    if (!mem->is_skills || memory_store(run) == NULL || step->task == NULL) {
        return;
    }
    span = weft__rt_span_start(run, RT_SPAN_RETRIEVAL, DATA_SOURCE, agent_span, NULL, 0);
    weft_span_set_int(span, "gen_ai.retrieval.top_k", (int64_t)mem->k);
    weft_span_set_str(span, "gen_ai.agent.name", agent);
    weft_span_set_double(span, "weft.skills.min_score", mem->min_score);
    weft__rt_span_content(run, span, "gen_ai.retrieval.query.text", step->task);
    err =
        weft__state_skills_search(memory_store(run), agent, step->task, 4 * mem->k, 0.0, &hits, &n);
    if (err == WEFT_OK) {
        rescore(hits, &n, step->task, mem->k, mem->min_score);
    }
    if (err != WEFT_OK) {
        weft_span_set_str(span, "error.type", weft_strerror(err));
        weft_span_set_status(span, WEFT_STATUS_ERROR, "skill lookup failed");
        n = 0;
    }
    docs = documents_json(hits, n);
    weft_span_set_str(span, "gen_ai.retrieval.documents", docs != NULL ? docs : "[]");
    weft_span_set_int(span, "weft.skills.hits", (int64_t)n);
    weft_span_end(span, 0);
    weft__free(docs);
    weft__rt_metrics_skill_lookup(run->tel.metrics, agent, n > 0);
    out->text = shown_text(hits, n);
    if (n > 0) {
        out->ids = json_array();
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(out->ids, json_string(hits[i].id));
            (void)weft__state_skill_used(memory_store(run), hits[i].id, weft__now_ns());
        }
        weft__rt_skills_mark(agent_span, out->ids);
    }
    weft__skills_free(hits, n);
}

/* One assistant message's tool calls that got a non-error answer, into @p b. */
static void
append_calls(struct weft__buf *b, const json_t *msgs, size_t at, size_t *kept)
{
    const json_t *calls = json_object_get(json_array_get(msgs, at), "tool_calls");

    size_t i = 0;
    const json_t *call = NULL;

    json_array_foreach(calls, i, call)
    {
        const char *id = json_string_value(json_object_get(call, "id"));
        const json_t *fn = json_object_get(call, "function");
        bool is_ok = false;
        for (size_t j = at + 1; j < json_array_size(msgs) && !is_ok && id != NULL; j++) {
            const json_t *m = json_array_get(msgs, j);
            const char *content = json_string_value(json_object_get(m, "content"));
            is_ok = json_equal(json_object_get(m, "tool_call_id"), json_object_get(call, "id")) &&
                    content != NULL && strncmp(content, "{\"error\"", 8) != 0;
        }
        if (is_ok && *kept < TOOLS_MAX) {
            (void)weft__buf_printf(b, "\n- %s %s", json_string_value(json_object_get(fn, "name")),
                                   json_string_value(json_object_get(fn, "arguments")));
            (*kept)++;
        }
    }
}

char *
weft__rt_skills_tools(const json_t *msgs)
{
    struct weft__buf b;
    size_t kept = 0;
    size_t i = 0;
    const json_t *m = NULL;

    weft__buf_init(&b, 0);
    (void)weft__buf_append(&b, "", 0);
    json_array_foreach(msgs, i, m)
    {
        if (json_object_get(m, "tool_calls") != NULL) {
            append_calls(&b, msgs, i, &kept);
        }
    }
    return b.data; /* NULL: out of memory */
}

void
weft__rt_skills_mark(struct weft_span *span, const json_t *ids)
{
    const char *text[16];
    size_t n = 0;

    for (; n < json_array_size(ids) && n < 16; n++) {
        text[n] = json_string_value(json_array_get(ids, n));
    }
    if (n > 0) {
        weft_span_set_str_array(span, "weft.skills.injected", text, n);
    }
}

void
weft__rt_skills_learn(struct run *run,
                      size_t index,
                      const char *tools,
                      const struct weft_span_context *span,
                      bool had_skill)
{
    const struct wf_memory *mem = &run->cfg.wf->memory;
    const struct plan_step *step = &run->ps.plan.steps[index];
    const char *agent = weft__rt_step_actor(run, step);
    bool is_success = step->status == STEP_COMPLETED;
    struct weft__skill s;
    struct weft__buf solution;
    bool is_new = false;

    if (!mem->is_skills || memory_store(run) == NULL) {
        return;
    }
    weft__rt_metrics_skill_outcome(run->tel.metrics, agent, had_skill, is_success);
    if (!is_success || !step->has_reward || step->reward <= 0 || step->result == NULL) {
        return;
    }
    weft__buf_init(&solution, 0);
    (void)weft__buf_append_str(&solution, step->result);
    if (tools != NULL && tools[0] != '\0') {
        (void)weft__buf_printf(&solution, "\nTool calls that worked:%s", tools);
    }
    memset(&s, 0, sizeof(s));
    s.agent = (char *)agent;
    s.task = step->task;
    s.solution = solution.data != NULL ? solution.data : step->result;
    s.workflow = run->cfg.wf->name;
    s.run_id = run->store.run_id;
    s.reward = step->reward;
    if (weft_span_context_is_valid(span)) {
        weft_hex_encode(span->trace_id, WEFT_TRACE_ID_SIZE, s.trace_id);
        weft_hex_encode(span->span_id, WEFT_SPAN_ID_SIZE, s.span_id);
    }
    weft__state_skills_retention(memory_store(run), mem->max_per_agent, mem->max_age_ns);
    if (weft__state_skill_save(memory_store(run), &s, &is_new) == WEFT_OK) {
        weft__rt_metrics_skill_saved(run->tel.metrics, agent, is_new);
    }
    weft__buf_cleanup(&solution);
}

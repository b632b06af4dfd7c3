/* runtime/memory/memory.c - skill memory in a run (memory.h).
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
 *
 * Embeddings (memory.embeddings): a save embeds the task and stores the vector with the skill;
 * a lookup embeds the new task once, compares it with every vector of the agent's skills made
 * by the same model (a brute-force scan: retention caps an agent at 1,000 skills by default,
 * a few milliseconds of dot products), and ranks the union of the full-text and the nearest
 * candidates by (1 - weight) * coverage + weight * cosine. An `embeddings {model}` span under
 * the retrieval span (lookup) or the step's agent span (save) traces each call. A call that
 * fails (endpoint down, an error status, an answer that is not an embedding, a vector of the
 * wrong length) is counted and traced, the run logs one warning naming the endpoint, and that
 * lookup or save goes on with text alone: memory never fails a step. The run lock is released
 * around the call, as around an LLM call: a parallel flow's other agents do not wait on it.
 */
#include "runtime/memory/memory.h"
#include "runtime/common/attr_keys.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "runtime/decide/evaluate.h"
#include "runtime/memory/embed.h"
#include "runtime/observe/metrics.h"
#include "runtime/observe/spans.h"
#include "runtime/state/state.h"

#include <libstemmer.h>
#include <math.h>
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

/* Words of @p text (lowercase ASCII letters and digits, and any byte of a UTF-8 sequence),
 * stemmed, distinct, at most WORDS_MAX, into @p words (each NUL-terminated). */
#define WORDS_MAX 64
#define WORD_MAX  48

struct words {
    size_t count;
    struct sb_stemmer *stemmer; /* Snowball English; NULL (out of memory): words as they are */
    char w[WORDS_MAX][WORD_MAX];
};

/* The query's words, with a stemmer of their own (a Snowball stemmer is not thread-safe, and
 * lookups run on several agent threads): words_cleanup() releases it. */
static void
words_init(struct words *out)
{
    out->count = 0;
    out->stemmer = sb_stemmer_new("english", NULL);
}

static void
words_cleanup(struct words *w)
{
    if (w->stemmer != NULL) {
        sb_stemmer_delete(w->stemmer);
        w->stemmer = NULL;
    }
}

/* Replace the @p *len bytes of ASCII @p word by their stem ("retrying" and "retries" become
 * "retri", as PostgreSQL's english configuration stems them), so that coverage counts a word's
 * inflections as the word. Words with other bytes are left as they are. */
static void
stem(struct sb_stemmer *stemmer, char *word, size_t *len)
{
    const sb_symbol *out = NULL;
    size_t n = 0;

    for (size_t i = 0; i < *len; i++) {
        if ((unsigned char)word[i] >= 0x80) {
            return;
        }
    }
    out = stemmer != NULL ? sb_stemmer_stem(stemmer, (const sb_symbol *)word, (int)*len) : NULL;
    n = out != NULL ? (size_t)sb_stemmer_length(stemmer) : 0;
    if (n > 0 && n < WORD_MAX) {
        memcpy(word, out, n);
        word[n] = '\0';
        *len = n;
    }
}

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
        stem(out->stemmer, word, &len);
        for (size_t i = 0; i < out->count && !is_seen; i++) {
            is_seen = strcmp(out->w[i], word) == 0;
        }
        if (len > 0 && !is_seen) {
            memcpy(out->w[out->count++], word, len + 1);
        }
    }
}

/* The share of @p query's distinct words (stems) that @p task has, in [0, 1]: how much of the
 * new task an old one covers. Unlike BM25, it does not depend on how many skills are stored, so
 * one threshold means the same with 1 skill or 100,000. */
static double
coverage(const struct words *query, const char *task)
{
    struct words t;
    size_t hit = 0;

    if (query->count == 0) {
        return 0;
    }
    t.stemmer = query->stemmer;
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

/* ------------------------------------------------------------------------------------------ */
/* Embeddings                                                                                  */

/* The run's embeddings client, made on first use; NULL when none is configured or it cannot be
 * made (then the run says so once and ranks by text). */
static struct rt_embedder *
embedder_of(struct run *run)
{
    const struct wf_embeddings *cfg = &run->cfg.wf->memory.embeddings;
    struct rt_embedder_options o;
    const char *key = cfg->api_key_env != NULL ? getenv(cfg->api_key_env) : NULL;
    weft_err err = WEFT_OK;

    if (cfg->base_url == NULL || run->store.is_embedder_broken || run->store.embedder != NULL) {
        return run->store.embedder;
    }
    run->store.is_embedder_broken = true; /* until made */
    if (cfg->api_key_env != NULL && (key == NULL || key[0] == '\0')) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "memory.embeddings: environment variable %s is not set; skill memory ranks by "
                 "text only in this run",
                 cfg->api_key_env);
        weft__rt_metrics_embedding(run->tel.metrics, "setup", "missing_api_key");
        return NULL;
    }
    memset(&o, 0, sizeof(o));
    o.base_url = cfg->base_url;
    o.model = cfg->model;
    o.api_key = key;
    o.timeout_ms = cfg->timeout_ms;
    o.dimensions = cfg->dimensions;
    err = weft__rt_embedder_new(&o, &run->store.embedder);
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "memory.embeddings: %s; skill memory ranks by text only in this run",
                 weft_strerror(err));
        weft__rt_metrics_embedding(run->tel.metrics, "setup", "client");
        return NULL;
    }
    run->store.is_embedder_broken = false;
    return run->store.embedder;
}

/* A failed call: traced on @p span, counted, and logged once per run (the endpoint without
 * credentials; never the key, never the text). */
static void
embed_failed(struct run *run,
             struct rt_embedder *e,
             const char *operation,
             struct weft_span *span,
             const struct rt_embed_error *why)
{
    weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, why->type);
    weft_span_set_status(span, WEFT_STATUS_ERROR, why->message);
    weft__rt_metrics_embedding(run->tel.metrics, operation, why->type);
    if (!run->store.is_embed_warned) {
        run->store.is_embed_warned = true;
        WEFT_LOG(WEFT_LOG_WARN,
                 "memory.embeddings: %s failed (%s: %s); skill memory ranks by text where it "
                 "fails (said once per run, counted in weft.skills.embedding_errors)",
                 weft__rt_embedder_endpoint(e), why->type, why->message);
    }
}

/* Embed a copy of @p text for @p operation (lookup, save) with an `embeddings {model}` span
 * under @p parent (else @p parent_ctx). Releases the run lock around the call: callers re-read
 * the plan afterwards. @return true with *out set (weft__rt_embedding_cleanup()). */
static bool
embed(struct run *run,
      const char *operation,
      const char *text,
      struct weft_span *parent,
      const struct weft_span_context *parent_ctx,
      struct rt_embedding *out)
{
    struct rt_embedder *e = embedder_of(run);
    struct rt_embed_error why;
    struct weft_span *span = NULL;
    char *copy = NULL;
    weft_err err = WEFT_OK;

    memset(out, 0, sizeof(*out));
    if (e == NULL || text == NULL) {
        return false;
    }
    copy = weft__strdup(text);
    if (copy == NULL) {
        return false;
    }
    memset(&why, 0, sizeof(why));
    span = weft__span_start_embeddings(run, weft__rt_embedder_model(e), parent, parent_ctx);
    weft__rk_set_str(span, WEFT__RK_SERVER_ADDRESS, weft__rt_embedder_host(e));
    weft__rk_set_int(span, WEFT__RK_SERVER_PORT, (int64_t)weft__rt_embedder_port(e));
    weft__rk_set_str(span, WEFT__RK_SKILLS_OPERATION, operation);
    weft__rt_unlock(run);
    err = weft__rt_embed(e, copy, out, &why);
    weft__rt_lock(run);
    weft__free(copy);
    if (err != WEFT_OK) {
        embed_failed(run, e, operation, span, &why);
    } else {
        if (out->input_tokens >= 0) {
            weft__rk_set_int(span, WEFT__RK_GEN_AI_USAGE_INPUT_TOKENS, out->input_tokens);
        }
        weft__rk_set_int(span, WEFT__RK_GEN_AI_EMBEDDINGS_DIMENSION_COUNT, (int64_t)out->dims);
        weft__rt_metrics_embedding(run->tel.metrics, operation, NULL);
    }
    weft_span_end(span, 0);
    return err == WEFT_OK;
}

static double
norm_of(const float *v, size_t dims)
{
    double sum = 0.0;

    for (size_t i = 0; i < dims; i++) {
        sum += (double)v[i] * (double)v[i];
    }
    return sqrt(sum);
}

/* ------------------------------------------------------------------------------------------ */
/* Ranking: full-text candidates and nearest vectors together                                  */

/* One candidate of a lookup: the skill, its coverage of the new task and, when the skill has a
 * vector of the query's model and length, their cosine. */
struct cand {
    struct weft__skill s; /* owned */
    double text;
    double vec;
    bool has_vec;
};

struct ranking {
    struct cand *c; /* at most cap */
    size_t n;
    size_t cap;
};

/* The scan of the agent's vectors: cosines of the text candidates, and the best `cap` others. */
struct nearest {
    const float *q;
    size_t dims;
    double q_norm;
    struct ranking *r;
    char (*ids)[WEFT_UUID_LEN + 1];
    double *cos;
    size_t n;
    size_t cap;
};

static bool
nearest_row(const char *id, const float *v, void *user_data)
{
    struct nearest *nb = user_data;
    double dot = 0.0;
    double v_norm = norm_of(v, nb->dims);
    double cos = 0.0;
    size_t at = 0;

    for (size_t i = 0; i < nb->dims; i++) {
        dot += (double)nb->q[i] * (double)v[i];
    }
    cos = v_norm > 0.0 ? dot / (nb->q_norm * v_norm) : 0.0;
    for (size_t i = 0; i < nb->r->n; i++) {
        if (strcmp(nb->r->c[i].s.id, id) == 0) {
            nb->r->c[i].vec = cos;
            nb->r->c[i].has_vec = true;
            return true;
        }
    }
    /* Insertion into the best nb->cap, best first (cap is at most 4 * 16). */
    at = nb->n < nb->cap ? nb->n : nb->cap;
    while (at > 0 && nb->cos[at - 1] < cos) {
        if (at < nb->cap) {
            nb->cos[at] = nb->cos[at - 1];
            memcpy(nb->ids[at], nb->ids[at - 1], sizeof(nb->ids[at]));
        }
        at--;
    }
    if (at < nb->cap) {
        nb->cos[at] = cos;
        snprintf(nb->ids[at], sizeof(nb->ids[at]), "%s", id);
        nb->n += nb->n < nb->cap ? 1 : 0;
    }
    return true;
}

/* Add the agent's skills nearest to @p q (not yet candidates) to @p r, and the cosines of those
 * that are. Store errors leave the text candidates as they are. */
static void
add_nearest(struct run *run,
            const char *agent,
            const struct words *words,
            const struct rt_embedding *q,
            struct ranking *r,
            size_t want)
{
    char ids[4 * 16][WEFT_UUID_LEN + 1];
    double cos[4 * 16];
    struct nearest nb;

    memset(&nb, 0, sizeof(nb));
    nb.q = q->values;
    nb.dims = q->dims;
    nb.q_norm = norm_of(q->values, q->dims);
    nb.r = r;
    nb.ids = ids;
    nb.cos = cos;
    nb.cap = want < 4 * 16 ? want : 4 * 16;
    if (weft__state_skill_vectors_each(memory_store(run), agent,
                                       run->cfg.wf->memory.embeddings.model, q->dims, nearest_row,
                                       &nb) != WEFT_OK) {
        return;
    }
    for (size_t i = 0; i < nb.n && r->n < r->cap; i++) {
        struct cand *c = &r->c[r->n];

        memset(c, 0, sizeof(*c));
        if (weft__state_skill_get(memory_store(run), ids[i], &c->s) != WEFT_OK) {
            continue; /* deleted since the scan */
        }
        c->text = coverage(words, c->s.task);
        c->vec = cos[i];
        c->has_vec = true;
        r->n++;
    }
}

/* A candidate's score: coverage alone without a comparable vector, else the weighted sum (a
 * negative cosine counts as 0: unrelated, not "anti-related"). */
static double
score_of(const struct cand *c, double weight)
{
    if (!c->has_vec) {
        return c->text;
    }
    return (1.0 - weight) * c->text + weight * (c->vec > 0.0 ? c->vec : 0.0);
}

static int
by_cand_score(const void *a, const void *b)
{
    double x = ((const struct cand *)a)->s.score;
    double y = ((const struct cand *)b)->s.score;

    return x < y ? 1 : x > y ? -1 : 0;
}

/* The text candidates of @p agent for @p task (4 k of them, any rank) into @p r with their
 * coverage. @return the store's error. */
static weft_err
add_text(struct run *run,
         const char *agent,
         const char *task,
         const struct words *words,
         struct ranking *r,
         size_t want)
{
    struct weft__skill *hits = NULL;
    size_t n = 0;
    weft_err err = weft__state_skills_search(memory_store(run), agent, task, want, 0.0, &hits, &n);

    for (size_t i = 0; err == WEFT_OK && i < n && r->n < r->cap; i++) {
        struct cand *c = &r->c[r->n++];

        memset(c, 0, sizeof(*c));
        c->s = hits[i];
        c->text = coverage(words, c->s.task);
        memset(&hits[i], 0, sizeof(hits[i])); /* moved */
    }
    weft__skills_free(hits, n);
    return err;
}

static void
ranking_cleanup(struct ranking *r)
{
    for (size_t i = 0; i < r->n; i++) {
        weft__skill_cleanup(&r->c[i].s);
    }
    weft__free(r->c);
    memset(r, 0, sizeof(*r));
}

/* Score, sort, keep the best @p k at or above @p min_score (the rest freed). */
static void
rank_keep(struct ranking *r, double weight, size_t k, double min_score)
{
    size_t kept = 0;

    for (size_t i = 0; i < r->n; i++) {
        r->c[i].s.score = score_of(&r->c[i], weight);
    }
    qsort(r->c, r->n, sizeof(*r->c), by_cand_score);
    for (size_t i = 0; i < r->n; i++) {
        if (kept < k && r->c[i].s.score >= min_score) {
            r->c[kept++] = r->c[i];
        } else {
            weft__skill_cleanup(&r->c[i].s);
        }
    }
    r->n = kept;
}

/* The retrieval span's documents: [{"id", "score", "text_score", "vector_score"?}] as JSON
 * text (new). */
static char *
documents_json(const struct ranking *r)
{
    json_t *docs = json_array();
    char *text = NULL;
    char *owned = NULL;

    for (size_t i = 0; docs != NULL && i < r->n; i++) {
        const struct cand *c = &r->c[i];
        json_t *d =
            json_pack("{s:s, s:f, s:f}", "id", c->s.id, "score", c->s.score, "text_score", c->text);
        if (d != NULL && c->has_vec) {
            json_object_set_new(d, "vector_score", json_real(c->vec));
        }
        json_array_append_new(docs, d);
    }
    text = docs != NULL ? json_dumps(docs, JSON_COMPACT) : NULL;
    owned = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    json_decref(docs);
    return owned;
}

/* The lookup itself, under the retrieval @p span: text candidates, then (with embeddings) the
 * query's vector and the nearest skills; ranked and cut to k at min_score into @p r. */
static weft_err
lookup(
    struct run *run, const char *agent, const char *task, struct weft_span *span, struct ranking *r)
{
    const struct wf_memory *mem = &run->cfg.wf->memory;
    struct rt_embedding q;
    struct words words;
    bool has_vector = false;
    weft_err err = WEFT_OK;

    r->cap = 8 * (size_t)mem->k;
    r->c = weft__calloc(r->cap, sizeof(*r->c));
    if (r->c == NULL) {
        return WEFT_ENOMEM;
    }
    words_init(&words);
    words_of(task, &words);
    err = add_text(run, agent, task, &words, r, 4 * (size_t)mem->k);
    has_vector = err == WEFT_OK && embed(run, "lookup", task, span, NULL, &q);
    if (has_vector) {
        add_nearest(run, agent, &words, &q, r, 4 * (size_t)mem->k);
        weft__rt_embedding_cleanup(&q);
    }
    words_cleanup(&words);
    weft__rk_set_str(span, WEFT__RK_SKILLS_RANKING, has_vector ? "text+vector" : "text");
    if (err == WEFT_OK) {
        rank_keep(r, mem->embeddings.weight, mem->k, mem->min_score);
    }
    return err;
}

/* The kept candidates' skills as one array (moved out of @p r). */
static struct weft__skill *
take_skills(struct ranking *r)
{
    struct weft__skill *out = r->n > 0 ? weft__calloc(r->n, sizeof(*out)) : NULL;

    for (size_t i = 0; out != NULL && i < r->n; i++) {
        out[i] = r->c[i].s;
        memset(&r->c[i].s, 0, sizeof(r->c[i].s));
    }
    return out;
}

/* Lessons and other callers: the store's full-text candidates (4 k, any rank) ranked by
 * coverage alone, as a lookup without embeddings ranks them. */
weft_err
weft__rt_memory_search(struct run *run,
                       const char *agent,
                       const char *query,
                       size_t k,
                       double min_score,
                       struct weft__skill **hits,
                       size_t *n)
{
    struct ranking r = {NULL, 0, 4 * k};
    struct words words;
    weft_err err = WEFT_OK;

    *hits = NULL;
    *n = 0;
    if (memory_store(run) == NULL || k == 0) {
        return WEFT_OK;
    }
    r.c = weft__calloc(r.cap, sizeof(*r.c));
    if (r.c == NULL) {
        return WEFT_ENOMEM;
    }
    words_init(&words);
    words_of(query, &words);
    err = add_text(run, agent, query, &words, &r, r.cap);
    words_cleanup(&words);
    if (err == WEFT_OK) {
        rank_keep(&r, 0.0, k, min_score);
        *hits = take_skills(&r);
        err = *hits != NULL || r.n == 0 ? WEFT_OK : WEFT_ENOMEM;
        *n = *hits != NULL ? r.n : 0;
    }
    ranking_cleanup(&r);
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
    struct ranking r;
    struct weft__skill *hits = NULL;
    size_t n = 0;
    struct weft_span *span = NULL;
    char *task = NULL;
    char *docs = NULL;
    weft_err err = WEFT_OK;

    memset(out, 0, sizeof(*out));
    memset(&r, 0, sizeof(r));
    if (!mem->is_skills || memory_store(run) == NULL || step->task == NULL) {
        return;
    }
    task = weft__strdup(step->task); /* the plan may move while an embeddings call runs */
    span = weft__rt_span_start(run, RT_SPAN_RETRIEVAL, DATA_SOURCE, agent_span, NULL, 0);
    weft__rk_set_int(span, WEFT__RK_GEN_AI_RETRIEVAL_TOP_K, (int64_t)mem->k);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_AGENT_NAME, agent);
    weft__rk_set_double(span, WEFT__RK_SKILLS_MIN_SCORE, mem->min_score);
    weft__rt_span_content(run, span, WEFT__RK_GEN_AI_RETRIEVAL_QUERY_TEXT, task);
    err = task != NULL ? lookup(run, agent, task, span, &r) : WEFT_ENOMEM;
    if (err != WEFT_OK) {
        weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, weft_strerror(err));
        weft_span_set_status(span, WEFT_STATUS_ERROR, "skill lookup failed");
        ranking_cleanup(&r);
    }
    docs = documents_json(&r);
    weft__rk_set_str(span, WEFT__RK_GEN_AI_RETRIEVAL_DOCUMENTS, docs != NULL ? docs : "[]");
    weft__rk_set_int(span, WEFT__RK_SKILLS_HITS, (int64_t)r.n);
    weft_span_end(span, 0);
    weft__free(docs);
    weft__free(task);
    n = r.n;
    hits = take_skills(&r);
    n = hits != NULL ? n : 0;
    ranking_cleanup(&r);
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

bool
weft__rt_memory_embed(struct run *run,
                      const char *text,
                      const struct weft_span_context *parent,
                      struct rt_embedding *out)
{
    const struct wf_memory *mem = &run->cfg.wf->memory;

    memset(out, 0, sizeof(*out));
    if ((!mem->is_skills && !mem->is_lessons) || memory_store(run) == NULL) {
        return false;
    }
    return embed(run, "save", text, NULL, parent, out);
}

weft_err
weft__rt_memory_save(struct run *run,
                     const struct weft__skill *s,
                     const struct rt_embedding *v,
                     bool *is_new)
{
    struct weft__skill_vector vec;

    if (memory_store(run) == NULL) {
        return WEFT_ESTATE;
    }
    vec.model = run->cfg.wf->memory.embeddings.model;
    vec.values = v != NULL ? v->values : NULL;
    vec.dims = v != NULL ? v->dims : 0;
    return weft__state_skill_save_vec(memory_store(run), s, vec.values != NULL ? &vec : NULL,
                                      is_new);
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
        weft__rk_set_str_array(span, WEFT__RK_SKILLS_INJECTED, text, n);
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
    struct rt_embedding vec;
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
    /* The vector first: the call releases the run lock, so the step is read again after it. */
    (void)weft__rt_memory_embed(run, step->task, span, &vec);
    step = &run->ps.plan.steps[index];
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
    if (weft__rt_memory_save(run, &s, &vec, &is_new) == WEFT_OK) {
        weft__rt_metrics_skill_saved(run->tel.metrics, agent, is_new);
    }
    weft__rt_embedding_cleanup(&vec);
    weft__buf_cleanup(&solution);
}

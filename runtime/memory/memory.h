/* runtime/memory/memory.h - skill memory in a run (docs/memory.md): before an agent step, the
 * agent's most similar past successes are looked up (a `retrieval weft.skills` span) and shown to
 * it as worked examples; after a step that succeeded, it is kept as a skill. The storage is the
 * state store's (state.h, both backends); this module decides when, what and how it is shown,
 * traced and counted. Everything here is off unless the workflow's "memory" says "skills".
 * Run lock held for every call (the lookups are short database reads); with
 * memory.embeddings, an embeddings call releases it around the network call, as an LLM call
 * does, so callers re-read the plan after weft__rt_skills_recall(), weft__rt_skills_learn()
 * and weft__rt_memory_embed(). */
#ifndef WEFT_RUNTIME_MEMORY_H
#define WEFT_RUNTIME_MEMORY_H

#include "runtime/run/run.h"

#include <jansson.h>

/* What a lookup found for a step: the text for the agent's instructions and the ids shown. */
struct rt_recall {
    char *text;  /* "" when nothing matched; NULL when memory is off */
    json_t *ids; /* array of the injected skills' ids (NULL: none) */
};

/* Look up the skills of step @p index's agent for its task, under @p agent_span; the hits are
 * counted as used, put on @p agent_span (weft.skills.injected) and returned in @p out.
 * Ownership: @p out's members are new (weft__rt_recall_cleanup()). */
void weft__rt_skills_recall(struct run *run,
                            size_t index,
                            struct weft_span *agent_span,
                            struct rt_recall *out);
void weft__rt_recall_cleanup(struct rt_recall *r);

/* Put skill ids @p ids (a JSON array of strings) on @p span as weft.skills.injected. */
void weft__rt_skills_mark(struct weft_span *span, const json_t *ids);

/* The tool calls in @p msgs (an attempt's chat) whose result was not an error, as text for a
 * skill's solution ("" when none). Ownership: returns new (weft__free), NULL when out of
 * memory. */
char *weft__rt_skills_tools(const json_t *msgs);

/* Keep step @p index as a skill when it succeeded with a reward above 0: its task, its result
 * (the fixed one after reflection) followed by @p tools (may be NULL), its reward and where it
 * came from (@p span, the last attempt's agent span). @p had_skill: skills were injected into
 * it (counted with its outcome, whatever it was). */
void weft__rt_skills_learn(struct run *run,
                           size_t index,
                           const char *tools,
                           const struct weft_span_context *span,
                           bool had_skill);

/* The @p k best of @p agent's stored items for @p query, by coverage (the share of the
 * query's words the stored task has, at least @p min_score), best first, from the run's memory
 * store (none: *n is 0). Skill memory and lessons (lessons.c) share it. @return as
 * weft__state_skills_search(). Ownership: *hits is the caller's (weft__skills_free()). */
struct weft__skill;
weft_err weft__rt_memory_search(struct run *run,
                                const char *agent,
                                const char *query,
                                size_t k,
                                double min_score,
                                struct weft__skill **hits,
                                size_t *n);

/* The vector of @p text for a save (a skill's or a lesson's task) when memory.embeddings is
 * configured, with an `embeddings {model}` span under @p parent (the step's agent span; the
 * run's root when invalid). A failure is traced, counted and warned about once per run (see
 * memory.c) and returns false: the item is saved without a vector. Releases the run lock
 * around the call: re-read the plan afterwards. Ownership: *out is new on true
 * (weft__rt_embedding_cleanup()), zeroed on false. */
struct rt_embedding;
bool weft__rt_memory_embed(struct run *run,
                           const char *text,
                           const struct weft_span_context *parent,
                           struct rt_embedding *out);

/* Save @p s in the run's memory store with the vector @p v (may be NULL or empty: none),
 * stored under the configured embeddings model. @return as weft__state_skill_save_vec(),
 * WEFT_ESTATE when the run has no store. Ownership: borrows everything. */
weft_err weft__rt_memory_save(struct run *run,
                              const struct weft__skill *s,
                              const struct rt_embedding *v,
                              bool *is_new);

#endif /* WEFT_RUNTIME_MEMORY_H */

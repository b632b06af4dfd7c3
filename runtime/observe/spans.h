/* runtime/observe/spans.h - DESIGN.md's span model (spans.c): span kinds, names, the three
 * attribute vocabularies and the run-wide attributes. Reads the run's configuration, persist and
 * telemetry parts; calls nothing in the engine. */
#ifndef WEFT_RUNTIME_SPANS_H
#define WEFT_RUNTIME_SPANS_H

#include "runtime/common/attr_keys.h"
#include "runtime/run/run.h"

/* Span kinds of DESIGN.md's span model. */
typedef enum rt_span_kind {
    RT_SPAN_WORKFLOW = 0,
    RT_SPAN_PLAN,
    RT_SPAN_AGENT,
    RT_SPAN_CHAT,
    RT_SPAN_TOOL,
    RT_SPAN_REFLECT,
    RT_SPAN_REPLAN,
    RT_SPAN_CORRECT,
    RT_SPAN_LOOP,
    RT_SPAN_FANOUT,
    RT_SPAN_ITEM,
    RT_SPAN_RETRIEVAL, /* a lookup in skill memory: subject is the data source id */
    RT_SPAN_EMBEDDINGS /* an embeddings call (skill memory): subject is the model */
} rt_span_kind;

/* Start a span named "{operation} {subject}" with the three vocabularies (gen_ai.operation.name
 * where the GenAI conventions define one, openinference.span.kind, langfuse.observation.type)
 * and the run-wide attributes (session, run id, workflow/trace name). Never NULL. */
struct weft_span *weft__rt_span_start(struct run *run,
                                      rt_span_kind kind,
                                      const char *subject,
                                      struct weft_span *parent,
                                      const struct weft_link_spec *links,
                                      size_t link_count);

/* The same, nested under the span context @p parent when it is valid (flow items), else
 * under the run's root span. */
struct weft_span *weft__rt_span_start_under(struct run *run,
                                            rt_span_kind kind,
                                            const char *subject,
                                            const struct weft_span_context *parent,
                                            const struct weft_link_spec *links,
                                            size_t link_count);

/* A chat span for @p model under @p parent, with gen_ai.provider.name and gen_ai.request.model
 * among its start attributes (both sampling-relevant). Never NULL. */
struct weft_span *weft__span_start_chat(struct run *run,
                                        const char *model,
                                        const char *provider,
                                        struct weft_span *parent);

/* An `embeddings {model}` span (CLIENT, gen_ai.operation.name embeddings, gen_ai.provider.name
 * openai and gen_ai.request.model at start) under @p parent, else under the span context
 * @p parent_ctx when valid, else under the run's root. Never NULL. */
struct weft_span *weft__span_start_embeddings(struct run *run,
                                              const char *model,
                                              struct weft_span *parent,
                                              const struct weft_span_context *parent_ctx);

/* Set a content attribute (prompts, outputs, arguments) under key @p key only when capture is
 * on. */
void
weft__rt_span_content(struct run *run, struct weft_span *span, weft__rk_id key, const char *text);

#endif /* WEFT_RUNTIME_SPANS_H */

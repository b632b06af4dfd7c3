/* runtime/observe/spans.c - DESIGN.md's span model in one place: names, kinds and the three
 * attribute vocabularies (OTel GenAI, OpenInference, Langfuse) every runtime span carries.
 *
 * The vocabularies are set as start attributes so that samplers see them. Run-wide attributes
 * (session, run id, trace name, and the caller's options.span_attrs with the root span's id, as
 * run_start() prepared them in run->tel.span_attrs, or as a worker's task run took them from its
 * task message) go on every span because Langfuse v4 reads trace-level fields from whichever span
 * it meets and does not merge spans after the fact. The session goes out as
 * gen_ai.conversation.id and session.id, both of which Langfuse reads as its session.
 *
 * The GenAI names come from semconv.h. The attributes the conventions mark sampling-relevant
 * (operation, agent name, provider, request model, tool name) are start attributes too; which
 * convention version decides the rest is asked of weft__semconv_genai_mode().
 */
#include "runtime/observe/spans.h"
#include "runtime/observe/semconv.h"

#include <stdio.h>
#include <string.h>

struct kind_info {
    const char *operation;     /* span name prefix */
    const char *genai_op;      /* gen_ai.operation.name, or NULL where none is defined */
    const char *openinference; /* openinference.span.kind */
    const char *langfuse;      /* langfuse.observation.type */
    weft_span_kind span_kind;
};

static const struct kind_info kinds[] = {
    [RT_SPAN_WORKFLOW] = {WEFT__GENAI_OP_INVOKE_WORKFLOW, WEFT__GENAI_OP_INVOKE_WORKFLOW, "CHAIN",
                          "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_PLAN] = {WEFT__GENAI_OP_PLAN, WEFT__GENAI_OP_PLAN, "CHAIN", "chain",
                      WEFT_SPAN_KIND_INTERNAL},
    /* In-process agents: INTERNAL (CLIENT is for remote agent services). */
    [RT_SPAN_AGENT] = {WEFT__GENAI_OP_INVOKE_AGENT, WEFT__GENAI_OP_INVOKE_AGENT, "AGENT", "agent",
                       WEFT_SPAN_KIND_INTERNAL},
    /* Model calls leave the process (or stand for calls that do): CLIENT. */
    [RT_SPAN_CHAT] = {WEFT__GENAI_OP_CHAT, WEFT__GENAI_OP_CHAT, "LLM", "generation",
                      WEFT_SPAN_KIND_CLIENT},
    /* Tools run in the process (or as its child processes): INTERNAL. */
    [RT_SPAN_TOOL] = {WEFT__GENAI_OP_EXECUTE_TOOL, WEFT__GENAI_OP_EXECUTE_TOOL, "TOOL", "tool",
                      WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_REFLECT] = {"reflect", NULL, "EVALUATOR", "evaluator", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_REPLAN] = {"replan", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_CORRECT] = {"correct", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_LOOP] = {"loop", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_FANOUT] = {"fan_out", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_ITEM] = {"item", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    /* GenAI retrieval spans are CLIENT: the store may be another process (PostgreSQL). */
    [RT_SPAN_RETRIEVAL] = {"retrieval", "retrieval", "RETRIEVER", "retriever",
                           WEFT_SPAN_KIND_CLIENT},
    /* An embeddings endpoint's call (skill memory): a model call, CLIENT. */
    [RT_SPAN_EMBEDDINGS] = {WEFT__GENAI_OP_EMBEDDINGS, WEFT__GENAI_OP_EMBEDDINGS, "EMBEDDING",
                            "embedding", WEFT_SPAN_KIND_CLIENT},
};

/* The GenAI start attributes of one kind of span; @p provider only for chat spans. */
static size_t
genai_start_attrs(const struct run *run,
                  rt_span_kind kind,
                  const char *subject,
                  const char *provider,
                  struct weft_attr *attrs)
{
    size_t n = 0;

    switch (kind) {
    case RT_SPAN_WORKFLOW:
        attrs[n++] = weft_attr_str(WEFT__GENAI_WORKFLOW_NAME, run->cfg.wf->name);
        break;
    case RT_SPAN_AGENT: {
        size_t a = weft__rt_find_agent(run, subject);
        attrs[n++] = weft_attr_str(WEFT__GENAI_AGENT_NAME, subject);
        size_t model = a != WF_NONE ? weft__rt_agent(run, a)->model : WF_NONE;
        if (model < run->cfg.wf->model_count) {
            const char *provider_of = run->svc->provider_name != NULL
                                          ? run->svc->provider_name(run->svc->ctx, model)
                                          : NULL;
            attrs[n++] = weft_attr_str(WEFT__GENAI_REQUEST_MODEL, run->cfg.wf->models[model].model);
            if (provider_of != NULL &&
                weft__semconv_agent_has_provider(weft__semconv_genai_mode())) {
                attrs[n++] = weft_attr_str(WEFT__GENAI_PROVIDER_NAME, provider_of);
            }
        }
        break;
    }
    case RT_SPAN_PLAN:
    case RT_SPAN_REFLECT:
        attrs[n++] = weft_attr_str(WEFT__GENAI_AGENT_NAME, subject);
        break;
    case RT_SPAN_CHAT:
    case RT_SPAN_EMBEDDINGS:
        if (provider != NULL) {
            attrs[n++] = weft_attr_str(WEFT__GENAI_PROVIDER_NAME, provider);
        }
        attrs[n++] = weft_attr_str(WEFT__GENAI_REQUEST_MODEL, subject);
        break;
    case RT_SPAN_TOOL:
        attrs[n++] = weft_attr_str(WEFT__GENAI_TOOL_NAME, subject);
        break;
    case RT_SPAN_RETRIEVAL:
        attrs[n++] = weft_attr_str("gen_ai.data_source.id", subject);
        break;
    default:
        break;
    }
    return n;
}

static struct weft_span *
start(struct run *run,
      rt_span_kind kind,
      const char *subject,
      const char *provider,
      struct weft_span *parent,
      const struct weft_span_context *parent_ctx,
      const struct weft_link_spec *links,
      size_t link_count)
{
    const struct kind_info *k = &kinds[kind];
    struct weft_span_start_options so;
    /* weft's own (at most 16), then the run's extra ones (run.h). */
    struct weft_attr attrs[16 + RUN_MAX_SPAN_ATTRS + 1];
    size_t n = 0;
    char name[256];

    if (run->tel.tracer == NULL) {
        return weft_span_start(NULL, "", NULL); /* the shared non-recording span */
    }
    snprintf(name, sizeof(name), "%s %s", k->operation, subject);
    if (k->genai_op != NULL) {
        attrs[n++] = weft_attr_str(WEFT__GENAI_OPERATION_NAME, k->genai_op);
    }
    n += genai_start_attrs(run, kind, subject, provider, attrs + n);
    attrs[n++] = weft_attr_str("openinference.span.kind", k->openinference);
    attrs[n++] = weft_attr_str("langfuse.observation.type", k->langfuse);
    attrs[n++] = weft_attr_str(WEFT__GENAI_CONVERSATION_ID, run->store.session_id);
    attrs[n++] = weft_attr_str("session.id", run->store.session_id);
    attrs[n++] = weft_attr_str("langfuse.trace.name", run->cfg.wf->name);
    attrs[n++] = weft_attr_str("weft.run.id", run->store.run_id);
    if (run->cfg.opts->user_id != NULL && run->cfg.opts->user_id[0] != '\0') {
        attrs[n++] = weft_attr_str("user.id", run->cfg.opts->user_id);
    }
    if (run->cfg.opts->tags != NULL && run->cfg.opts->tag_count > 0) {
        attrs[n].key = "weft.run.tags";
        attrs[n].value.type = WEFT_VALUE_STRING_ARRAY;
        attrs[n].value.len = run->cfg.opts->tag_count < 16 ? run->cfg.opts->tag_count : 16;
        attrs[n++].value.u.strs = run->cfg.opts->tags;
    }
    if (run->tel.span_attr_count > 0) {
        /* A shallow copy: the span copies the strings it keeps when it starts. */
        memcpy(attrs + n, run->tel.span_attrs, run->tel.span_attr_count * sizeof(attrs[0]));
        n += run->tel.span_attr_count;
    }
    memset(&so, 0, sizeof(so));
    so.kind = k->span_kind;
    so.parent = parent;
    so.parent_context = parent_ctx;
    so.is_root = parent == NULL && parent_ctx == NULL;
    so.attrs = attrs;
    so.attr_count = n;
    so.links = links;
    so.link_count = link_count;
    return weft_span_start(run->tel.tracer, name, &so);
}

struct weft_span *
weft__rt_span_start(struct run *run,
                    rt_span_kind kind,
                    const char *subject,
                    struct weft_span *parent,
                    const struct weft_link_spec *links,
                    size_t link_count)
{
    return start(run, kind, subject, NULL, parent, NULL, links, link_count);
}

struct weft_span *
weft__span_start_chat(struct run *run,
                      const char *model,
                      const char *provider,
                      struct weft_span *parent)
{
    return start(run, RT_SPAN_CHAT, model, provider, parent, NULL, NULL, 0);
}

struct weft_span *
weft__span_start_embeddings(struct run *run,
                            const char *model,
                            struct weft_span *parent,
                            const struct weft_span_context *parent_ctx)
{
    if (parent == NULL && (parent_ctx == NULL || !weft_span_context_is_valid(parent_ctx))) {
        parent = run->tel.root;
        parent_ctx = NULL;
    }
    return start(run, RT_SPAN_EMBEDDINGS, model, "openai", parent,
                 parent == NULL ? parent_ctx : NULL, NULL, 0);
}

void
weft__rt_span_content(struct run *run, struct weft_span *span, weft__rk_id key, const char *text)
{
    if (run->cfg.capture_content && text != NULL) {
        weft__rk_set_str(span, key, text);
    }
}

struct weft_span *
weft__rt_span_start_under(struct run *run,
                          rt_span_kind kind,
                          const char *subject,
                          const struct weft_span_context *parent,
                          const struct weft_link_spec *links,
                          size_t link_count)
{
    if (parent == NULL || !weft_span_context_is_valid(parent)) {
        /* The run's root itself starts a new trace when it has no parent. */
        return weft__rt_span_start(
            run, kind, subject, kind == RT_SPAN_WORKFLOW ? NULL : run->tel.root, links, link_count);
    }
    return start(run, kind, subject, NULL, NULL, parent, links, link_count);
}

/* runtime/spans.c - DESIGN.md's span model in one place: names, kinds and the three attribute
 * vocabularies (OTel GenAI, OpenInference, Langfuse) every runtime span carries.
 *
 * The vocabularies are set as start attributes so that samplers see them. Run-wide attributes
 * (session, run id, trace name) go on every span because Langfuse v4 reads trace-level fields
 * from whichever span it meets and does not merge spans after the fact. The session goes out as
 * gen_ai.conversation.id and session.id, both of which Langfuse reads as its session.
 */
#include "spans.h"

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
    [RT_SPAN_WORKFLOW] = {"invoke_workflow", "invoke_workflow", "CHAIN", "chain",
                          WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_PLAN] = {"plan", "plan", "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_AGENT] = {"invoke_agent", "invoke_agent", "AGENT", "agent", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_CHAT] = {"chat", "chat", "LLM", "generation", WEFT_SPAN_KIND_CLIENT},
    [RT_SPAN_TOOL] = {"execute_tool", "execute_tool", "TOOL", "tool", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_REFLECT] = {"reflect", NULL, "EVALUATOR", "evaluator", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_REPLAN] = {"replan", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_CORRECT] = {"correct", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_LOOP] = {"loop", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_FANOUT] = {"fan_out", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
    [RT_SPAN_ITEM] = {"item", NULL, "CHAIN", "chain", WEFT_SPAN_KIND_INTERNAL},
};

static struct weft_span *
start(struct run *run,
      rt_span_kind kind,
      const char *subject,
      struct weft_span *parent,
      const struct weft_span_context *parent_ctx,
      const struct weft_link_spec *links,
      size_t link_count)
{
    const struct kind_info *k = &kinds[kind];
    struct weft_span_start_options so;
    struct weft_attr attrs[12];
    size_t n = 0;
    char name[256];

    if (run->tel.tracer == NULL) {
        return weft_span_start(NULL, "", NULL); /* the shared non-recording span */
    }
    snprintf(name, sizeof(name), "%s %s", k->operation, subject);
    if (k->genai_op != NULL) {
        attrs[n++] = weft_attr_str("gen_ai.operation.name", k->genai_op);
    }
    attrs[n++] = weft_attr_str("openinference.span.kind", k->openinference);
    attrs[n++] = weft_attr_str("langfuse.observation.type", k->langfuse);
    attrs[n++] = weft_attr_str("gen_ai.conversation.id", run->store.session_id);
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
    if (kind == RT_SPAN_WORKFLOW) {
        attrs[n++] = weft_attr_str("gen_ai.workflow.name", run->cfg.wf->name);
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
    return start(run, kind, subject, parent, NULL, links, link_count);
}

void
weft__rt_span_content(struct run *run, struct weft_span *span, const char *key, const char *text)
{
    if (run->cfg.capture_content && text != NULL) {
        weft_span_set_str(span, key, text);
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
    return start(run, kind, subject, NULL, parent, links, link_count);
}

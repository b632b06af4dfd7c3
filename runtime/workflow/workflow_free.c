/* runtime/workflow/workflow_free.c - a loaded workflow's teardown: every member workflow.c's
 * loader allocated, released in one place (apart from the loader, which is large enough).
 * Invariant: a member the loader did not fill is NULL or zero, so every release here is safe
 * on a workflow whose load stopped halfway. */
#include "runtime/workflow/workflow.h"

#include "base/mem.h"

#include <jansson.h>

void
weft_workflow_free(struct weft_workflow *wf)
{
    if (wf == NULL) {
        return;
    }
    json_decref(wf->doc);
    weft_sampling_policy_free(wf->sampling);
    for (size_t i = 0; i < wf->model_count; i++) {
        struct wf_model *m = &wf->models[i];
        weft__free(m->name);
        weft__free(m->model);
        weft__free(m->base_url);
        weft__free(m->api_key_env);
        weft__free(m->script);
        json_decref(m->script_doc);
    }
    weft__free(wf->models);
    weft__free(wf->memory.embeddings.base_url);
    weft__free(wf->memory.embeddings.model);
    weft__free(wf->memory.embeddings.api_key_env);
    for (size_t i = 0; i < wf->agent_count; i++) {
        struct wf_agent *a = &wf->agents[i];
        weft__free(a->name);
        weft__free(a->instructions);
        weft__wf_prompt_ref_free(a->prompt);
        weft__free(a->tools);
        weft__free(a->description);
        weft__free(a->mcp_servers);
        weft_workflow_free(a->team);
        if (a->architect != NULL) {
            weft__free(a->architect->out_dir);
            weft__free(a->architect);
        }
        weft__free(a->can_request);
        weft__wf_free_str_array(a->replan_keywords, a->replan_keyword_count);
        weft__free(a->reflection.instructions);
        weft__wf_prompt_ref_free(a->reflection.prompt);
    }
    weft__free(wf->agents);
    for (size_t i = 0; i < wf->mcp_count; i++) {
        weft__mcp_entry_cleanup(&wf->mcp[i]);
    }
    weft__free(wf->mcp);
    for (size_t i = 0; i < wf->tool_count; i++) {
        weft__tool_def_cleanup(&wf->tools[i]);
    }
    weft__free(wf->tools);
    for (size_t i = 0; i < wf->plan_count; i++) {
        weft__free(wf->plan[i].id);
        weft__free(wf->plan[i].task);
        weft__wf_free_str_array(wf->plan[i].depends_on, wf->plan[i].depends_count);
        json_decref(wf->plan[i].spec);
    }
    weft__free(wf->plan);
    weft__wf_flow_free(wf->flow);
    for (size_t i = 0; i < wf->router.route_count; i++) {
        weft__free(wf->router.routes[i].name);
    }
    weft__free(wf->router.routes);
    weft__free(wf->router.instructions);
    weft__wf_prompt_ref_free(wf->router.prompt);
    weft__wf_free_str_array(wf->router.vague_patterns, wf->router.vague_pattern_count);
    weft__free(wf->supervisor.name);
    weft__free(wf->supervisor.instructions);
    weft__wf_prompt_ref_free(wf->supervisor.prompt);
    weft__free(wf->supervisor.correction_instructions);
    weft__wf_prompt_ref_free(wf->supervisor.correction_prompt);
    weft__free(wf->supervisor.watchdog.webhook_url);
    weft__free(wf->executor.kind);
    weft__free(wf->executor.queue_prefix);
    weft__free(wf->path);
    weft__free(wf->dir);
    weft__free(wf->name);
    weft__free(wf->description);
    weft__free(wf->workspace);
    weft__free(wf);
}

/* runtime/engine/engine_resume.c - a stored run loaded back for `weft resume` (and a fork's reused
 * steps): the plan, the steps' results and statuses, the scripts' positions and the previous
 * trace's root for the link. Private to the engine (engine.h). */
#define _GNU_SOURCE /* strcasestr, realpath */

#include "runtime/common/secrets.h"
#include "runtime/decide/correct.h"
#include "runtime/decide/evaluate.h"
#include "runtime/decide/lessons.h"
#include "runtime/decide/router.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/fork.h"
#include "runtime/engine/parallel.h"
#include "runtime/mcp/hub.h"
#include "runtime/memory/embed.h"
#include "runtime/observe/metrics_store.h"
#include "runtime/observe/semconv.h"
#include "runtime/observe/spans.h"
#include "runtime/replay/replay.h"
#include "runtime/state/durable.h"
#include "runtime/state/snapshot.h"
#include "runtime/steps/agent.h"
#include "runtime/steps/architect.h"
#include "runtime/steps/command_step.h"
#include "runtime/steps/flow.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "tracing/ids.h"

#include <weft/weft.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------------------ */
/* Resume                                                                                      */

static weft_err
resume_step(const struct state_step_row *row, void *user_data)
{
    struct run *run = user_data;
    json_t *deps = json_loads(row->depends_on != NULL ? row->depends_on : "[]", 0, NULL);
    const char *ids[256];
    size_t n = 0;
    size_t index = 0;
    step_executor ex = EXEC_AGENT;
    size_t agent = WF_NONE;
    struct plan_step *s = NULL;
    step_status status = STEP_PENDING;

    if (row->executor != NULL && !weft__step_executor_parse(row->executor, &ex)) {
        json_decref(deps);
        return WEFT_EPARSE;
    }
    if (ex == EXEC_AGENT) {
        agent = weft__rt_find_agent(run, row->actor);
        if (agent == WF_NONE) {
            WEFT_LOG(WEFT_LOG_ERROR, "resume: step %s names agent '%s', unknown to the workflow",
                     row->id, row->actor);
            json_decref(deps);
            return WEFT_EPARSE;
        }
    }
    for (; n < json_array_size(deps) && n < 256; n++) {
        ids[n] = json_string_value(json_array_get(deps, n));
    }
    if (weft__plan_append(&run->ps.plan, row->id, agent, row->task, ids, n, &index) != WEFT_OK) {
        json_decref(deps);
        return WEFT_ENOMEM;
    }
    json_decref(deps);
    s = &run->ps.plan.steps[index];
    s->executor = ex;
    (void)weft__step_status_parse(row->status, &status);
    /* The step that was running when the process died runs again. */
    weft__plan_step_set_status(&run->ps.plan, s,
                               status == STEP_IN_PROGRESS ? STEP_PENDING : status);
    s->attempts = row->attempts;
    /* The task keeps its id across a resume: a result a worker published for it while the
     * orchestrator was down still matches (docs/distributed.md, Resume). */
    if (row->task_uuid != NULL && weft__uuid_is_valid(row->task_uuid)) {
        memcpy(s->task_uuid, row->task_uuid, sizeof(s->task_uuid));
    }
    s->retries = row->retries;
    s->is_dispatched = row->is_dispatched;
    s->spec = row->spec != NULL ? json_loads(row->spec, 0, NULL) : NULL;
    s->error = row->error != NULL ? json_loads(row->error, 0, NULL) : NULL;
    s->result = row->result != NULL ? weft__strdup(row->result) : NULL;
    s->feedback = row->feedback != NULL ? weft__strdup(row->feedback) : NULL;
    s->requested_by = row->requested_by != NULL ? weft__strdup(row->requested_by) : NULL;
    s->parent = row->parent != NULL ? weft__strdup(row->parent) : NULL;
    s->error_type = row->error_type != NULL ? weft__strdup(row->error_type) : NULL;
    s->has_reward = row->has_reward;
    s->reward = row->reward;
    if (s->has_reward) {
        run->tel.result->reward += s->reward;
    }
    return WEFT_OK;
}

static weft_err
remember_step(const struct state_step_row *row, void *user_data)
{
    json_t *steps = user_data;
    json_t *entry = json_pack("{s:s, s:s?, s:i}", "status", row->status, "result", row->result,
                              "attempts", (int)row->attempts);

    if (entry == NULL) {
        return WEFT_ENOMEM;
    }
    if (row->has_reward) {
        json_object_set_new(entry, "reward", json_real(row->reward));
    }
    return json_object_set_new(steps, row->id, entry) == 0 ? WEFT_OK : WEFT_ENOMEM;
}

/* Load the stored run into @p run; fills @p link with the previous trace's root. */
weft_err
weft__eng_resume_load(struct run *run,
                      struct weft_span_context *link,
                      char *error,
                      size_t error_len)
{
    struct weft_run_info info;
    weft_err err = weft__rt_resume_claim(run, error, error_len); /* durable.c: owner, file hash */

    memset(link, 0, sizeof(*link));
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__state_run_info(run->store.state, run->cfg.opts->resume_run_id, &info);
    if (err != WEFT_OK) {
        snprintf(error, error_len, "resume: no run '%.64s' in the state database",
                 run->cfg.opts->resume_run_id);
        return err;
    }
    if (strcmp(info.workflow, run->cfg.wf->name) != 0) {
        snprintf(error, error_len, "resume: run %.64s belongs to workflow '%.64s', not '%.64s'",
                 info.run_id, info.workflow, run->cfg.wf->name);
        err = WEFT_EINVAL;
    } else if (strcmp(info.status, "running") != 0 && strcmp(info.status, "aborted") != 0 &&
               strcmp(info.status, "interrupted") != 0) {
        snprintf(error, error_len,
                 "resume: run %.64s already ended (%s); only interrupted runs "
                 "resume",
                 info.run_id, info.status);
        err = WEFT_EINVAL;
    }
    if (err == WEFT_OK) {
        snprintf(run->store.run_id, sizeof(run->store.run_id), "%s", info.run_id);
        weft__free(run->store.session_id);
        run->store.session_id = weft__strdup(info.session_id);
        run->cfg.stored_input = info.input != NULL ? weft__strdup(info.input) : NULL;
        if (run->cfg.opts->input == NULL) {
            run->cfg.input = run->cfg.stored_input;
        }
        run->store.is_resumed = true;
        run->tel.result->corrections = info.corrections;
        run->ps.corrections = (unsigned)info.corrections;
        if (info.trace_id != NULL && info.root_span_id != NULL && strlen(info.trace_id) == 32 &&
            strlen(info.root_span_id) == 16) {
            for (size_t i = 0; i < 16; i++) {
                unsigned v = 0;
                sscanf(info.trace_id + 2 * i, "%2x", &v);
                link->trace_id[i] = (uint8_t)v;
            }
            for (size_t i = 0; i < 8; i++) {
                unsigned v = 0;
                sscanf(info.root_span_id + 2 * i, "%2x", &v);
                link->span_id[i] = (uint8_t)v;
            }
            link->trace_flags = WEFT_TRACE_FLAG_SAMPLED;
        }
        if (run->cfg.wf->flow != NULL) {
            /* Flows rebuild their scopes as they go; the stored steps fill them in. */
            run->store.resumed = json_object();
            err = run->store.resumed != NULL
                      ? weft__state_steps_each(run->store.state, run->store.run_id, remember_step,
                                               run->store.resumed)
                      : WEFT_ENOMEM;
        } else {
            /* before the steps: some may be its teams' */
            weft__rt_architect_restore(run, run->store.run_id, UINT64_MAX);
            err = weft__state_steps_each(run->store.state, run->store.run_id, resume_step, run);
        }
        if (err != WEFT_OK) {
            snprintf(error, error_len, "resume: the stored plan of run %.64s cannot be loaded",
                     run->store.run_id);
        }
    }
    weft__state_info_cleanup(&info);
    if (err != WEFT_OK) {
        (void)weft__state_lease_release(run->store.state, run->cfg.opts->resume_run_id);
    }
    return err;
}

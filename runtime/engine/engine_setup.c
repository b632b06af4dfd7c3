/* runtime/engine/engine_setup.c - what a run needs before its first decision and gives back after
 * its last: the run's id, the LLM providers of its models (scripted, replayed or
 * OpenAI-compatible; one per worker thread for parallel steps), the scripts' positions saved
 * and restored, the workspace and the native tools bound to it, and the teardown. Private to
 * the engine (engine.h). */
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
/* Set-up                                                                                      */

weft_err
weft__eng_make_run_id(char out[24])
{
    uint8_t bytes[8];
    struct weft__rng *rng = weft__thread_rng();
    uint64_t v = weft__rng_next(rng);

    memcpy(bytes, &v, sizeof(bytes));
    weft_hex_encode(bytes, 6, out);
    out[12] = '\0';
    return WEFT_OK;
}

/* mkdir -p: @p path and its missing ancestors. */
static weft_err
mkdirs(const char *path)
{
    weft_err err = weft__mkdir_parents(path, 0755);

    if (err == WEFT_OK && mkdir(path, 0755) != 0 && errno != EEXIST) {
        err = WEFT_EIO;
    }
    return err;
}

weft_err
weft__eng_setup_workspace(struct run *run, char *error, size_t error_len)
{
    struct weft__buf b;
    char resolved[PATH_MAX];
    const char *dir =
        run->cfg.opts->workspace != NULL ? run->cfg.opts->workspace : run->cfg.wf->workspace;

    weft__buf_init(&b, 0);
    if (dir == NULL) {
        const char *home = weft__env("WEFT_HOME");
        if (weft__buf_printf(&b, "%s/workspaces/%s", home != NULL ? home : ".weft",
                             run->store.run_id) != WEFT_OK) {
            weft__buf_cleanup(&b);
            return WEFT_ENOMEM;
        }
        dir = b.data;
    }
    if (mkdirs(dir) != WEFT_OK || realpath(dir, resolved) == NULL) {
        snprintf(error, error_len, "workspace %s: cannot create: %s", dir, strerror(errno));
        weft__buf_cleanup(&b);
        return WEFT_EINVAL; /* a configuration error, found before the run starts */
    }
    weft__buf_cleanup(&b);
    run->cfg.workspace = weft__strdup(resolved);
    return run->cfg.workspace != NULL ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__eng_make_worker_providers(void *ctx, size_t workers)
{
    struct run *run = ctx;
    const struct weft_workflow *wf = run->cfg.wf;
    char error[256];
    bool has_openai = false;

    for (size_t i = 0; i < wf->model_count; i++) {
        has_openai = has_openai || wf->models[i].provider == WF_PROVIDER_OPENAI;
    }
    if (!has_openai || ENG(run)->replay != NULL || workers == 0) {
        return WEFT_OK;
    }
    ENG(run)->worker_providers = weft__calloc(workers, sizeof(*ENG(run)->worker_providers));
    if (ENG(run)->worker_providers == NULL) {
        return WEFT_ENOMEM;
    }
    ENG(run)->worker_count = workers;
    for (size_t w = 0; w < workers; w++) {
        ENG(run)->worker_providers[w] =
            weft__calloc(wf->model_count, sizeof(**ENG(run)->worker_providers));
        for (size_t i = 0; ENG(run)->worker_providers[w] != NULL && i < wf->model_count; i++) {
            if (wf->models[i].provider == WF_PROVIDER_OPENAI &&
                weft__wf_model_provider(&wf->models[i], &ENG(run)->worker_providers[w][i], error,
                                        sizeof(error)) != WEFT_OK) {
                WEFT_LOG(WEFT_LOG_WARN, "flow worker %zu shares the engine's client: %s", w, error);
            }
        }
    }
    return WEFT_OK;
}

/* A replay with fork options (@p opts) replays a fork: run @p info must be a fork of that
 * run (or an id prefix of it) from that step. True for a replay without them. */
static bool
is_replayed_fork(const struct weft_run_options *opts, const struct weft_run_info *info)
{
    if (opts->fork_run_id == NULL) {
        return true;
    }
    return info->origin_kind != NULL && strcmp(info->origin_kind, "fork") == 0 &&
           info->origin_run_id != NULL && info->origin_step != NULL &&
           opts->fork_from_step != NULL && strcmp(info->origin_step, opts->fork_from_step) == 0 &&
           strncmp(info->origin_run_id, opts->fork_run_id, strlen(opts->fork_run_id)) == 0;
}

/* A replay: the original's calls answer every model (replay.h); its root span is the link. */
static weft_err
setup_replay(struct run *run, char *error, size_t error_len)
{
    struct weft_run_info info;
    weft_err err = weft__replay_open(run->store.state, run->cfg.opts->replay_run_id,
                                     &run->cfg.replay, &info, error, error_len);

    if (err != WEFT_OK) {
        return err;
    }
    if (!is_replayed_fork(run->cfg.opts, &info)) {
        snprintf(error, error_len,
                 "replay and fork together replay a fork: run %s is not a fork of %.64s from "
                 "step %.64s",
                 info.run_id, run->cfg.opts->fork_run_id, run->cfg.opts->fork_from_step);
        weft__state_info_cleanup(&info);
        return WEFT_EINVAL;
    }
    weft__rt_stored_root(&info, &ENG(run)->origin);
    weft__state_info_cleanup(&info);
    return weft__replay_provider_new(run->cfg.replay, &ENG(run)->replay);
}

weft_err
weft__eng_setup_providers(struct run *run, char *error, size_t error_len)
{
    const struct weft_workflow *wf = run->cfg.wf;
    struct llm_error lerr;
    json_t *script = NULL;
    weft_err err = WEFT_OK;

    ENG(run)->providers = weft__calloc(wf->model_count, sizeof(*ENG(run)->providers));
    if (ENG(run)->providers == NULL) {
        return WEFT_ENOMEM;
    }
    if (run->cfg.opts->replay_run_id != NULL) {
        return setup_replay(run, error, error_len);
    }
    if (run->cfg.opts->replay_path != NULL && strncmp(run->cfg.opts->replay_path, "run:", 4) == 0) {
        /* Replay a stored run: its LLM exchanges, in order, become the script. */
        char id[96];
        char why[160];
        err = weft__state_run_resolve(run->store.state, run->cfg.opts->replay_path + 4, id,
                                      sizeof(id), why, sizeof(why));
        if (err == WEFT_OK) {
            err = weft__state_exchanges_script(run->store.state, id, &script);
        }
        if (err == WEFT_OK) {
            err = weft__llm_scripted_new(script, run->cfg.opts->replay_path, &ENG(run)->replay,
                                         &lerr);
        } else {
            snprintf(lerr.message, sizeof(lerr.message), "no stored LLM exchanges for run '%.64s'",
                     run->cfg.opts->replay_path + 4);
        }
        json_decref(script);
        if (err != WEFT_OK) {
            snprintf(error, error_len, "replay: %s", lerr.message);
        }
        return err;
    }
    if (run->cfg.opts->replay_path != NULL) {
        err = weft__llm_script_load(run->cfg.opts->replay_path, &script, &lerr);
        if (err == WEFT_OK) {
            err = weft__llm_scripted_new(script, run->cfg.opts->replay_path, &ENG(run)->replay,
                                         &lerr);
        }
        json_decref(script);
        if (err != WEFT_OK) {
            snprintf(error, error_len, "replay: %s", lerr.message);
        }
        return err;
    }
    for (size_t i = 0; i < wf->model_count; i++) {
        const struct wf_model *m = &wf->models[i];
        /* Models naming the same script share one provider, so its queues are shared. */
        for (size_t j = 0; m->provider == WF_PROVIDER_SCRIPTED && j < i; j++) {
            if (wf->models[j].provider == WF_PROVIDER_SCRIPTED &&
                strcmp(wf->models[j].script, m->script) == 0) {
                ENG(run)->providers[i] = ENG(run)->providers[j];
            }
        }
        if (ENG(run)->providers[i] != NULL) {
            continue;
        }
        err = weft__wf_model_provider(m, &ENG(run)->providers[i], error, error_len);
        if (err != WEFT_OK) {
            return err;
        }
    }
    return WEFT_OK;
}

weft_err
weft__eng_bind_native_tools(struct run *run, char *error, size_t error_len)
{
    const struct weft_workflow *wf = run->cfg.wf;

    run->cfg.native = weft__calloc(wf->tool_count + 1, sizeof(*run->cfg.native));
    if (run->cfg.native == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < wf->tool_count; i++) {
        bool is_found = false;
        if (wf->tools[i].type != TOOL_NATIVE) {
            continue;
        }
        for (size_t j = 0; j < weft__tool_registry_count(run->cfg.opts->tools); j++) {
            const struct tool_def *d = weft__tool_registry_get(run->cfg.opts->tools, j);
            if (strcmp(d->name, wf->tools[i].name) == 0) {
                run->cfg.native[i] = d;
                is_found = true;
            }
        }
        if (!is_found) {
            snprintf(error, error_len,
                     "tool '%s' is declared native but the program registered no such tool",
                     wf->tools[i].name);
            return WEFT_ENOTFOUND;
        }
    }
    return WEFT_OK;
}

/* The script path a provider of model @p i answers from (replay or scripted), else NULL. */
const char *
weft__eng_script_of(const struct run *run, size_t i)
{
    if (ENG(run)->replay != NULL) {
        return run->cfg.opts->replay_path;
    }
    /* A script loaded from a snapshot keeps the cursors of the file the run had (snapshot.c). */
    return run->cfg.wf->models[i].provider == WF_PROVIDER_SCRIPTED
               ? weft__rt_snapshot_unroot(run->cfg.opts->snapshot_root,
                                          run->cfg.wf->models[i].script)
               : NULL;
}

/* A conversation given a session id, or a resumed run, continues its scripts where the last
 * turn or the last finished step left them; cursors are saved after every step for that. */
void
weft__eng_cursors_restore(struct run *run)
{
    for (size_t i = 0; (run->cfg.opts->session_id != NULL || run->store.is_resumed) &&
                       i < run->cfg.wf->model_count;
         i++) {
        json_t *saved = NULL;
        const char *script = weft__eng_script_of(run, i);
        if (script != NULL &&
            weft__state_cursors_load(run->store.state, run->store.session_id, script, &saved) ==
                WEFT_OK &&
            saved != NULL) {
            (void)weft__llm_scripted_restore(weft__eng_provider_for(run, i), saved);
        }
        json_decref(saved);
    }
}

const char *
weft__eng_provider_name(void *ctx, size_t model)
{
    struct run *run = ctx;
    const struct llm_provider *p = ENG(run)->providers != NULL && model < run->cfg.wf->model_count
                                       ? weft__eng_provider_for(run, model)
                                       : NULL;

    return p != NULL ? p->provider_name : NULL;
}

void
weft__eng_cursors_save(void *ctx)
{
    struct run *run = ctx;
    for (size_t i = 0; i < run->cfg.wf->model_count; i++) {
        const char *script = weft__eng_script_of(run, i);
        json_t *c = weft__llm_scripted_cursors_changed(weft__eng_provider_for(run, i));
        if (script != NULL && c != NULL && json_object_size(c) > 0) {
            (void)weft__state_cursors_save(run->store.state, run->store.session_id, script, c);
        }
        json_decref(c);
    }
}

void
weft__eng_teardown(struct run *run)
{
    weft__rt_watchdog_stop(run);
    for (size_t i = 0; ENG(run)->providers != NULL && i < run->cfg.wf->model_count; i++) {
        bool is_shared = false;
        for (size_t j = 0; j < i; j++) {
            is_shared = is_shared || ENG(run)->providers[j] == ENG(run)->providers[i];
        }
        if (!is_shared) {
            weft__llm_provider_free(ENG(run)->providers[i]);
        }
    }
    weft__free(ENG(run)->providers);
    for (size_t w = 0; w < ENG(run)->worker_count; w++) {
        for (size_t i = 0; ENG(run)->worker_providers[w] != NULL && i < run->cfg.wf->model_count;
             i++) {
            weft__llm_provider_free(ENG(run)->worker_providers[w][i]);
        }
        weft__free(ENG(run)->worker_providers[w]);
    }
    weft__free(ENG(run)->worker_providers);
    weft__llm_provider_free(ENG(run)->replay);
    weft__replay_free(run->cfg.replay);
    weft__rt_fork_free(run->store.fork);
    weft__llm_recording_free(ENG(run)->recording);
    weft__free((void *)run->cfg.native);
    if (!run->cfg.is_mcp_borrowed) {
        weft__mcp_hub_free(run->cfg.mcp);
    }
    for (size_t i = 0; i < run->ps.request_count; i++) {
        weft__free(run->ps.requests[i].agent);
        weft__free(run->ps.requests[i].query);
    }
    weft__plan_cleanup(&run->ps.plan);
    for (size_t i = 0; i < run->roster.count; i++) {
        weft_workflow_free(run->roster.teams[i]);
    }
    json_decref(run->store.history);
    json_decref(run->store.resumed);
    weft__state_close(run->store.state);
    weft__state_close(run->store.memory);
    weft__rt_embedder_free(run->store.embedder);
    weft__free(run->store.session_id);
    weft__free(run->cfg.workspace);
    weft__free(run->cfg.stored_input);
    weft__rt_metrics_free(run->tel.metrics);
    if (ENG(run)->executor != NULL && ENG(run)->executor->ops->bind_run_meter != NULL) {
        ENG(run)->executor->ops->bind_run_meter(ENG(run)->executor, NULL); /* before it is freed */
    }
    weft__rt_mstore_free(run->tel.mstore);
    pthread_mutex_destroy(&ENG(run)->lock);
    pthread_mutex_destroy(&ENG(run)->task_lock);
}

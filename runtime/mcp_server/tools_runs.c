/* runtime/mcp_server/tools_runs.c - the tools over the state database's runs (docs/mcp.md):
 * list_runs (the latest runs, filtered by status) and show_run (one run's plan, failed steps
 * and corrections), read through weft_runs_list() and weft_run_load().
 */
#include "runtime/mcp_server/tools.h"

#include <stdio.h>
#include <string.h>
#include <weft/weft.h>

#define MAX_LIST_RUNS 500 /* list_runs limit */

static json_t *
run_info_json(const struct weft_run_info *r)
{
    return json_pack("{s:s, s:s?, s:s?, s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:f, s:o, s:s?, s:f}",
                     "run_id", r->run_id, "workflow", r->workflow, "workflow_path",
                     r->workflow_path, "status", r->status != NULL ? r->status : "unknown",
                     "started", weft__mcp_time_json(r->started_ns), "duration_ms",
                     weft__mcp_duration_json(r->started_ns, r->ended_ns), "reason",
                     weft__mcp_text_json(r->reason, WEFT__MCP_MAX_TEXT_BYTES), "steps",
                     (json_int_t)r->step_count, "iterations", (json_int_t)r->iterations,
                     "corrections", (json_int_t)r->corrections, "reward", r->reward, "input",
                     weft__mcp_text_json(r->input, WEFT__MCP_MAX_TEXT_BYTES), "trace_id",
                     r->trace_id, "cost_usd", r->cost_usd);
}

static void
tool_list_runs(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    long long limit = 0;
    const char *status = NULL;
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;
    weft_err err = WEFT_OK;

    if (!weft__mcp_int_arg(args, "limit", 1, MAX_LIST_RUNS, 20, &limit, to) ||
        !weft__mcp_str_arg(args, "status", false, &status, to)) {
        return;
    }
    /* With a status filter, read further back so that the filter still finds limit runs. */
    err = weft_runs_list(srv->state_path, status != NULL ? (size_t)limit * 10 : (size_t)limit,
                         &runs, &count);
    if (err == WEFT_ENOTFOUND) {
        count = 0;
    } else if (err != WEFT_OK) {
        weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
        return;
    }
    list = json_array();
    for (size_t i = 0; list != NULL && i < count && json_array_size(list) < (size_t)limit; i++) {
        json_t *item = NULL;

        if (status != NULL && (runs[i].status == NULL || strcmp(runs[i].status, status) != 0)) {
            continue;
        }
        item = run_info_json(&runs[i]);
        if (item != NULL && !weft__mcp_fits(item, &used, srv->max_result - 1024)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(list, item);
    }
    to->result = json_pack("{s:o, s:I, s:b}", "runs", list, "count",
                           (json_int_t)json_array_size(list), "truncated", is_truncated);
    weft_run_infos_free(runs, count);
}

static json_t *
depends_json(const char *csv)
{
    json_t *a = json_array();

    while (a != NULL && csv != NULL && *csv != '\0') {
        size_t n = strcspn(csv, ",");

        if (n > 0) {
            json_array_append_new(a, json_stringn(csv, n));
        }
        csv += n + (csv[n] == ',');
    }
    return a;
}

static void
tool_show_run(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    struct weft_run_details *run = NULL;
    json_t *o = NULL;
    json_t *steps = NULL;
    json_t *failed = NULL;
    json_t *corrections = NULL;
    size_t used = 0;
    bool is_truncated = false;

    if (!weft__mcp_str_arg(args, "run_id", true, &ref, to)) {
        return;
    }
    run = weft__mcp_load_run(srv, ref, to);
    if (run == NULL) {
        return;
    }
    o = run_info_json(&run->info);
    steps = json_array();
    failed = json_array();
    corrections = json_array();
    for (size_t i = 0; o != NULL && steps != NULL && failed != NULL && i < run->step_count; i++) {
        const struct weft_run_step *st = &run->steps[i];
        const struct weft_run_step_extra *x = &run->step_extras[i];
        json_t *item = json_pack(
            "{s:s, s:s?, s:s?, s:o, s:s, s:I, s:o, s:o, s:s?, s:s?, s:o, s:s?, s:o}", "id", st->id,
            "agent", st->agent, "executor", st->executor, "task",
            weft__mcp_text_json(st->task, 500), "status",
            st->status != NULL ? st->status : "unknown", "attempts", (json_int_t)st->attempts,
            "reward", st->has_reward ? json_real(st->reward) : json_null(), "depends_on",
            depends_json(st->depends_on), "requested_by", st->requested_by, "parent", st->parent,
            "duration_ms", weft__mcp_duration_json(x->started_ns, x->ended_ns), "error_type",
            x->error_type, "result", weft__mcp_text_json(st->result, 500));

        if (item != NULL && !weft__mcp_fits(item, &used, srv->max_result / 2)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(steps, item);
    }
    for (size_t i = 0; failed != NULL && i < run->step_count; i++) {
        const struct weft_run_step *st = &run->steps[i];
        const struct weft_run_step_extra *x = &run->step_extras[i];
        bool is_failed = st->status != NULL && strcmp(st->status, "failed") == 0;
        json_t *item = NULL;

        if (!is_failed && x->skipped_dependency == NULL && x->error_type == NULL) {
            continue;
        }
        item = weft__mcp_failure_json(st, x);
        if (item != NULL && !weft__mcp_fits(item, &used, srv->max_result - srv->max_result / 4)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(failed, item);
    }
    for (size_t i = 0; corrections != NULL && i < run->correction_count && i < 50; i++) {
        const struct weft_run_correction *c = &run->corrections[i];

        json_array_append_new(
            corrections, json_pack("{s:I, s:s?, s:s?, s:s?, s:s?, s:s?}", "seq", (json_int_t)c->seq,
                                   "failed_step", c->failed_step, "error_type", c->error_type,
                                   "inserted", c->inserted, "depends_before", c->depends_before,
                                   "depends_after", c->depends_after));
    }
    if (o != NULL) {
        json_object_set_new(o, "plan", steps);
        json_object_set_new(o, "failed_steps", failed);
        json_object_set_new(o, "corrections_applied", corrections);
        json_object_set_new(o, "truncated", json_boolean(is_truncated));
        steps = failed = corrections = NULL;
    }
    json_decref(steps);
    json_decref(failed);
    json_decref(corrections);
    to->result = o;
    weft_run_details_free(run);
}

/* ---------------------------------------------------------------------------------------- */
/* Tool table                                                                                 */

#define RUN_ITEM_SCHEMA                                                                        \
    "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"workflow\":{"     \
    "\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"started\":{\"type\":[\"string\"," \
    "\"null\"]},\"duration_ms\":{\"type\":[\"number\",\"null\"]},\"steps\":{\"type\":"         \
    "\"integer\"},\"reward\":{\"type\":\"number\"},\"reason\":{\"type\":[\"string\","          \
    "\"null\"]},\"trace_id\":{\"type\":\"string\"}},\"required\":[\"run_id\",\"status\"]}"

const struct tool weft__mcp_tools_runs[] = {
    {"list_runs", "List workflow runs",
     "List the most recent workflow runs weft has stored, newest first: run id, workflow name, "
     "status (running, completed, failed, stuck, aborted, interrupted, ...), start time, "
     "duration, step count, reward, the reason the run ended and its trace id. Start here to "
     "find a run id; filter with status (e.g. \"failed\").",
     "{\"type\":\"object\",\"properties\":{\"limit\":{\"type\":\"integer\",\"minimum\":1,"
     "\"maximum\":500,\"description\":\"at most this many runs (default 20)\"},\"status\":{"
     "\"type\":\"string\",\"description\":\"only runs with this status, e.g. failed or "
     "completed\"}},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"runs\":{\"type\":\"array\",\"items\":" RUN_ITEM_SCHEMA
     "},\"count\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"}},\"required\":["
     "\"runs\",\"count\",\"truncated\"]}",
     tool_list_runs, true},
    {"show_run", "Show a run's plan",
     "Show one run: its status and reason, its plan (every step with status, agent or "
     "executor, attempts, reward, dependencies), the failed steps with their error type, "
     "feedback and error details, corrections applied, and the run's trace id for get_trace "
     "and why_failed. run_id may be a full run id, a unique prefix, or \"last\".",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\",\"description\":"
     "\"run id, unique prefix, or \\\"last\\\"\"}},\"required\":[\"run_id\"],"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"status\":{"
     "\"type\":\"string\"},\"reason\":{\"type\":[\"string\",\"null\"]},\"trace_id\":{\"type\":"
     "[\"string\",\"null\"]},\"plan\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
     "\"failed_steps\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"truncated\":{"
     "\"type\":\"boolean\"}},\"required\":[\"run_id\",\"status\",\"plan\",\"failed_steps\"]}",
     tool_show_run, true},
};
const size_t weft__mcp_tools_runs_count =
    sizeof(weft__mcp_tools_runs) / sizeof(weft__mcp_tools_runs[0]);

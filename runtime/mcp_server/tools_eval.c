/* runtime/mcp_server/tools_eval.c - list_datasets, list_experiments and get_experiment
 * (docs/mcp.md): the datasets and experiments of the state store (include/weft/dataset.h,
 * docs/experiments.md), so that an agent can run the loop from a failed run to a passing
 * experiment: why_failed, change the workflow, `weft eval`, read the results here.
 */
#include "runtime/mcp_server/tools.h"

#include <stdio.h>
#include <string.h>
#include <weft/dataset.h>

#define MAX_LIST 500 /* datasets or experiments listed at most */

/* What the state store said, as the tool's error; true when it said nothing wrong. */
static bool
store_ok(weft_err err, struct tool_out *to)
{
    if (err == WEFT_OK || err == WEFT_ENOTFOUND) {
        return true;
    }
    weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
    return false;
}

static void
tool_list_datasets(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_dataset *ds = NULL;
    size_t count = 0;
    json_t *list = NULL;

    (void)args;
    if (!store_ok(weft_datasets_list(srv->state_path, &ds, &count), to)) {
        return;
    }
    list = json_array();
    for (size_t i = 0; list != NULL && i < count && i < MAX_LIST; i++) {
        json_array_append_new(
            list, json_pack("{s:s, s:I, s:I, s:o, s:o}", "name", ds[i].name, "version",
                            (json_int_t)ds[i].version, "items", (json_int_t)ds[i].items, "created",
                            weft__mcp_time_json(ds[i].created_ns), "description",
                            weft__mcp_text_json(ds[i].description, WEFT__MCP_MAX_TEXT_BYTES)));
    }
    to->result = list != NULL ? json_pack("{s:o, s:I, s:b}", "datasets", list, "count",
                                          (json_int_t)count, "truncated", count > MAX_LIST)
                              : NULL;
    weft_datasets_free(ds, count);
}

/* An experiment's summary as stored (a JSON object), or null. */
static json_t *
summary_json(const struct weft_experiment *e)
{
    json_t *s = e->summary != NULL ? json_loads(e->summary, 0, NULL) : NULL;

    return s != NULL ? s : json_null();
}

static json_t *
experiment_json(const struct weft_experiment *e)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:b, s:s, s:o, s:o, s:o}", "id", e->id, "name",
                     e->name != NULL ? e->name : "", "dataset", e->dataset, "dataset_version",
                     (json_int_t)e->dataset_version, "workflow",
                     e->workflow != NULL ? e->workflow : "", "from_failure", e->from_failure,
                     "status", e->status != NULL ? e->status : "", "started",
                     weft__mcp_time_json(e->started_ns), "ended",
                     e->ended_ns != 0 ? weft__mcp_time_json(e->ended_ns) : json_null(), "summary",
                     summary_json(e));
}

static void
tool_list_experiments(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_experiment *e = NULL;
    size_t count = 0;
    const char *dataset = NULL;
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;

    if (!weft__mcp_str_arg(args, "dataset", false, &dataset, to) ||
        !store_ok(weft_experiments_list(srv->state_path, dataset, &e, &count), to)) {
        return;
    }
    list = json_array();
    for (size_t i = 0; list != NULL && i < count; i++) {
        json_t *item = experiment_json(&e[i]);

        if (item == NULL || i >= MAX_LIST || !weft__mcp_fits(item, &used, srv->max_result - 1024)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(list, item);
    }
    to->result = list != NULL ? json_pack("{s:o, s:I, s:b}", "experiments", list, "count",
                                          (json_int_t)count, "truncated", is_truncated)
                              : NULL;
    weft_experiments_free(e, count);
}

/* The full id of experiment @p ref: an id, a prefix of 4 or more characters, or a name (its
 * newest experiment). false with @p to's error otherwise. */
static bool
resolve_experiment(struct weft_mcp_server *srv, const char *ref, char *id, struct tool_out *to)
{
    weft_err err = weft_experiment_resolve(srv->state_path, ref, id);

    if (err == WEFT_OK) {
        return true;
    }
    if (err == WEFT_ENOTFOUND || err == WEFT_EINVAL) {
        weft__mcp_fail_tool(to,
                            err == WEFT_ENOTFOUND
                                ? "no experiment %s: list_experiments shows them"
                                : "%s names several experiments: give more of the id",
                            ref);
    } else {
        weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
    }
    return false;
}

static json_t *
item_json(const struct weft_experiment_item *it)
{
    json_t *scores = it->scores != NULL ? json_loads(it->scores, 0, NULL) : NULL;

    return json_pack(
        "{s:s, s:o, s:s, s:o, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:o}", "item_id", it->item_id,
        "run_id", it->run_id != NULL ? json_string(it->run_id) : json_null(), "status", it->status,
        "scores", scores != NULL ? scores : json_array(), "tokens", (json_int_t)it->tokens,
        "cost_usd", it->cost_usd, "duration_ms", (double)it->duration_ns / 1e6, "loops",
        (json_int_t)it->loops, "stuck_loops", (json_int_t)it->stuck_loops, "corrections",
        (json_int_t)it->corrections, "llm_calls", (json_int_t)it->llm_calls, "error",
        weft__mcp_text_json(it->error, WEFT__MCP_MAX_TEXT_BYTES));
}

static void
tool_get_experiment(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_experiment e;
    struct weft_experiment_item *items = NULL;
    size_t count = 0;
    const char *ref = NULL;
    char id[37];
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;
    weft_err err = WEFT_OK;

    memset(&e, 0, sizeof(e));
    if (!weft__mcp_str_arg(args, "experiment", true, &ref, to) ||
        !resolve_experiment(srv, ref, id, to)) {
        return;
    }
    err = weft_experiment_load(srv->state_path, id, &e, &items, &count);
    if (err != WEFT_OK) {
        weft__mcp_fail_tool(to, "experiment %s cannot be read: %s", id, weft_strerror(err));
        return;
    }
    /* Failed and errored items first: what an agent fixing the workflow reads. */
    list = json_array();
    for (int pass = 0; list != NULL && pass < 2 && !is_truncated; pass++) {
        for (size_t i = 0; i < count; i++) {
            bool is_passed = strcmp(items[i].status, "passed") == 0;
            json_t *item = (pass == 0) != is_passed ? item_json(&items[i]) : NULL;

            if (item != NULL && !weft__mcp_fits(item, &used, srv->max_result - 4096)) {
                json_decref(item);
                is_truncated = true;
                break;
            }
            if (item != NULL) {
                json_array_append_new(list, item);
            }
        }
    }
    to->result = list != NULL
                     ? json_pack("{s:o, s:o, s:I, s:b}", "experiment", experiment_json(&e), "items",
                                 list, "count", (json_int_t)count, "truncated", is_truncated)
                     : NULL;
    weft_experiment_items_free(items, count);
    weft_experiment_cleanup(&e);
}

const struct tool weft__mcp_tools_eval[] = {
    {"list_datasets", "List datasets",
     "List the datasets of the state store (weft dataset): name, latest version, items in it, "
     "when it was made. A dataset holds inputs (often the failed runs of a workflow, each with "
     "the step where it went wrong) that `weft eval WORKFLOW --dataset NAME` runs a workflow "
     "over.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"datasets\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"object\"}},\"count\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"}},"
     "\"required\":[\"datasets\",\"count\",\"truncated\"]}",
     tool_list_datasets, true},
    {"list_experiments", "List experiments",
     "List experiments (`weft eval` runs of a workflow over a dataset version), newest first: "
     "id, name, dataset and version, workflow, from_failure, status and the summary (items, "
     "passed, failed, errored, pass rate, tokens, cost, LLM calls saved). Filter with dataset.",
     "{\"type\":\"object\",\"properties\":{\"dataset\":{\"type\":\"string\",\"description\":"
     "\"only experiments over this dataset\"}},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"experiments\":{\"type\":\"array\",\"items\":{"
     "\"type\":\"object\"}},\"count\":{\"type\":\"integer\"},\"truncated\":{\"type\":"
     "\"boolean\"}},\"required\":[\"experiments\",\"count\",\"truncated\"]}",
     tool_list_experiments, true},
    {"get_experiment", "Read an experiment's results",
     "Read one experiment: its summary and every item's result (status passed, failed or "
     "errored, the evaluators' scores with their explanations, the item's run id for "
     "why_failed, tokens, cost, duration, loops, LLM calls), failed and errored items first. "
     "experiment may be an id, a prefix of 4+ characters, or a name (its newest run).",
     "{\"type\":\"object\",\"properties\":{\"experiment\":{\"type\":\"string\",\"description\":"
     "\"id, id prefix or name\"}},\"required\":[\"experiment\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"experiment\":{\"type\":\"object\"},\"items\":{"
     "\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"count\":{\"type\":\"integer\"},"
     "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"experiment\",\"items\",\"count\","
     "\"truncated\"]}",
     tool_get_experiment, true},
};
const size_t weft__mcp_tools_eval_count =
    sizeof(weft__mcp_tools_eval) / sizeof(weft__mcp_tools_eval[0]);

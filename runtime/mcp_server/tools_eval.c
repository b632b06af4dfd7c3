/* runtime/mcp_server/tools_eval.c - list_experiments, get_experiment and compare_experiments
 * (docs/mcp.md): the experiments of the state store (include/weft/dataset.h,
 * docs/experiments.md), so that an agent can run the loop from a failed run to a passing
 * experiment: why_failed, change the workflow, `weft eval`, compare_experiments.
 *
 * The JSON is report/experiment.h's (`weft eval list|show|compare --json` and `weft serve`
 * send the same), with what the MCP results have promised since get_experiment came
 * (docs/mcp.md): RFC 3339 "started"/"ended" beside the _ns times, "duration_ms" beside
 * "duration_ns", and an item's error cut at WEFT__MCP_MAX_TEXT_BYTES (the stored one may hold
 * 64 KiB, which would crowd the other items out of the result).
 */
#include "runtime/mcp_server/tools.h"

#include "runtime/dataset/exp_load.h"

#include <stdio.h>
#include <string.h>
#include <weft/dataset.h>

#define MAX_LIST 500 /* experiments listed at most */

/* An experiment (no items) as the tools give it; NULL when out of memory. */
static json_t *
experiment_json(const struct weft_experiment *e)
{
    json_t *o = weft__doc_experiment_info(e);

    if (o == NULL || !weft__mcp_add_time(o, "started_ns", "started") ||
        !weft__mcp_add_time(o, "ended_ns", "ended")) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A nanosecond member of @p o also as milliseconds (@p key); false when out of memory. */
static bool
add_ms(json_t *o, const char *ns_key, const char *key)
{
    double ns = json_number_value(json_object_get(o, ns_key));

    return json_object_set_new(o, key, json_real(ns / 1e6)) == 0;
}

/* One item's result as get_experiment gives it; NULL when out of memory. */
static json_t *
item_json(const struct weft_experiment_item *it)
{
    json_t *o = weft__doc_experiment_item(it);

    if (o == NULL || !add_ms(o, "duration_ns", "duration_ms") ||
        !weft__mcp_cut_member(o, "error", WEFT__MCP_MAX_TEXT_BYTES)) {
        json_decref(o);
        return NULL;
    }
    return o;
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
    weft_err err = WEFT_OK;

    if (!weft__mcp_str_arg(args, "dataset", false, &dataset, to)) {
        return;
    }
    err = weft_experiments_list(srv->state_path, dataset, &e, &count);
    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
        return;
    }
    list = json_array();
    for (size_t i = 0; list != NULL && i < count; i++) {
        json_t *item = i < MAX_LIST ? experiment_json(&e[i]) : NULL;

        if (i < MAX_LIST && item == NULL) {
            json_decref(list);
            list = NULL;
            break;
        }
        if (item == NULL || !weft__mcp_fits(item, &used, srv->max_result - 1024)) {
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

/* Load experiment @p ref (an id, a prefix of 4 or more characters, or a name: its newest) into
 * @p x; false with @p to's error otherwise. Release @p x with weft__exp_cleanup() either way. */
static bool
load_experiment(struct weft_mcp_server *srv,
                const char *ref,
                struct weft__exp *x,
                struct tool_out *to)
{
    weft_err err = weft__exp_load(srv->state_path, ref, x);

    if (err == WEFT_OK) {
        return true;
    }
    if (err == WEFT_ENOTFOUND) {
        weft__mcp_fail_tool(to, "no experiment %s: list_experiments shows them", ref);
    } else if (err == WEFT_EINVAL) {
        weft__mcp_fail_tool(to,
                            "%s names several experiments: give more of the id "
                            "(list_experiments shows them)",
                            ref);
    } else {
        weft__mcp_fail_tool(to, "experiment %s cannot be read: %s", ref, weft_strerror(err));
    }
    return false;
}

/* Add @p item to @p list when it fits the result's budget; false when it does not (or is
 * NULL: out of memory, *is_oom set). Consumes @p item. */
static bool
append_fitting(struct weft_mcp_server *srv, json_t *list, json_t *item, size_t *used, bool *is_oom)
{
    if (item == NULL) {
        *is_oom = true;
        return false;
    }
    if (!weft__mcp_fits(item, used, srv->max_result - 256)) {
        json_decref(item);
        return false;
    }
    if (json_array_append_new(list, item) != 0) {
        *is_oom = true;
        return false;
    }
    return true;
}

/* @p result with "items" (@p list), "count" and "truncated" set, or NULL when out of memory
 * (*is_oom, or a member that could not be set). Consumes @p result and @p list. */
static json_t *
finish(json_t *result, json_t *list, size_t count, bool is_truncated, bool is_oom)
{
    if (is_oom || result == NULL || list == NULL) {
        json_decref(list);
        json_decref(result);
        return NULL;
    }
    if (json_object_set_new(result, "items", list) != 0 ||
        json_object_set_new(result, "count", json_integer((json_int_t)count)) != 0 ||
        json_object_set_new(result, "truncated", json_boolean(is_truncated)) != 0) {
        json_decref(result);
        return NULL;
    }
    return result;
}

static void
tool_get_experiment(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft__exp x;
    const char *ref = NULL;
    json_t *result = NULL;
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;
    bool is_oom = false;

    memset(&x, 0, sizeof(x));
    if (!weft__mcp_str_arg(args, "experiment", true, &ref, to) ||
        !load_experiment(srv, ref, &x, to)) {
        weft__exp_cleanup(&x);
        return;
    }
    result = json_pack("{s:o}", "experiment", experiment_json(&x.e));
    list = result != NULL ? json_array() : NULL;
    used = result != NULL ? json_dumpb(result, NULL, 0, JSON_COMPACT) : 0;
    /* Failed and errored items first: what an agent fixing the workflow reads. */
    for (int pass = 0; list != NULL && pass < 2 && !is_truncated && !is_oom; pass++) {
        for (size_t i = 0; i < x.count; i++) {
            bool is_passed = strcmp(x.items[i].status, "passed") == 0;

            if ((pass == 0) != is_passed &&
                !append_fitting(srv, list, item_json(&x.items[i]), &used, &is_oom)) {
                is_truncated = true;
                break;
            }
        }
    }
    to->result = finish(result, list, x.count, is_truncated, is_oom);
    weft__exp_cleanup(&x);
}

/* The comparison of @p a and @p b (report/experiment.h's weft.experiment_compare/v1) with its
 * experiments as experiment_json() gives them; NULL when out of memory. Its "items" are left
 * out: the caller lists them within the budget. */
static json_t *
compare_json(const struct weft__exp *a, const struct weft__exp *b, json_t **items)
{
    json_t *doc = weft__doc_experiment_compare(a, b);

    *items = NULL;
    if (doc == NULL || json_object_set_new(doc, "a", experiment_json(&a->e)) != 0 ||
        json_object_set_new(doc, "b", experiment_json(&b->e)) != 0 ||
        !add_ms(json_object_get(doc, "deltas"), "duration_ns", "duration_ms")) {
        json_decref(doc);
        return NULL;
    }
    *items = json_incref(json_object_get(doc, "items"));
    json_object_del(doc, "items");
    return doc;
}

static void
tool_compare_experiments(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft__exp a;
    struct weft__exp b;
    const char *ra = NULL;
    const char *rb = NULL;
    json_t *result = NULL;
    json_t *all = NULL;
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;
    bool is_oom = false;

    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    if (!weft__mcp_str_arg(args, "a", true, &ra, to) ||
        !weft__mcp_str_arg(args, "b", true, &rb, to) || !load_experiment(srv, ra, &a, to) ||
        !load_experiment(srv, rb, &b, to)) {
        weft__exp_cleanup(&a);
        weft__exp_cleanup(&b);
        return;
    }
    result = compare_json(&a, &b, &all);
    list = result != NULL ? json_array() : NULL;
    used = result != NULL ? json_dumpb(result, NULL, 0, JSON_COMPACT) : 0;
    /* The changed items come first in the document: what is cut is unchanged ones first. */
    for (size_t i = 0; list != NULL && i < json_array_size(all); i++) {
        if (!append_fitting(srv, list, json_incref(json_array_get(all, i)), &used, &is_oom)) {
            is_truncated = true;
            break;
        }
    }
    to->result = finish(result, list, json_array_size(all), is_truncated, is_oom);
    json_decref(all);
    weft__exp_cleanup(&a);
    weft__exp_cleanup(&b);
}

const struct tool weft__mcp_tools_eval[] = {
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
    {"compare_experiments", "Compare two experiments",
     "Compare experiment b with experiment a (say, the workflow after a change with the one "
     "before, over the same dataset): counts of items fixed (passed only in b), broken (passed "
     "only in a) and unchanged (added and removed for items in only one), the deltas b - a "
     "(pass rate, mean reward, cost, tokens, duration, loops), and the items with both "
     "statuses and both run ids, the changed ones first (why_failed on b_run_id says why an "
     "item broke). a and b may be ids, prefixes of 4+ characters, or names (the newest).",
     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"description\":\"the "
     "experiment compared with (before): id, id prefix or name\"},\"b\":{\"type\":\"string\","
     "\"description\":\"the experiment compared (after): id, id prefix or name\"}},"
     "\"required\":[\"a\",\"b\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"object\"},\"b\":{\"type\":"
     "\"object\"},\"counts\":{\"type\":\"object\",\"properties\":{\"fixed\":{\"type\":"
     "\"integer\"},\"broken\":{\"type\":\"integer\"},\"unchanged\":{\"type\":\"integer\"},"
     "\"added\":{\"type\":\"integer\"},\"removed\":{\"type\":\"integer\"}},\"required\":["
     "\"fixed\",\"broken\",\"unchanged\"]},\"deltas\":{\"type\":\"object\"},\"items\":{"
     "\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"count\":{\"type\":\"integer\"},"
     "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"a\",\"b\",\"counts\",\"deltas\","
     "\"items\",\"count\",\"truncated\"]}",
     tool_compare_experiments, true},
};
const size_t weft__mcp_tools_eval_count =
    sizeof(weft__mcp_tools_eval) / sizeof(weft__mcp_tools_eval[0]);

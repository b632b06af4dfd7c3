/* runtime/mcp_server/tools_datasets.c - list_datasets and show_dataset (docs/mcp.md): the
 * datasets of the state store (include/weft/dataset.h, docs/experiments.md) and one version's
 * items, each with the run it came from and that run's failing step, which is where an agent
 * fixing a workflow starts (why_failed on the item's run).
 *
 * The JSON of a dataset and of an item is report/experiment.h's (`weft dataset list|show
 * --json` and `weft serve` send the same), with the MCP results' additions: an RFC 3339
 * "created" beside "created_ns", and the description cut like every free text of a result.
 */
#include "runtime/mcp_server/tools.h"

#include "report/experiment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/dataset.h>

#define MAX_LIST 500 /* datasets listed at most */

/* A dataset as list_datasets and show_dataset give it; NULL when out of memory. */
static json_t *
dataset_json(const struct weft_dataset *d)
{
    json_t *o = weft__doc_dataset_info(d);

    if (o == NULL || !weft__mcp_add_time(o, "created_ns", "created") ||
        !weft__mcp_cut_member(o, "description", WEFT__MCP_MAX_TEXT_BYTES)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static void
tool_list_datasets(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_dataset *ds = NULL;
    size_t count = 0;
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;
    weft_err err = weft_datasets_list(srv->state_path, &ds, &count);

    (void)args;
    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
        return;
    }
    list = json_array();
    for (size_t i = 0; list != NULL && i < count; i++) {
        json_t *item = NULL;

        /* A dataset's evaluators may be 64 KiB: the list keeps within the result cap too. */
        if (i >= MAX_LIST) {
            is_truncated = true;
            break;
        }
        item = dataset_json(&ds[i]);
        if (item == NULL) {
            json_decref(list);
            list = NULL;
            break;
        }
        if (!weft__mcp_fits(item, &used, srv->max_result - 1024)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(list, item);
    }
    to->result = list != NULL ? json_pack("{s:o, s:I, s:b}", "datasets", list, "count",
                                          (json_int_t)count, "truncated", is_truncated)
                              : NULL;
    weft_datasets_free(ds, count);
}

/* "NAME" or "NAME@VERSION" into @p name and @p version (0: the latest); false with @p to's
 * error when it is neither. */
static bool
split_ref(const char *ref,
          char name[WEFT_DATASET_NAME_MAX + 1],
          uint64_t *version,
          struct tool_out *to)
{
    const char *at = strrchr(ref, '@');
    size_t len = at != NULL ? (size_t)(at - ref) : strlen(ref);
    char *end = NULL;

    *version = 0;
    if (at != NULL) {
        *version = strtoull(at + 1, &end, 10);
    }
    if (len == 0 || len > WEFT_DATASET_NAME_MAX ||
        (at != NULL && (at[1] < '0' || at[1] > '9' || *end != '\0' || *version == 0))) {
        weft__mcp_fail_tool(to,
                            "dataset: expected NAME or NAME@VERSION (a version from 1), not "
                            "\"%.200s\"",
                            ref);
        return false;
    }
    memcpy(name, ref, len);
    name[len] = '\0';
    return true;
}

/* show_dataset's items of @p items: those with a failing step when @p is_failing_only, within
 * the result cap (@p used: what the rest of the result takes). NULL when out of memory. */
static json_t *
items_json(struct weft_mcp_server *srv,
           const struct weft_dataset_item *items,
           size_t count,
           bool is_failing_only,
           size_t used,
           size_t *selected,
           bool *is_truncated)
{
    json_t *list = json_array();

    *selected = 0;
    *is_truncated = false;
    for (size_t i = 0; list != NULL && i < count; i++) {
        json_t *item = NULL;

        if (is_failing_only && items[i].fail_step == NULL) {
            continue;
        }
        (*selected)++;
        if (*is_truncated) {
            continue; /* counted, not listed */
        }
        item = weft__doc_dataset_item(&items[i]);
        if (item == NULL) {
            json_decref(list);
            return NULL;
        }
        if (!weft__mcp_fits(item, &used, srv->max_result - 256)) {
            json_decref(item);
            *is_truncated = true;
            continue;
        }
        json_array_append_new(list, item);
    }
    return list;
}

static void
tool_show_dataset(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_dataset ds;
    struct weft_dataset_item *items = NULL;
    size_t count = 0;
    size_t selected = 0;
    const char *ref = NULL;
    const json_t *failing = json_object_get(args, "failing_only");
    char name[WEFT_DATASET_NAME_MAX + 1];
    uint64_t version = 0;
    json_t *result = NULL;
    json_t *list = NULL;
    bool is_truncated = false;
    weft_err err = WEFT_OK;

    memset(&ds, 0, sizeof(ds));
    if (!weft__mcp_str_arg(args, "dataset", true, &ref, to) ||
        !split_ref(ref, name, &version, to)) {
        return;
    }
    if (failing != NULL && !json_is_boolean(failing)) {
        weft__mcp_fail_tool(to, "failing_only: expected true or false");
        return;
    }
    err = weft_dataset_show(srv->state_path, name, version, &ds, &items, &count);
    if (err == WEFT_ENOTFOUND) {
        weft__mcp_fail_tool(to, "no dataset %s: list_datasets shows them", name);
        return;
    }
    if (err == WEFT_EINVAL) {
        weft__mcp_fail_tool(to,
                            "dataset %s has no version %llu: list_datasets shows its latest "
                            "version",
                            name, (unsigned long long)version);
        return;
    }
    if (err != WEFT_OK) {
        weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
        return;
    }
    /* The result but its items first, so that the items know what room is left. */
    result = json_pack("{s:o, s:I, s:I}", "dataset", dataset_json(&ds), "version",
                       (json_int_t)(version != 0 ? version : ds.version), "latest_version",
                       (json_int_t)ds.version);
    list = result != NULL
               ? items_json(srv, items, count, json_is_true(failing),
                            json_dumpb(result, NULL, 0, JSON_COMPACT), &selected, &is_truncated)
               : NULL;
    if (list == NULL || json_object_set_new(result, "items", list) != 0 ||
        json_object_set_new(result, "count", json_integer((json_int_t)selected)) != 0 ||
        json_object_set_new(result, "truncated", json_boolean(is_truncated)) != 0) {
        json_decref(result);
        result = NULL;
    }
    to->result = result;
    weft_dataset_items_free(items, count);
    weft_dataset_cleanup(&ds);
}

const struct tool weft__mcp_tools_datasets[] = {
    {"list_datasets", "List datasets",
     "List the datasets of the state store (weft dataset): name, latest version, items in it, "
     "when it was made. A dataset holds inputs (often the failed runs of a workflow, each with "
     "the step where it went wrong) that `weft eval WORKFLOW --dataset NAME` runs a workflow "
     "over. show_dataset reads one's items.",
     "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"datasets\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"object\"}},\"count\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"}},"
     "\"required\":[\"datasets\",\"count\",\"truncated\"]}",
     tool_list_datasets, true},
    {"show_dataset", "Read a dataset's items",
     "Read one version of a dataset (the latest, or NAME@VERSION): each item's input, expected "
     "output, assertions and metadata, and for an item made from a stored run that run's id "
     "(for why_failed), its trace id and its failing step. failing_only: only the items with "
     "a failing step. count is how many items were selected; truncated says when some were "
     "left out to keep the result within the server's cap.",
     "{\"type\":\"object\",\"properties\":{\"dataset\":{\"type\":\"string\",\"description\":"
     "\"NAME or NAME@VERSION\"},\"failing_only\":{\"type\":\"boolean\",\"description\":"
     "\"only items from runs that failed at a step\"}},\"required\":[\"dataset\"],"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"dataset\":{\"type\":\"object\"},\"version\":{"
     "\"type\":\"integer\"},\"latest_version\":{\"type\":\"integer\"},\"items\":{\"type\":"
     "\"array\",\"items\":{\"type\":\"object\"}},\"count\":{\"type\":\"integer\"},"
     "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"dataset\",\"version\","
     "\"latest_version\",\"items\",\"count\",\"truncated\"]}",
     tool_show_dataset, true},
};
const size_t weft__mcp_tools_datasets_count =
    sizeof(weft__mcp_tools_datasets) / sizeof(weft__mcp_tools_datasets[0]);

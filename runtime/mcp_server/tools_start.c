/* runtime/mcp_server/tools_start.c - start_run (docs/mcp.md): run a workflow file below the
 * server's allowed directory to its end (weft_run()) and answer with the run's outcome; the
 * run's spans are flushed first, so that the caller's next question about its trace finds them.
 */
#define _GNU_SOURCE /* realpath */
#include "runtime/mcp_server/tools.h"

#include "base/buf.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <weft/export.h>
#include <weft/weft.h>

#define RUN_FLUSH_MS 10000 /* wait for the run's spans to reach the store */

/* The real path of @p workflow when it is a file below the allowed directory; else fills
 * @p to. Ownership: free the result with free() (realpath allocates with malloc). */
static char *
allowed_path(const struct weft_mcp_server *srv, const char *workflow, struct tool_out *to)
{
    struct weft__buf joined;
    char *real = NULL;
    size_t dir_len = strlen(srv->workflows_dir);
    struct stat st;
    bool is_below = false;

    weft__buf_init(&joined, PATH_MAX * 2);
    if (workflow[0] != '/') {
        (void)weft__buf_printf(&joined, "%s/", srv->workflows_dir);
    }
    if (weft__buf_append_str(&joined, workflow) != WEFT_OK) {
        weft__buf_cleanup(&joined);
        weft__mcp_fail_tool(to, "argument \"workflow\": path too long");
        return NULL;
    }
    real = realpath(joined.data, NULL);
    weft__buf_cleanup(&joined);
    if (real == NULL) {
        weft__mcp_fail_tool(to, "no workflow file \"%s\" in the allowed directory", workflow);
        return NULL;
    }
    is_below = strncmp(real, srv->workflows_dir, dir_len) == 0 &&
               (real[dir_len] == '/' || strcmp(srv->workflows_dir, "/") == 0);
    if (!is_below) {
        weft__mcp_fail_tool(to, "refused: \"%s\" is outside the allowed workflows directory",
                            workflow);
        free(real);
        return NULL;
    }
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        weft__mcp_fail_tool(to, "\"%s\" is not a workflow file", workflow);
        free(real);
        return NULL;
    }
    return real;
}

static void
tool_start_run(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *workflow = NULL;
    const char *input = NULL;
    char *path = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    struct weft_run_options ro;
    struct weft_run_result *result = NULL;
    char error[512] = "";
    weft_err err = WEFT_OK;

    if (!weft__mcp_str_arg(args, "workflow", true, &workflow, to) ||
        !weft__mcp_str_arg(args, "input", false, &input, to)) {
        return;
    }
    path = allowed_path(srv, workflow, to);
    if (path == NULL) {
        return;
    }
    err = weft_workflow_load(path, &wf, &diags);
    if (err != WEFT_OK) {
        char line[400] = "";

        if (diags.count > 0) {
            weft_diag_format(&diags.items[0], line, sizeof(line));
        }
        snprintf(to->error, sizeof(to->error), "workflow %.100s cannot be loaded: %s%s%.300s",
                 workflow, weft_strerror(err), line[0] != '\0' ? ": " : "", line);
        goto out;
    }
    memset(&ro, 0, sizeof(ro));
    ro.provider = srv->provider;
    ro.meter = srv->meter;
    ro.input = input;
    ro.state_path = srv->state_path;
    ro.abort_flag = srv->abort_flag;
    ro.capture_content = -1;
    err = weft_run(wf, &ro, &result, error, sizeof(error));
    if (err != WEFT_OK) {
        snprintf(to->error, sizeof(to->error), "workflow %.200s did not run: %.250s", workflow,
                 error[0] != '\0' ? error : weft_strerror(err));
        goto out;
    }
    if (srv->provider != NULL) {
        /* The caller's next question is about this run's trace: have it in the store. */
        (void)weft_provider_force_flush(srv->provider, RUN_FLUSH_MS);
    }
    to->result = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:I, s:f, s:o}", "run_id",
        result->run_id != NULL ? result->run_id : "", "workflow", weft_workflow_name(wf), "status",
        weft_run_status_name(result->status), "reason",
        weft__mcp_text_json(result->reason, WEFT__MCP_MAX_TEXT_BYTES), "trace_id",
        result->trace_id[0] != '\0' ? json_string(result->trace_id) : json_null(), "output",
        weft__mcp_text_json(result->output, WEFT__MCP_MAX_TEXT_BYTES * 2), "duration_ms",
        (double)result->duration_ns / 1e6, "steps", (json_int_t)result->step_count, "reward",
        result->reward, "iterations", json_integer((json_int_t)result->iterations));
out:
    weft_run_result_free(result);
    weft_workflow_free(wf);
    weft_diags_cleanup(&diags);
    free(path);
}

/* ---------------------------------------------------------------------------------------- */
/* Tool table                                                                                 */

const struct tool weft__mcp_tools_start[] = {
    {"start_run", "Start a workflow run",
     "Run a workflow file (a path relative to the server's workflows directory; paths outside "
     "it are refused) to its end, with an optional input (the user's request), and return the "
     "run id, status, reason, output and trace id. The run may take as long as the workflow "
     "does.",
     "{\"type\":\"object\",\"properties\":{\"workflow\":{\"type\":\"string\",\"description\":"
     "\"workflow file, relative to the workflows directory\"},\"input\":{\"type\":\"string\"}},"
     "\"required\":[\"workflow\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"workflow\":{"
     "\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"reason\":{\"type\":[\"string\","
     "\"null\"]},\"trace_id\":{\"type\":[\"string\",\"null\"]},\"output\":{\"type\":[\"string\","
     "\"null\"]}},\"required\":[\"run_id\",\"status\"]}",
     tool_start_run, false},
};
const size_t weft__mcp_tools_start_count =
    sizeof(weft__mcp_tools_start) / sizeof(weft__mcp_tools_start[0]);

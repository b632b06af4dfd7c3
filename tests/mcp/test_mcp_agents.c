/* tests/mcp/test_mcp_agents.c - MCP servers as agents: the configuration (mcp_servers,
 * mcpServers files, bindings) with its errors, a scripted run whose supervisor routes to
 * mcp_agent_filesystem and writes and reads a file through the real filesystem server from npm
 * (tests/mcp/node_modules, installed by `scripts/deps.sh test`), its spans and metrics, a
 * server that does not start, and `weft mcp list` / `weft validate`.
 */
#include "runtime/workflow/workflow.h"
#include "support/otlp_sink.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/weft.h>

#define MODULES   WEFT_SOURCE_DIR "/tests/mcp/node_modules"
#define FS_SERVER MODULES "/@modelcontextprotocol/server-filesystem/dist/index.js"

struct fx {
    char *dir;
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    char state[512];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct stat st;

    if (stat(FS_SERVER, &st) != 0) {
        fprintf(stderr, "%s is missing: `scripts/deps.sh test` installs the MCP test servers\n",
                FS_SERVER);
        free(f);
        return -1; /* fails the group: never a silent skip */
    }
    f->dir = weft_test_mkdtemp("weft-mcp-agents-");
    assert_non_null(f->dir);
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    f->sink = otlp_sink_new();
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = -1;
    weft_test_setenv("WEFT_MCP_MODULES", MODULES);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_test_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Load @p name of the test directory; @p diags receives the problems. */
static weft_err
load(struct fx *f, const char *name, struct weft_diags *diags)
{
    char path[1024];

    weft_workflow_free(f->wf);
    f->wf = NULL;
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    return weft_workflow_load(path, &f->wf, diags);
}

/* The diagnostics joined as "path: message" lines. */
static const char *
diag_text(const struct weft_diags *d)
{
    static char buf[4096];
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < d->count && used < sizeof(buf); i++) {
        int n = snprintf(buf + used, sizeof(buf) - used, "%s: %s\n", d->items[i].path,
                         d->items[i].message);
        used += n > 0 ? (size_t)n : 0;
    }
    return buf;
}

#define MODEL "\"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"script.json\"}}"

static void
assert_load_error(struct fx *f, const char *servers, const char *path, const char *needle)
{
    char wf[2048];
    struct weft_diags d = {0};

    snprintf(wf, sizeof(wf),
             "{\"name\": \"bad\", " MODEL ", \"agents\": [{\"name\": \"a\"}], \"mcp_servers\": %s}",
             servers);
    weft_test_write_file(f->dir, "bad.json", wf);
    assert_weft_err(load(f, "bad.json", &d), WEFT_EPARSE);
    if (strstr(diag_text(&d), path) == NULL || strstr(diag_text(&d), needle) == NULL) {
        fail_msg("expected '%s' ... '%s' in:\n%s", path, needle, diag_text(&d));
    }
    weft_diags_cleanup(&d);
}

/* Every mistake in a server entry names the server and the key, and says what was expected. */
static void
test_mcp_config_errors_name_server_and_key(void **state)
{
    struct fx *f = *state;

    weft_test_write_file(f->dir, "script.json", "{\"responses\": {}}");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"colour\": 1}}",
                      "mcp_servers.fs.colour", "unknown key");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"url\": \"http://127.0.0.1:1/\"}}",
                      "mcp_servers.fs", "exactly one of \"command\"");
    assert_load_error(f, "{\"fs\": {\"url\": \"http://127.0.0.1:1/\", \"type\": \"sse\"}}",
                      "mcp_servers.fs.type", "legacy HTTP+SSE");
    assert_load_error(f, "{\"f s\": {\"command\": \"node\"}}", "mcp_servers.f s",
                      "1 to 48 characters");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"args\": [1]}}",
                      "mcp_servers.fs.args[0]", "expected a string");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"env\": {\"K\": 2}}}",
                      "mcp_servers.fs.env.K", "expected a string");
    assert_load_error(f, "{\"fs\": {\"url\": \"ftp://x/\"}}", "mcp_servers.fs.url",
                      "http:// or https://");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"timeout_s\": 0}}",
                      "mcp_servers.fs.timeout_s", "expected seconds");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"model\": \"nope\"}}",
                      "mcp_servers.fs.model", "unknown model 'nope'");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"optional\": \"yes\"}}",
                      "mcp_servers.fs.optional", "expected true (the run goes on");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"retries\": 9}}",
                      "mcp_servers.fs.retries", "expected an integer from 0 to 5");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"install\": 1}}",
                      "mcp_servers.fs.install", "expected the command that installs");
    /* An agent binding a server that does not exist. */
    {
        struct weft_diags d = {0};
        weft_test_write_file(f->dir, "bind.json",
                             "{\"name\": \"bind\", " MODEL ", \"agents\": [{\"name\": \"a\", "
                             "\"mcp_servers\": [\"nope\"]}]}");
        assert_weft_err(load(f, "bind.json", &d), WEFT_EPARSE);
        assert_non_null(
            strstr(diag_text(&d), "agents[0].mcp_servers[0]: unknown MCP server 'nope'"));
        weft_diags_cleanup(&d);
    }
}

/* Servers from an mcpServers file and inline; each becomes mcp_agent_<name> unless "agent":
 * false, or an agent of that name is declared (which binds it); "${NAME}" expands. */
static void
test_mcp_agents_from_file_inline_and_bindings(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    const struct weft_workflow *wf = NULL;

    weft_test_setenv("WEFT_TEST_MCP_TOKEN", "sk-test-abc");
    weft_test_write_file(f->dir, "script.json", "{\"responses\": {}}");
    weft_test_write_file(
        f->dir, "mcp.json",
        "{\"mcpServers\": {\"files\": {\"command\": \"node\", \"args\": [\"x.js\"], "
        "\"env\": {\"TOKEN\": \"${WEFT_TEST_MCP_TOKEN}\"}}, \"web\": {\"type\": \"http\", "
        "\"url\": \"http://127.0.0.1:9/mcp\", \"headers\": {\"Authorization\": \"Bearer "
        "${WEFT_TEST_MCP_TOKEN}\"}}}}");
    weft_test_write_file(f->dir, "wf.json",
                         "{\"name\": \"team\", " MODEL ", \"mcp_servers_file\": \"mcp.json\", "
                         "\"mcp_servers\": {\"quiet\": {\"command\": \"node\", \"agent\": false}}, "
                         "\"agents\": [{\"name\": \"writer\", \"mcp_servers\": [\"quiet\"]}, "
                         "{\"name\": \"mcp_agent_web\", \"description\": \"the web, my way\"}]}");
    if (load(f, "wf.json", &d) != WEFT_OK) {
        fail_msg("%s", diag_text(&d));
    }
    weft_diags_cleanup(&d);
    wf = f->wf;
    /* Inline servers first, then the file's. */
    assert_int_equal(wf->mcp_count, 3);
    assert_string_equal(wf->mcp[0].cfg.name, "quiet");
    assert_false(wf->mcp[0].is_agent);
    assert_string_equal(wf->mcp[1].cfg.name, "files");
    assert_string_equal(wf->mcp[1].cfg.argv[0], "node");
    assert_string_equal(wf->mcp[1].cfg.argv[1], "x.js");
    assert_string_equal(wf->mcp[1].cfg.env[0], "TOKEN=sk-test-abc");
    assert_string_equal(wf->mcp[2].cfg.url, "http://127.0.0.1:9/mcp");
    assert_string_equal(wf->mcp[2].cfg.headers[0], "Authorization: Bearer sk-test-abc");
    /* The document keeps the reference, never the value (it travels to workers). */
    {
        char *doc = json_dumps(wf->doc, 0);
        assert_null(strstr(doc, "sk-test-abc"));
        free(doc);
    }
    /* writer binds quiet; mcp_agent_web is declared (binds web, keeps its description);
     * mcp_agent_files is made for files; quiet gets no agent. */
    assert_int_equal(wf->agent_count, 3);
    assert_string_equal(wf->agents[0].name, "writer");
    assert_int_equal(wf->agents[0].mcp_server_count, 1);
    assert_int_equal(wf->agents[0].mcp_servers[0], 0);
    assert_string_equal(wf->agents[1].name, "mcp_agent_web");
    assert_false(wf->agents[1].is_mcp);
    assert_int_equal(wf->agents[1].mcp_servers[0], 2);
    assert_string_equal(wf->agents[1].description, "the web, my way");
    assert_string_equal(wf->agents[2].name, "mcp_agent_files");
    assert_true(wf->agents[2].is_mcp);
    assert_int_equal(wf->agents[2].mcp_servers[0], 1);
    assert_int_equal(wf->agents[2].model, 0);
    unsetenv("WEFT_TEST_MCP_TOKEN");
}

/* The contents of file @p path (to free()), or NULL. */
static char *
slurp(const char *path)
{
    FILE *in = fopen(path, "r");
    char *text = NULL;
    long len = 0;

    if (in == NULL) {
        return NULL;
    }
    fseek(in, 0, SEEK_END);
    len = ftell(in);
    fseek(in, 0, SEEK_SET);
    text = calloc((size_t)len + 1, 1);
    if (text != NULL && fread(text, 1, (size_t)len, in) != (size_t)len) {
        free(text);
        text = NULL;
    }
    fclose(in);
    return text;
}

/* The example, copied into the test directory with a sandbox of its own. */
static void
copy_example(struct fx *f)
{
    char *wf = slurp(WEFT_SOURCE_DIR "/examples/mcp_filesystem/workflow.json");
    char *script = slurp(WEFT_SOURCE_DIR "/examples/mcp_filesystem/script.json");
    char sandbox[1024];

    assert_non_null(wf);
    assert_non_null(script);
    weft_test_write_file(f->dir, "workflow.json", wf);
    weft_test_write_file(f->dir, "script.json", script);
    free(wf);
    free(script);
    snprintf(sandbox, sizeof(sandbox), "%s/sandbox", f->dir);
    assert_int_equal(mkdir(sandbox, 0700), 0);
}

static void
run(struct fx *f, const char *input)
{
    char error[512] = "";

    weft_run_result_free(f->r);
    f->r = NULL;
    f->ro.input = input;
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run failed: %s", error);
    }
    otlp_sink_collect(f->sink);
}

/* The supervisor's plan routes to mcp_agent_filesystem, which writes the file and reads it
 * back through the real server; each MCP request is a client span under its execute_tool
 * span, and the MCP metrics reach what `weft serve` shows. */
static void
test_mcp_example_writes_and_reads_through_the_server(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    char path[1024];
    char *notes = NULL;
    json_t *tool = NULL;
    json_t *call = NULL;
    json_t *parent = NULL;
    struct weft_meter *meter = NULL;
    struct weft_meter *live = NULL;
    char *prom = NULL;
    size_t prom_len = 0;

    copy_example(f);
    if (load(f, "workflow.json", &d) != WEFT_OK) {
        fail_msg("%s", diag_text(&d));
    }
    weft_diags_cleanup(&d);
    assert_weft_ok(weft_meter_new(NULL, &live));
    f->ro.meter = live; /* the caller's meter (weft run --metrics-addr, OTLP metrics) */
    run(f, "Write the release notes");
    assert_weft_ok(weft_prometheus_render(live, &prom, &prom_len));
    if (strstr(prom, "mcp_client_operation_duration_seconds_count{") == NULL ||
        strstr(prom, "weft_mcp_calls_total{") == NULL) {
        fail_msg("the caller's meter lacks the MCP metrics:\n%.3000s", prom);
    }
    free(prom);
    prom = NULL;
    f->ro.meter = NULL;
    weft_meter_free(live);
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(f->r->step_count, 3);
    assert_string_equal(f->r->steps[0].agent, "mcp_agent_filesystem");
    assert_string_equal(f->r->steps[1].agent, "mcp_agent_filesystem");
    for (size_t i = 0; i < f->r->step_count; i++) {
        assert_string_equal(f->r->steps[i].status, "completed");
    }
    /* The file is really there, written by the server. */
    snprintf(path, sizeof(path), "%s/sandbox/notes.md", f->dir);
    notes = slurp(path);
    assert_non_null(notes);
    assert_non_null(strstr(notes, "# Release 1.4"));
    free(notes);
    /* The read came back through MCP: the tool message the agent got holds the text. */
    assert_int_equal(f->r->tool_calls, 2);
    /* execute_tool write_file, and under it the MCP client span. */
    tool = otlp_sink_find(f->sink, "execute_tool write_file", 0);
    assert_non_null(tool);
    assert_string_equal(otlp_span_attr(tool, "gen_ai.tool.type"), "extension");
    assert_string_equal(otlp_span_attr(tool, "weft.mcp.server"), "filesystem");
    call = otlp_sink_find(f->sink, "tools/call write_file", 0);
    assert_non_null(call);
    parent = otlp_sink_parent(f->sink, call);
    assert_non_null(parent);
    assert_string_equal(json_string_value(json_object_get(parent, "spanId")),
                        json_string_value(json_object_get(tool, "spanId")));
    assert_int_equal(json_integer_value(json_object_get(call, "kind")), 3); /* CLIENT */
    assert_string_equal(otlp_span_attr(call, "mcp.method.name"), "tools/call");
    assert_string_equal(otlp_span_attr(call, "gen_ai.tool.name"), "write_file");
    assert_string_equal(otlp_span_attr(call, "network.transport"), "pipe");
    assert_true(strlen(otlp_span_attr(call, "mcp.protocol.version")) == 10);
    assert_true(strlen(otlp_span_attr(call, "jsonrpc.request.id")) > 0);
    assert_non_null(otlp_sink_find(f->sink, "tools/call read_text_file", 0));
    /* The run's metrics in the state database carry the MCP histogram. */
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_from_store(meter, f->state));
    assert_weft_ok(weft_prometheus_render(meter, &prom, &prom_len));
    if (strstr(prom, "mcp_client_operation_duration_seconds_count{") == NULL ||
        strstr(prom, "gen_ai_tool_name=\"write_file\"") == NULL) {
        fail_msg("no MCP operation histogram for write_file in:\n%.3000s", prom);
    }
    if (strstr(prom, "mcp_client_session_duration_seconds_count{") == NULL) {
        fail_msg("no MCP session duration stored in:\n%.3000s", prom);
    }
    if (strstr(prom, "weft_mcp_calls_total{") == NULL ||
        strstr(prom, "outcome=\"success\",server=\"filesystem\"") == NULL) {
        fail_msg("no weft_mcp_calls_total for filesystem in:\n%.3000s", prom);
    }
    free(prom);
    weft_meter_free(meter);
}

/* A result longer than the server's max_output_bytes reaches the agent cut, and the cut is
 * shown on the span and counted. */
static void
test_mcp_long_result_is_cut_and_counted(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    char big[8193];
    json_t *tool = NULL;
    const char *result = NULL;
    struct weft_meter *meter = NULL;
    char *prom = NULL;
    size_t prom_len = 0;

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    {
        char sandbox[1024];
        snprintf(sandbox, sizeof(sandbox), "%s/sandbox", f->dir);
        assert_int_equal(mkdir(sandbox, 0700), 0);
    }
    weft_test_write_file(f->dir, "sandbox/big.txt", big);
    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"mcp_agent_fs\": {\"act\": [{\"tool_calls\": [{\"name\": "
        "\"read_text_file\", \"arguments\": {\"path\": \"big.txt\"}}]}, {\"content\": "
        "\"read\"}]}}}");
    weft_test_write_file(f->dir, "wf.json",
                         "{\"name\": \"cut\", " MODEL ", \"mcp_servers\": {\"fs\": {\"command\": "
                         "\"node\", \"args\": [\"" FS_SERVER "\", \"sandbox\"], \"cwd\": \".\", "
                         "\"max_output_bytes\": 1024}}, \"plan\": [{\"id\": \"s1\", \"agent\": "
                         "\"mcp_agent_fs\", \"task\": \"read\"}]}");
    if (load(f, "wf.json", &d) != WEFT_OK) {
        fail_msg("%s", diag_text(&d));
    }
    weft_diags_cleanup(&d);
    f->ro.capture_content = 1;
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    tool = otlp_sink_find(f->sink, "execute_tool read_text_file", 0);
    assert_non_null(tool);
    assert_string_equal(otlp_span_attr(tool, "weft.tool.truncated"), "true");
    result = otlp_span_attr(tool, "gen_ai.tool.call.result");
    assert_true(strlen(result) > 512 && strlen(result) < 2048);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_runtime_metrics_from_store(meter, f->state));
    assert_weft_ok(weft_prometheus_render(meter, &prom, &prom_len));
    if (strstr(prom, "weft_mcp_truncated_results_total{server=\"fs\"") == NULL) {
        fail_msg("no weft_mcp_truncated_results_total for fs in:\n%.3000s", prom);
    }
    free(prom);
    weft_meter_free(meter);
}

/* Run the built weft with @p args in the test directory; @return its exit status, and its
 * output (stdout and stderr) in @p out (to free()). */
static int
weft_cli(const struct fx *f, const char *const *args, char **out)
{
    const char *argv[16];
    char log[1024];
    size_t n = 0;
    int status = 0;

    argv[n++] = WEFT_BINARY_DIR "/weft";
    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    snprintf(log, sizeof(log), "%s/cli.log", f->dir);
    unlink(log);
    status = weft_test_run(argv, NULL, f->dir, log, 60000);
    *out = slurp(log);
    assert_non_null(*out);
    return status;
}

/* weft mcp list: a server's tools with their schemas, from a workflow or an mcpServers file;
 * an unknown server is named with the ones there are. weft validate starts the servers
 * (--offline does not), and a server that does not start is a problem at its path. */
static void
test_mcp_list_and_validate(void **state)
{
    struct fx *f = *state;
    char *out = NULL;
    json_t *listing = NULL;

    copy_example(f);
    {
        const char *args[] = {"mcp", "list", "workflow.json", "filesystem", "--json", NULL};
        assert_int_equal(weft_cli(f, args, &out), 0);
        listing = json_loads(out, 0, NULL);
        if (listing == NULL) {
            fail_msg("not JSON:\n%s", out);
        }
        assert_string_equal(json_string_value(json_object_get(listing, "server")), "filesystem");
        assert_string_equal(json_string_value(json_object_get(listing, "transport")), "stdio");
        assert_true(json_array_size(json_object_get(listing, "tools")) >= 5);
        assert_non_null(strstr(out, "\"write_file\""));
        assert_non_null(strstr(out, "\"input_schema\""));
        json_decref(listing);
        free(out);
    }
    weft_test_write_file(f->dir, "mcp.json",
                         "{\"mcpServers\": {\"fs\": {\"command\": \"node\", \"args\": [\"" FS_SERVER
                         "\", \"sandbox\"]}, \"other\": {\"url\": \"http://127.0.0.1:9/mcp\"}}}");
    {
        const char *args[] = {"mcp", "list", "mcp.json", "fs", NULL};
        assert_int_equal(weft_cli(f, args, &out), 0);
        assert_non_null(strstr(out, "mcp server fs (stdio, protocol "));
        assert_non_null(strstr(out, "read_text_file"));
        free(out);
    }
    {
        const char *args[] = {"mcp", "list", "mcp.json", "nope", NULL};
        assert_int_equal(weft_cli(f, args, &out), 2);
        assert_non_null(strstr(out, "no MCP server 'nope' (servers: fs, other)"));
        free(out);
    }
    {
        const char *args[] = {"validate", "workflow.json", NULL};
        assert_int_equal(weft_cli(f, args, &out), 0);
        assert_non_null(strstr(out, "mcp server filesystem: "));
        assert_non_null(strstr(out, "valid (workflow 'mcp-filesystem')"));
        free(out);
    }
    weft_test_write_file(f->dir, "broken.json",
                         "{\"name\": \"broken\", " MODEL ", \"agents\": [{\"name\": \"a\"}], "
                         "\"mcp_servers\": {\"gone\": {\"command\": \"/nonexistent/mcp-server\", "
                         "\"init_timeout_s\": 5}}}");
    {
        const char *args[] = {"validate", "broken.json", NULL};
        assert_int_equal(weft_cli(f, args, &out), 2);
        assert_non_null(strstr(out, "mcp_servers.gone: "));
        assert_non_null(strstr(out, "gone"));
        free(out);
    }
    {
        const char *args[] = {"validate", "--offline", "broken.json", NULL};
        assert_int_equal(weft_cli(f, args, &out), 0);
        free(out);
    }
}

/* An optional server that does not start fails nothing by itself: the run goes on and the log
 * names the server (one that is not optional fails the run first: test_mcp_faults.c). */
static void
test_mcp_optional_server_that_does_not_start_leaves_the_run_going(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};

    weft_test_capture_logs();
    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"mcp_agent_gone\": {\"act\": [{\"content\": \"no tools "
                         "today\"}]}, \"a\": {\"act\": [{\"content\": \"done\"}]}}}");
    weft_test_write_file(
        f->dir, "gone.json",
        "{\"name\": \"gone\", " MODEL ", \"agents\": [{\"name\": \"a\"}], "
        "\"mcp_servers\": {\"gone\": {\"command\": \"/nonexistent/mcp-server\", "
        "\"init_timeout_s\": 5, \"optional\": true}}, \"plan\": [{\"id\": \"s1\", \"agent\": "
        "\"mcp_agent_gone\", \"task\": \"try\"}, {\"id\": \"s2\", \"agent\": \"a\", "
        "\"task\": \"go on\", \"depends_on\": [\"s1\"]}]}");
    if (load(f, "gone.json", &d) != WEFT_OK) {
        fail_msg("%s", diag_text(&d));
    }
    weft_diags_cleanup(&d);
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_string_equal(f->r->steps[1].status, "completed");
    /* The log names the server's command and the retry, not just the word "gone", which is
     * also the workflow's name. */
    if (strstr(weft_test_logs(), "/nonexistent/mcp-server") == NULL ||
        strstr(weft_test_logs(), "next attempt in") == NULL) {
        fail_msg("the log does not say the server did not start:\n%s", weft_test_logs());
    }
    /* The supervisor is not offered the agent of the server that did not start, while the
     * agent of a server that did start is: the planner's prompt (captured on its chat span)
     * lists "- mcp_agent_fs" and "- a" and not "- mcp_agent_gone". */
    weft_test_write_file(f->dir, "script.json",
                         "{\"responses\": {\"supervisor\": {\"plan\": [{\"content\": "
                         "{\"thought\": \"a\", \"plan\": [{\"agent\": \"a\", \"task\": "
                         "\"go on\"}]}}]}, \"a\": {\"act\": [{\"content\": \"done\"}]}}}");
    weft_test_write_file(
        f->dir, "planned.json",
        "{\"name\": \"planned\", " MODEL ", \"agents\": [{\"name\": \"a\"}], "
        "\"mcp_servers\": {\"gone\": {\"command\": \"/nonexistent/mcp-server\", "
        "\"init_timeout_s\": 5, \"optional\": true}, \"fs\": {\"command\": \"node\", "
        "\"args\": [\"" FS_SERVER "\", \".\"], \"cwd\": \".\", \"optional\": true}}}");
    if (load(f, "planned.json", &d) != WEFT_OK) {
        fail_msg("%s", diag_text(&d));
    }
    weft_diags_cleanup(&d);
    f->ro.capture_content = 1;
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    {
        char *prompts = otlp_sink_attr_list(f->sink, "chat ", "gen_ai.input.messages");
        if (strstr(prompts, "Agents:") == NULL || strstr(prompts, "- mcp_agent_fs") == NULL ||
            strstr(prompts, "- a") == NULL || strstr(prompts, "mcp_agent_gone") != NULL) {
            fail_msg("the planner's prompt offers the wrong agents:\n%.4000s", prompts);
        }
        free(prompts);
    }
}

#define EVERYTHING MODULES "/@modelcontextprotocol/server-everything/dist/index.js"

struct progress_seen {
    size_t count;
    char last[256];
};

static void
on_progress(const struct weft_run_event *ev, void *user_data)
{
    struct progress_seen *seen = user_data;

    if (ev->kind == WEFT_EVENT_TOOL_PROGRESS) {
        seen->count++;
        snprintf(seen->last, sizeof(seen->last), "%s", ev->detail);
    }
}

/* A long MCP call's progress notifications reach the run's progress display as they come. */
static void
test_mcp_progress_reaches_the_progress_display(void **state)
{
    struct fx *f = *state;
    struct weft_diags d = {0};
    struct progress_seen seen;

    memset(&seen, 0, sizeof(seen));
    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"mcp_agent_everything\": {\"act\": [{\"tool_calls\": "
        "[{\"name\": \"trigger-long-running-operation\", \"arguments\": {\"duration\": "
        "0.4, \"steps\": 4}}]}, {\"content\": \"done\"}]}}}");
    weft_test_write_file(
        f->dir, "wf.json",
        "{\"name\": \"long\", " MODEL ", \"mcp_servers\": {\"everything\": "
        "{\"command\": \"node\", \"args\": [\"" EVERYTHING "\", \"stdio\"]}}, "
        "\"plan\": [{\"id\": \"s1\", \"agent\": \"mcp_agent_everything\", \"task\": "
        "\"wait\"}]}");
    if (load(f, "wf.json", &d) != WEFT_OK) {
        fail_msg("%s", diag_text(&d));
    }
    weft_diags_cleanup(&d);
    f->ro.progress = on_progress;
    f->ro.progress_user_data = &seen;
    run(f, "go");
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    assert_int_equal(seen.count, 4);
    assert_string_equal(seen.last, "mcp everything trigger-long-running-operation: 100%");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mcp_config_errors_name_server_and_key, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mcp_agents_from_file_inline_and_bindings, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mcp_example_writes_and_reads_through_the_server, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mcp_list_and_validate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mcp_long_result_is_cut_and_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mcp_progress_reaches_the_progress_display, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_mcp_optional_server_that_does_not_start_leaves_the_run_going, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

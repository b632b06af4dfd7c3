/* tests/mcp/test_mcp_agents.c - MCP servers as agents: the configuration (mcp_servers,
 * mcpServers files, bindings) with its errors, a scripted run whose supervisor routes to
 * mcp_agent_filesystem and writes and reads a file through the real filesystem server from npm
 * (tests/mcp/node_modules, installed by `scripts/deps.sh test`), its spans and metrics, a
 * server that does not start, and `weft mcp list` / `weft validate`.
 */
#include "runtime/workflow.h"
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

#define MODULES WEFT_SOURCE_DIR "/tests/mcp/node_modules"
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

static void
write_file(const struct fx *f, const char *name, const char *text)
{
    char path[1024];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
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
    write_file(f, "bad.json", wf);
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

    write_file(f, "script.json", "{\"responses\": {}}");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"colour\": 1}}", "mcp_servers.fs.colour",
                      "unknown key");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"url\": \"http://127.0.0.1:1/\"}}",
                      "mcp_servers.fs", "exactly one of \"command\"");
    assert_load_error(f, "{\"fs\": {\"url\": \"http://127.0.0.1:1/\", \"type\": \"sse\"}}",
                      "mcp_servers.fs.type", "legacy HTTP+SSE");
    assert_load_error(f, "{\"f s\": {\"command\": \"node\"}}", "mcp_servers.f s",
                      "1 to 48 characters");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"args\": [1]}}", "mcp_servers.fs.args[0]",
                      "expected a string");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"env\": {\"K\": 2}}}",
                      "mcp_servers.fs.env.K", "expected a string");
    assert_load_error(f, "{\"fs\": {\"url\": \"ftp://x/\"}}", "mcp_servers.fs.url",
                      "http:// or https://");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"timeout_s\": 0}}",
                      "mcp_servers.fs.timeout_s", "expected seconds");
    assert_load_error(f, "{\"fs\": {\"command\": \"node\", \"model\": \"nope\"}}",
                      "mcp_servers.fs.model", "unknown model 'nope'");
    /* An agent binding a server that does not exist. */
    {
        struct weft_diags d = {0};
        write_file(f, "bind.json",
                   "{\"name\": \"bind\", " MODEL ", \"agents\": [{\"name\": \"a\", "
                   "\"mcp_servers\": [\"nope\"]}]}");
        assert_weft_err(load(f, "bind.json", &d), WEFT_EPARSE);
        assert_non_null(strstr(diag_text(&d), "agents[0].mcp_servers[0]: unknown MCP server 'nope'"));
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
    write_file(f, "script.json", "{\"responses\": {}}");
    write_file(f, "mcp.json",
               "{\"mcpServers\": {\"files\": {\"command\": \"node\", \"args\": [\"x.js\"], "
               "\"env\": {\"TOKEN\": \"${WEFT_TEST_MCP_TOKEN}\"}}, \"web\": {\"type\": \"http\", "
               "\"url\": \"http://127.0.0.1:9/mcp\", \"headers\": {\"Authorization\": \"Bearer "
               "${WEFT_TEST_MCP_TOKEN}\"}}}}");
    write_file(f, "wf.json",
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mcp_config_errors_name_server_and_key, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_mcp_agents_from_file_inline_and_bindings, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

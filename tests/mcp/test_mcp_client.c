/* tests/mcp/test_mcp_client.c - the MCP client (runtime/mcp) against real servers from npm
 * (server-everything over stdio and Streamable HTTP, server-filesystem over stdio) and the
 * misbehaving server tests/mcp/servers/fault.mjs. `scripts/deps.sh test` installs them
 * (npm ci in tests/mcp); a server that cannot start fails the test. */
#include "support/weft_test.h"

#include "base/mem.h"
#include "runtime/mcp/mcp.h"
#include "support/mem_exporter.h"
#include "support/server_proc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MCP_DIR    WEFT_SOURCE_DIR "/tests/mcp"
#define EVERYTHING MCP_DIR "/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
#define FILESYSTEM MCP_DIR "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
#define FAULT      MCP_DIR "/servers/fault.mjs"
#define SECRET_ENV "sk-test-secret-123"
#define SECRET_HDR "secret-xyz"

static void
msleep(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

struct fx {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
    struct weft_meter *meter;
    struct weft_span *parent;
    struct weft_span_context parent_ctx;
    pthread_mutex_t lock;
    int progress;
    int tools_changed;
    int down;
    int restarted;
    char dir[256];
    char record[300];
};

static void
on_event(void *ud, const struct weft__mcp_event *ev)
{
    struct fx *f = ud;

    pthread_mutex_lock(&f->lock);
    if (ev->kind == WEFT__MCP_PROGRESS) {
        f->progress++;
    } else if (ev->kind == WEFT__MCP_TOOLS_CHANGED) {
        f->tools_changed++;
    } else if (ev->kind == WEFT__MCP_SERVER_DOWN) {
        f->down++;
    } else if (ev->kind == WEFT__MCP_SERVER_RESTARTED) {
        f->restarted++;
    }
    pthread_mutex_unlock(&f->lock);
}

static int
count_of(struct fx *f, const int *field)
{
    int v = 0;
    pthread_mutex_lock(&f->lock);
    v = *field;
    pthread_mutex_unlock(&f->lock);
    return v;
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct weft_exporter *exp = NULL;
    struct weft_processor *proc = NULL;
    char *dir = NULL;

    pthread_mutex_init(&f->lock, NULL);
    weft_test_capture_logs();
    assert_weft_ok(weft_provider_new(NULL, &f->provider));
    assert_weft_ok(mem_exporter_new(&exp, &f->mem));
    assert_weft_ok(weft_simple_processor_new(exp, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
    assert_weft_ok(weft_provider_get_tracer(f->provider, "weft.test.mcp", NULL, &f->tracer));
    assert_weft_ok(weft_meter_new(NULL, &f->meter));
    f->parent = weft_span_start(f->tracer, "invoke_agent test", NULL);
    weft_span_context_of(f->parent, &f->parent_ctx);
    dir = weft_test_mkdtemp("weft-mcp-");
    assert_non_null(dir);
    snprintf(f->dir, sizeof(f->dir), "%s", dir);
    free(dir);
    snprintf(f->record, sizeof(f->record), "%s/record.jsonl", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_span_end(f->parent, 0);
    weft_provider_shutdown(f->provider, 1000);
    weft_provider_free(f->provider);
    weft_meter_free(f->meter);
    weft_test_rmtree(f->dir);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return 0;
}

static struct weft__mcp_options
options(struct fx *f)
{
    struct weft__mcp_options o;
    memset(&o, 0, sizeof(o));
    o.tracer = f->tracer;
    o.meter = f->meter;
    o.on_event = on_event;
    o.user_data = f;
    return o;
}

static struct weft__mcp_client *
start_stdio(struct fx *f, const char *name, char **argv, size_t argc, char **env, size_t env_n)
{
    struct weft__mcp_server_config cfg;
    struct weft__mcp_options o = options(f);
    struct weft__mcp_client *c = NULL;
    char err[512] = "";
    weft_err rc = WEFT_OK;

    memset(&cfg, 0, sizeof(cfg));
    cfg.name = (char *)name;
    cfg.argv = argv;
    cfg.argc = argc;
    cfg.env = env;
    cfg.env_count = env_n;
    cfg.init_timeout_ms = 15000;
    cfg.timeout_ms = 10000;
    rc = weft__mcp_client_new(&cfg, &o, &c, err, sizeof(err));
    if (rc != WEFT_OK) {
        fail_msg("could not start mcp server %s: %s (%s)", name, err, weft_strerror(rc));
    }
    return c;
}

static struct weft__mcp_client *
start_fault(struct fx *f, const char *mode)
{
    static char *argv[4];
    static char env0[400];
    static char env1[64];
    static char *env[2];

    argv[0] = "node";
    argv[1] = FAULT;
    argv[2] = (char *)mode;
    argv[3] = NULL;
    snprintf(env0, sizeof(env0), "MCP_RECORD=%s", f->record);
    snprintf(env1, sizeof(env1), "API_KEY=%s", SECRET_ENV);
    env[0] = env0;
    env[1] = env1;
    return start_stdio(f, "fault", argv, 3, env, 2);
}

static const struct mem_span *
find_span(struct fx *f, const char *name)
{
    weft_provider_force_flush(f->provider, 1000);
    return mem_exporter_find(f->mem, name);
}

static const char *
span_str(const struct mem_span *s, const char *key)
{
    const struct weft_value *v = mem_span_attr(s, key);
    return v != NULL && v->type == WEFT_VALUE_STRING ? v->u.str : NULL;
}

static bool
has_tool(struct weft__mcp_client *c, const char *name, uint64_t *version, size_t *count)
{
    struct weft__mcp_tool *tools = NULL;
    size_t n = 0;
    bool found = false;

    assert_weft_ok(weft__mcp_client_tools(c, &tools, &n, version));
    for (size_t i = 0; i < n; i++) {
        found = found || strcmp(tools[i].name, name) == 0;
        assert_non_null(tools[i].input_schema);
    }
    if (count != NULL) {
        *count = n;
    }
    weft__mcp_tools_free(tools, n);
    return found;
}

/* No secret in any span attribute or log line. */
static void
assert_no_secrets(struct fx *f)
{
    weft_provider_force_flush(f->provider, 1000);
    for (size_t i = 0; i < mem_exporter_count(f->mem); i++) {
        const struct mem_span *s = mem_exporter_span(f->mem, i);
        for (size_t a = 0; a < s->attr_count; a++) {
            if (s->attrs[a].value.type == WEFT_VALUE_STRING) {
                assert_null(strstr(s->attrs[a].value.u.str, SECRET_ENV));
                assert_null(strstr(s->attrs[a].value.u.str, SECRET_HDR));
            }
        }
        assert_null(strstr(s->status_message, SECRET_ENV));
    }
    assert_null(strstr(weft_test_logs(), SECRET_ENV));
    assert_null(strstr(weft_test_logs(), SECRET_HDR));
}

struct series_find {
    const char *method;
    const char *tool;
    bool found;
};

static bool
visit(const struct weft_instrument_view *inst, const struct weft_series_view *series, void *ud)
{
    struct series_find *sf = ud;
    bool has_method = false;
    bool has_tool = sf->tool == NULL;

    if (series == NULL || strcmp(inst->name, "mcp.client.operation.duration") != 0) {
        return true;
    }
    assert_int_equal(inst->bound_count, 14);
    for (size_t i = 0; i < series->attr_count; i++) {
        const struct weft_attr *a = &series->attrs[i];
        if (strcmp(a->key, "mcp.method.name") == 0 && strcmp(a->value.u.str, sf->method) == 0) {
            has_method = true;
        }
        if (sf->tool != NULL && strcmp(a->key, "gen_ai.tool.name") == 0 &&
            strcmp(a->value.u.str, sf->tool) == 0) {
            has_tool = true;
        }
    }
    if (has_method && has_tool && series->count > 0) {
        sf->found = true;
    }
    return true;
}

static bool
has_series(struct fx *f, const char *method, const char *tool)
{
    struct series_find sf = {method, tool, false};
    assert_weft_ok(weft_meter_collect(f->meter, visit, &sf));
    return sf.found;
}

static void
check_call_span(struct fx *f, const char *name, const char *tool, const char *transport)
{
    const struct mem_span *s = find_span(f, name);

    assert_non_null(s);
    assert_int_equal(s->kind, WEFT_SPAN_KIND_CLIENT);
    assert_string_equal(span_str(s, "mcp.method.name"), "tools/call");
    assert_string_equal(span_str(s, "gen_ai.tool.name"), tool);
    assert_string_equal(span_str(s, "gen_ai.operation.name"), "execute_tool");
    assert_string_equal(span_str(s, "network.transport"), transport);
    assert_string_equal(span_str(s, "mcp.protocol.version"), "2025-11-25");
    assert_non_null(span_str(s, "jsonrpc.request.id"));
    assert_memory_equal(s->trace_id, f->parent_ctx.trace_id, 16);
    assert_true(s->has_parent);
    assert_memory_equal(s->parent_span_id, f->parent_ctx.span_id, 8);
}

/* ------------------------------------------------------------------------------------------ */

static void
test_everything_stdio_lifecycle_tools_progress(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"node", EVERYTHING, "stdio", NULL};
    struct weft__mcp_client *c = start_stdio(f, "everything", argv, 3, NULL, 0);
    struct weft__mcp_call_result r;
    json_t *args = NULL;
    uint64_t version = 0;

    assert_string_equal(weft__mcp_client_protocol(c), "2025-11-25");
    assert_null(weft__mcp_client_session_id(c));
    assert_non_null(weft__mcp_client_server_name(c));
    assert_true(has_tool(c, "echo", &version, NULL));
    assert_true(has_tool(c, "trigger-long-running-operation", NULL, NULL));
    assert_true(version >= 1);

    args = json_pack("{s:s}", "message", "hello weft");
    assert_weft_ok(weft__mcp_client_call(c, "echo", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    assert_string_equal(r.error_type, "");
    assert_non_null(strstr(r.text, "hello weft"));
    weft__mcp_call_result_cleanup(&r);

    args = json_pack("{s:s}", "location", "Chicago");
    assert_weft_ok(weft__mcp_client_call(c, "get-structured-content", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    assert_non_null(r.structured);
    assert_true(json_is_number(json_object_get(r.structured, "temperature")));
    weft__mcp_call_result_cleanup(&r);

    args = json_pack("{s:f,s:i}", "duration", 0.6, "steps", 3);
    assert_weft_ok(
        weft__mcp_client_call(c, "trigger-long-running-operation", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    assert_int_equal(count_of(f, &f->progress), 3);
    weft__mcp_call_result_cleanup(&r);

    /* Arguments the tool's schema refuses: the SDK answers with isError. */
    args = json_pack("{s:s}", "a", "not a number");
    assert_weft_ok(weft__mcp_client_call(c, "get-sum", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_true(r.is_error);
    assert_string_equal(r.error_type, "tool_error");
    weft__mcp_call_result_cleanup(&r);

    assert_weft_ok(weft__mcp_client_ping(c, 5000));
    weft__mcp_client_free(c);

    check_call_span(f, "tools/call echo", "echo", "pipe");
    {
        const struct mem_span *s = find_span(f, "tools/call get-sum");
        assert_non_null(s);
        assert_int_equal(s->status, WEFT_STATUS_ERROR);
        assert_string_equal(span_str(s, "error.type"), "tool_error");
        s = find_span(f, "initialize");
        assert_non_null(s);
        assert_string_equal(span_str(s, "mcp.protocol.version"), "2025-11-25");
        assert_non_null(find_span(f, "tools/list"));
        assert_non_null(find_span(f, "ping"));
    }
    assert_true(has_series(f, "tools/call", "echo"));
    assert_true(has_series(f, "tools/call", "trigger-long-running-operation"));
}

/* A call's event stream that drops before its answer is resumed with GET + Last-Event-ID,
 * and the answer that comes on the resumed stream completes the call. */
static void
test_http_dropped_stream_is_resumed(void **state)
{
    struct fx *f = *state;
    unsigned port = weft_test_free_port();
    char port_env[32], record_env[400], record[340], url[128], log_path[300];
    const char *argv[] = {"/usr/bin/node", MCP_DIR "/servers/resume_http.mjs", NULL};
    const char *env[] = {port_env, record_env, NULL};
    struct weft__mcp_server_config cfg;
    struct weft__mcp_options o = options(f);
    struct weft__mcp_client *c = NULL;
    struct weft__mcp_call_result r;
    char err[512] = "";
    pid_t pid = 0;
    weft_err rc = WEFT_OK;

    assert_true(port > 0);
    snprintf(port_env, sizeof(port_env), "PORT=%u", port);
    snprintf(record, sizeof(record), "%s/resume.record", f->dir);
    snprintf(record_env, sizeof(record_env), "RECORD=%s", record);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", port);
    snprintf(log_path, sizeof(log_path), "%s/resume.log", f->dir);
    pid = weft_test_spawn(argv, env, MCP_DIR, log_path, true);
    assert_true(pid > 0);
    memset(&cfg, 0, sizeof(cfg));
    cfg.name = "resume";
    cfg.url = url;
    cfg.init_timeout_ms = 2000;
    for (int i = 0; i < 50; i++) {
        rc = weft__mcp_client_new(&cfg, &o, &c, err, sizeof(err));
        if (rc == WEFT_OK) {
            break;
        }
        msleep(200);
    }
    if (rc != WEFT_OK) {
        weft_test_kill_group(pid, 1000);
        fail_msg("could not start the resuming server: %s", err);
    }
    assert_weft_ok(weft__mcp_client_call(c, "slow", NULL, &f->parent_ctx, 5000, &r));
    assert_false(r.is_error);
    assert_string_equal(r.text, "resumed after event 1");
    weft__mcp_call_result_cleanup(&r);
    assert_int_equal(count_of(f, &f->progress), 1); /* the event before the drop */
    weft__mcp_client_free(c);
    weft_test_kill_group(pid, 2000);
    assert_true(weft_test_file_contains(record, "Last-Event-ID: 1"));
}

/* An HTTP answer over the 8 MiB message cap: reading stops there and the call fails as
 * oversized (a server failure: agent.c retries it, then fails the step), not as a garbled
 * answer. */
static void
test_http_oversized_answer_fails_the_call(void **state)
{
    struct fx *f = *state;
    unsigned port = weft_test_free_port();
    char port_env[32], url[128], log_path[300];
    const char *argv[] = {"/usr/bin/node", MCP_DIR "/servers/huge_http.mjs", NULL};
    const char *env[] = {port_env, NULL};
    struct weft__mcp_server_config cfg;
    struct weft__mcp_options o = options(f);
    struct weft__mcp_client *c = NULL;
    struct weft__mcp_call_result r;
    char err[512] = "";
    pid_t pid = 0;
    weft_err rc = WEFT_OK;

    assert_true(port > 0);
    snprintf(port_env, sizeof(port_env), "PORT=%u", port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", port);
    snprintf(log_path, sizeof(log_path), "%s/huge.log", f->dir);
    pid = weft_test_spawn(argv, env, MCP_DIR, log_path, true);
    assert_true(pid > 0);
    memset(&cfg, 0, sizeof(cfg));
    cfg.name = "huge";
    cfg.url = url;
    cfg.init_timeout_ms = 2000;
    for (int i = 0; i < 50; i++) {
        rc = weft__mcp_client_new(&cfg, &o, &c, err, sizeof(err));
        if (rc == WEFT_OK) {
            break;
        }
        msleep(200);
    }
    if (rc != WEFT_OK) {
        weft_test_kill_group(pid, 1000);
        fail_msg("could not start the huge server: %s", err);
    }
    rc = weft__mcp_client_call(c, "huge", NULL, &f->parent_ctx, 10000, &r);
    weft__mcp_client_free(c);
    weft_test_kill_group(pid, 2000); /* before any assertion: a failed one leaves no server */
    assert_weft_ok(rc);
    assert_true(r.is_error);
    assert_string_equal(r.error_type, "oversized");
    assert_non_null(strstr(r.text, "over 8388608 bytes"));
    weft__mcp_call_result_cleanup(&r);
}

static void
test_everything_http_session_progress(void **state)
{
    struct fx *f = *state;
    unsigned port = weft_test_free_port();
    char port_env[32];
    char url[128];
    char log_path[300];
    const char *argv[] = {"/usr/bin/node", MCP_DIR "/servers/everything_http.mjs", NULL};
    const char *env[] = {port_env, NULL};
    char *headers[] = {"Authorization: Bearer " SECRET_HDR};
    struct weft__mcp_server_config cfg;
    struct weft__mcp_options o = options(f);
    struct weft__mcp_client *c = NULL;
    struct weft__mcp_call_result r;
    char err[512] = "";
    json_t *args = NULL;
    pid_t pid = 0;
    weft_err rc = WEFT_OK;

    assert_true(port > 0);
    snprintf(port_env, sizeof(port_env), "PORT=%u", port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", port);
    snprintf(log_path, sizeof(log_path), "%s/http.log", f->dir);
    pid = weft_test_spawn(argv, env, MCP_DIR, log_path, true);
    assert_true(pid > 0);
    memset(&cfg, 0, sizeof(cfg));
    cfg.name = "everything_http";
    cfg.url = url;
    cfg.headers = headers;
    cfg.header_count = 1;
    cfg.init_timeout_ms = 2000;
    /* The server needs a moment to listen: retry the start for up to 10 s. */
    for (int i = 0; i < 50; i++) {
        rc = weft__mcp_client_new(&cfg, &o, &c, err, sizeof(err));
        if (rc == WEFT_OK) {
            break;
        }
        msleep(200);
    }
    if (rc != WEFT_OK) {
        weft_test_kill_group(pid, 1000);
        fail_msg("could not start server-everything over HTTP: %s\nlogs:\n%s", err,
                 weft_test_logs());
    }
    assert_string_equal(weft__mcp_client_protocol(c), "2025-11-25");
    assert_non_null(weft__mcp_client_session_id(c));

    args = json_pack("{s:s}", "message", "over http");
    assert_weft_ok(weft__mcp_client_call(c, "echo", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    assert_non_null(strstr(r.text, "over http"));
    weft__mcp_call_result_cleanup(&r);

    args = json_pack("{s:f,s:i}", "duration", 0.4, "steps", 2);
    assert_weft_ok(
        weft__mcp_client_call(c, "trigger-long-running-operation", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    assert_int_equal(count_of(f, &f->progress), 2);
    weft__mcp_call_result_cleanup(&r);

    args = json_pack("{s:s}", "location", "New York");
    assert_weft_ok(weft__mcp_client_call(c, "get-structured-content", args, &f->parent_ctx, 0, &r));
    json_decref(args);
    assert_non_null(r.structured);
    weft__mcp_call_result_cleanup(&r);

    assert_weft_ok(weft__mcp_client_ping(c, 5000));
    weft__mcp_client_free(c);
    weft_test_kill_group(pid, 2000);

    check_call_span(f, "tools/call echo", "echo", "tcp");
    {
        const struct mem_span *s = find_span(f, "tools/call echo");
        const struct weft_value *p = mem_span_attr(s, "server.port");
        assert_non_null(span_str(s, "mcp.session.id"));
        assert_string_equal(span_str(s, "server.address"), "127.0.0.1");
        assert_non_null(p);
        assert_int_equal(p->u.i, port);
    }
    assert_true(has_series(f, "tools/call", "echo"));
    assert_no_secrets(f);
}

static void
test_filesystem_write_then_read(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"node", FILESYSTEM, f->dir, NULL};
    struct weft__mcp_client *c = start_stdio(f, "filesystem", argv, 3, NULL, 0);
    struct weft__mcp_call_result r;
    char path[400];
    char buf[64] = "";
    json_t *args = NULL;
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/note.txt", f->dir);
    args = json_pack("{s:s,s:s}", "path", path, "content", "written through MCP");
    assert_weft_ok(weft__mcp_client_call(c, "write_file", args, NULL, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    weft__mcp_call_result_cleanup(&r);

    args = json_pack("{s:s}", "path", path);
    assert_weft_ok(weft__mcp_client_call(c, "read_text_file", args, NULL, 0, &r));
    json_decref(args);
    assert_false(r.is_error);
    assert_non_null(strstr(r.text, "written through MCP"));
    weft__mcp_call_result_cleanup(&r);
    weft__mcp_client_free(c);

    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(buf, sizeof(buf), fp));
    fclose(fp);
    assert_string_equal(buf, "written through MCP");
}

static void
test_fault_crash_mid_call_then_restart(void **state)
{
    struct fx *f = *state;
    struct weft__mcp_client *c = start_fault(f, "ok");
    struct weft__mcp_call_result r;
    struct weft__mcp_stats st;

    assert_weft_ok(weft__mcp_client_call(c, "crash", NULL, &f->parent_ctx, 0, &r));
    assert_true(r.is_error);
    assert_string_equal(r.error_type, "server_down");
    assert_non_null(strstr(r.text, "fault"));
    assert_non_null(strstr(r.text, "status 3"));
    weft__mcp_call_result_cleanup(&r);
    /* SERVER_DOWN is emitted by the reader thread right after it wakes the caller. */
    for (int i = 0; i < 100 && count_of(f, &f->down) == 0; i++) {
        msleep(10);
    }
    assert_int_equal(count_of(f, &f->down), 1);

    assert_weft_ok(weft__mcp_client_call(c, "echo", NULL, &f->parent_ctx, 0, &r));
    assert_false(r.is_error);
    assert_non_null(strstr(r.text, "echo:"));
    /* The image item is rendered as compact JSON. */
    assert_non_null(strstr(r.text, "\"type\":\"image\""));
    weft__mcp_call_result_cleanup(&r);
    weft__mcp_client_stats(c, &st);
    assert_int_equal(st.restarts, 1);
    assert_int_equal(st.calls, 2);
    assert_int_equal(st.errors, 1);
    assert_int_equal(count_of(f, &f->restarted), 1);
    weft__mcp_client_free(c);

    {
        const struct mem_span *s = find_span(f, "tools/call crash");
        assert_non_null(s);
        assert_int_equal(s->status, WEFT_STATUS_ERROR);
        assert_string_equal(span_str(s, "error.type"), "server_down");
    }
    assert_no_secrets(f);
}

static char *
read_record(struct fx *f, const char *needle)
{
    for (int i = 0; i < 100; i++) {
        FILE *fp = fopen(f->record, "r");
        char *buf = calloc(1, 1 << 20);
        size_t n = 0;
        if (fp != NULL) {
            n = fread(buf, 1, (1 << 20) - 1, fp);
            fclose(fp);
        }
        buf[n] = '\0';
        if (strstr(buf, needle) != NULL) {
            return buf;
        }
        free(buf);
        msleep(20);
    }
    return NULL;
}

static void
test_fault_hang_times_out_and_cancels(void **state)
{
    struct fx *f = *state;
    struct weft__mcp_client *c = start_fault(f, "ok");
    struct weft__mcp_call_result r;
    struct weft__mcp_stats st;
    const struct mem_span *s = NULL;
    char *rec = NULL;
    char needle[64];

    assert_weft_ok(weft__mcp_client_call(c, "hang", NULL, &f->parent_ctx, 300, &r));
    assert_true(r.is_error);
    assert_string_equal(r.error_type, "timeout");
    weft__mcp_call_result_cleanup(&r);
    weft__mcp_client_stats(c, &st);
    assert_int_equal(st.timeouts, 1);
    s = find_span(f, "tools/call hang");
    assert_non_null(s);
    assert_string_equal(span_str(s, "error.type"), "timeout");
    snprintf(needle, sizeof(needle), "\"requestId\":%s", span_str(s, "jsonrpc.request.id"));
    rec = read_record(f, "notifications/cancelled");
    assert_non_null(rec);
    assert_non_null(strstr(rec, needle));
    free(rec);
    /* The server still answers other calls. */
    assert_weft_ok(weft__mcp_client_call(c, "echo", NULL, NULL, 0, &r));
    assert_false(r.is_error);
    weft__mcp_call_result_cleanup(&r);
    weft__mcp_client_free(c);
}

static void
test_fault_garbage_lines_counted(void **state)
{
    struct fx *f = *state;
    struct weft__mcp_client *c = start_fault(f, "garbage");
    struct weft__mcp_call_result r;
    struct weft__mcp_stats st;

    assert_weft_ok(weft__mcp_client_call(c, "echo", NULL, NULL, 0, &r));
    assert_false(r.is_error);
    weft__mcp_call_result_cleanup(&r);
    weft__mcp_client_stats(c, &st);
    assert_true(st.bad_lines >= 4);
    assert_non_null(strstr(weft_test_logs(), "not JSON-RPC"));
    weft__mcp_client_free(c);
}

static void
test_fault_no_initialize_answer(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"node", FAULT, "noinit", NULL};
    struct weft__mcp_server_config cfg;
    struct weft__mcp_options o = options(f);
    struct weft__mcp_client *c = NULL;
    char err[512] = "";
    struct timespec t0;
    struct timespec t1;

    memset(&cfg, 0, sizeof(cfg));
    cfg.name = "silent";
    cfg.argv = argv;
    cfg.argc = 3;
    cfg.init_timeout_ms = 1500;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_weft_err(weft__mcp_client_new(&cfg, &o, &c, err, sizeof(err)), WEFT_ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_null(c);
    assert_non_null(strstr(err, "'silent'"));
    assert_non_null(strstr(err, "initialize"));
    assert_true(t1.tv_sec - t0.tv_sec < 6);
}

static void
test_fault_version_refused(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"node", FAULT, "oldversion", NULL};
    struct weft__mcp_server_config cfg;
    struct weft__mcp_client *c = NULL;
    char err[512] = "";

    memset(&cfg, 0, sizeof(cfg));
    cfg.name = "old";
    cfg.argv = argv;
    cfg.argc = 3;
    (void)f;
    assert_weft_err(weft__mcp_client_new(&cfg, NULL, &c, err, sizeof(err)), WEFT_EPARSE);
    assert_null(c);
    assert_non_null(strstr(err, "'old'"));
    assert_non_null(strstr(err, "2024-01-01"));
}

static void
test_fault_errors_and_list_changed(void **state)
{
    struct fx *f = *state;
    struct weft__mcp_client *c = start_fault(f, "ok");
    struct weft__mcp_call_result r;
    uint64_t v0 = 0;
    uint64_t v1 = 0;
    size_t n = 0;

    /* Eight tools over four pages. */
    assert_true(has_tool(c, "change", &v0, &n));
    assert_int_equal(n, 8);
    {
        char *instructions = weft__mcp_client_instructions(c);
        assert_string_equal(instructions, "a server that breaks");
        weft__free(instructions);
    }

    assert_weft_ok(weft__mcp_client_call(c, "fail", NULL, &f->parent_ctx, 0, &r));
    assert_true(r.is_error);
    assert_string_equal(r.error_type, "tool_error");
    assert_string_equal(r.text, "it broke");
    weft__mcp_call_result_cleanup(&r);

    assert_weft_ok(weft__mcp_client_call(c, "rpcerror", NULL, &f->parent_ctx, 0, &r));
    assert_true(r.is_error);
    assert_string_equal(r.error_type, "jsonrpc_-32602");
    weft__mcp_call_result_cleanup(&r);
    {
        const struct mem_span *s = find_span(f, "tools/call rpcerror");
        assert_non_null(s);
        assert_int_equal(s->status, WEFT_STATUS_ERROR);
        assert_string_equal(s->status_message, "bad params");
        assert_string_equal(span_str(s, "error.type"), "-32602");
        assert_string_equal(span_str(s, "rpc.response.status_code"), "-32602");
    }

    assert_weft_ok(weft__mcp_client_call(c, "change", NULL, NULL, 0, &r));
    weft__mcp_call_result_cleanup(&r);
    for (int i = 0; i < 200 && count_of(f, &f->tools_changed) == 0; i++) {
        msleep(10);
    }
    assert_int_equal(count_of(f, &f->tools_changed), 1);
    assert_true(has_tool(c, "added", &v1, &n));
    assert_int_equal(n, 9);
    assert_true(v1 > v0);
    weft__mcp_client_free(c);
}

static void
test_trace_context_in_meta(void **state)
{
    struct fx *f = *state;
    struct weft__mcp_client *c = start_fault(f, "ok");
    struct weft__mcp_call_result r;
    const struct mem_span *s = NULL;
    char *rec = NULL;
    char trace_hex[33];
    char span_hex[17];
    char expected[128];

    assert_weft_ok(weft__mcp_client_call(c, "echo", NULL, &f->parent_ctx, 0, &r));
    weft__mcp_call_result_cleanup(&r);
    weft__mcp_client_free(c);
    s = find_span(f, "tools/call echo");
    assert_non_null(s);
    assert_memory_equal(s->parent_span_id, f->parent_ctx.span_id, 8);
    weft_hex_encode(s->trace_id, 16, trace_hex);
    weft_hex_encode(s->span_id, 8, span_hex);
    /* The traceparent in params._meta names the MCP span itself as the server's parent. */
    snprintf(expected, sizeof(expected), "\"traceparent\":\"00-%s-%s-%02x\"", trace_hex, span_hex,
             s->trace_flags);
    rec = read_record(f, "\"name\":\"echo\"");
    assert_non_null(rec);
    assert_non_null(strstr(rec, expected));
    assert_non_null(strstr(rec, "\"progressToken\""));
    free(rec);
    assert_no_secrets(f);
}

struct worker_arg {
    struct weft__mcp_client *c;
    int ok;
};

static void *
caller(void *arg)
{
    struct worker_arg *w = arg;
    for (int i = 0; i < 20; i++) {
        struct weft__mcp_call_result r;
        json_t *args = json_pack("{s:i}", "n", i);
        if (weft__mcp_client_call(w->c, "echo", args, NULL, 0, &r) == WEFT_OK && !r.is_error) {
            w->ok++;
        }
        json_decref(args);
        weft__mcp_call_result_cleanup(&r);
    }
    return NULL;
}

static void
test_concurrent_calls_multiplexed(void **state)
{
    struct fx *f = *state;
    struct weft__mcp_client *c = start_fault(f, "ok");
    pthread_t t[4];
    struct worker_arg w[4];

    for (int i = 0; i < 4; i++) {
        w[i].c = c;
        w[i].ok = 0;
        assert_int_equal(pthread_create(&t[i], NULL, caller, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].ok, 20);
    }
    weft__mcp_client_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_everything_stdio_lifecycle_tools_progress, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_everything_http_session_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_dropped_stream_is_resumed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_oversized_answer_fails_the_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filesystem_write_then_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_crash_mid_call_then_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_hang_times_out_and_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_garbage_lines_counted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_no_initialize_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_errors_and_list_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_context_in_meta, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_calls_multiplexed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

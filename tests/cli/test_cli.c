/* tests/cli/test_cli.c - the `weft` binary end to end: the test writes a span store through
 * the store exporter, runs the built binary against it and checks exit codes, stdout and
 * stderr: trace list, trace show (last, prefix, unknown, ambiguous, colour), version, help,
 * exporters (the README's table is the command's output), and usage errors (unknown command or
 * option: exit 2). */
#include "support/http_receiver.h"
#include "support/otlp_decode.h"
#include "support/weft_test.h"
#include "tracing/exporter.h"

#include <curl/curl.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MS         1000000ull
#define T0         1700000000000000000ull
#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define OLD_TRACE  "0123456789abcdef0123456789abcdef"
#define NEW_TRACE  "0124aaaabbbbccccddddeeeeffff0000"
#define MAX_OUTPUT 65536

static const struct weft_attr resource_attrs[] = {
    {"service.name", {WEFT_VALUE_STRING, 7, {.str = "svc-cli"}}},
};
static const struct weft_resource resource = {resource_attrs, 1, 0, NULL};
static const struct weft_scope scope = {"weft.test", NULL, NULL, NULL, 0};

struct fixture {
    char dir[64];
    char db[128];
    char out[MAX_OUTPUT];
    char err[MAX_OUTPUT];
};

struct run {
    int status;
    const char *out;
    const char *err;
};

static void
hex_to_bytes(const char *hex, uint8_t *out, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned v = 0;

        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

static struct weft_span_data
make_span(const char *trace_hex,
          uint8_t id,
          uint8_t parent,
          const char *name,
          uint64_t start_ms,
          uint64_t dur_ms)
{
    struct weft_span_data s;

    memset(&s, 0, sizeof(s));
    hex_to_bytes(trace_hex, s.trace_id, WEFT_TRACE_ID_SIZE);
    s.span_id[7] = id;
    if (parent != 0) {
        s.parent_span_id[7] = parent;
        s.has_parent = true;
    }
    s.name = name;
    s.kind = WEFT_SPAN_KIND_INTERNAL;
    s.start_time_ns = T0 + start_ms * MS;
    s.end_time_ns = s.start_time_ns + dur_ms * MS;
    s.resource = &resource;
    s.scope = &scope;
    return s;
}

/* Two traces sharing the prefix "012": an older one of one span and a newer workflow whose
 * agent failed. */
static void
write_store(const char *db)
{
    struct weft_exporter *ex = NULL;
    struct weft_span_data spans[4];
    const struct weft_span_data *batch[4];
    struct weft_export_result result = {0};

    spans[0] = make_span(OLD_TRACE, 1, 0, "invoke_workflow old", 0, 10);
    spans[1] = make_span(NEW_TRACE, 2, 1, "invoke_agent researcher", 1010, 300);
    spans[1].status_code = WEFT_STATUS_ERROR;
    spans[1].status_message = "boom";
    spans[2] = make_span(NEW_TRACE, 3, 1, "plan supervisor", 1001, 5);
    spans[3] = make_span(NEW_TRACE, 1, 0, "invoke_workflow new", 1000, 400);
    for (size_t i = 0; i < 4; i++) {
        batch[i] = &spans[i];
    }
    assert_weft_ok(weft_store_exporter_new(db, &ex));
    assert_weft_ok(ex->ops->export_batch(ex->self, batch, 4, 0, &result));
    weft_exporter_free(ex);
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-cli-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/weft.db", f->dir);
    write_store(f->db);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
read_file(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    assert_non_null(fp);
    n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

/* Run the weft binary with @p args (NULL-terminated, without argv[0]); stdout and stderr
 * are captured through files in the fixture's directory. */
static struct run
run_weft(struct fixture *f, const char *const *args)
{
    struct run r = {0};

    r.status = weft_test_run_captured(WEFT_BIN, args, f->dir, f->out, sizeof(f->out), f->err,
                                      sizeof(f->err));
    r.out = f->out;
    r.err = f->err;
    return r;
}

#define RUN(f, ...) run_weft((f), (const char *const[]){__VA_ARGS__, NULL})

static void
test_cli_trace_list_prints_traces_newest_first(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "list", "--db", f->db);
    const char *newer = NULL;
    const char *older = NULL;

    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "TRACE ID"));
    newer = strstr(r.out, NEW_TRACE);
    older = strstr(r.out, OLD_TRACE);
    assert_non_null(newer);
    assert_non_null(older);
    assert_true(newer < older);
    assert_non_null(strstr(newer, "svc-cli"));
    assert_non_null(strstr(newer, "invoke_workflow new"));
    assert_non_null(strstr(newer, "400ms"));
}

static void
test_cli_trace_list_limit_keeps_newest(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "list", "--limit=1", "--db", f->db);

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, NEW_TRACE));
    assert_null(strstr(r.out, OLD_TRACE));
    r = RUN(f, "trace", "list", "-n", "0", "--db", f->db);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--limit"));
}

static void
test_cli_trace_list_reads_weft_home_by_default(void **state)
{
    struct fixture *f = *state;
    struct run r = {0};

    weft_test_setenv("WEFT_HOME", f->dir);
    r = RUN(f, "trace", "list");
    weft_test_setenv("WEFT_HOME", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, NEW_TRACE));
}

static void
test_cli_trace_show_last_prints_the_tree(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "show", "last", "--db", f->db, "--color=never");
    const char *root = NULL;
    const char *plan = NULL;
    const char *agent = NULL;

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "trace " NEW_TRACE));
    assert_non_null(strstr(r.out, "service=svc-cli"));
    assert_non_null(strstr(r.out, "spans=3"));
    assert_non_null(strstr(r.out, "errors=1"));
    root = strstr(r.out, "\ninvoke_workflow new ");
    plan = strstr(r.out, "\n\xe2\x94\x9c\xe2\x94\x80 plan supervisor ");
    agent = strstr(r.out, "\n\xe2\x94\x94\xe2\x94\x80 invoke_agent researcher ");
    assert_non_null(root);
    assert_non_null(plan);
    assert_non_null(agent);
    assert_true(root < plan && plan < agent);
    assert_non_null(strstr(agent, "300ms  ERROR: boom"));
    assert_null(strstr(r.out, "\x1b["));
}

static void
test_cli_trace_show_accepts_unique_prefix(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "show", "--db", f->db, "01234");

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "trace " OLD_TRACE));
    assert_non_null(strstr(r.out, "invoke_workflow old"));
}

static void
test_cli_trace_show_color_always_highlights_errors(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "show", "last", "--db", f->db, "--color=always");

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\x1b[31mERROR: boom\x1b[0m"));
    r = RUN(f, "trace", "show", "last", "--db", f->db, "--color");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\x1b[31m"));
    r = RUN(f, "trace", "show", "last", "--db", f->db, "--color=sometimes");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--color"));
}

static void
test_cli_trace_show_unknown_trace_exits_1(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "show", "ffff", "--db", f->db);

    assert_int_equal(r.status, 1);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "trace 'ffff' not found"));
}

static void
test_cli_trace_show_ambiguous_prefix_exits_1(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "show", "012", "--db", f->db);

    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "ambiguous"));
    assert_non_null(strstr(r.err, OLD_TRACE));
    assert_non_null(strstr(r.err, NEW_TRACE));
}

static void
test_cli_missing_store_exits_1_with_hint(void **state)
{
    struct fixture *f = *state;
    char path[160];
    struct run r = {0};

    snprintf(path, sizeof(path), "%s/absent.db", f->dir);
    r = RUN(f, "trace", "list", "--db", path);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no trace store at"));
    assert_non_null(strstr(r.err, "OTEL_TRACES_EXPORTER=store"));
}

static void
test_cli_bad_option_exits_2_with_usage(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "trace", "list", "--bogus");

    assert_int_equal(r.status, 2);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "unknown option '--bogus'"));
    assert_non_null(strstr(r.err, "usage: weft trace list"));
    r = RUN(f, "trace", "show", "last", "--db");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "needs a value"));
    r = RUN(f, "trace", "show");
    assert_int_equal(r.status, 2);
}

static void
test_cli_unknown_command_exits_2(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "frobnicate");

    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unknown command 'frobnicate'"));
    assert_non_null(strstr(r.err, "usage: weft"));
    r = RUN(f, "trace", "explode");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unknown subcommand 'explode'"));
    r = RUN(f, "--frob");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unknown option '--frob'"));
}

static void
test_cli_version_and_help_exit_0(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "version");

    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "weft " WEFT_VERSION "\n");
    r = RUN(f, "--help");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "usage: weft <command>"));
    assert_non_null(strstr(r.out, "trace"));
    r = RUN(f, "help", "trace");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "weft trace show <trace-id|prefix|last>"));
    r = RUN(f, "trace", "show", "--help");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "--color[=WHEN]"));
}

static void
test_cli_no_arguments_prints_usage_and_exits_2(void **state)
{
    struct fixture *f = *state;
    struct run r = run_weft(f, (const char *const[]){NULL});

    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "usage: weft"));
}

/* ------------------------------------------------------------------------------------------ */
/* weft validate / weft run                                                                    */

#define EXAMPLE(name) WEFT_SOURCE_DIR "/examples/" name "/workflow.json"

static void
write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void
test_cli_validate_examples_exit_0(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "validate", EXAMPLE("code_review"), EXAMPLE("clarify"),
                       EXAMPLE("swarm_reflection"), EXAMPLE("openai"));

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "valid (workflow 'code-review')"));
    assert_non_null(strstr(r.out, "valid (workflow 'openai-review')"));
}

static void
test_cli_validate_prints_every_error_and_exits_2(void **state)
{
    struct fixture *f = *state;
    char path[128];
    struct run r;

    snprintf(path, sizeof(path), "%s/bad.json", f->dir);
    write_text(path, "{\"name\": \"w\", \"models\": {\"m\": {\"provider\": \"openai\","
                     " \"base_url\": \"http://x\"}}, \"agents\": [{\"name\": \"a\","
                     " \"reflection\": {\"max_retries\": -2}, \"colour\": 1}]}");
    r = RUN(f, "validate", path);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "agents[0].reflection.max_retries: expected integer"));
    assert_non_null(strstr(r.err, "agents[0].colour: unknown key"));
    assert_non_null(strstr(r.err, path));
    r = RUN(f, "validate");
    assert_int_equal(r.status, 2);
}

static void
test_cli_run_example_prints_summary_and_tree(void **state)
{
    struct fixture *f = *state;
    char state_db[128];
    struct run r;

    snprintf(state_db, sizeof(state_db), "%s/state.db", f->dir);
    weft_test_setenv("WEFT_HOME", f->dir);
    r = RUN(f, "run", EXAMPLE("code_review"), "--input", "Add a login endpoint", "--workspace",
            f->dir, "--state", state_db);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, ": completed in "));
    assert_non_null(strstr(r.out, "replan=6"));
    assert_non_null(strstr(r.out, "s9:reviewer(completed)"));
    assert_non_null(strstr(r.out, "spans:   "));
    assert_non_null(strstr(r.out, " 0 dropped, 0 failed to export"));
    /* The trace tree from the local store, and plain progress lines on a non-terminal. */
    assert_non_null(strstr(r.out, "invoke_workflow code-review"));
    assert_non_null(strstr(r.out, "replan reviewer"));
    assert_non_null(strstr(r.err, "decide rule: fixer"));
}

static void
test_cli_run_json_record_and_replay(void **state)
{
    struct fixture *f = *state;
    char rec[128];
    char first[MAX_OUTPUT];
    json_t *a = NULL;
    json_t *b = NULL;
    struct run r;

    snprintf(rec, sizeof(rec), "%s/rec.json", f->dir);
    weft_test_setenv("WEFT_HOME", f->dir);
    r = RUN(f, "run", EXAMPLE("swarm_reflection"), "--json", "-q", "--record", rec, "--workspace",
            f->dir);
    assert_int_equal(r.status, 0);
    memcpy(first, r.out, sizeof(first));
    r = RUN(f, "run", EXAMPLE("swarm_reflection"), "--json", "-q", "--replay", rec, "--workspace",
            f->dir);
    assert_int_equal(r.status, 0);
    a = json_loads(first, 0, NULL);
    b = json_loads(r.out, 0, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(json_string_value(json_object_get(b, "status")), "completed");
    assert_true(json_equal(json_object_get(a, "decisions"), json_object_get(b, "decisions")));
    assert_true(json_equal(json_object_get(a, "verdicts"), json_object_get(b, "verdicts")));
    assert_int_equal(json_array_size(json_object_get(b, "steps")), 5);
    json_decref(a);
    json_decref(b);
    r = RUN(f, "run", EXAMPLE("swarm_reflection"), "--record", rec, "--replay", rec);
    assert_int_equal(r.status, 2);
}

static void
test_cli_run_failed_run_exits_1_invalid_workflow_exits_2(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    struct run r;

    snprintf(wf, sizeof(wf), "%s/wf.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    write_text(script, "{\"responses\": {}}");
    write_text(wf, "{\"name\": \"empty\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                   " \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}");
    weft_test_setenv("WEFT_HOME", f->dir);
    r = RUN(f, "run", wf, "-q", "--no-trace", "--workspace", f->dir);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.out, ": failed in "));
    assert_non_null(strstr(r.out, "no scripted response left"));
    write_text(wf, "{\"name\": \"broken\"");
    r = RUN(f, "run", wf);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "invalid JSON"));
}

/* A run the watchdog stops is stuck: exit status 3 with the loop named (exit 1 would read as
 * an ordinary failure to a script). The policy is spelled "abort", the old name of "fail", so
 * the alias is checked too; an invalid WEFT_WATCHDOG_WINDOW is said on stderr and the default
 * window applies; a flow with policy "escalate" is refused at load (exit 2). */
static void
test_cli_stuck_run_exits_3_and_watchdog_settings_are_checked(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    char *flow = NULL;
    char *at = NULL;
    struct run r;

    snprintf(wf, sizeof(wf), "%s/wf.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    write_text(script, "{\"responses\": {\"poller\": {\"act\": [{\"content\": \"pending\"}, "
                       "{\"content\": \"pending\"}, {\"content\": \"pending\"}, "
                       "{\"content\": \"pending\"}]}}}");
    write_text(wf, "{\"name\": \"poll\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"supervisor\": {\"watchdog\": {\"policy\":"
                   " \"abort\"}}, \"agents\": [{\"name\": \"poller\"}], \"plan\": ["
                   "{\"agent\": \"poller\", \"task\": \"Check the build status\"},"
                   " {\"agent\": \"poller\", \"task\": \"Check the build status\"},"
                   " {\"agent\": \"poller\", \"task\": \"Check the build status\"},"
                   " {\"agent\": \"poller\", \"task\": \"Check the build status\"}]}");
    weft_test_setenv("WEFT_HOME", f->dir);
    weft_test_setenv("WEFT_WATCHDOG_WINDOW", "many");
    r = RUN(f, "run", wf, "-q", "--no-trace", "--workspace", f->dir);
    weft_test_setenv("WEFT_WATCHDOG_WINDOW", NULL);
    if (r.status != 3 || strstr(r.out, "stuck") == NULL) {
        fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
    }
    if (strstr(r.err, "WEFT_WATCHDOG_WINDOW=many: expected an integer from 2 to") == NULL) {
        fail_msg("the invalid window is not reported:\n%s", r.err);
    }
    /* Its --json says so too. */
    r = RUN(f, "run", wf, "-q", "--json", "--workspace", f->dir);
    assert_int_equal(r.status, 3);
    assert_non_null(strstr(r.out, "\"status\": \"stuck\""));

    /* The stuck-loop example's flow with "escalate": nobody to escalate to. */
    {
        char path[512];
        FILE *fp = NULL;
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/examples/stuck_loops/flow.json", WEFT_SOURCE_DIR);
        flow = calloc(1, 1 << 16);
        assert_non_null(flow);
        fp = fopen(path, "r");
        assert_non_null(fp);
        n = fread(flow, 1, (1 << 16) - 1, fp);
        fclose(fp);
        flow[n] = '\0';
    }
    at = strstr(flow, "\"policy\": \"break\"");
    assert_non_null(at);
    {
        static char escalating[1 << 16];
        snprintf(escalating, sizeof(escalating), "%.*s\"policy\": \"escalate\"%s", (int)(at - flow),
                 flow, at + strlen("\"policy\": \"break\""));
        write_text(wf, escalating);
    }
    free(flow);
    snprintf(script, sizeof(script), "%s/flow_script.json", f->dir);
    write_text(script, "{\"responses\": {}}");
    r = RUN(f, "validate", wf);
    assert_int_equal(r.status, 2);
    if (strstr(r.out, "supervisor.watchdog.policy") == NULL &&
        strstr(r.err, "supervisor.watchdog.policy") == NULL) {
        fail_msg("stdout:\n%s\nstderr:\n%s", r.out, r.err);
    }
    assert_true(strstr(r.out, "\"escalate\" needs a supervisor") != NULL ||
                strstr(r.err, "\"escalate\" needs a supervisor") != NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* weft runs / weft run show / weft resume                                                     */

/* A value from an SQLite database, or "" (the caller frees). */
static char *
sql_value(const char *db_path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char *out = NULL;

    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0) != NULL) {
        out = strdup((const char *)sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return out != NULL ? out : strdup("");
}

static void
test_cli_runs_and_run_show_list_the_surgery(void **state)
{
    struct fixture *f = *state;
    struct run r;

    weft_test_setenv("WEFT_HOME", f->dir);
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "no runs yet"));
    r = RUN(f, "run", EXAMPLE("correction"), "-q", "--no-trace", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    r = RUN(f, "runs");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "adaptive-correction"));
    assert_non_null(strstr(r.out, "completed"));
    assert_non_null(strstr(r.out, "2.50")); /* the failed attempt's -1.0 counts */
    r = RUN(f, "run", "show", "last");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "greet.c1.1"));
    assert_non_null(strstr(r.out, "file_writer"));
    assert_non_null(strstr(r.out, "DAG surgery:"));
    assert_non_null(strstr(r.out, "#1 greet failed (exit_status): inserted [\"greet.c1.1\"]; "
                                  "depends_on [] -> [\"greet.c1.1\"]"));
    r = RUN(f, "run", "show", "ffffffffff");
    assert_int_equal(r.status, 1);
}

/* A scripted workflow in the fixture's directory whose build step runs @p build. */
static void
write_replay_workflow(struct fixture *f, const char *name, const char *build)
{
    char path[256];
    char text[1024];

    snprintf(path, sizeof(path), "%s/script.json", f->dir);
    write_text(path, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"found\"},"
                     " {\"content\": \"reported\"}]}}}");
    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    snprintf(text, sizeof(text),
             "{\"name\": \"rp\", \"models\": {\"m\": {\"provider\": \"scripted\","
             " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": ["
             "{\"id\": \"find\", \"agent\": \"a\", \"task\": \"Find\"},"
             "{\"id\": \"build\", \"executor\": \"command\", \"task\": \"Build\","
             " \"depends_on\": [\"find\"], \"argv\": [\"sh\", \"-c\", \"%s\"]},"
             "{\"id\": \"report\", \"agent\": \"a\", \"task\": \"Report\","
             " \"depends_on\": [\"build\"]}]}",
             build);
    write_text(path, text);
}

/* weft replay: identical (exit 0, --json's replay member), diverged after the workflow changed
 * (exit 5, the first differing span named); weft fork from the failed step with the fixed
 * workflow completes; unknown runs and steps are refused. */
static void
test_cli_replay_and_fork(void **state)
{
    struct fixture *f = *state;
    char ok[256];
    char broken[256];
    char id[16] = "";
    struct run r;

    weft_test_setenv("WEFT_HOME", f->dir);
    write_replay_workflow(f, "ok.json", "echo built");
    write_replay_workflow(f, "broken.json", "exit 3");
    snprintf(ok, sizeof(ok), "%s/ok.json", f->dir);
    snprintf(broken, sizeof(broken), "%s/broken.json", f->dir);
    r = RUN(f, "run", ok, "-q", "--no-trace", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    r = RUN(f, "replay", "last", "--json", "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"replay\": {"));
    assert_non_null(strstr(r.out, "\"identical\": true"));
    r = RUN(f, "run", broken, "-q", "--no-trace", "--workspace", f->dir);
    assert_int_equal(r.status, 1);
    r = RUN(f, "runs", "--json");
    assert_int_equal(r.status, 0);
    /* The newest run is the broken one. */
    assert_non_null(strstr(r.out, "\"run_id\": \""));
    memcpy(id, strstr(r.out, "\"run_id\": \"") + 11, 12);
    r = RUN(f, "replay", id, "--workflow", ok, "--no-trace", "--workspace", f->dir);
    assert_int_equal(r.status, 5);
    assert_non_null(strstr(r.out, "DIVERGED at span execute_tool command (step build): request"));
    assert_non_null(strstr(r.out, "expected: "));
    r = RUN(f, "fork", id, "--from", "build", "--workflow", ok, "--json", "-q");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"reused_steps\": 1"));
    assert_non_null(strstr(r.out, "\"status\": \"completed\""));
    r = RUN(f, "run", "show", "last", "--json");
    assert_non_null(strstr(r.out, "\"kind\": \"fork\""));
    r = RUN(f, "fork", id, "--from", "nope");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "no step 'nope'"));
    r = RUN(f, "fork", "ffffffffffff", "--from", "build");
    assert_int_equal(r.status, 1);
    r = RUN(f, "fork", id);
    assert_int_equal(r.status, 2);
    r = RUN(f, "fork", id, "--from", "build", "--set", "agent.a.colour=red");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "agent.NAME.instructions"));
    assert_non_null(strstr(r.err, "step.STEP.answer"));
    /* The forked step's task and first answer set: its result is the given answer. */
    r = RUN(f, "fork", id, "--from", "report", "--workflow", ok, "--set",
            "step.report.task=Report briefly", "--set", "step.report.answer=EDITED REPORT",
            "--json", "-q");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "EDITED REPORT"));
    assert_non_null(strstr(r.out, "Report briefly"));
    r = RUN(f, "fork", id, "--from", "report", "--set", "step.find.task=x");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "only the --from step 'report'"));
    r = RUN(f, "fork", id, "--from", "report", "--set", "step.report.colour=x");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "step.STEP.task, step.STEP.answer"));
    r = RUN(f, "fork", id, "--from", "build", "--set", "step.build.answer=x");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "not an agent"));
}

/* Start `weft run WF` and SIGKILL it while step @p step_id is in progress. */
static long
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
kill_while_in_flight(struct fixture *f, const char *wf, const char *step_id)
{
    const char *argv[] = {WEFT_BIN, "run", wf, "-q", "--no-trace", "--workspace", f->dir, NULL};
    char state_db[128];
    char sql[160];
    pid_t pid = 0;
    int status = 0;
    bool is_seen = false;

    snprintf(state_db, sizeof(state_db), "%s/state.db", f->dir);
    snprintf(sql, sizeof(sql), "SELECT status FROM steps WHERE step_id = '%s'", step_id);
    weft_test_setenv("WEFT_HOME", f->dir);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, NULL, NULL, (char *const *)argv, environ), 0);
    /* Until the state is seen (30 s: a sanitizer build under load starts slowly), not a count
     * of polls, which a slow start could use up before the step is even reached. */
    for (long deadline = now_ms() + 30000; now_ms() < deadline;) {
        char *st = sql_value(state_db, sql);
        bool is_running = strcmp(st, "in_progress") == 0;
        struct timespec ts = {0, 10000000};
        free(st);
        if (is_running) {
            is_seen = true;
            break;
        }
        nanosleep(&ts, NULL);
    }
    if (!is_seen) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, &status, 0);
        fail_msg("step %s was never seen in progress", step_id);
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

static void
test_cli_resume_after_sigkill_keeps_completed_steps(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    char state_db[128];
    char weft_db[128];
    char *run_id = NULL;
    char *old_trace = NULL;
    char *links = NULL;
    char sql[300];
    struct run r;

    snprintf(wf, sizeof(wf), "%s/slow.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    snprintf(state_db, sizeof(state_db), "%s/state.db", f->dir);
    snprintf(weft_db, sizeof(weft_db), "%s/weft.db", f->dir);
    write_text(script, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"first done\"},"
                       " {\"content\": \"second done\", \"delay_ms\": 1500},"
                       " {\"content\": \"third done\"}]}}}");
    write_text(
        wf,
        "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\","
        " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
        " \"plan\": [{\"id\": \"one\", \"agent\": \"a\", \"task\": \"first\"},"
        " {\"id\": \"two\", \"agent\": \"a\", \"task\": \"second\", \"depends_on\": [\"one\"]},"
        " {\"id\": \"three\", \"agent\": \"a\", \"task\": \"third\", \"depends_on\": [\"two\"]}]}");
    kill_while_in_flight(f, wf, "two");
    run_id = sql_value(state_db, "SELECT id FROM runs");
    old_trace = sql_value(state_db, "SELECT trace_id FROM runs");
    assert_int_equal(strlen(old_trace), 32);
    {
        char *st = sql_value(state_db, "SELECT status FROM runs");
        assert_string_equal(st, "running");
        free(st);
    }
    r = RUN(f, "resume", run_id, "--json", "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    {
        json_t *j = json_loads(r.out, 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "run_id")), run_id);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "completed");
        /* Step one was not re-run: two LLM calls, for steps two and three. */
        assert_int_equal(json_integer_value(json_object_get(j, "llm_calls")), 2);
        assert_string_equal(json_string_value(json_object_get(j, "output")), "third done");
        assert_string_equal(json_string_value(json_object_get(j, "session_id")), run_id);
        json_decref(j);
    }
    {
        char *st = sql_value(state_db, "SELECT status || ' ' || resumed_from_trace FROM runs");
        char expected[80];
        snprintf(expected, sizeof(expected), "completed %s", old_trace);
        assert_string_equal(st, expected);
        free(st);
        st = sql_value(state_db, "SELECT attempts FROM steps WHERE step_id = 'one'");
        assert_string_equal(st, "1");
        free(st);
    }
    /* The new trace's root links to the old trace. */
    snprintf(sql, sizeof(sql),
             "SELECT links FROM spans WHERE name = 'invoke_workflow slow' AND trace_id != '%s'",
             old_trace);
    links = sql_value(weft_db, sql);
    assert_non_null(strstr(links, old_trace));
    r = RUN(f, "resume", run_id);
    assert_int_equal(r.status, 2); /* already completed */
    assert_non_null(strstr(r.err, "already ended"));
    free(links);
    free(run_id);
    free(old_trace);
}

/* A run whose architect composed a team, killed while the team's step runs: `weft resume`
 * registers the team again from the state store's teams table and finishes the step, without
 * composing again; `weft teams --run` lists it. */
static void
test_cli_resume_registers_composed_teams_again(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    char state_db[128];
    char *run_id = NULL;
    struct run r;

    snprintf(wf, sizeof(wf), "%s/arch.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    snprintf(state_db, sizeof(state_db), "%s/state.db", f->dir);
    write_text(script,
               "{\"responses\": {\"architect\": {\"act\": [{\"tool_calls\": [{\"name\": "
               "\"submit_team\", \"arguments\": {\"team\": {\"name\": \"slow_team\", "
               "\"agents\": [{\"name\": \"w\"}], \"plan\": [{\"id\": \"work\", \"agent\": "
               "\"w\", \"task\": \"work\"}]}}}]}, {\"content\": \"done\"}]}, \"w\": {\"act\": "
               "[{\"content\": \"worked\", \"delay_ms\": 1500}]}}}");
    write_text(wf, "{\"name\": \"arch\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"architect\","
                   " \"architect\": true}], \"plan\": [{\"id\": \"design\", \"agent\":"
                   " \"architect\", \"task\": \"Build a team that works\"}]}");
    kill_while_in_flight(f, wf, "s1");
    run_id = sql_value(state_db, "SELECT run_id FROM steps WHERE step_id = 's1'");
    r = RUN(f, "resume", run_id, "--json", "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    {
        json_t *j = json_loads(r.out, 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "completed");
        assert_string_equal(json_string_value(json_object_get(j, "output")), "worked");
        /* Not composed again: the team's one call only. */
        assert_int_equal(json_integer_value(json_object_get(j, "llm_calls")), 1);
        json_decref(j);
    }
    r = RUN(f, "teams", "--run", run_id, "--json");
    assert_int_equal(r.status, 0);
    {
        json_t *j = json_loads(r.out, 0, NULL);
        json_t *teams = json_object_get(j, "teams");
        assert_int_equal(json_array_size(teams), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(teams, 0), "name")),
                            "slow_team");
        assert_string_equal(json_string_value(json_object_get(json_array_get(teams, 0), "goal")),
                            "Build a team that works");
        json_decref(j);
    }
    free(run_id);
}

/* GET http://127.0.0.1:PORT/PATH with curl(1)-free libcurl; returns the body (free it). */
static char *
http_get_text(unsigned port, const char *path, long *status)
{
    CURL *curl = curl_easy_init();
    FILE *mem = NULL;
    char *text = NULL;
    size_t len = 0;
    char url[128];

    assert_non_null(curl);
    mem = open_memstream(&text, &len);
    assert_non_null(mem);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, mem);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(curl);
    fclose(mem);
    return text;
}

/* weft serve: /metrics aggregated from the state store across runs, a killed run counted as
 * interrupted (its process is gone), /healthz, and a clean stop on SIGTERM. */
static void
test_cli_serve_exposes_metrics_across_stored_runs(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {WEFT_BIN, "serve", "--addr", "127.0.0.1:0", NULL};
    posix_spawn_file_actions_t actions;
    char wf[128];
    char script[128];
    char err_path[160];
    char line[4096];
    unsigned port = 0;
    pid_t pid = 0;
    int status = 0;
    long http = 0;
    char *text = NULL;
    const char *age = NULL;
    struct run r;

    snprintf(wf, sizeof(wf), "%s/slow.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    write_text(script, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"one\"},"
                       " {\"content\": \"two\", \"delay_ms\": 3000}]}}}");
    write_text(wf, "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                   " \"plan\": [{\"id\": \"one\", \"agent\": \"a\", \"task\": \"first\"},"
                   " {\"id\": \"two\", \"agent\": \"a\", \"task\": \"second\","
                   " \"depends_on\": [\"one\"]}]}");
    kill_while_in_flight(f, wf, "two"); /* stays "running" in the store */
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--no-trace", "--workspace", f->dir, "--input",
            "x");
    assert_int_equal(r.status, 0);

    snprintf(err_path, sizeof(err_path), "%s/serve.err", f->dir);
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &actions, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    for (int i = 0; i < 500 && port == 0; i++) {
        struct timespec ts = {0, 10000000};
        const char *p = NULL;

        read_file(err_path, line, sizeof(line));
        p = strstr(line, "listening on port ");
        if (p != NULL) {
            port = (unsigned)strtoul(p + 18, NULL, 10);
        } else {
            nanosleep(&ts, NULL);
        }
    }
    assert_true(port > 0);
    text = http_get_text(port, "/metrics", &http);
    assert_int_equal(http, 200);
    assert_non_null(
        strstr(text, "weft_runs_total{status=\"completed\",workflow=\"code-review\"} 1\n"));
    assert_non_null(strstr(text, "weft_agent_invocations_total{gen_ai_agent_name=\"reviewer\","
                                 "outcome=\"success\",workflow=\"code-review\"} 4\n"));
    assert_non_null(strstr(text, "weft_agent_invocations_total{gen_ai_agent_name=\"a\","
                                 "outcome=\"success\",workflow=\"slow\"} 1\n"));
    /* The killed run's process is gone: weft serve marks it interrupted, as weft runs does,
     * so nothing is in progress any more. */
    assert_non_null(strstr(text, "weft_runs_active{workflow=\"slow\"} 0\n"));
    assert_non_null(strstr(text, "weft_runs_total{status=\"interrupted\",workflow=\"slow\"} 1\n"));
    assert_non_null(strstr(text, "weft_runs_active{workflow=\"code-review\"} 0\n"));
    /* Families with no stored source are listed at zero, never missing. */
    assert_non_null(strstr(text, "# TYPE weft_reflection_verdicts_total counter\n"));
    age = strstr(text, "\nweft_runs_oldest_active_age_seconds ");
    assert_non_null(age);
    assert_true(strtod(age + 37, NULL) == 0.0);
    free(text);
    text = http_get_text(port, "/healthz", &http);
    assert_int_equal(http, 200);
    free(text);
    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    r = RUN(f, "serve", "--addr", "nope");
    assert_int_equal(r.status, 2);
}

static void
test_cli_resume_flow_after_sigkill_reruns_only_the_item_in_flight(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    char *run_id = NULL;
    struct run r;

    snprintf(wf, sizeof(wf), "%s/fslow.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    write_text(script, "{\"responses\": {\"split\": {\"act\": [{\"content\": {\"items\": "
                       "[\"a\", \"b\"]}}]}, \"each[0].work\": {\"act\": [{\"content\": \"A\"}]},"
                       " \"each[1].work\": {\"act\": [{\"content\": \"B\", \"delay_ms\": 1500}]},"
                       " \"join\": {\"act\": [{\"content\": \"AB\"}]}}}");
    write_text(wf, "{\"name\": \"fslow\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"split\"},"
                   " {\"name\": \"work\"}, {\"name\": \"join\"}], \"flow\": {\"max_parallel\": 1,"
                   " \"nodes\": [{\"agent\": \"split\"}, {\"id\": \"each\", \"upstream_agents\":"
                   " [\"split\"], \"for_each\": \"items\", \"nodes\": [{\"agent\": \"work\"}]},"
                   " {\"agent\": \"join\", \"upstream_agents\": [\"each\"]}]}}");
    /* One item at a time: item 0 is saved completed before item 1 starts, whatever the load. */
    kill_while_in_flight(f, wf, "each[1].work");
    {
        char db[160];
        snprintf(db, sizeof(db), "%s/state.db", f->dir);
        run_id = sql_value(db, "SELECT id FROM runs");
    }
    r = RUN(f, "resume", run_id, "--json", "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 0);
    {
        json_t *j = json_loads(r.out, 0, NULL);
        json_t *steps = json_object_get(j, "steps");
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "status")), "completed");
        /* split and item 0 were done: only item 1 and the join ask the model again. */
        assert_int_equal(json_integer_value(json_object_get(j, "llm_calls")), 2);
        assert_string_equal(json_string_value(json_object_get(j, "output")), "AB");
        for (size_t i = 0; i < json_array_size(steps); i++) {
            json_t *s = json_array_get(steps, i);
            assert_string_equal(json_string_value(json_object_get(s, "status")), "completed");
        }
        json_decref(j);
    }
    free(run_id);
}

/* OTEL_METRICS_EXPORTER=otlp: the run's metrics reach an OTLP receiver at the end of the run
 * (the final export on stop), with the run's numbers in them; the traces go to the same
 * receiver, and every span carries the run's --user and --tags. */
static void
test_cli_run_exports_otlp_metrics(void **state)
{
    struct fixture *f = *state;
    struct http_receiver *rx = NULL;
    char url[160];
    char *text = NULL;
    json_t *root = NULL;
    size_t metrics = 0;
    size_t spans = 0;
    struct run r;

    assert_int_equal(http_receiver_start(&rx), 0);
    http_receiver_url(rx, "", url, sizeof(url));
    weft_test_setenv("WEFT_HOME", f->dir);
    weft_test_setenv("OTEL_METRICS_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_SERVICE_NAME", "cli-metrics");
    r = RUN(f, "run", EXAMPLE("code_review"), "--input", "Add a login endpoint", "--workspace",
            f->dir, "--no-trace", "--user", "alice", "--tags", "nightly, canary");
    weft_test_setenv("OTEL_METRICS_EXPORTER", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_SERVICE_NAME", NULL);
    assert_int_equal(r.status, 0);
    for (size_t i = 0; i < http_receiver_count(rx); i++) {
        const struct http_request *req = http_receiver_request(rx, i);
        size_t k = 0;
        json_t *rs = NULL;

        if (strcmp(req->path, "/v1/metrics") == 0) {
            root = weft_test_otlp_decode_metrics_request(req->body, req->body_len, 0, NULL);
            assert_non_null(root);
            json_decref(root);
            metrics++;
            if (i + 1 < http_receiver_count(rx)) {
                continue;
            }
            root = weft_test_otlp_decode_metrics_request(req->body, req->body_len, 0, NULL);
            text = json_dumps(root, 0);
            assert_non_null(strstr(text, "\"cli-metrics\""));
            assert_non_null(strstr(text, "\"weft.runs\""));
            assert_non_null(strstr(text, "\"completed\""));
            assert_non_null(strstr(text, "\"gen_ai.client.token.usage\""));
            free(text);
            json_decref(root);
            continue;
        }
        assert_string_equal(req->path, "/v1/traces");
        root = weft_test_otlp_decode_request(req->body, req->body_len, 0, NULL);
        assert_non_null(root);
        json_array_foreach(json_object_get(root, "resourceSpans"), k, rs)
        {
            json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
            size_t j = 0;
            json_t *span = NULL;

            json_array_foreach(json_object_get(ss, "spans"), j, span)
            {
                char *attrs = json_dumps(json_object_get(span, "attributes"), JSON_COMPACT);

                assert_non_null(strstr(attrs, "{\"key\":\"user.id\",\"value\":{\"stringValue\":"
                                              "\"alice\"}}"));
                assert_non_null(strstr(attrs, "{\"key\":\"weft.run.tags\",\"value\":{"
                                              "\"arrayValue\":{\"values\":[{\"stringValue\":"
                                              "\"nightly\"},{\"stringValue\":\"canary\"}]}}}"));
                free(attrs);
                spans++;
            }
        }
        json_decref(root);
    }
    assert_true(metrics >= 1);
    assert_true(spans >= 10);
    /* The metrics export was the last request: after the run ended. */
    assert_string_equal(http_receiver_request(rx, http_receiver_count(rx) - 1)->path,
                        "/v1/metrics");
    http_receiver_stop(rx);

    r = RUN(f, "run", EXAMPLE("code_review"), "--tags",
            "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "--tags: expected at most 16"));

    /* An unknown exporter name is reported, not fatal. */
    weft_test_setenv("OTEL_METRICS_EXPORTER", "statsd");
    r = RUN(f, "run", EXAMPLE("code_review"), "--input", "x", "--workspace", f->dir, "--no-trace",
            "--quiet");
    weft_test_setenv("OTEL_METRICS_EXPORTER", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "OTEL_METRICS_EXPORTER: unknown exporter \"statsd\""));
}

/* ------------------------------------------------------------------------------------------ */
/* Issue 12: configuration errors, --record, scripts, telemetry loss, a second SIGINT          */

/* A port on 127.0.0.1 nothing listens on: bound to get a free number, then closed. */
static unsigned short
closed_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned short port = 0;

    assert_true(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

static size_t
count_of(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static void
test_cli_run_record_to_unwritable_path_fails_at_start(void **state)
{
    struct fixture *f = *state;
    char rec[160];
    char want[220];
    struct stat st;
    struct run r;

    weft_test_setenv("WEFT_HOME", f->dir);
    snprintf(rec, sizeof(rec), "%s/no-such-dir/rec.json", f->dir);
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--record", rec, "--workspace", f->dir);
    assert_int_equal(r.status, 2);
    snprintf(want, sizeof(want), "--record %s: cannot write: No such file or directory", rec);
    assert_non_null(strstr(r.err, want));
    assert_int_equal(count_of(r.err, "cannot write"), 1); /* one error, not one per exchange */
    assert_null(strstr(r.out, "completed"));              /* no step ran */

    /* A recording holds prompts and answers: 0600, also when it replaces a 0644 file. */
    snprintf(rec, sizeof(rec), "%s/rec.json", f->dir);
    write_text(rec, "old");
    assert_int_equal(chmod(rec, 0644), 0);
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--no-trace", "--record", rec, "--workspace",
            f->dir);
    assert_int_equal(r.status, 0);
    assert_int_equal(stat(rec, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(st.st_size > 100);
    /* So are the databases the run created, and their WAL files. */
    snprintf(rec, sizeof(rec), "%s/state.db", f->dir);
    assert_int_equal(stat(rec, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(rec, sizeof(rec), "%s/state.db-wal", f->dir);
    if (stat(rec, &st) == 0) {
        assert_int_equal(st.st_mode & 0777, 0600);
    }
    snprintf(rec, sizeof(rec), "%s/weft.db", f->dir);
    assert_int_equal(stat(rec, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void
test_cli_validate_and_run_check_the_scripted_provider_script(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    char want[200];
    struct run r;

    snprintf(wf, sizeof(wf), "%s/wf.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    write_text(wf, "{\"name\": \"w\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                   " \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}");
    /* A JSON syntax error: file, line and column from the parser. */
    write_text(script, "{\"responses\": {\"a\": {\"act\": [\n  {\"content\": \"x\",}\n]}}}");
    r = RUN(f, "validate", wf);
    assert_int_equal(r.status, 2);
    snprintf(want, sizeof(want), "%s:2:19: invalid JSON:", script);
    assert_non_null(strstr(r.err, want));
    assert_non_null(strstr(r.err, "(script of model 'm')"));
    /* A wrong field: the file, the field's path and what was expected. */
    write_text(script, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"x\","
                       " \"usage\": {\"input_tokens\": \"3\"}}]}}}");
    r = RUN(f, "validate", wf);
    assert_int_equal(r.status, 2);
    snprintf(want, sizeof(want),
             "%s: responses.a.act[0].usage: expected {\"input_tokens\": integer", script);
    assert_non_null(strstr(r.err, want));
    weft_test_setenv("WEFT_HOME", f->dir);
    r = RUN(f, "run", wf, "-q", "--workspace", f->dir);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, want));
    /* A good script passes. */
    write_text(script, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"x\"}]}}}");
    r = RUN(f, "validate", wf);
    assert_int_equal(r.status, 0);
}

/* Configuration errors of every kind end `weft run` with exit status 2 before it runs. */
static void
test_cli_run_configuration_errors_exit_2(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    struct run r;

    weft_test_setenv("WEFT_HOME", f->dir);
    snprintf(wf, sizeof(wf), "%s/missing.json", f->dir);
    r = RUN(f, "run", wf);
    assert_int_equal(r.status, 2); /* unreadable workflow */

    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318");
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--workspace", f->dir);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    assert_int_equal(r.status, 2); /* bad exporter configuration */
    assert_non_null(strstr(r.err, "OTEL_EXPORTER_OTLP_ENDPOINT=ftp://collector:4318"));

    weft_test_setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-only-half");
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--workspace", f->dir);
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", NULL);
    assert_int_equal(r.status, 2); /* half a Langfuse key pair */

    /* A traces file or a workspace that cannot be created where the user pointed. */
    weft_test_setenv("OTEL_TRACES_EXPORTER", "file");
    weft_test_setenv("WEFT_TRACES_FILE", "/proc/no-such-dir/traces.jsonl");
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--workspace", f->dir);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("WEFT_TRACES_FILE", NULL);
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "/proc/no-such-dir/traces.jsonl"));
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--workspace", "/proc/no-such-dir/ws");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "workspace /proc/no-such-dir/ws: cannot create"));

    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--metrics-addr", "nowhere");
    assert_int_equal(r.status, 2);
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--color=sometimes");
    assert_int_equal(r.status, 2);
}

/* Every span failed to reach the collector: the run completed, but its telemetry is lost:
 * exit status 4, and the summary says which exporter, how many spans and why. */
static void
test_cli_run_total_export_loss_exits_4_and_says_why(void **state)
{
    struct fixture *f = *state;
    char url[64];
    char want[128];
    unsigned short port = closed_port();
    json_t *j = NULL;
    json_t *ex = NULL;
    size_t i = 0;
    bool is_otlp_seen = false;
    struct run r;

    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    weft_test_setenv("WEFT_HOME", f->dir);
    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    weft_test_setenv("OTEL_BSP_EXPORT_TIMEOUT", "1000"); /* retries give up after 1 s */
    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--no-trace", "--workspace", f->dir);
    assert_int_equal(r.status, 4);
    snprintf(want, sizeof(want), "connection refused by http://127.0.0.1:%u/v1/traces", port);
    assert_non_null(strstr(r.out, "otlp: 0 delivered, "));
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "store: "));
    assert_null(strstr(r.out, "store: 0 delivered"));
    assert_non_null(strstr(r.err, "exporter otlp delivered 0 of "));
    assert_null(strstr(r.err, "invalid state"));

    r = RUN(f, "run", EXAMPLE("code_review"), "-q", "--json", "--workspace", f->dir);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("OTEL_BSP_EXPORT_TIMEOUT", NULL);
    assert_int_equal(r.status, 4);
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    json_array_foreach(json_object_get(j, "exporters"), i, ex)
    {
        if (strcmp(json_string_value(json_object_get(ex, "name")), "otlp") == 0) {
            is_otlp_seen = true;
            assert_int_equal(json_integer_value(json_object_get(ex, "delivered")), 0);
            assert_true(json_integer_value(json_object_get(ex, "failed")) > 0);
            assert_non_null(strstr(json_string_value(json_object_get(ex, "last_error")), want));
        } else {
            assert_true(json_integer_value(json_object_get(ex, "delivered")) > 0);
        }
    }
    assert_true(is_otlp_seen);
    json_decref(j);
}

/* Wait until the file at @p path contains @p text (the child writes it). */
static bool
wait_for_text(const char *path, const char *text, unsigned timeout_ms)
{
    static char buf[MAX_OUTPUT];

    for (unsigned waited = 0; waited < timeout_ms; waited += 10) {
        struct timespec ts = {0, 10000000};
        FILE *fp = fopen(path, "r");

        if (fp != NULL) {
            size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
            buf[n] = '\0';
            fclose(fp);
            if (strstr(buf, text) != NULL) {
                return true;
            }
        }
        nanosleep(&ts, NULL);
    }
    return false;
}

/* A collector that never answers holds `weft run` in its final flush; a second SIGINT ends
 * the wait at once: exit 130, one line saying how many spans are lost. The local store, shut
 * down first, still has the run's trace. */
static void
test_cli_second_sigint_exits_now_while_the_collector_hangs(void **state)
{
    struct fixture *f = *state;
    struct http_receiver *rx = NULL;
    char url[128];
    char err_path[160];
    char out_path[160];
    char weft_db[160];
    char *count = NULL;
    const char *argv[] = {
        WEFT_BIN, "run", EXAMPLE("code_review"), "-q", "--no-trace", "--workspace", f->dir, NULL};
    posix_spawn_file_actions_t actions;
    pid_t pid = 0;
    int status = 0;
    uint64_t t = 0;
    struct timespec now;

    assert_int_equal(http_receiver_start(&rx), 0);
    http_receiver_set_default(rx, &(struct http_response){.delay_ms = 60000});
    http_receiver_url(rx, "", url, sizeof(url));
    snprintf(out_path, sizeof(out_path), "%s/stdout", f->dir);
    snprintf(err_path, sizeof(err_path), "%s/stderr", f->dir);
    snprintf(weft_db, sizeof(weft_db), "%s/weft.db", f->dir);
    weft_test_setenv("WEFT_HOME", f->dir);
    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url);
    weft_test_setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000"); /* the first export is at exit */
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &actions, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("OTEL_BSP_SCHEDULE_DELAY", NULL);

    /* The run is over and its spans are on their way to a collector that does not answer. */
    assert_true(http_receiver_wait(rx, 1, 30000));
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_true(wait_for_text(err_path, "interrupt again to exit now", 5000));
    clock_gettime(CLOCK_MONOTONIC, &now);
    t = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    clock_gettime(CLOCK_MONOTONIC, &now);
    assert_true((uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u - t < 2000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    read_file(err_path, f->err, sizeof(f->err));
    assert_int_equal(count_of(f->err, "interrupted again: exiting now; "), 1);
    assert_non_null(strstr(f->err, " spans not yet exported are lost"));
    assert_null(strstr(f->err, "; 0 spans not yet exported"));
    count = sql_value(weft_db, "SELECT count(*) FROM spans");
    assert_true(atoi(count) > 10);
    free(count);
    http_receiver_stop(rx);
}

/* A second SIGINT while the run itself is still stopping (a model that takes its time) exits
 * at once as well, with one line. */
static void
test_cli_second_sigint_during_a_slow_step_exits_130(void **state)
{
    struct fixture *f = *state;
    char wf[128];
    char script[128];
    char state_db[128];
    char err_path[160];
    const char *argv[] = {WEFT_BIN, "run", NULL, "-q", "--no-trace", "--workspace", NULL, NULL};
    posix_spawn_file_actions_t actions;
    pid_t pid = 0;
    int status = 0;
    bool is_running = false;

    snprintf(wf, sizeof(wf), "%s/slow.json", f->dir);
    snprintf(script, sizeof(script), "%s/script.json", f->dir);
    snprintf(state_db, sizeof(state_db), "%s/state.db", f->dir);
    snprintf(err_path, sizeof(err_path), "%s/stderr", f->dir);
    write_text(script, "{\"responses\": {\"a\": {\"act\": [{\"content\": \"late\","
                       " \"delay_ms\": 20000}]}}}");
    write_text(wf, "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\","
                   " \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}],"
                   " \"plan\": [{\"id\": \"one\", \"agent\": \"a\", \"task\": \"t\"}]}");
    argv[2] = wf;
    argv[6] = f->dir;
    weft_test_setenv("WEFT_HOME", f->dir);
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &actions, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    for (int i = 0; i < 1000 && !is_running; i++) {
        char *st = sql_value(state_db, "SELECT status FROM steps WHERE step_id = 'one'");
        struct timespec ts = {0, 10000000};
        is_running = strcmp(st, "in_progress") == 0;
        free(st);
        if (!is_running) {
            nanosleep(&ts, NULL);
        }
    }
    assert_true(is_running);
    assert_int_equal(kill(pid, SIGINT), 0);
    /* Two signals sent back to back may merge into one: wait until the first is handled. */
    assert_true(wait_for_text(err_path, "interrupt again to exit now", 5000));
    assert_int_equal(kill(pid, SIGINT), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    read_file(err_path, f->err, sizeof(f->err));
    assert_int_equal(count_of(f->err, "interrupted again: exiting now"), 1);
}

/* The block README.md carries between its `weft exporters --markdown` markers. */
static char *
readme_exporters_block(void)
{
    static const char begin[] = "<!-- weft exporters --markdown: begin -->\n";
    static const char end[] = "<!-- weft exporters --markdown: end -->";
    static char readme[1 << 17];
    const char *from = NULL;
    char *to = NULL;

    read_file(WEFT_SOURCE_DIR "/README.md", readme, sizeof(readme));
    from = strstr(readme, begin);
    assert_non_null(from);
    from += strlen(begin);
    to = strstr(from, end);
    assert_non_null(to);
    *to = '\0';
    return (char *)from;
}

static void
test_cli_exporters_markdown_is_the_readme_table(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "exporters", "--markdown");

    assert_int_equal(r.status, 0);
    /* On failure: paste `build/weft exporters --markdown` between the README markers. */
    assert_string_equal(r.out, readme_exporters_block());
}

static void
test_cli_exporters_json_and_text_list_the_registry(void **state)
{
    struct fixture *f = *state;
    const struct weft_exporter_info *e = NULL;
    json_error_t jerr;
    json_t *doc = NULL;
    json_t *list = NULL;
    struct run r = RUN(f, "exporters", "--json");
    size_t i = 0;

    assert_int_equal(r.status, 0);
    doc = json_loads(r.out, 0, &jerr);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.exporters/v1");
    list = json_object_get(doc, "exporters");
    for (i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        json_t *o = json_array_get(list, i);
        json_t *env = json_object_get(o, "env");

        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(o, "name")), e->name);
        assert_int_equal(json_array_size(env), e->env_count);
        for (size_t v = 0; v < e->env_count; v++) {
            json_t *d = json_object_get(json_array_get(env, v), "default");

            assert_string_equal(json_string_value(json_object_get(json_array_get(env, v), "name")),
                                e->env[v].name);
            if (e->env[v].default_value == NULL) {
                assert_true(json_is_null(d));
            } else {
                assert_string_equal(json_string_value(d), e->env[v].default_value);
            }
        }
    }
    assert_int_equal(json_array_size(list), i);
    json_decref(doc);

    r = RUN(f, "exporters");
    assert_int_equal(r.status, 0);
    for (i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        assert_non_null(strstr(r.out, e->name));
        for (size_t v = 0; v < e->env_count; v++) {
            assert_non_null(strstr(r.out, e->env[v].name));
        }
    }
}

static void
test_cli_exporters_bad_usage_exits_2(void **state)
{
    struct fixture *f = *state;
    struct run r = RUN(f, "exporters", "otlp");

    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "unexpected argument 'otlp'"));
    r = RUN(f, "exporters", "--json", "--markdown");
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "exclude each other"));
    r = RUN(f, "help", "exporters");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "usage: weft exporters"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_cli_trace_list_prints_traces_newest_first),
        T(test_cli_trace_list_limit_keeps_newest),
        T(test_cli_trace_list_reads_weft_home_by_default),
        T(test_cli_trace_show_last_prints_the_tree),
        T(test_cli_trace_show_accepts_unique_prefix),
        T(test_cli_trace_show_color_always_highlights_errors),
        T(test_cli_trace_show_unknown_trace_exits_1),
        T(test_cli_trace_show_ambiguous_prefix_exits_1),
        T(test_cli_missing_store_exits_1_with_hint),
        T(test_cli_bad_option_exits_2_with_usage),
        T(test_cli_unknown_command_exits_2),
        T(test_cli_version_and_help_exit_0),
        T(test_cli_no_arguments_prints_usage_and_exits_2),
        T(test_cli_validate_examples_exit_0),
        T(test_cli_validate_prints_every_error_and_exits_2),
        T(test_cli_run_example_prints_summary_and_tree),
        T(test_cli_run_json_record_and_replay),
        T(test_cli_run_failed_run_exits_1_invalid_workflow_exits_2),
        T(test_cli_stuck_run_exits_3_and_watchdog_settings_are_checked),
        T(test_cli_runs_and_run_show_list_the_surgery),
        T(test_cli_replay_and_fork),
        T(test_cli_resume_after_sigkill_keeps_completed_steps),
        T(test_cli_resume_registers_composed_teams_again),
        T(test_cli_resume_flow_after_sigkill_reruns_only_the_item_in_flight),
        T(test_cli_serve_exposes_metrics_across_stored_runs),
        T(test_cli_run_exports_otlp_metrics),
        T(test_cli_run_record_to_unwritable_path_fails_at_start),
        T(test_cli_validate_and_run_check_the_scripted_provider_script),
        T(test_cli_run_configuration_errors_exit_2),
        T(test_cli_run_total_export_loss_exits_4_and_says_why),
        T(test_cli_second_sigint_exits_now_while_the_collector_hangs),
        T(test_cli_second_sigint_during_a_slow_step_exits_130),
        T(test_cli_exporters_markdown_is_the_readme_table),
        T(test_cli_exporters_json_and_text_list_the_registry),
        T(test_cli_exporters_bad_usage_exits_2),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/dist/test_dist.c - distributed runs against a real RabbitMQ broker started by the test:
 * `weft run --executor amqp` with `weft worker` processes gives the same run as in process; a
 * worker killed with SIGKILL mid-task loses nothing (the task is delivered again and counted
 * once); a poison task that kills every worker ends in the dead-letter queue and fails its step
 * with a note; malformed messages go to the dead letters and never crash a worker; a worker
 * stops on SIGTERM with exit 0; the spans an MCP agent's steps start on a worker carry the
 * run's span attributes. Each test uses its own queue prefix (its own queues). */
#include "support/amqp_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static struct weft_test_amqp *broker;
static char weft_bin[1024];

struct env {
    char dir[512];
    char home[600];
    char url[600];
    char prefix[600];
    const char *vars[8];
};

static int
group_setup(void **state)
{
    char err[1024];

    (void)state;
    snprintf(weft_bin, sizeof(weft_bin), "%s/weft", WEFT_BINARY_DIR);
    broker = weft_test_amqp_start(err, sizeof(err));
    if (broker == NULL) {
        fprintf(stderr, "cannot start RabbitMQ: %s\n", err);
        return -1; /* fails the group: never a silent skip */
    }
    return 0;
}

/* Every worker a test started: one whose test failed before stopping it is stopped at the end
 * (a child's pid is not reused before it is reaped, so this never hits another process). */
static pid_t started[64];
static size_t started_count;

static int
group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < started_count; i++) {
        if (!weft_test_has_exited(started[i], NULL)) {
            weft_test_kill_group(started[i], 5000);
        }
    }
    return weft_test_amqp_stop(broker) == 0 ? 0 : -1;
}

static void
env_init(struct env *e, const char *prefix)
{
    char *dir = weft_test_mkdtemp("weft-dist-");

    assert_non_null(dir);
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    free(dir);
    snprintf(e->home, sizeof(e->home), "WEFT_HOME=%s/home", e->dir);
    snprintf(e->url, sizeof(e->url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(broker));
    snprintf(e->prefix, sizeof(e->prefix), "WEFT_QUEUE_PREFIX=%s.", prefix);
    e->vars[0] = e->home;
    e->vars[1] = e->url;
    e->vars[2] = e->prefix;
    e->vars[3] = "OTEL_TRACES_EXPORTER=none";
    e->vars[4] = "WEFT_DEBUG=1"; /* workers log each task they start */
    e->vars[5] = NULL;
}

static pid_t
start_worker(const struct env *e, const char *name, const char *concurrency, const char *extra)
{
    char log[700];
    const char *argv[] = {weft_bin, "worker", "--concurrency", concurrency,
                          "--id",   name,     extra,           extra != NULL ? "2" : NULL,
                          NULL};
    pid_t pid = 0;

    snprintf(log, sizeof(log), "%s/%s.log", e->dir, name);
    pid = weft_test_spawn(argv, e->vars, e->dir, log, true);
    assert_true(pid > 0);
    if (started_count < sizeof(started) / sizeof(started[0])) {
        started[started_count++] = pid;
    }
    return pid;
}

/* A queue's ready and unacknowledged message counts from rabbitmqctl. */
static void
queue_counts(const char *queue, long *ready, long *unacked)
{
    const char *args[] = {"list_queues", "-q", "name", "messages_ready", "messages_unacknowledged",
                          NULL};
    char *out = NULL;
    char *line = NULL;

    *ready = -1;
    *unacked = -1;
    assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
    for (line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char name[256];
        long r = 0, u = 0;
        if (sscanf(line, "%255s %ld %ld", name, &r, &u) == 3 && strcmp(name, queue) == 0) {
            *ready = r;
            *unacked = u;
        }
    }
    free(out);
}

/* Wait (at most 30 s: the broker refreshes these statistics every few seconds) until the
 * queue shows @p ready and @p unacked messages. */
static void
wait_counts(const char *queue, long ready, long unacked)
{
    long r = -1, u = -1;
    long deadline = weft_test_now_ms() + 30000;

    for (;;) {
        queue_counts(queue, &r, &u);
        if ((r == ready && u == unacked) || weft_test_now_ms() >= deadline) {
            break;
        }
        weft_test_sleep_ms(250);
    }
    assert_int_equal(r, ready);
    assert_int_equal(u, unacked);
}

/* Wait (at most 30 s) until @p queue has a consumer: the worker declared the topology (the
 * exchanges, the queues and their dead-letter routes, all before it consumes) and listens. A
 * fixed pause instead either wastes time or, on a loaded machine, publishes into exchanges
 * not declared yet, where the broker drops the messages unseen. */
static void
wait_consumer(const char *queue)
{
    const char *args[] = {"list_queues", "-q", "name", "consumers", NULL};
    long deadline = weft_test_now_ms() + 30000;
    long consumers = -1;

    while (consumers < 1) {
        char *out = NULL;
        char *line = NULL;
        assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
        for (line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
            char name[256];
            long c = 0;
            if (sscanf(line, "%255s %ld", name, &c) == 2 && strcmp(name, queue) == 0) {
                consumers = c;
            }
        }
        free(out);
        if (consumers >= 1) {
            break;
        }
        if (weft_test_now_ms() >= deadline) {
            fail_msg("no consumer on %s after 30 s", queue);
        }
        weft_test_sleep_ms(100);
    }
}

static void
write_file(const char *dir, const char *name, const char *text)
{
    char path[700];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void
assert_log(const struct env *e, const char *name, const char *needle)
{
    char path[700];

    snprintf(path, sizeof(path), "%s/%s", e->dir, name);
    if (!weft_test_file_contains(path, needle)) {
        char *tail = weft_test_log_tail(path, 4000);
        fprintf(stderr, "%s lacks \"%s\":\n%s\n", path, needle, tail);
        free(tail);
        fail();
    }
}

/* SIGTERM to a worker: a graceful stop, exit 0. */
static void
stop_worker(pid_t w)
{
    kill(w, SIGTERM);
    assert_int_equal(weft_test_wait(w, 60000), 0);
}

/* SIGTERM to two workers: a graceful stop, each exits 0. */
static void
stop_workers(pid_t a, pid_t b)
{
    kill(a, SIGTERM);
    kill(b, SIGTERM);
    assert_int_equal(weft_test_wait(a, 60000), 0);
    assert_int_equal(weft_test_wait(b, 60000), 0);
}

/* Wait until the worker logging to @p name has started a task. */
static void
wait_started(const struct env *e, const char *name)
{
    char path[700];
    long deadline = weft_test_now_ms() + 60000;

    snprintf(path, sizeof(path), "%s/%s", e->dir, name);
    while (!weft_test_file_contains(path, " started: step ") && weft_test_now_ms() < deadline) {
        weft_test_sleep_ms(100);
    }
    assert_log(e, name, " started: step ");
}

/* The code-review example: its loop-back replanning, tools and reflection run on two workers
 * and come out exactly as in process. */
static void
test_run_matches_in_process(void **state)
{
    struct env e;
    char wf[1024];
    pid_t w1 = 0, w2 = 0;
    const char *expect = "s1:architect(completed) s2:codesmith(completed) s3:reviewer(completed) "
                         "s4:fixer(completed) s5:reviewer(completed) s6:fixer(completed) "
                         "s7:reviewer(completed) s8:fixer(completed) s9:reviewer(completed)";

    (void)state;
    env_init(&e, "match");
    snprintf(wf, sizeof(wf), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    w1 = start_worker(&e, "w1", "2", NULL);
    w2 = start_worker(&e, "w2", "2", NULL);
    {
        char log[700];
        const char *argv[] = {weft_bin,     "run",  wf,           "--input", "Add a login endpoint",
                              "--executor", "amqp", "--no-trace", "-q",      NULL};
        snprintf(log, sizeof(log), "%s/amqp.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    {
        char log[700];
        const char *argv[] = {weft_bin,     "run", wf,  "--input", "Add a login endpoint",
                              "--no-trace", "-q",  NULL};
        snprintf(log, sizeof(log), "%s/local.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_log(&e, "amqp.log", expect);
    assert_log(&e, "local.log", expect);
    assert_log(&e, "amqp.log", "9 task(s) published, 9 result(s), 0 duplicate(s)");
    assert_log(&e, "amqp.log", "llm calls: 26, tool calls: 16, tokens: 8870 in / 1085 out");
    assert_log(&e, "local.log", "llm calls: 26, tool calls: 16, tokens: 8870 in / 1085 out");
    assert_log(&e, "amqp.log", "loops:   replan=6");
    /* The summary counts the workers' spans too, as the trace tree shows them (issue 26: it said
     * "37 spans recorded" under a tree of 96). */
    assert_log(&e, "amqp.log", "in the run's trace so far (");
    assert_log(&e, "amqp.log", " by workers), 0 dropped");
    assert_log(&e, "local.log", "spans:   ");
    /* SIGTERM: a graceful stop, exit 0, with the tasks it ran counted. */
    stop_workers(w1, w2);
    assert_log(&e, "w1.log", "stopped:");
    weft_test_rm_rf(e.dir);
}

#define BARRIER                                                                                 \
    "mkdir -p barrier && touch barrier/$0 && n=0 && while [ $(ls barrier | wc -l) -lt 2 ]; do " \
    "n=$((n+1)); [ $n -gt 600 ] && exit 1; sleep 0.05; done"
/* Two command steps that each wait until both have started (in the run's workspace, shared by
 * the workers here), and a step that joins them: with two workers of one slot each, the run
 * completes only when the orchestrator dispatched both at once and each worker ran one. The
 * workflow itself asks for the amqp executor. */
static const char wide_workflow[] =
    "{\"name\": \"wide\", \"executor\": {\"kind\": \"amqp\"}, \"models\": {\"m\": "
    "{\"provider\": \"scripted\", \"script\": \"script.json\"}}, \"agents\": [{\"name\": "
    "\"a\"}], \"plan\": ["
    "{\"id\": \"left\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"" BARRIER "\", "
    "\"left\"]},"
    "{\"id\": \"right\", \"executor\": \"command\", \"argv\": [\"sh\", \"-c\", \"" BARRIER "\", "
    "\"right\"]},"
    "{\"id\": \"join\", \"executor\": \"command\", \"argv\": [\"ls\", \"barrier\"], "
    "\"depends_on\": [\"left\", \"right\"]}]}\n";

static void
test_wide_plan_runs_on_two_workers_at_once(void **state)
{
    struct env e;
    char wf[700], log[700];
    pid_t a = 0, b = 0;

    (void)state;
    env_init(&e, "wide");
    write_file(e.dir, "workflow.json", wide_workflow);
    write_file(e.dir, "script.json", "{\"responses\": {}}");
    snprintf(wf, sizeof(wf), "%s/workflow.json", e.dir);
    a = start_worker(&e, "a", "1", NULL);
    b = start_worker(&e, "b", "1", NULL);
    {
        /* No --executor: the workflow's "executor" says amqp. */
        const char *argv[] = {weft_bin, "run", wf, "--no-trace", "-q", NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_log(&e, "run.log", "left:command(completed) right:command(completed)");
    assert_log(&e, "run.log", "join:command(completed)");
    assert_log(&e, "run.log", "3 task(s) published, 3 result(s), 0 duplicate(s)");
    /* Each worker took one of the pair (one slot each, and neither could finish alone). */
    assert_log(&e, "a.log", " started: step ");
    assert_log(&e, "b.log", " started: step ");
    stop_workers(a, b);
    weft_test_rm_rf(e.dir);
}

/* A plan wider than the window: 300 independent command steps, 32 in flight, on two workers
 * of 4 slots. Results come back in groups (one poll brings several), and the engine refills
 * each freed slot at once: every step must run, none be judged a loop, and the run says so
 * truthfully. The workflow is named by a path relative to the orchestrator's directory, which
 * the workers (started elsewhere) resolve through the absolute path the task carries. */
static void
test_wider_than_the_window_runs_every_step(void **state)
{
    struct env e;
    char log[700];
    pid_t a = 0, b = 0;
    json_t *steps = json_array();
    json_t *doc = NULL;
    char *text = NULL;

    (void)state;
    env_init(&e, "window");
    for (int i = 0; i < 300; i++) {
        json_array_append_new(steps, json_pack("{s:o, s:s, s:[s]}", "id", json_sprintf("s%d", i),
                                               "executor", "command", "argv", "true"));
    }
    doc = json_pack("{s:s, s:{s:i}, s:{s:{s:s, s:s}}, s:[{s:s}], s:o}", "name", "window",
                    "supervisor", "max_iterations", 1000, "models", "m", "provider", "scripted",
                    "script", "script.json", "agents", "name", "a", "plan", steps);
    text = json_dumps(doc, 0);
    write_file(e.dir, "workflow.json", text);
    free(text);
    json_decref(doc);
    write_file(e.dir, "script.json", "{\"responses\": {}}");
    a = start_worker(&e, "a", "4", NULL);
    b = start_worker(&e, "b", "4", NULL);
    {
        const char *argv[] = {weft_bin,          "run", "workflow.json", "--executor", "amqp",
                              "--max-in-flight", "32",  "--no-trace",    "-q",         NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_log(&e, "run.log", "completed in");
    assert_log(&e, "run.log", "290 more (290 completed;"); /* and the 10 listed */
    assert_log(&e, "run.log", "s9:command(completed)");
    assert_log(&e, "run.log", "300 task(s) published, 300 result(s), 0 duplicate(s)");
    stop_workers(a, b);
    weft_test_rm_rf(e.dir);
}

/* A file of examples/@p example into @p dir. */
static void
copy_from(const char *example, const char *dir, const char *name)
{
    char src[700], text[16384];
    FILE *in = NULL;
    size_t n = 0;

    snprintf(src, sizeof(src), "%s/examples/%s/%s", WEFT_SOURCE_DIR, example, name);
    in = fopen(src, "r");
    assert_non_null(in);
    n = fread(text, 1, sizeof(text) - 1, in);
    fclose(in);
    text[n] = '\0';
    write_file(dir, name, text);
}

/* An MCP agent's steps on a worker: the worker starts the workflow's filesystem server once
 * (kept across its tasks), and the file the plan writes and reads through it is on disk. */
static void
test_mcp_agent_runs_on_a_worker(void **state)
{
    struct env e;
    char path[700], log[700];
    pid_t w = 0;

    (void)state;
    env_init(&e, "mcp");
    e.vars[5] = "WEFT_MCP_MODULES=" WEFT_SOURCE_DIR "/tests/mcp/node_modules";
    e.vars[6] = NULL;
    copy_from("mcp_filesystem", e.dir, "workflow.json");
    copy_from("mcp_filesystem", e.dir, "script.json");
    snprintf(path, sizeof(path), "%s/sandbox", e.dir);
    assert_int_equal(mkdir(path, 0700), 0);
    w = start_worker(&e, "w", "2", NULL);
    {
        const char *argv[] = {weft_bin, "run", "workflow.json", "--executor", "amqp", "--no-trace",
                              "-q",     NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_log(&e, "run.log",
               "s1:mcp_agent_filesystem(completed) s2:mcp_agent_filesystem(completed)");
    assert_log(&e, "run.log", "3 task(s) published, 3 result(s)");
    snprintf(path, sizeof(path), "%s/sandbox/notes.md", e.dir);
    assert_true(weft_test_file_contains(path, "# Release 1.4"));
    stop_worker(w);
    weft_test_rm_rf(e.dir);
}

/* Langfuse's experiment attributes reach the spans of an MCP agent's steps on a worker: `weft
 * eval --executor amqp` of one item, the worker keeping the filesystem server across its tasks
 * (its clients started without any run's attributes), and every span of the item's trace in the
 * span store they share, the worker's MCP client spans included, carries them with the root
 * span's id. */
static void
test_mcp_spans_on_a_worker_carry_the_run_attrs(void **state)
{
    struct env e;
    char path[700], log[700];
    char *out = NULL;
    json_t *doc = NULL;
    json_t *spans = NULL;
    json_t *span = NULL;
    const char *run_id = NULL;
    const char *root_id = NULL;
    size_t i = 0;
    size_t calls = 0, consumers = 0;
    pid_t w = 0;

    (void)state;
    env_init(&e, "mcp-attrs");
    e.vars[3] = "OTEL_TRACES_EXPORTER=store"; /* $WEFT_HOME/weft.db, for both processes */
    e.vars[5] = "WEFT_MCP_MODULES=" WEFT_SOURCE_DIR "/tests/mcp/node_modules";
    e.vars[6] = NULL;
    copy_from("mcp_filesystem", e.dir, "workflow.json");
    copy_from("mcp_filesystem", e.dir, "script.json");
    write_file(e.dir, "items.jsonl", "{\"input\": \"Write the release notes\"}\n");
    snprintf(path, sizeof(path), "%s/sandbox", e.dir);
    assert_int_equal(mkdir(path, 0700), 0);
    w = start_worker(&e, "w", "2", NULL);
    {
        const char *argv[] = {weft_bin, "dataset",     "create", "items",
                              "--file", "items.jsonl", NULL};
        snprintf(log, sizeof(log), "%s/dataset.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 60000), 0);
    }
    {
        const char *argv[] = {weft_bin,     "eval", "workflow.json", "--dataset", "items",
                              "--executor", "amqp", "--json",        NULL};
        snprintf(log, sizeof(log), "%s/eval.json", e.dir);
        if (weft_test_run(argv, e.vars, e.dir, log, 120000) != 0) {
            char *text = weft_test_read_file(log);
            fail_msg("weft eval --executor amqp: %s", text != NULL ? text : "(no output)");
        }
    }
    out = weft_test_read_file(log);
    assert_non_null(out);
    doc = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(doc);
    run_id = json_string_value(
        json_object_get(json_array_get(json_object_get(doc, "items"), 0), "run_id"));
    assert_non_null(run_id);
    snprintf(path, sizeof(path), "%s", run_id);
    json_decref(doc);
    free(out);
    stop_worker(w); /* its spans are in the store */
    {
        const char *argv[] = {weft_bin, "trace", "show", path, "--json", NULL};
        snprintf(log, sizeof(log), "%s/trace.json", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 60000), 0);
    }
    out = weft_test_read_file(log);
    assert_non_null(out);
    doc = json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(doc);
    spans = json_object_get(doc, "spans");
    root_id = json_string_value(json_object_get(json_array_get(spans, 0), "span_id"));
    assert_non_null(root_id);
    json_array_foreach(spans, i, span)
    {
        const json_t *attrs = json_object_get(span, "attributes");
        const char *name = json_string_value(json_object_get(span, "name"));
        const char *got = json_string_value(
            json_object_get(attrs, "langfuse.experiment.item.root_observation_id"));

        if (got == NULL || strcmp(got, root_id) != 0 ||
            json_string_value(json_object_get(attrs, "langfuse.experiment.id")) == NULL) {
            fail_msg("span %s lacks the experiment's attributes (root_observation_id %s, "
                     "expected %s)",
                     name, got != NULL ? got : "none", root_id);
        }
        calls += strncmp(name, "tools/call ", 11) == 0 ? 1 : 0;
        consumers += json_object_get(attrs, "weft.worker.id") != NULL ? 1 : 0;
    }
    if (calls < 2 || consumers < 2) {
        fail_msg("the trace has %zu MCP tools/call span(s) and %zu worker task(s); expected at "
                 "least 2 each",
                 calls, consumers);
    }
    json_decref(doc);
    free(out);
    weft_test_rm_rf(e.dir);
}

/* Failed tool calls on a worker are counted where the run's summary, --json and `run show` read
 * them (the stored steps): notes.md is a directory, so the server answers isError to the write
 * and the read, and the summary of a run whose steps ran on a worker says so (the run's own
 * meter, which it once read, never saw them). */
static void
test_tool_errors_on_a_worker_reach_the_summary(void **state)
{
    struct env e;
    char path[700], log[700];
    pid_t w = 0;

    (void)state;
    env_init(&e, "mcp-errors");
    e.vars[5] = "WEFT_MCP_MODULES=" WEFT_SOURCE_DIR "/tests/mcp/node_modules";
    e.vars[6] = NULL;
    copy_from("mcp_filesystem", e.dir, "workflow.json");
    copy_from("mcp_filesystem", e.dir, "script.json");
    snprintf(path, sizeof(path), "%s/sandbox", e.dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/sandbox/notes.md", e.dir);
    assert_int_equal(mkdir(path, 0700), 0);
    w = start_worker(&e, "w", "2", NULL);
    {
        const char *argv[] = {weft_bin, "run", "workflow.json", "--executor", "amqp", "--no-trace",
                              "-q",     NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        (void)weft_test_run(argv, e.vars, e.dir, log, 120000);
    }
    assert_log(&e, "run.log", "tool errors: mcp_agent_filesystem:tool_error=");
    {
        const char *argv[] = {weft_bin, "run", "show", "last", NULL};
        snprintf(log, sizeof(log), "%s/show.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 60000), 0);
    }
    assert_log(&e, "show.log", "mcp_agent_filesystem:tool_error=");
    stop_worker(w);
    weft_test_rm_rf(e.dir);
}

/* Skill memory on a worker: the step that ran there is kept in the shared store, and the
 * second run's step (on the worker again) is shown it. */
static void
test_skill_memory_on_a_worker(void **state)
{
    struct env e;
    char log[700];
    pid_t w = 0;

    (void)state;
    env_init(&e, "skills");
    copy_from("skills", e.dir, "workflow.json");
    copy_from("skills", e.dir, "script.json");
    w = start_worker(&e, "w", "1", NULL);
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {weft_bin, "run", "workflow.json", "--executor", "amqp", "--no-trace",
                              "-q",     NULL};
        snprintf(log, sizeof(log), "%s/run%d.log", e.dir, i);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    {
        const char *argv[] = {weft_bin, "skills", "list", "--json", NULL};
        snprintf(log, sizeof(log), "%s/skills.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 60000), 0);
    }
    assert_log(&e, "skills.log", "\"agent\": \"coder\"");
    assert_log(&e, "skills.log", "\"uses\": 1");
    stop_worker(w);
    weft_test_rm_rf(e.dir);
}

static const char slow_workflow[] =
    "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\": \"s\", "
    "\"script\": \"script.json\"}},"
    " \"supervisor\": {\"timeout_s\": 120},"
    " \"agents\": [{\"name\": \"slow\", \"instructions\": \"Take your time.\"}],"
    " \"plan\": [{\"id\": \"s1\", \"agent\": \"slow\", \"task\": \"think\"}]}\n";
static const char slow_script[] =
    "{\"version\": 1, \"responses\": {\"slow\": {\"act\": [{\"content\": \"thought it over\", "
    "\"delay_ms\": 4000}]}}}\n";

/* SIGKILL the only worker while it runs the task: the broker delivers the task again to the
 * next worker, the run completes, and the step's result is counted once. */
static void
test_worker_killed_mid_task(void **state)
{
    struct env e;
    char wf[700], log[700], queue[300];
    pid_t a = 0, b = 0, run = 0;

    (void)state;
    env_init(&e, "kill");
    write_file(e.dir, "workflow.json", slow_workflow);
    write_file(e.dir, "script.json", slow_script);
    snprintf(wf, sizeof(wf), "%s/workflow.json", e.dir);
    snprintf(queue, sizeof(queue), "kill.task_dispatch_queue");
    a = start_worker(&e, "a", "1", NULL);
    {
        const char *argv[] = {weft_bin, "run", wf, "--executor", "amqp", "--no-trace", "-q", NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        run = weft_test_spawn(argv, e.vars, e.dir, log, true);
        assert_true(run > 0);
    }
    wait_started(&e, "a.log");
    kill(-a, SIGKILL);
    assert_int_equal(weft_test_wait(a, 10000), 128 + SIGKILL);
    b = start_worker(&e, "b", "1", NULL);
    assert_int_equal(weft_test_wait(run, 120000), 0);
    assert_log(&e, "run.log", "s1:slow(completed)");
    assert_log(&e, "run.log", "1 result(s), 0 duplicate(s), 1 redelivery(ies), 0 dead-lettered");
    wait_counts(queue, 0, 0);
    stop_worker(b);
    assert_log(&e, "b.log", "1 succeeded");
    weft_test_rm_rf(e.dir);
}

static const char poison_workflow[] =
    "{\"name\": \"poison\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\": \"s\", "
    "\"script\": \"script.json\"}}, \"supervisor\": {\"timeout_s\": 120},"
    " \"agents\": [{\"name\": \"noop\", \"instructions\": \"-\"}],"
    " \"plan\": [{\"id\": \"boom\", \"executor\": \"command\", \"task\": \"crash the worker\","
    " \"argv\": [\"sh\", \"-c\", \"kill -9 $PPID; sleep 5\"], \"timeout_s\": 30}]}\n";

/* A task that kills every worker that runs it goes to the dead-letter queue after the
 * delivery limit, and its step fails with a note that says so. */
static void
test_poison_task_dead_lettered(void **state)
{
    struct env e;
    char wf[700], log[700];
    pid_t run = 0, w = 0;
    int status = -1;
    long deadline = 0;
    int starts = 0;

    (void)state;
    env_init(&e, "poison");
    write_file(e.dir, "workflow.json", poison_workflow);
    write_file(e.dir, "script.json", slow_script);
    snprintf(wf, sizeof(wf), "%s/workflow.json", e.dir);
    w = start_worker(&e, "p0", "1", "--max-redeliveries");
    {
        const char *argv[] = {weft_bin, "run", wf, "--executor", "amqp", "--no-trace", NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        run = weft_test_spawn(argv, e.vars, e.dir, log, true);
        assert_true(run > 0);
    }
    deadline = weft_test_now_ms() + 120000;
    while (!weft_test_has_exited(run, &status) && weft_test_now_ms() < deadline) {
        int ws = 0;
        if (weft_test_has_exited(w, &ws)) {
            char name[16];
            assert_int_equal(ws, 128 + SIGKILL); /* the poison killed it */
            snprintf(name, sizeof(name), "p%d", ++starts);
            w = start_worker(&e, name, "1", "--max-redeliveries");
        }
        weft_test_sleep_ms(100);
    }
    assert_int_equal(status, 1); /* the run failed: its only step did */
    assert_true(starts >= 2);    /* delivered more than once before the limit */
    assert_log(&e, "run.log", "dead-lettered by the broker (delivery_limit)");
    assert_log(&e, "run.log", "1 dead-lettered");
    wait_counts("poison.task_dead_letter_queue", 1, 0); /* kept for an operator */
    kill(w, SIGTERM);
    (void)weft_test_wait(w, 60000);
    weft_test_rm_rf(e.dir);
}

/* Publish @p body to the dispatch exchange as a foreign producer would. */
static void
publish_raw(const char *prefix, const char *body, const char *type)
{
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    amqp_basic_properties_t p;
    char exchange[256];

    assert_int_equal(amqp_socket_open(sock, "127.0.0.1", (int)weft_test_amqp_port(broker)),
                     AMQP_STATUS_OK);
    assert_int_equal(
        amqp_login(conn, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest").reply_type,
        AMQP_RESPONSE_NORMAL);
    amqp_channel_open(conn, 1);
    assert_int_equal(amqp_get_rpc_reply(conn).reply_type, AMQP_RESPONSE_NORMAL);
    memset(&p, 0, sizeof(p));
    if (type != NULL) {
        p._flags = AMQP_BASIC_TYPE_FLAG;
        p.type = amqp_cstring_bytes(type);
    }
    snprintf(exchange, sizeof(exchange), "%sagent_exchange", prefix);
    assert_int_equal(amqp_basic_publish(conn, 1, amqp_cstring_bytes(exchange),
                                        amqp_cstring_bytes("task"), 0, 0, &p,
                                        amqp_cstring_bytes(body)),
                     AMQP_STATUS_OK);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

/* Garbage, a foreign JSON message and a task message with a bad field go to the dead letters;
 * the worker stays up and runs the next real run. */
static void
test_malformed_messages_rejected(void **state)
{
    struct env e;
    char wf[700], log[700];
    pid_t w = 0;

    (void)state;
    env_init(&e, "bad");
    write_file(e.dir, "workflow.json", slow_workflow);
    write_file(e.dir, "script.json",
               "{\"version\": 1, \"responses\": {\"slow\": {\"act\": [{\"content\": \"ok\"}]}}}\n");
    snprintf(wf, sizeof(wf), "%s/workflow.json", e.dir);
    w = start_worker(&e, "w", "2", NULL);
    wait_consumer("bad.task_dispatch_queue"); /* the worker declared the topology */
    publish_raw("bad.", "\x01\x02 not json", NULL);
    publish_raw("bad.", "{\"hello\": \"world\"}", "something.else");
    publish_raw("bad.",
                "{\"type\": \"weft.task.v1\", \"run_id\": \"r\", \"task_id\": \"nope\", \"seq\": 1,"
                " \"attempt\": 1, \"step_id\": \"s\", \"kind\": \"agent\", \"agent\": \"a\","
                " \"task\": \"t\"}",
                "weft.task.v1");
    wait_counts("bad.task_dead_letter_queue", 3, 0);
    assert_false(weft_test_has_exited(w, NULL));
    assert_log(&e, "w.log", "field \"task_id\": expected a UUID");
    {
        const char *argv[] = {weft_bin, "run", wf, "--executor", "amqp", "--no-trace", NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        assert_int_equal(weft_test_run(argv, e.vars, e.dir, log, 120000), 0);
    }
    assert_log(&e, "run.log", "s1:slow(completed)");
    stop_worker(w);
    assert_log(&e, "w.log", "3 rejected");
    weft_test_rm_rf(e.dir);
}

/* The broker restarts while a worker runs a task: orchestrator and worker reconnect, the run
 * completes and nothing is lost. */
static void
test_broker_restart_mid_run(void **state)
{
    struct env e;
    char wf[700], log[700], err[1024];
    pid_t w = 0, run = 0;

    (void)state;
    env_init(&e, "restart");
    write_file(e.dir, "workflow.json", slow_workflow);
    write_file(e.dir, "script.json", slow_script);
    snprintf(wf, sizeof(wf), "%s/workflow.json", e.dir);
    w = start_worker(&e, "w", "1", NULL);
    {
        const char *argv[] = {weft_bin, "run", wf, "--executor", "amqp", "--no-trace", "-q", NULL};
        snprintf(log, sizeof(log), "%s/run.log", e.dir);
        run = weft_test_spawn(argv, e.vars, e.dir, log, true);
        assert_true(run > 0);
    }
    wait_started(&e, "w.log");
    assert_int_equal(weft_test_amqp_restart(broker, err, sizeof(err)), 0);
    assert_int_equal(weft_test_wait(run, 120000), 0);
    assert_log(&e, "run.log", "s1:slow(completed)");
    assert_log(&e, "run.log", "0 dead-lettered");
    stop_worker(w);
    weft_test_rm_rf(e.dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_matches_in_process),
        cmocka_unit_test(test_wide_plan_runs_on_two_workers_at_once),
        cmocka_unit_test(test_wider_than_the_window_runs_every_step),
        cmocka_unit_test(test_mcp_agent_runs_on_a_worker),
        cmocka_unit_test(test_mcp_spans_on_a_worker_carry_the_run_attrs),
        cmocka_unit_test(test_tool_errors_on_a_worker_reach_the_summary),
        cmocka_unit_test(test_skill_memory_on_a_worker),
        cmocka_unit_test(test_worker_killed_mid_task),
        cmocka_unit_test(test_malformed_messages_rejected),
        cmocka_unit_test(test_poison_task_dead_lettered),
        cmocka_unit_test(test_broker_restart_mid_run),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

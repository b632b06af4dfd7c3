/* tests/mcp/test_mcp_oom.c - out-of-memory loops (tests/support/failalloc.h) over the MCP
 * modules that allocate from input: a server entry's parse (runtime/mcp/config.c) and
 * weft mcp serve's message handling (runtime/mcp_server/server.c), its why_failed tool over a
 * stored failed run (tools_why.c), and show_dataset, get_experiment and compare_experiments over
 * a dataset made from it and two experiments (tools_datasets.c, tools_eval.c). Each allocation in
 * turn fails:
 * the call fails cleanly (nothing half-built, nothing leaked: ASan's leak check runs this test in
 * `make test`) or succeeds, and with enough memory it succeeds.
 */
#include "runtime/mcp/config.h"
#include "support/failalloc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

static void
test_mcp_entry_parse_out_of_memory(void **state)
{
    json_t *entry = json_loads(
        "{\"command\": \"node\", \"args\": [\"server.js\", \"${HOME}\", \"--flag\"], "
        "\"env\": {\"A\": \"1\", \"TOKEN\": \"${WEFT_OOM_TOKEN:-secret-default}\"}, \"cwd\": "
        "\"sub\", \"description\": \"files\", \"model\": \"m\", \"timeout_s\": 5}",
        0, NULL);
    size_t failures = 0;
    bool is_done = false;

    (void)state;
    assert_non_null(entry);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 200 && !is_done; budget++) {
        struct weft__mcp_entry e;
        char field[64], why[128];
        bool is_ok = false;

        failalloc_budget = budget;
        is_ok =
            weft__mcp_entry_parse("fs", entry, "/tmp", &e, field, sizeof(field), why, sizeof(why));
        failalloc_budget = -1;
        if (!is_ok) {
            assert_string_equal(why, "out of memory");
            assert_null(e.cfg.argv); /* cleaned up */
            failures++;
            continue;
        }
        assert_string_equal(e.cfg.argv[2], getenv("HOME") != NULL ? getenv("HOME") : "");
        assert_string_equal(e.cfg.env[1], "TOKEN=secret-default");
        assert_string_equal(e.cfg.cwd, "/tmp/sub");
        weft__mcp_entry_cleanup(&e);
        is_done = true;
    }
    weft_set_allocator(NULL, NULL, NULL);
    json_decref(entry);
    assert_true(is_done);
    assert_true(failures > 5);
}

/* One message through a fresh server at each budget (up to @p max_budget allocations), over the
 * stores of WEFT_HOME @p home (NULL: the defaults). */
static void
oom_loop_handle_in(
    const char *dir, const char *home, long max_budget, const char *message, const char *needle)
{
    size_t failures = 0;
    bool is_done = false;
    char state[600];
    char db[600];

    snprintf(state, sizeof(state), "%s/state.db", home != NULL ? home : "");
    snprintf(db, sizeof(db), "%s/weft.db", home != NULL ? home : "");
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < max_budget && !is_done; budget++) {
        struct weft_mcp_server_options o;
        struct weft_mcp_server *srv = NULL;
        char *response = NULL;
        weft_err err = WEFT_OK;

        memset(&o, 0, sizeof(o));
        o.workflows_dir = dir;
        o.state_path = home != NULL ? state : NULL;
        o.db_path = home != NULL ? db : NULL;
        failalloc_budget = budget;
        err = weft_mcp_server_new(&o, &srv);
        if (err == WEFT_OK) {
            err = weft_mcp_server_handle(srv, message, strlen(message), &response);
        }
        failalloc_budget = -1;
        if (err == WEFT_ENOMEM) {
            assert_null(response);
            weft_mcp_server_free(srv);
            failures++;
            continue;
        }
        assert_weft_ok(err);
        assert_non_null(response);
        /* A response made while short of memory may be an error answer; the last is not. */
        if (strstr(response, needle) != NULL) {
            is_done = true;
        } else {
            failures++;
        }
        weft_mcp_text_free(response);
        weft_mcp_server_free(srv);
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    assert_true(failures > 0);
}

static void
oom_loop_handle(const char *dir, const char *message, const char *needle)
{
    oom_loop_handle_in(dir, NULL, 400, message, needle);
}

static void
test_mcp_server_handle_out_of_memory(void **state)
{
    char *dir = weft_test_mkdtemp("weft-mcp-oom-");

    (void)state;
    assert_non_null(dir);
    oom_loop_handle(dir,
                    "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", \"params\": "
                    "{\"protocolVersion\": \"2025-11-25\", \"capabilities\": {}, \"clientInfo\": "
                    "{\"name\": \"oom\", \"version\": \"1\"}}}",
                    "\"protocolVersion\":\"2025-11-25\"");
    oom_loop_handle(dir, "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/list\"}",
                    "\"why_failed\"");
    weft_test_rm_rf(dir);
    free(dir);
}

/* `weft ARGS...` in WEFT_HOME @p home, from @p dir. @return the exit status. */
static int
weft_in(const char *dir, const char *home, const char *const *args)
{
    const char *argv[16] = {WEFT_BINARY_DIR "/weft"};
    char env_home[700];
    const char *env[] = {env_home, "OTEL_*", NULL};
    size_t n = 1;

    snprintf(env_home, sizeof(env_home), "WEFT_HOME=%s", home);
    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = args[i];
    }
    return weft_test_run(argv, env, dir, NULL, 60000);
}

/* A stored failed run in WEFT_HOME @p home (in @p dir): fail.json, one command step (boom)
 * exiting 4. */
static void
make_failed_run(const char *dir, const char *home)
{
    char wf[600];
    char script[600];
    FILE *f = NULL;

    snprintf(wf, sizeof(wf), "%s/fail.json", dir);
    f = fopen(wf, "w");
    assert_non_null(f);
    fputs("{\"name\": \"fails\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\": "
          "\"m\", \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\", \"instructions\": "
          "\"A.\"}], \"plan\": [{\"id\": \"boom\", \"executor\": \"command\", \"task\": "
          "\"Fail\", \"argv\": [\"sh\", \"-c\", \"echo 'disk full' >&2; exit 4\"], "
          "\"timeout_s\": 5}]}\n",
          f);
    assert_int_equal(fclose(f), 0);
    snprintf(script, sizeof(script), "%s/script.json", dir);
    f = fopen(script, "w");
    assert_non_null(f);
    fputs("{\"version\": 1, \"responses\": {}}\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(weft_in(dir, home, (const char *const[]){"run", "-q", "--no-trace", wf, NULL}),
                     1);
}

/* why_failed over a stored failed run (a command step exiting 4): the document, the stored
 * error and the summary built at every budget, or the call fails cleanly. */
static void
test_mcp_why_failed_out_of_memory(void **state)
{
    char *dir = weft_test_mkdtemp("weft-mcp-oom-why-");
    char home[600];

    (void)state;
    assert_non_null(dir);
    snprintf(home, sizeof(home), "%s/home", dir);
    make_failed_run(dir, home);
    oom_loop_handle_in(dir, home, 20000,
                       "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/call\", "
                       "\"params\": {\"name\": \"why_failed\", \"arguments\": {\"run_id\": "
                       "\"last\"}}}",
                       "cause: step boom exited with status 4");
    weft_test_rm_rf(dir);
    free(dir);
}

/* show_dataset over a dataset made from the failed run, and compare_experiments of two
 * experiments over it (each item fails in both: unchanged). */
static void
test_mcp_eval_tools_out_of_memory(void **state)
{
    char *dir = weft_test_mkdtemp("weft-mcp-oom-eval-");
    char home[600];
    char wf[600];

    (void)state;
    assert_non_null(dir);
    snprintf(home, sizeof(home), "%s/home", dir);
    snprintf(wf, sizeof(wf), "%s/fail.json", dir);
    make_failed_run(dir, home);
    assert_int_equal(weft_in(dir, home,
                             (const char *const[]){"dataset", "create", "fails", "--from-runs",
                                                   "--status", "failed", NULL}),
                     0);
    assert_int_equal(weft_in(dir, home,
                             (const char *const[]){"eval", wf, "--dataset", "fails", "--name",
                                                   "one", "-q", NULL}),
                     0);
    assert_int_equal(weft_in(dir, home,
                             (const char *const[]){"eval", wf, "--dataset", "fails", "--name",
                                                   "two", "-q", NULL}),
                     0);
    oom_loop_handle_in(dir, home, 20000,
                       "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"tools/call\", "
                       "\"params\": {\"name\": \"show_dataset\", \"arguments\": {\"dataset\": "
                       "\"fails@1\", \"failing_only\": true}}}",
                       "\"fail_step\":\"boom\"");
    oom_loop_handle_in(dir, home, 20000,
                       "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"tools/call\", "
                       "\"params\": {\"name\": \"compare_experiments\", \"arguments\": "
                       "{\"a\": \"one\", \"b\": \"two\"}}}",
                       "\"unchanged\":1");
    oom_loop_handle_in(dir, home, 20000,
                       "{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": \"tools/call\", "
                       "\"params\": {\"name\": \"get_experiment\", \"arguments\": "
                       "{\"experiment\": \"two\"}}}",
                       "\"status\":\"failed\"");
    weft_test_rm_rf(dir);
    free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mcp_entry_parse_out_of_memory),
        cmocka_unit_test(test_mcp_server_handle_out_of_memory),
        cmocka_unit_test(test_mcp_why_failed_out_of_memory),
        cmocka_unit_test(test_mcp_eval_tools_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/serve/test_fork.c - POST /api/v1/runs/ID/fork (serve/fork.c, serve/http.c) as the
 * explorer's "fork from this step" uses it: with the token, a finished code_review run forked
 * from s2 with the step's answer set answers 202 with the fork's id, and that run completes with
 * the answer as s2's result and weft.fork.answer_override on the LLM span; a bad body (400), a
 * wrong Content-Type (415), an unknown run (404), an unknown step (400, the run's steps named),
 * a wrong token (401) are refused, and without a token configured the route is off (403, saying
 * how to start serve with one). GET /api/v1/session says whether the page may fork.
 *
 * The server is the built `weft` binary, spoken to over real HTTP on 127.0.0.1 (libcurl).
 */
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <curl/curl.h> /* curl_global_init() */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define WEFT  WEFT_BINARY_DIR "/weft"
#define TOKEN "correct-horse-battery-staple-42"
#define JSON  "Content-Type: application/json"

struct fx {
    struct serve_proc_home h;
    char state[600];
    char run_id[32];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char wf[600];
    char ws[600];
    struct weft_run_info *runs = NULL;
    size_t count = 0;

    assert_non_null(f);
    serve_proc_home_init(&f->h, "weft-serve-fork-");
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->h.dir);
    snprintf(wf, sizeof(wf), "%s/examples/code_review/workflow.json", WEFT_SOURCE_DIR);
    snprintf(ws, sizeof(ws), "%s/ws", f->h.dir);
    {
        const char *argv[] = {WEFT, "run", wf, "-q", "--workspace", ws, NULL};
        const char *env[] = {f->h.home_env, "WEFT_SERVE_TOKEN*", "WEFT_STATE_URL*", NULL};
        assert_int_equal(weft_test_run(argv, env, f->h.dir, f->h.log, 60000), 0);
    }
    assert_int_equal(weft_runs_list(f->state, 1, &runs, &count), WEFT_OK);
    assert_int_equal(count, 1);
    snprintf(f->run_id, sizeof(f->run_id), "%s", runs[0].run_id);
    weft_run_infos_free(runs, count);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    serve_proc_home_cleanup(&f->h);
    free(f);
    return 0;
}

/* Start `weft serve --addr 127.0.0.1:0 EXTRA...` (WEFT_SERVE_TOKEN unset). */
static void
start_serve(struct fx *f, const char *const *extra)
{
    serve_proc_home_start(&f->h, WEFT, "127.0.0.1:0", extra, NULL);
}

/* POST @p body to the fork route of run @p ref with @p auth and @p type headers. */
static long
post_fork(const struct fx *f,
          const char *ref,
          const char *auth,
          const char *type,
          const char *body,
          struct serve_proc_answer *a)
{
    char path[128];

    snprintf(path, sizeof(path), "/api/v1/runs/%s/fork", ref);
    serve_proc_request(f->h.port, path, auth, type, body, a);
    return a->status;
}

/* Wait (at most 30 s) for run @p id to end; @return its details (weft_run_details_free()). */
static struct weft_run_details *
wait_ended(const struct fx *f, const char *id)
{
    long deadline = weft_test_now_ms() + 30000;
    struct weft_run_details *d = NULL;

    for (;;) {
        assert_int_equal(weft_run_load(f->state, id, &d), WEFT_OK);
        if (strcmp(d->info.status, "running") != 0 || weft_test_now_ms() > deadline) {
            return d;
        }
        weft_run_details_free(d);
        weft_test_sleep_ms(50);
    }
}

static void
test_fork_route_with_token(void **state)
{
    struct fx *f = *state;
    char store[640];
    /* A span store of its own (not WEFT_HOME's): the fork's spans must land where the server
     * reads, or its page has no trace. */
    const char *args[] = {"--token", TOKEN, "--store", store, NULL};
    const char *auth = "Authorization: Bearer " TOKEN;
    static struct serve_proc_answer a;
    char fork_id[32] = "";
    char path[160];
    struct weft_run_details *d = NULL;
    const char *s2 = NULL;

    snprintf(store, sizeof(store), "%s/serve-spans.db", f->h.dir);
    start_serve(f, args);
    serve_proc_request(f->h.port, "/api/v1/session", auth, NULL, NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"can_fork\":true"));
    assert_int_equal(post_fork(f, f->run_id, auth, JSON,
                               "{\"from\": \"s2\", \"set\": {\"step.s2.answer\": "
                               "\"EDITED: bcrypt it is\"}}",
                               &a),
                     202);
    if (sscanf(a.body, "{\"run_id\":\"%31[0-9a-f]\"}", fork_id) != 1) {
        fail_msg("202 without the fork's run id: %s", a.body);
    }
    d = wait_ended(f, fork_id);
    assert_string_equal(d->info.status, "completed");
    assert_string_equal(d->info.origin_kind, "fork");
    assert_string_equal(d->info.origin_run_id, f->run_id);
    for (size_t i = 0; i < d->step_count; i++) {
        s2 = strcmp(d->steps[i].id, "s2") == 0 ? d->steps[i].result : s2;
    }
    assert_non_null(s2);
    assert_string_equal(s2, "EDITED: bcrypt it is");
    weft_run_details_free(d);
    snprintf(path, sizeof(path), "/api/v1/runs/%s/trace?limit=500", fork_id);
    serve_proc_request(f->h.port, path, auth, NULL, NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"weft.fork.answer_override\":true"));
    /* Refused as weft fork refuses, as JSON. */
    assert_int_equal(post_fork(f, f->run_id, auth, JSON, "not json", &a), 400);
    assert_non_null(strstr(a.body, "\"message\":\"the body: expected a JSON object"));
    assert_int_equal(post_fork(f, f->run_id, auth, JSON, "{\"from\": \"s2\", \"x\": 1}", &a), 400);
    assert_int_equal(post_fork(f, f->run_id, auth, JSON, "{\"from\": \"s99\"}", &a), 400);
    assert_non_null(strstr(a.body, "has no step 's99' (its steps: s1, s2, s3"));
    assert_int_equal(post_fork(f, f->run_id, auth, JSON,
                               "{\"from\": \"s2\", \"set\": {\"step.s3.task\": \"x\"}}", &a),
                     400);
    assert_non_null(strstr(a.body, "only step.s2.task and step.s2.answer"));
    assert_int_equal(
        post_fork(f, f->run_id, auth, "Content-Type: text/plain", "{\"from\": \"s2\"}", &a), 415);
    assert_int_equal(post_fork(f, f->run_id, auth, NULL, "{\"from\": \"s2\"}", &a), 415);
    assert_int_equal(post_fork(f, "ffffffffffff", auth, JSON, "{\"from\": \"s2\"}", &a), 404);
    assert_non_null(strstr(a.body, "no run 'ffffffffffff'"));
    assert_int_equal(post_fork(f, f->run_id, "Authorization: Bearer wrong-horse-battery-42", JSON,
                               "{\"from\": \"s2\"}", &a),
                     401);
    /* The browser's login cookie opens it too. The first fork's process may still be ending
     * (its run has): one fork at a time, the next is told 429 until then. */
    for (long deadline = weft_test_now_ms() + 20000;;) {
        long got =
            post_fork(f, f->run_id, "Cookie: weft_token=" TOKEN, JSON, "{\"from\": \"s2\"}", &a);
        if (got == 202 || got != 429 || weft_test_now_ms() > deadline) {
            assert_int_equal(got, 202);
            break;
        }
        assert_non_null(strstr(a.body, "another fork is running"));
        weft_test_sleep_ms(100);
    }
    /* Stopped at once: the fork just started is interrupted or done, and waited for. */
    serve_proc_home_stop(&f->h);
}

/* One fork at a time, and only while it runs: a request while the fork's process runs is told
 * 429, and once it has ended the next fork starts (a 429 once kept every later request out). */
static void
test_fork_route_busy_while_one_runs_then_free(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--token", TOKEN, NULL};
    const char *auth = "Authorization: Bearer " TOKEN;
    const char *fork_b = "{\"from\": \"a\", \"set\": {\"step.a.answer\": \"given\"}}";
    static struct serve_proc_answer a;
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    char slow[32];
    char wf[640];
    long got = 0;

    /* An original whose second step answers after 1.5 s: its fork from "a" has its run row
     * at once and its process busy for that long. */
    weft_test_write_file(f->h.dir, "slow_script.json",
                         "{\"responses\": {\"w\": {\"act\": [{\"content\": \"x\"}, "
                         "{\"content\": \"y\", \"delay_ms\": 1500}]}}}");
    weft_test_write_file(f->h.dir, "slow.json",
                         "{\"name\": \"slow\", \"models\": {\"m\": {\"provider\": "
                         "\"scripted\", \"script\": \"slow_script.json\"}}, \"agents\": "
                         "[{\"name\": \"w\"}], \"plan\": [{\"id\": \"a\", \"agent\": \"w\", "
                         "\"task\": \"1\"}, {\"id\": \"b\", \"agent\": \"w\", \"task\": \"2\", "
                         "\"depends_on\": [\"a\"]}]}");
    snprintf(wf, sizeof(wf), "%s/slow.json", f->h.dir);
    {
        const char *argv[] = {WEFT, "run", wf, "-q", NULL};
        const char *env[] = {f->h.home_env, "WEFT_SERVE_TOKEN*", "WEFT_STATE_URL*", NULL};
        assert_int_equal(weft_test_run(argv, env, f->h.dir, f->h.log, 60000), 0);
    }
    assert_int_equal(weft_runs_list(f->state, 1, &runs, &count), WEFT_OK);
    assert_int_equal(count, 1);
    snprintf(slow, sizeof(slow), "%s", runs[0].run_id);
    weft_run_infos_free(runs, count);
    start_serve(f, args);
    assert_int_equal(post_fork(f, slow, auth, JSON, fork_b, &a), 202);
    /* Its process still runs step b: the next is refused, and refused again. */
    assert_int_equal(post_fork(f, slow, auth, JSON, fork_b, &a), 429);
    assert_non_null(strstr(a.body, "another fork is running"));
    assert_int_equal(post_fork(f, slow, auth, JSON, fork_b, &a), 429);
    /* Once it has ended, a fork starts again. */
    for (long deadline = weft_test_now_ms() + 20000;;) {
        got = post_fork(f, slow, auth, JSON, fork_b, &a);
        if (got != 429 || weft_test_now_ms() > deadline) {
            break;
        }
        weft_test_sleep_ms(100);
    }
    assert_int_equal(got, 202);
    serve_proc_home_stop(&f->h);
}

static void
test_fork_route_off_without_token(void **state)
{
    struct fx *f = *state;
    static struct serve_proc_answer a;

    start_serve(f, NULL);
    serve_proc_request(f->h.port, "/api/v1/session", NULL, NULL, NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"can_fork\":false"));
    assert_int_equal(post_fork(f, f->run_id, NULL, JSON, "{\"from\": \"s2\"}", &a), 403);
    assert_non_null(strstr(a.body, "--token, --token-file or WEFT_SERVE_TOKEN"));
    serve_proc_home_stop(&f->h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fork_route_with_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_route_busy_while_one_runs_then_free, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fork_route_off_without_token, setup, teardown),
    };
    int rc = 0;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

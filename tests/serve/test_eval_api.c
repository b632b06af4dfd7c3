/* tests/serve/test_eval_api.c - `weft serve`'s datasets and experiments (serve/api_eval.c,
 * serve/http.c) as the explorer's Datasets and Experiments pages read them:
 * - GET /api/v1/datasets, /datasets/NAME, NAME@V, ?version=V, /experiments[?dataset=],
 *   /experiments/REF (a name, an id prefix) and /experiments/compare?a=&b= answer the very
 *   documents `weft dataset list|show --json` and `weft eval list|show|compare --json` print
 *   for the same store (compared parsed), and compare's counts agree with the two experiments'
 *   items; unknown names answer 404 with what to do, bad versions and refs 400, all as JSON;
 * - POST /api/v1/datasets/NAME/items with the token adds a stored run as an item (201 with the
 *   new version, which GET and `weft dataset show` then hold), "create": true makes a dataset;
 *   refused: no or a wrong token (401, counted on /metrics), a wrong Content-Type (415), a bad
 *   body, an unknown member, an unknown run or a bad name (400, the store's sentence), an
 *   unknown dataset without "create" (404); GET /api/v1/session says the page may add;
 * - without a token configured the route is off (403) and the session says so; reads still work.
 *
 * The store is made with the built `weft` (examples/support_triage: a dataset of its 30 tickets,
 * an experiment of the workflow and one of its fix, a dataset of the failed runs and a
 * --from-failure experiment over it); the server is the built `weft serve`, spoken to over real
 * HTTP on 127.0.0.1 (libcurl). Over SQLite; tests/serve_pg/test_serve_pg.c compares the read
 * routes with the CLI over a PostgreSQL state store.
 */
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <curl/curl.h> /* curl_global_init() */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define WEFT    WEFT_BINARY_DIR "/weft"
#define EXAMPLE WEFT_SOURCE_DIR "/examples/support_triage"
#define TOKEN   "correct-horse-battery-staple-42"
#define AUTH    "Authorization: Bearer " TOKEN
#define JSON    "Content-Type: application/json"

struct fx {
    struct serve_proc_home h;
    char before_id[40];
    char run_id[40]; /* a completed run of `before` */
};

static struct fx *fixture;
static char out[1 << 20];
static char err[1 << 14];

/* `weft ARGS...` on the fixture's home; its stdout into out. */
static void
weft_ok(const char *const *args)
{
    int status =
        weft_test_run_captured(WEFT, args, fixture->h.dir, out, sizeof(out), err, sizeof(err));

    if (status != 0) {
        fail_msg("weft %s %s exited %d: %s", args[0], args[1], status, err);
    }
}

static json_t *
weft_json(const char *const *args)
{
    json_t *doc = NULL;

    weft_ok(args);
    doc = json_loads(out, 0, NULL);
    if (doc == NULL) {
        fail_msg("weft %s %s printed no JSON: %.300s", args[0], args[1], out);
    }
    return doc;
}

/* `weft serve` on the fixture's home, with the token or without. */
static void
start_serve(struct fx *f, bool with_token)
{
    const char *token[] = {"--token", TOKEN, NULL};

    serve_proc_home_start(&f->h, WEFT, "127.0.0.1:0", with_token ? token : NULL, NULL);
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    json_t *doc = NULL;

    assert_non_null(f);
    fixture = f;
    serve_proc_home_init(&f->h, "weft-serve-eval-");
    weft_test_setenv("WEFT_HOME", f->h.dir);
    weft_test_setenv("WEFT_STATE_URL", NULL);
    weft_test_setenv("WEFT_SERVE_TOKEN", NULL);
    weft_test_setenv("WEFT_EXECUTOR", NULL);
    {
        const char *a[] = {"dataset", "create", "tickets", "--file", EXAMPLE "/tickets.jsonl",
                           NULL};
        weft_ok(a);
    }
    {
        const char *a[] = {
            "eval", EXAMPLE "/workflow.json", "--dataset", "tickets", "--name", "before", "-q",
            NULL};
        weft_ok(a);
    }
    {
        const char *a[] = {
            "eval", EXAMPLE "/workflow_fixed.json", "--dataset", "tickets", "--name", "after", "-q",
            NULL};
        weft_ok(a);
    }
    {
        const char *a[] = {"dataset",  "create", "refunds", "--from-runs",
                           "--status", "failed", NULL};
        weft_ok(a);
    }
    {
        const char *a[] = {"eval",
                           EXAMPLE "/workflow_fixed.json",
                           "--dataset",
                           "refunds",
                           "--from-failure",
                           "--name",
                           "refix",
                           "-q",
                           NULL};
        weft_ok(a);
    }
    {
        const char *a[] = {"eval", "show", "before", "--json", NULL};
        doc = weft_json(a);
        snprintf(f->before_id, sizeof(f->before_id), "%s",
                 json_string_value(json_object_get(doc, "id")));
        for (size_t i = 0; i < json_array_size(json_object_get(doc, "items")); i++) {
            json_t *it = json_array_get(json_object_get(doc, "items"), i);
            if (strcmp(json_string_value(json_object_get(it, "status")), "passed") == 0) {
                snprintf(f->run_id, sizeof(f->run_id), "%s",
                         json_string_value(json_object_get(it, "run_id")));
            }
        }
        json_decref(doc);
    }
    assert_true(strlen(f->before_id) == 36);
    assert_true(f->run_id[0] != '\0');
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

static struct serve_proc_answer answer;

/* serve_proc_request() into answer. One request at a time: never told 503 (the API's slots go
 * back when an answer is queued, tests/net/test_http_server.c). */
static void
request(const struct fx *f, const char *path, const char *h1, const char *h2, const char *body)
{
    serve_proc_request(f->h.port, path, h1, h2, body, &answer);
}

/* GET @p path (with the token); the body parsed. */
static json_t *
get_json(const struct fx *f, const char *path, long want_status)
{
    json_t *doc = NULL;

    request(f, path, AUTH, NULL, NULL);
    if (answer.status != want_status) {
        fail_msg("GET %s: %ld, expected %ld: %s", path, answer.status, want_status, answer.body);
    }
    doc = json_loads(answer.body, 0, NULL);
    if (doc == NULL) {
        fail_msg("GET %s: not JSON: %.300s", path, answer.body);
    }
    return doc;
}

/* GET @p path answers what `weft @p args` prints, parsed. @return the API's document. */
static json_t *
same_as_cli(const struct fx *f, const char *path, const char *const *args)
{
    json_t *api = get_json(f, path, 200);
    json_t *cli = weft_json(args);

    if (!json_equal(api, cli)) {
        fail_msg("GET %s differs from weft %s %s --json:\nAPI %.600s\nCLI %.600s", path, args[0],
                 args[1], answer.body, out);
    }
    json_decref(cli);
    return api;
}

/* An error answer: @p status and a message containing @p text. */
static void
assert_error(const char *path, long status, const char *text)
{
    json_t *doc = json_loads(answer.body, 0, NULL);
    const json_t *e = json_object_get(doc, "error");

    if (answer.status != status || json_integer_value(json_object_get(e, "status")) != status ||
        strstr(json_string_value(json_object_get(e, "message")) != NULL
                   ? json_string_value(json_object_get(e, "message"))
                   : "",
               text) == NULL) {
        fail_msg("%s: %ld %s, expected %ld with \"%s\"", path, answer.status, answer.body, status,
                 text);
    }
    json_decref(doc);
}

static void
test_eval_api_reads_are_the_cli_documents(void **state)
{
    struct fx *f = *state;
    char path[200];
    json_t *doc = NULL;

    start_serve(f, true);
    {
        const char *a[] = {"dataset", "list", "--json", NULL};
        doc = same_as_cli(f, "/api/v1/datasets", a);
        assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.datasets/v1");
        assert_int_equal(json_array_size(json_object_get(doc, "datasets")), 2);
        json_decref(doc);
    }
    {
        const char *a[] = {"dataset", "show", "refunds", "--json", NULL};
        doc = same_as_cli(f, "/api/v1/datasets/refunds", a);
        assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.dataset/v1");
        /* Items made from failed runs name their run and failing step. */
        for (size_t i = 0; i < json_array_size(json_object_get(doc, "items")); i++) {
            json_t *it = json_array_get(json_object_get(doc, "items"), i);
            assert_true(json_is_string(json_object_get(it, "run_id")));
            assert_true(json_is_string(json_object_get(it, "fail_step")));
        }
        assert_true(json_array_size(json_object_get(doc, "items")) > 0);
        json_decref(doc);
    }
    {
        const char *a[] = {"dataset", "show", "tickets@1", "--json", NULL};
        json_decref(same_as_cli(f, "/api/v1/datasets/tickets@1", a));
        json_decref(same_as_cli(f, "/api/v1/datasets/tickets?version=1", a));
    }
    {
        const char *a[] = {"eval", "list", "--json", NULL};
        doc = same_as_cli(f, "/api/v1/experiments", a);
        assert_int_equal(json_array_size(json_object_get(doc, "experiments")), 3);
        json_decref(doc);
    }
    {
        const char *a[] = {"eval", "list", "--dataset", "refunds", "--json", NULL};
        doc = same_as_cli(f, "/api/v1/experiments?dataset=refunds", a);
        assert_int_equal(json_array_size(json_object_get(doc, "experiments")), 1);
        assert_true(json_is_true(json_object_get(
            json_array_get(json_object_get(doc, "experiments"), 0), "from_failure")));
        json_decref(doc);
    }
    {
        const char *a[] = {"eval", "show", "before", "--json", NULL};
        json_t *by_name = same_as_cli(f, "/api/v1/experiments/before", a);
        snprintf(path, sizeof(path), "/api/v1/experiments/%.8s", f->before_id);
        doc = get_json(f, path, 200);
        assert_true(json_equal(doc, by_name)); /* an id prefix finds the same */
        assert_string_equal(json_string_value(json_object_get(doc, "schema")),
                            "weft.experiment/v1");
        assert_int_equal(json_array_size(json_object_get(doc, "items")), 30);
        json_decref(by_name);
        json_decref(doc);
    }
    {
        const char *a[] = {"eval", "compare", "before", "after", "--json", NULL};
        json_t *ea = get_json(f, "/api/v1/experiments/before", 200);
        json_t *eb = get_json(f, "/api/v1/experiments/after", 200);
        long fixed = 0;
        long broken = 0;
        doc = same_as_cli(f, "/api/v1/experiments/compare?a=before&b=after", a);
        /* Its counts are the items whose status changed between the two. */
        for (size_t i = 0; i < json_array_size(json_object_get(ea, "items")); i++) {
            json_t *ia = json_array_get(json_object_get(ea, "items"), i);
            for (size_t j = 0; j < json_array_size(json_object_get(eb, "items")); j++) {
                json_t *ib = json_array_get(json_object_get(eb, "items"), j);
                if (json_equal(json_object_get(ia, "item_id"), json_object_get(ib, "item_id"))) {
                    bool pa =
                        strcmp(json_string_value(json_object_get(ia, "status")), "passed") == 0;
                    bool pb =
                        strcmp(json_string_value(json_object_get(ib, "status")), "passed") == 0;
                    fixed += !pa && pb;
                    broken += pa && !pb;
                }
            }
        }
        assert_true(fixed > 0);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(doc, "counts"), "fixed")), fixed);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(doc, "counts"), "broken")), broken);
        json_decref(ea);
        json_decref(eb);
        json_decref(doc);
    }
    serve_proc_home_stop(&f->h);
}

static void
test_eval_api_unknown_and_bad_refs_are_json_errors(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *path;
        long status;
        const char *text;
    } cases[] = {
        {"/api/v1/datasets/nope", 404, "no dataset 'nope'"},
        {"/api/v1/datasets/tickets@99", 400, "dataset tickets has no version 99"},
        {"/api/v1/datasets/tickets@0", 400, "a version from 1"},
        {"/api/v1/datasets/tickets@x", 400, "a version from 1"},
        {"/api/v1/datasets/tickets?version=-1", 400, "a version from 1"},
        {"/api/v1/datasets/tickets@1?version=1", 400, "NAME@VERSION or NAME?version=V"},
        {"/api/v1/experiments/no-such-experiment", 404, "no experiment 'no-such-experiment'"},
        {"/api/v1/experiments/compare?a=before", 400, "expected ?a=EXPERIMENT&b=EXPERIMENT"},
        {"/api/v1/experiments/compare?a=before&b=nope", 404, "no experiment 'nope'"},
        {"/api/v1/datasets/tickets/x", 404, "expected /api/v1/datasets/NAME[@VERSION]"},
        {"/api/v1/experiments/before/x", 404, "expected /api/v1/experiments/REF"},
    };

    start_serve(f, true);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        request(f, cases[i].path, AUTH, NULL, NULL);
        assert_error(cases[i].path, cases[i].status, cases[i].text);
    }
    serve_proc_home_stop(&f->h);
}

static long
post_items(
    const struct fx *f, const char *name, const char *auth, const char *type, const char *body)
{
    char path[200];

    snprintf(path, sizeof(path), "/api/v1/datasets/%s/items", name);
    request(f, path, auth, type, body);
    return answer.status;
}

/* weft_serve_access_denied_total{reason="token"} as /metrics shows it. */
static double
denied_token(const struct fx *f)
{
    static struct serve_proc_answer m;
    const char *labels[] = {"reason=\"token\"", NULL};

    serve_proc_request(f->h.port, "/metrics", NULL, NULL, NULL, &m);
    assert_int_equal(m.status, 200);
    return serve_proc_sum(m.body, "weft_serve_access_denied_total", labels, NULL);
}

static void
test_eval_api_add_to_dataset_with_token(void **state)
{
    struct fx *f = *state;
    char body[200];
    json_t *doc = NULL;
    json_t *items = NULL;
    bool is_there = false;
    double denied0 = 0;

    start_serve(f, true);
    doc = get_json(f, "/api/v1/session", 200);
    assert_true(json_is_true(json_object_get(doc, "can_add_to_dataset")));
    json_decref(doc);
    doc = get_json(f, "/api/v1/datasets/refunds", 200);
    long v0 = (long)json_integer_value(json_object_get(doc, "version"));
    size_t n0 = json_array_size(json_object_get(doc, "items"));
    json_decref(doc);

    snprintf(body, sizeof(body), "{\"run_id\": \"%s\"}", f->run_id);
    assert_int_equal(post_items(f, "refunds", AUTH, JSON, body), 201);
    doc = json_loads(answer.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "dataset")), "refunds");
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), v0 + 1);
    assert_int_equal(json_integer_value(json_object_get(doc, "added")), 1);
    assert_true(json_is_false(json_object_get(doc, "created")));
    json_decref(doc);
    /* The new version holds the run, in the API and in the CLI alike. */
    {
        const char *a[] = {"dataset", "show", "refunds", "--json", NULL};
        doc = same_as_cli(f, "/api/v1/datasets/refunds", a);
    }
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), v0 + 1);
    items = json_object_get(doc, "items");
    assert_int_equal(json_array_size(items), n0 + 1);
    for (size_t i = 0; i < json_array_size(items); i++) {
        const char *rid = json_string_value(json_object_get(json_array_get(items, i), "run_id"));
        is_there = is_there || (rid != NULL && strcmp(rid, f->run_id) == 0);
    }
    assert_true(is_there);
    json_decref(doc);

    /* A new dataset with "create"; without it, 404 saying how. */
    assert_int_equal(post_items(f, "fresh", AUTH, JSON, body), 404);
    assert_error("fresh", 404, "send \"create\": true");
    snprintf(body, sizeof(body), "{\"run_id\": \"%s\", \"create\": true}", f->run_id);
    assert_int_equal(
        post_items(f, "fresh", AUTH, "Content-Type: application/json; charset=utf-8", body), 201);
    assert_non_null(strstr(answer.body, "\"version\":1"));
    assert_non_null(strstr(answer.body, "\"created\":true"));
    doc = get_json(f, "/api/v1/datasets", 200);
    assert_int_equal(json_array_size(json_object_get(doc, "datasets")), 3);
    json_decref(doc);

    /* Refused. */
    assert_int_equal(post_items(f, "refunds", AUTH, JSON, "not json"), 400);
    assert_error("not json", 400, "the body: expected a JSON object");
    assert_int_equal(post_items(f, "refunds", AUTH, JSON, "{\"run_id\": \"x\", \"y\": 1}"), 400);
    assert_error("unknown member", 400, "unknown member \"y\"");
    assert_int_equal(post_items(f, "refunds", AUTH, JSON, "{\"create\": true}"), 400);
    assert_error("no run_id", 400, "\"run_id\" must name a stored run");
    assert_int_equal(post_items(f, "refunds", AUTH, JSON, "{\"run_id\": \"ffffffffffff\"}"), 400);
    assert_error("unknown run", 400, "run ffffffffffff: no such run");
    assert_int_equal(post_items(f, "bad%20name", AUTH, JSON, body), 400);
    assert_error("bad name", 400, "dataset name 'bad name'");
    assert_int_equal(post_items(f, "refunds", AUTH, "Content-Type: text/plain", body), 415);
    assert_error("text/plain", 415, "expected Content-Type: application/json");
    assert_int_equal(post_items(f, "refunds", AUTH, NULL, body), 415);
    {
        static char big[5000];
        memset(big, ' ', sizeof(big) - 1);
        memcpy(big, body, strlen(body)); /* valid JSON, then blanks: over 4 KiB */
        assert_int_equal(post_items(f, "refunds", AUTH, JSON, big), 413);
        assert_error("4 KiB body", 413, "the body is too large");
    }
    denied0 = denied_token(f);
    assert_int_equal(post_items(f, "refunds", NULL, JSON, body), 401);
    assert_int_equal(
        post_items(f, "refunds", "Authorization: Bearer wrong-horse-battery-42", JSON, body), 401);
    assert_true(denied_token(f) >= denied0 + 2);
    /* The browser's login cookie opens it (as the page sends it). */
    assert_int_equal(post_items(f, "refunds", "Cookie: weft_token=" TOKEN, JSON, body), 201);
    assert_non_null(strstr(answer.body, "\"version\":"));
    /* Nothing the refusals sent was stored: two adds, two versions. */
    doc = get_json(f, "/api/v1/datasets/refunds", 200);
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), v0 + 2);
    json_decref(doc);
    serve_proc_home_stop(&f->h);
}

static void
test_eval_api_add_to_dataset_off_without_token(void **state)
{
    struct fx *f = *state;
    char body[200];
    json_t *doc = NULL;

    start_serve(f, false);
    request(f, "/api/v1/session", NULL, NULL, NULL);
    assert_int_equal(answer.status, 200);
    assert_non_null(strstr(answer.body, "\"can_add_to_dataset\":false"));
    snprintf(body, sizeof(body), "{\"run_id\": \"%s\", \"create\": true}", f->run_id);
    assert_int_equal(post_items(f, "refunds", NULL, JSON, body), 403);
    assert_error("no token", 403, "--token, --token-file or WEFT_SERVE_TOKEN");
    /* Reads need no token on loopback. */
    request(f, "/api/v1/experiments", NULL, NULL, NULL);
    assert_int_equal(answer.status, 200);
    doc = json_loads(answer.body, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "experiments")), 3);
    json_decref(doc);
    serve_proc_home_stop(&f->h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_api_reads_are_the_cli_documents),
        cmocka_unit_test(test_eval_api_unknown_and_bad_refs_are_json_errors),
        cmocka_unit_test(test_eval_api_add_to_dataset_off_without_token),
        cmocka_unit_test(test_eval_api_add_to_dataset_with_token),
    };
    int rc = 0;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* One store for every case (its runs take seconds under the sanitizers); the adding case
     * runs last, the others read the store as made. */
    rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}

/* tests/serve/test_api.c - the explorer's JSON API (serve/api.c) and `weft serve`'s HTTP layer
 * (serve/http.c) over stores filled by the built `weft` running scripted workflows: the runs
 * list and its filters, a run, its trace paged, why it failed (the same span as `weft mcp
 * serve`'s rule), two runs compared, the collaboration totals, clear errors; and over HTTP the
 * security headers, the embedded assets, a token (401, Bearer, the login cookie) and the
 * explorer off beyond loopback without one (403) while /metrics stays open.
 */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"
#include "report/docs.h"
#include "serve/api.h"
#include "serve/http.h"
#include "tracing/exporter.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct fx {
    char home[256];
    char state[300];
    char store[300];
    char failed[64];
    char good_a[64];
    char good_b[64];
    struct weft__api_config cfg;
};

static void
write_file(const struct fx *f, const char *name, const char *text)
{
    char path[512];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->home, name);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
}

/* `weft run FILE` (relative to the fixture's home unless absolute) in the fixture's home; the
 * new run's id into @p id. */
static void
run_weft(struct fx *f, const char *file, int want_status, char *id, size_t id_len)
{
    char path[512];
    char out[512];
    const char *args[] = {"run", path, "-q", "--json", NULL};
    FILE *in = NULL;
    json_t *doc = NULL;
    char buf[1 << 16];
    size_t n = 0;

    snprintf(path, sizeof(path), "%s%s%s", file[0] == '/' ? "" : f->home, file[0] == '/' ? "" : "/",
             file);
    snprintf(out, sizeof(out), "%s/out.json", f->home);
    assert_int_equal(serve_proc_run(WEFT_BINARY_DIR "/weft", f->home, out, args), want_status);
    in = fopen(out, "r");
    assert_non_null(in);
    n = fread(buf, 1, sizeof(buf) - 1, in);
    buf[n] = '\0';
    fclose(in);
    doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    snprintf(id, id_len, "%s", json_string_value(json_object_get(doc, "run_id")));
    json_decref(doc);
}

/* `weft ARGS... -q --json` in the fixture's home (@p args NULL-terminated, at most 6); the new
 * run's id into @p id. */
static void
run_args(struct fx *f, const char *const *args, int want_status, char *id, size_t id_len)
{
    const char *all[10];
    char out[512];
    char buf[1 << 16];
    size_t n = 0;
    FILE *in = NULL;
    json_t *doc = NULL;

    while (args[n] != NULL && n < 6) {
        all[n] = args[n];
        n++;
    }
    all[n++] = "-q";
    all[n++] = "--json";
    all[n] = NULL;
    snprintf(out, sizeof(out), "%s/out.json", f->home);
    assert_int_equal(serve_proc_run(WEFT_BINARY_DIR "/weft", f->home, out, all), want_status);
    in = fopen(out, "r");
    assert_non_null(in);
    n = fread(buf, 1, sizeof(buf) - 1, in);
    buf[n] = '\0';
    fclose(in);
    doc = json_loads(buf, 0, NULL);
    assert_non_null(doc);
    snprintf(id, id_len, "%s", json_string_value(json_object_get(doc, "run_id")));
    json_decref(doc);
}

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->home, sizeof(f->home), "/tmp/weft-serve-api-XXXXXX");
    assert_non_null(mkdtemp(f->home));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->home);
    snprintf(f->store, sizeof(f->store), "%s/weft.db", f->home);
    f->cfg.state_path = f->state;
    f->cfg.store_path = f->store;
    write_file(
        f, "fail.json",
        "{\"name\": \"fails\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
        "\"a_script.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": \"boom\", "
        "\"executor\": \"command\", \"task\": \"explode\", \"argv\": [\"sh\", \"-c\", "
        "\"exit 4\"]}]}");
    write_file(f, "a.json",
               "{\"name\": \"pair\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"a_script.json\"}}, \"agents\": [{\"name\": \"w\"}, {\"name\": \"r\"}], \"plan\": "
               "[{\"id\": \"one\", \"agent\": \"w\", \"task\": \"write\"}, {\"id\": \"two\", "
               "\"agent\": \"r\", \"task\": \"read\", \"depends_on\": [\"one\"]}]}");
    write_file(f, "b.json",
               "{\"name\": \"pair\", \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": "
               "\"b_script.json\"}}, \"agents\": [{\"name\": \"w\"}, {\"name\": \"r\"}], \"plan\": "
               "[{\"id\": \"one\", \"agent\": \"w\", \"task\": \"write\"}, {\"id\": \"two\", "
               "\"agent\": \"r\", \"task\": \"read\", \"depends_on\": [\"one\"]}]}");
    write_file(f, "a_script.json",
               "{\"responses\": {\"w\": {\"act\": [{\"content\": \"draft\", \"usage\": "
               "{\"input_tokens\": 100, \"output_tokens\": 7}}]}, \"r\": {\"act\": "
               "[{\"content\": \"line 1\\nline 2\"}]}}}");
    write_file(f, "b_script.json",
               "{\"responses\": {\"w\": {\"act\": [{\"content\": \"draft\"}]}, \"r\": {\"act\": "
               "[{\"content\": \"line 1\\nline two\"}]}}}");
    run_weft(f, "fail.json", 1, f->failed, sizeof(f->failed));
    run_weft(f, "a.json", 0, f->good_a, sizeof(f->good_a));
    run_weft(f, "b.json", 0, f->good_b, sizeof(f->good_b));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_test_rmtree(f->home);
    free(f);
    return 0;
}

struct args {
    const char *names[4];
    const char *values[4];
};

static const char *
arg_of(void *ctx, const char *name)
{
    const struct args *a = ctx;

    for (size_t i = 0; i < 4 && a->names[i] != NULL; i++) {
        if (strcmp(a->names[i], name) == 0) {
            return a->values[i];
        }
    }
    return NULL;
}

/* GET @p path with @p args; the parsed body, the status in *status. */
static json_t *
get(const struct fx *f, const char *path, const struct args *args, unsigned *status)
{
    static const struct args none = {{NULL}, {NULL}};
    struct weft__api_request req = {path, arg_of, (void *)(args != NULL ? args : &none)};
    struct weft__api_reply reply;
    json_t *doc = NULL;

    weft__api_get(&f->cfg, &req, &reply);
    assert_non_null(reply.body);
    doc = json_loads(reply.body, 0, NULL);
    assert_non_null(doc);
    *status = reply.status;
    free(reply.body);
    return doc;
}

static void
test_api_runs_list_filters_and_run_documents(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    struct args failed_only = {{"status"}, {"failed"}};
    struct args query = {{"q", "limit"}, {"pair", "1"}};
    struct args bad = {{"limit"}, {"lots"}};
    json_t *doc = get(f, "/api/v1/runs", NULL, &status);
    char path[128];

    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.runs/v1");
    assert_int_equal(json_array_size(json_object_get(doc, "runs")), 3);
    json_decref(doc);
    doc = get(f, "/api/v1/runs", &failed_only, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "runs")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(doc, "runs"), 0), "run_id")),
                        f->failed);
    json_decref(doc);
    doc = get(f, "/api/v1/runs", &query, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "runs")), 1); /* limit 1 of the 2 */
    json_decref(doc);
    doc = get(f, "/api/v1/runs", &bad, &status);
    assert_int_equal(status, 400);
    assert_non_null(json_object_get(json_object_get(doc, "error"), "message"));
    json_decref(doc);
    /* A run: the document of `weft run show --json`. */
    snprintf(path, sizeof(path), "/api/v1/runs/%s", f->good_a);
    doc = get(f, path, NULL, &status);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.run/v1");
    assert_int_equal(json_array_size(json_object_get(doc, "steps")), 2);
    json_decref(doc);
    doc = get(f, "/api/v1/runs/ffffffffffff", NULL, &status);
    assert_int_equal(status, 404);
    json_decref(doc);
    doc = get(f, "/api/v1/nothing", NULL, &status);
    assert_int_equal(status, 404);
    json_decref(doc);
}

/* A flow run's document carries its loops as they ran (the plan graph's back-edges): the stuck
 * flow's check went back to patch as many times as the run counted flow loops, and the watchdog
 * stopped the last one; a plan run's document has none. */
static void
test_api_run_document_has_its_flow_loops(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    char id[64];
    char path[128];
    json_t *doc = NULL;
    json_t *loop = NULL;

    run_weft(f, WEFT_SOURCE_DIR "/examples/stuck_loops/flow.json", 3, id, sizeof(id));
    snprintf(path, sizeof(path), "/api/v1/runs/%s", id);
    doc = get(f, path, NULL, &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_array_size(json_object_get(doc, "flow_loops")), 1);
    loop = json_array_get(json_object_get(doc, "flow_loops"), 0);
    assert_string_equal(json_string_value(json_object_get(loop, "step")), "check");
    assert_string_equal(json_string_value(json_object_get(loop, "back_to")), "patch");
    assert_string_equal(json_string_value(json_object_get(loop, "outcome")), "stuck");
    assert_true(json_integer_value(json_object_get(loop, "taken")) > 0);
    assert_int_equal(json_integer_value(json_object_get(loop, "taken")),
                     json_integer_value(json_object_get(
                         json_object_get(json_object_get(doc, "run"), "loops"), "flow")));
    assert_null(json_object_get(doc, "flow_loops_error"));
    json_decref(doc);
    snprintf(path, sizeof(path), "/api/v1/runs/%s", f->good_a);
    doc = get(f, path, NULL, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "flow_loops")), 0);
    json_decref(doc);
    /* A span store that cannot be read is said, never read as "no loops". */
    {
        static char broken[320];
        const char *kept = f->cfg.store_path;
        const char *error = NULL;

        write_file(f, "broken.db", "this is not a span store, not even SQLite\n");
        snprintf(broken, sizeof(broken), "%s/broken.db", f->home);
        f->cfg.store_path = broken;
        snprintf(path, sizeof(path), "/api/v1/runs/%s", id);
        doc = get(f, path, NULL, &status);
        f->cfg.store_path = kept;
        assert_int_equal(status, 200);
        assert_int_equal(json_array_size(json_object_get(doc, "flow_loops")), 0);
        error = json_string_value(json_object_get(doc, "flow_loops_error"));
        assert_non_null(error);
        assert_non_null(strstr(error, "span store: "));
        json_decref(doc);
    }
}

static void
test_api_trace_is_paged_and_why_names_the_deepest_error(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    struct args page = {{"offset", "limit"}, {"1", "2"}};
    char path[128];
    json_t *doc = NULL;
    json_t *why = NULL;
    size_t total = 0;

    snprintf(path, sizeof(path), "/api/v1/runs/%s/trace", f->good_a);
    doc = get(f, path, NULL, &status);
    assert_int_equal(status, 200);
    total = (size_t)json_integer_value(json_object_get(doc, "span_count"));
    assert_true(total > 3);
    assert_int_equal(json_array_size(json_object_get(doc, "spans")), total);
    json_decref(doc);
    doc = get(f, path, &page, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "spans")), 2);
    assert_int_equal(json_integer_value(json_object_get(doc, "offset")), 1);
    assert_int_equal(json_integer_value(json_object_get(doc, "span_count")), total);
    json_decref(doc);

    /* The waterfall's compact rows, and one span whole. */
    {
        struct args wf = {{"view"}, {"waterfall"}};
        json_t *row = NULL;
        char span_path[200];
        doc = get(f, path, &wf, &status);
        assert_int_equal(status, 200);
        assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.waterfall/v1");
        assert_int_equal(json_array_size(json_object_get(doc, "spans")), total);
        row = json_array_get(json_object_get(doc, "spans"), 0);
        assert_int_equal(json_array_size(row), 7);
        assert_int_equal(json_integer_value(json_array_get(row, 1)), 0); /* the root's depth */
        assert_int_equal(json_integer_value(json_array_get(row, 3)), 0); /* it starts first */
        assert_string_equal(json_string_value(json_array_get(row, 2)), "invoke_workflow pair");
        snprintf(span_path, sizeof(span_path), "/api/v1/traces/%s/spans/%s",
                 json_string_value(json_object_get(doc, "trace_id")),
                 json_string_value(json_array_get(row, 0)));
        json_decref(doc);
        doc = get(f, span_path, NULL, &status);
        assert_int_equal(status, 200);
        assert_string_equal(json_string_value(json_object_get(doc, "name")),
                            "invoke_workflow pair");
        json_decref(doc);
        snprintf(span_path + strlen(span_path) - 16, 17, "%s", "0000000000000000");
        doc = get(f, span_path, NULL, &status);
        assert_int_equal(status, 404);
        json_decref(doc);
    }

    snprintf(path, sizeof(path), "/api/v1/runs/%s/why", f->failed);
    why = get(f, path, NULL, &status);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(why, "status")), "failed");
    assert_true(json_array_size(json_object_get(why, "path")) >= 2);
    /* The path runs from the root to the failed span; the failed step is named. */
    assert_int_equal(json_integer_value(
                         json_object_get(json_array_get(json_object_get(why, "path"), 0), "depth")),
                     0);
    assert_string_equal(
        json_string_value(
            json_object_get(json_array_get(json_object_get(why, "path"),
                                           json_array_size(json_object_get(why, "path")) - 1),
                            "span_id")),
        json_string_value(json_object_get(json_object_get(why, "failed_span"), "span_id")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(why, "failed_span"), "error_type")),
        "exit_status");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(why, "failed_steps"), 0), "id")),
                        "boom");
    json_decref(why);
}

/* GET /api/v1/runs/@p id/why. */
static json_t *
why_of(const struct fx *f, const char *id)
{
    char path[128];
    unsigned status = 0;
    json_t *why = NULL;

    snprintf(path, sizeof(path), "/api/v1/runs/%s/why", id);
    why = get(f, path, NULL, &status);
    assert_int_equal(status, 200);
    return why;
}

static const char *
member_str(const json_t *o, const char *a, const char *b)
{
    const json_t *x = json_object_get(o, a);

    return json_string_value(b != NULL ? json_object_get(x, b) : x);
}

/* Each cause weft.why/v1 names: a failed step's stored error; the budget that ran out with its
 * limit and the amount used (from the root span, or from the stored run when the trace was
 * not kept); the last model answer before the failure, the same text whether the span
 * captured it or it comes from the stored exchange; a stuck loop with its repetitions. */
static void
test_api_why_names_each_cause(void **state)
{
    struct fx *f = *state;
    char budget[64];
    char budget_cap[64];
    char dropped[64];
    char stuck[64];
    char stuck_cap[64];
    char path[512];
    json_t *why = NULL;
    json_t *cap = NULL;
    const json_t *loop = NULL;
    const json_t *reps = NULL;

    write_file(f, "budget_script.json",
               "{\"responses\": {\"w\": {\"act\": [{\"content\": \"first part\", \"usage\": "
               "{\"input_tokens\": 40, \"output_tokens\": 30}}, {\"content\": \"second part\", "
               "\"usage\": {\"input_tokens\": 40, \"output_tokens\": 30}}, {\"content\": \"third\","
               " \"usage\": {\"input_tokens\": 40, \"output_tokens\": 30}}]}}}");
    write_file(f, "budget.json",
               "{\"name\": \"budgeted\", \"models\": {\"m\": {\"provider\": \"scripted\", "
               "\"script\": \"budget_script.json\"}}, \"agents\": [{\"name\": \"w\"}], "
               "\"supervisor\": {\"max_tokens\": 100}, \"plan\": [{\"id\": \"a\", \"agent\": "
               "\"w\", \"task\": \"A\"}, {\"id\": \"b\", \"agent\": \"w\", \"task\": \"B\", "
               "\"depends_on\": [\"a\"]}, {\"id\": \"c\", \"agent\": \"w\", \"task\": \"C\", "
               "\"depends_on\": [\"b\"]}]}");
    snprintf(path, sizeof(path), "%s/budget.json", f->home);
    run_args(f, (const char *const[]){"run", path, NULL}, 1, budget, sizeof(budget));
    run_args(f, (const char *const[]){"run", path, "--capture-content", NULL}, 1, budget_cap,
             sizeof(budget_cap));
    run_args(f, (const char *const[]){"run", path, "--sampling", "0%", NULL}, 1, dropped,
             sizeof(dropped));
    run_args(
        f, (const char *const[]){"run", WEFT_SOURCE_DIR "/examples/stuck_loops/handoff.json", NULL},
        3, stuck, sizeof(stuck));
    run_args(f,
             (const char *const[]){"run", WEFT_SOURCE_DIR "/examples/stuck_loops/handoff.json",
                                   "--capture-content", NULL},
             3, stuck_cap, sizeof(stuck_cap));

    /* A command step's exit status and stderr, no model call, nothing else. */
    why = why_of(f, f->failed);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_object_get(json_array_get(json_object_get(why, "failed_steps"), 0), "error"),
            "exit_code")),
        4);
    assert_true(json_is_true(json_object_get(why, "trace_read")));
    assert_true(json_is_null(json_object_get(why, "last_answer")));
    assert_true(json_is_null(json_object_get(why, "budget")));
    assert_int_equal(json_array_size(json_object_get(why, "exceptions")), 0);
    assert_int_equal(json_array_size(json_object_get(why, "stuck_loops")), 0);
    json_decref(why);

    /* The token budget: 70 tokens a call, the second crosses 100. */
    why = why_of(f, budget);
    assert_string_equal(member_str(why, "budget", "name"), "max_tokens");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(why, "budget"), "limit")),
                     100);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(why, "budget"), "used")),
                     140);
    assert_string_equal(member_str(why, "budget", "unit"), "tokens");
    assert_string_equal(member_str(why, "budget", "from"), "span");
    assert_string_equal(member_str(why, "last_answer", "text"), "second part");
    assert_string_equal(member_str(why, "last_answer", "source"), "exchange");
    cap = why_of(f, budget_cap);
    assert_string_equal(member_str(cap, "last_answer", "text"), "second part");
    assert_string_equal(member_str(cap, "last_answer", "source"), "span");
    json_decref(cap);
    json_decref(why);
    /* Its trace dropped by tail sampling: the budget from the stored reason and totals. */
    why = why_of(f, dropped);
    assert_false(json_is_true(json_object_get(why, "trace_read")));
    assert_string_equal(member_str(why, "budget", "name"), "max_tokens");
    assert_string_equal(member_str(why, "budget", "from"), "reason");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(why, "budget"), "used")),
                     140);
    json_decref(why);

    /* The stuck loop: its repetitions, oldest first, the last where the watchdog found it; the
     * last answer the same from the stored exchanges as from the captured spans. */
    why = why_of(f, stuck);
    cap = why_of(f, stuck_cap);
    loop = json_array_get(json_object_get(why, "stuck_loops"), 0);
    reps = json_object_get(loop, "repetitions");
    assert_int_equal(json_array_size(json_object_get(why, "stuck_loops")), 1);
    assert_string_equal(json_string_value(json_object_get(loop, "kind")), "handoff");
    assert_int_equal(json_array_size(reps), 3);
    for (size_t i = 0; i < json_array_size(reps); i++) {
        assert_non_null(json_string_value(json_object_get(json_array_get(reps, i), "name")));
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(reps, 2), "span_id")),
                        json_string_value(json_object_get(loop, "span_id")));
    assert_string_equal(member_str(why, "last_answer", "source"), "exchange");
    assert_string_equal(member_str(cap, "last_answer", "source"), "span");
    assert_non_null(member_str(cap, "last_answer", "text"));
    assert_string_equal(member_str(why, "last_answer", "text"),
                        member_str(cap, "last_answer", "text"));
    assert_string_equal(member_str(why, "last_answer", "span_name"),
                        member_str(cap, "last_answer", "span_name"));
    json_decref(cap);
    json_decref(why);
}

static void
test_api_compare_and_collaboration(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    struct args pair = {{"a", "b"}, {f->good_a, f->good_b}};
    struct args missing = {{"a"}, {f->good_a}};
    json_t *doc = get(f, "/api/v1/compare", &pair, &status);
    json_t *diff = NULL;
    bool has_del = false;
    bool has_add = false;
    size_t i = 0;
    json_t *d = NULL;

    assert_int_equal(status, 200);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "first_divergence"), "step")),
        "two");
    diff = json_object_get(doc, "output_diff");
    json_array_foreach(diff, i, d)
    {
        const char *op = json_string_value(json_object_get(d, "op"));
        const char *line = json_string_value(json_object_get(d, "line"));
        has_del = has_del || (strcmp(op, "-") == 0 && strcmp(line, "line 2") == 0);
        has_add = has_add || (strcmp(op, "+") == 0 && strcmp(line, "line two") == 0);
    }
    assert_true(has_del && has_add);
    /* Tokens per step, from the traces' model calls: A's writer reported usage, B's none. */
    {
        json_t *one = json_array_get(json_object_get(doc, "steps"), 0);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(one, "a"), "input_tokens")), 100);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(one, "a"), "output_tokens")), 7);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(one, "b"), "input_tokens")), 0);
    }
    json_decref(doc);
    doc = get(f, "/api/v1/compare", &missing, &status);
    assert_int_equal(status, 400);
    json_decref(doc);

    doc = get(f, "/api/v1/metrics", NULL, &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_integer_value(json_object_get(doc, "runs")), 3);
    /* w's step feeds r's in both pair runs. */
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(doc, "handoffs"), "w"), "r")),
                     2);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(doc, "agents"), "command"), "failed")),
                     1);
    json_decref(doc);
}

/* A step's side in a compare document: @p side "a" or "b" of step @p id. */
static json_t *
cmp_side(json_t *doc, const char *id, const char *side)
{
    size_t i = 0;
    json_t *s = NULL;

    json_array_foreach(json_object_get(doc, "steps"), i, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "id")), id) == 0) {
            return side != NULL ? json_object_get(s, side) : s;
        }
    }
    fail_msg("no step %s", id);
    return NULL;
}

/* Does line diff @p diff hold a line @p op with @p text in it? */
static bool
diff_has(const json_t *diff, const char *op, const char *text)
{
    size_t i = 0;
    json_t *d = NULL;

    json_array_foreach(diff, i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "op")), op) == 0 &&
            strstr(json_string_value(json_object_get(d, "line")), text) != NULL) {
            return true;
        }
    }
    return false;
}

/* Inputs and workflows first: the pair's workflows differ (their scripts' names), and the
 * diff of their documents says where; each step's result diff. */
static void
test_api_compare_workflows_and_result_diff(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    struct args pair = {{"a", "b"}, {f->good_a, f->good_b}};
    json_t *doc = get(f, "/api/v1/compare", &pair, &status);
    json_t *wf = json_object_get(doc, "workflows");
    char hash[WEFT_RUN_SNAPSHOT_HASH_LEN];
    char *text = NULL;

    assert_int_equal(status, 200);
    assert_true(json_is_true(json_object_get(json_object_get(doc, "inputs"), "same")));
    assert_true(json_is_false(json_object_get(wf, "same")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(wf, "a"), "name")),
                        "pair");
    assert_true(json_is_true(json_object_get(json_object_get(wf, "b"), "document_kept")));
    /* The documents re-indented, so the one changed value is one changed line. */
    assert_true(diff_has(json_object_get(wf, "diff"), "-", "\"script\": \"a_script.json\""));
    assert_true(diff_has(json_object_get(wf, "diff"), "+", "\"script\": \"b_script.json\""));
    assert_true(diff_has(json_object_get(wf, "diff"), "=", "\"provider\": \"scripted\""));
    /* The hash is the workflow file's, as weft_run_workflow_load() reads it. */
    assert_weft_ok(weft_run_workflow_load(f->state, f->good_a, hash, &text));
    assert_non_null(text);
    assert_non_null(strstr(text, "a_script.json"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(wf, "a"), "hash")), hash);
    assert_int_equal(strncmp(hash, "fnv1a64:", 8), 0);
    weft_run_snapshot_text_free(text);
    text = NULL;
    assert_int_equal(weft_run_workflow_load(f->state, "no-such-run", hash, &text), WEFT_ENOTFOUND);
    assert_null(text);
    assert_int_equal(weft_run_workflow_load(f->state, NULL, hash, &text), WEFT_EINVAL);
    /* Step one's results are equal (no diff); step two's differ by a line. */
    assert_true(json_is_null(json_object_get(cmp_side(doc, "one", NULL), "result_diff")));
    assert_true(
        diff_has(json_object_get(cmp_side(doc, "two", NULL), "result_diff"), "-", "line 2"));
    assert_true(
        diff_has(json_object_get(cmp_side(doc, "two", NULL), "result_diff"), "+", "line two"));
    assert_true(
        diff_has(json_object_get(cmp_side(doc, "two", NULL), "result_diff"), "=", "line 1"));
    assert_true(json_is_false(json_object_get(cmp_side(doc, "one", "b"), "reused")));
    json_decref(doc);
}

/* Two runs of one workflow with different inputs: inputs.same false and their diff; the
 * workflows the same (one hash, no diff). */
static void
test_api_compare_inputs_differ(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    char x[64];
    char y[64];
    char path[512];
    const char *run_x[] = {"run", path, "--input", "add a login page", NULL};
    const char *run_y[] = {"run", path, "--input", "add a logout page", NULL};
    struct args pair = {{"a", "b"}, {x, y}};
    json_t *doc = NULL;
    json_t *in = NULL;
    json_t *wf = NULL;

    snprintf(path, sizeof(path), "%s/a.json", f->home);
    run_args(f, run_x, 0, x, sizeof(x));
    run_args(f, run_y, 0, y, sizeof(y));
    doc = get(f, "/api/v1/compare", &pair, &status);
    assert_int_equal(status, 200);
    in = json_object_get(doc, "inputs");
    wf = json_object_get(doc, "workflows");
    assert_true(json_is_false(json_object_get(in, "same")));
    assert_string_equal(json_string_value(json_object_get(in, "a")), "add a login page");
    assert_string_equal(json_string_value(json_object_get(in, "b")), "add a logout page");
    assert_true(diff_has(json_object_get(in, "diff"), "-", "add a login page"));
    assert_true(diff_has(json_object_get(in, "diff"), "+", "add a logout page"));
    assert_true(json_is_true(json_object_get(wf, "same")));
    assert_int_equal(json_array_size(json_object_get(wf, "diff")), 0);
    json_decref(doc);
}

/* A fork's steps taken from its original are marked reused (and carry no duration); the step it
 * ran again is not. A run that does not exist is a 404 naming the side. */
static void
test_api_compare_fork_reused_and_missing(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    char fork[64];
    const char *fork_args[] = {"fork", f->good_b, "--from", "two", NULL};
    struct args pair = {{"a", "b"}, {f->good_b, fork}};
    struct args missing = {{"a", "b"}, {f->good_a, "feedface0000"}};
    json_t *doc = NULL;
    const char *msg = NULL;

    run_args(f, fork_args, 0, fork, sizeof(fork));
    doc = get(f, "/api/v1/compare", &pair, &status);
    assert_int_equal(status, 200);
    assert_true(json_is_true(json_object_get(cmp_side(doc, "one", "b"), "reused")));
    assert_true(json_is_null(json_object_get(cmp_side(doc, "one", "b"), "duration_ns")));
    assert_true(json_is_false(json_object_get(cmp_side(doc, "one", "a"), "reused")));
    assert_true(json_is_false(json_object_get(cmp_side(doc, "two", "b"), "reused")));
    assert_true(json_is_true(json_object_get(json_object_get(doc, "workflows"), "same")));
    json_decref(doc);

    doc = get(f, "/api/v1/compare", &missing, &status);
    assert_int_equal(status, 404);
    msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
    assert_non_null(strstr(msg, "b=feedface0000"));
    assert_non_null(strstr(msg, "no such run"));
    json_decref(doc);
}

/* A span store that cannot be read is an error of the comparison (500 naming the trace), not
 * a 200 whose steps say they used no tokens. */
static void
test_api_compare_span_store_unreadable(void **state)
{
    struct fx *f = *state;
    unsigned status = 0;
    struct args pair = {{"a", "b"}, {f->good_a, f->good_b}};
    char garbage[320];
    json_t *doc = NULL;
    const char *msg = NULL;

    write_file(f, "garbage.db", "this is not a span store, not even SQLite\n");
    snprintf(garbage, sizeof(garbage), "%s/garbage.db", f->home);
    f->cfg.store_path = garbage;
    doc = get(f, "/api/v1/compare", &pair, &status);
    f->cfg.store_path = f->store;
    assert_int_equal(status, 500);
    msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "trace "));
    assert_null(json_object_get(doc, "steps"));
    json_decref(doc);
}

/* ---------------------------------------------------------------------------------------- */
/* HTTP                                                                                      */

struct http_answer {
    long status;
    char headers[4096];
    char body[8192];
    size_t hlen;
    size_t blen;
};

static size_t
on_body(char *p, size_t size, size_t n, void *user)
{
    struct http_answer *a = user;
    size_t len = size * n;
    size_t room = sizeof(a->body) - 1 - a->blen;

    memcpy(a->body + a->blen, p, len < room ? len : room);
    a->blen += len < room ? len : room;
    a->body[a->blen] = '\0';
    return len;
}

static size_t
on_header(char *p, size_t size, size_t n, void *user)
{
    struct http_answer *a = user;
    size_t len = size * n;
    size_t room = sizeof(a->headers) - 1 - a->hlen;

    memcpy(a->headers + a->hlen, p, len < room ? len : room);
    a->hlen += len < room ? len : room;
    a->headers[a->hlen] = '\0';
    return len;
}

static void http_request(unsigned port,
                         const char *path,
                         const char *header,
                         const char *post_json,
                         struct http_answer *a);

static void
http_get(unsigned port, const char *path, const char *header, struct http_answer *a)
{
    http_request(port, path, header, NULL, a);
}

static void
http_request(unsigned port,
             const char *path,
             const char *header,
             const char *post_json,
             struct http_answer *a)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = header != NULL ? curl_slist_append(NULL, header) : NULL;
    char url[256];

    if (post_json != NULL) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post_json);
    }

    memset(a, 0, sizeof(*a));
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L); /* send "/../" as it is, not resolved */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static weft_err
no_metrics(void *user_data, char **out, size_t *len)
{
    (void)user_data;
    *out = strdup("weft_up 1\n");
    *len = strlen(*out);
    return WEFT_OK;
}

static void
test_http_headers_assets_and_token(void **state)
{
    struct fx *f = *state;
    struct weft__serve_config cfg;
    struct weft__serve *srv = NULL;
    struct http_answer a;
    unsigned port = 0;

    memset(&cfg, 0, sizeof(cfg));
    cfg.addr = "127.0.0.1:0";
    cfg.api = f->cfg;
    cfg.metrics = no_metrics;
    assert_weft_ok(weft__serve_start(&cfg, &srv));
    port = weft__serve_port(srv);
    http_get(port, "/", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.headers, "Content-Security-Policy: default-src 'none'; script-src "
                                      "'self'"));
    assert_non_null(strstr(a.headers, "X-Content-Type-Options: nosniff"));
    assert_non_null(strstr(a.body, "/assets/app.js"));
    /* One bundle (esbuild): the page's code with dagre and Chart.js, their licences kept. */
    http_get(port, "/assets/app.js", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.headers, "text/javascript"));
    assert_non_null(strstr(a.body, "/assets/licenses.txt"));
    http_get(port, "/assets/licenses.txt", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.headers, "text/plain"));
    assert_non_null(strstr(a.body, "== @dagrejs/dagre "));
    assert_non_null(strstr(a.body, "Chart.js Contributors"));
    http_get(port, "/assets/dagre.min.js", NULL, &a);
    assert_int_equal(a.status, 404);
    http_get(port, "/assets/../state.db", NULL, &a);
    assert_int_equal(a.status, 404);
    http_get(port, "/api/v1/runs", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.headers, "application/json"));
    weft__serve_stop(srv);

    /* With a token: 401 without it, the Bearer header or the login cookie let in; /healthz
     * and /metrics stay open. */
    cfg.token = "correct-horse-battery-staple";
    assert_weft_ok(weft__serve_start(&cfg, &srv));
    port = weft__serve_port(srv);
    http_get(port, "/api/v1/runs", NULL, &a);
    assert_int_equal(a.status, 401);
    http_get(port, "/api/v1/runs", "Authorization: Bearer wrong-horse-battery-staple", &a);
    assert_int_equal(a.status, 401);
    http_get(port, "/api/v1/runs", "Authorization: Bearer correct-horse-battery-staple", &a);
    assert_int_equal(a.status, 200);
    http_get(port, "/?token=correct-horse-battery-staple", NULL, &a);
    assert_int_equal(a.status, 303);
    assert_non_null(strstr(a.headers, "weft_token=correct-horse-battery-staple; Path=/; HttpOnly"));
    http_get(port, "/", "Cookie: weft_token=correct-horse-battery-staple", &a);
    assert_int_equal(a.status, 200);
    http_get(port, "/healthz", NULL, &a);
    assert_int_equal(a.status, 200);
    http_get(port, "/metrics", NULL, &a);
    assert_int_equal(a.status, 200);
    weft__serve_stop(srv);

    /* Beyond loopback without a token the explorer is off (tested on loopback: the flag is
     * what the command sets for another address). */
    cfg.token = NULL;
    cfg.is_explorer_off = true;
    assert_weft_ok(weft__serve_start(&cfg, &srv));
    port = weft__serve_port(srv);
    http_get(port, "/api/v1/runs", NULL, &a);
    assert_int_equal(a.status, 403);
    http_get(port, "/", NULL, &a);
    assert_int_equal(a.status, 403);
    http_get(port, "/metrics", NULL, &a);
    assert_int_equal(a.status, 200);
    weft__serve_stop(srv);
}

/* A trace sent to `weft serve`'s OTLP ingest is in the explorer's API at once; ingest follows
 * the explorer's access rule (the token). */
static void
test_http_ingested_trace_reaches_the_explorer(void **state)
{
    struct fx *f = *state;
    struct weft__serve_config cfg;
    struct weft__serve *srv = NULL;
    struct weft__ingest *ing = NULL;
    struct weft__ingest_options io = {f->store, 0, NULL, 0};
    struct http_answer a;
    unsigned port = 0;
    static const char body[] =
        "{\"resourceSpans\": [{\"resource\": {\"attributes\": [{\"key\": \"service.name\", "
        "\"value\": {\"stringValue\": \"checkout\"}}]}, \"scopeSpans\": [{\"scope\": {\"name\": "
        "\"t\"}, \"spans\": [{\"traceId\": \"0af7651916cd43dd8448eb211c80319c\", \"spanId\": "
        "\"b7ad6b7169203331\", \"name\": \"GET /cart\", \"kind\": 2, \"startTimeUnixNano\": "
        "\"1700000000000000000\", \"endTimeUnixNano\": \"1700000000100000000\"}]}]}]}";

    assert_weft_ok(weft__ingest_new(&io, &ing));
    memset(&cfg, 0, sizeof(cfg));
    cfg.addr = "127.0.0.1:0";
    cfg.api = f->cfg;
    cfg.metrics = no_metrics;
    cfg.ingest = ing;
    cfg.token = "correct-horse-battery-staple";
    assert_weft_ok(weft__serve_start(&cfg, &srv));
    port = weft__serve_port(srv);
    http_request(port, "/v1/traces", NULL, body, &a);
    assert_int_equal(a.status, 401);
    http_request(port, "/v1/traces", "Authorization: Bearer correct-horse-battery-staple", body,
                 &a);
    assert_int_equal(a.status, 200);
    http_get(port, "/api/v1/traces/0af7651916cd43dd8448eb211c80319c",
             "Authorization: Bearer correct-horse-battery-staple", &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"GET /cart\""));
    assert_non_null(strstr(a.body, "\"checkout\""));
    weft__serve_stop(srv);
    weft__ingest_free(ing);
}

/* A page of whole spans is at most 10,000 spans, whatever `limit` asks: a reader cannot make
 * the server build a document of 100,000 whole spans (it did). The waterfall's compact rows
 * still go to 100,000, and the client reads on from offset + the spans returned. */
static void
test_api_whole_span_pages_are_capped(void **state)
{
    struct fx *f = *state;
    struct weft__ingest *ing = NULL;
    struct weft__ingest_options io = {f->store, 0, NULL, 0};
    struct weft__ingest_request ireq;
    struct weft__http_reply reply;
    struct weft__buf body;
    struct args all = {{"limit"}, {"100000"}};
    struct args next = {{"limit", "offset"}, {"100000", "10000"}};
    struct args wf = {{"limit", "view"}, {"100000", "waterfall"}};
    unsigned status = 0;
    json_t *doc = NULL;
    const size_t spans = 10050;

    weft__buf_init(&body, 0);
    assert_weft_ok(
        weft__buf_append_str(&body, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["));
    for (size_t i = 0; i < spans; i++) {
        assert_weft_ok(weft__buf_printf(&body,
                                        "%s{\"traceId\":\"5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e\","
                                        "\"spanId\":\"%016zx\",\"name\":\"s\"}",
                                        i > 0 ? "," : "", i + 1));
    }
    assert_weft_ok(weft__buf_append_str(&body, "]}]}]}"));
    assert_weft_ok(weft__ingest_new(&io, &ing));
    memset(&ireq, 0, sizeof(ireq));
    ireq.method = "POST";
    ireq.content_type = "application/json";
    ireq.body = body.data;
    ireq.len = body.len;
    weft__ingest_handle(ing, &ireq, &reply);
    assert_int_equal(reply.status, 200);
    if (reply.free_body) {
        weft__free(reply.body);
    }
    weft__ingest_free(ing);
    weft__buf_cleanup(&body);
    doc = get(f, "/api/v1/traces/5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e", &all, &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_array_size(json_object_get(doc, "spans")), 10000);
    assert_int_equal(json_integer_value(json_object_get(doc, "span_count")), spans);
    json_decref(doc);
    doc = get(f, "/api/v1/traces/5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e", &next, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "spans")), spans - 10000);
    json_decref(doc);
    doc = get(f, "/api/v1/traces/5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e", &wf, &status);
    assert_int_equal(json_array_size(json_object_get(doc, "spans")), spans);
    json_decref(doc);
}

/* Live and peak bytes of weft's own allocations (the span store's arenas among them), each
 * block prefixed with its size. Single-threaded: weft__api_get() runs on this thread. */
static size_t counted_live;
static size_t counted_peak;

static void *
counted_malloc(size_t n)
{
    size_t *p = malloc(n + 16);

    if (p == NULL) {
        return NULL;
    }
    *p = n;
    counted_live += n;
    counted_peak = counted_live > counted_peak ? counted_live : counted_peak;
    return (char *)p + 16;
}

static void
counted_free(void *q)
{
    size_t *p = q != NULL ? (size_t *)(void *)((char *)q - 16) : NULL;

    if (p != NULL) {
        counted_live -= *p;
        free(p);
    }
}

static void *
counted_realloc(void *q, size_t n)
{
    size_t *p = q != NULL ? (size_t *)(void *)((char *)q - 16) : NULL;
    size_t old = p != NULL ? *p : 0;
    size_t *grown = realloc(p, n + 16);

    if (grown == NULL) {
        return NULL;
    }
    *grown = n;
    counted_live = counted_live - old + n;
    counted_peak = counted_live > counted_peak ? counted_live : counted_peak;
    return (char *)grown + 16;
}

#define BIG_TRACE       "b16b16b16b16b16b16b16b16b16b16b1"
#define BIG_TRACE_SPANS 20000

/* A trace of 20,000 spans, each with a 2 KB attribute (40 MB of attributes in all): a root,
 * 200 agents, 99 tool calls under each, every 7th with an event, every 11th failed. */
static void
write_big_trace(const struct fx *f)
{
    static char blob[2049];
    static const struct weft_attr ev_attrs[] = {
        {"weft.stuck_loop.kind", {WEFT_VALUE_STRING, 7, {.str = "handoff"}}},
    };
    struct weft_exporter *ex = NULL;
    struct weft_attr attrs[2];
    struct weft_event_data event = {0, "weft.stuck_loop", ev_attrs, 1, 0};
    struct weft_span_data batch[500];
    const struct weft_span_data *ptrs[500];
    uint64_t t0 = 1700000000000000000ull;

    memset(blob, 'x', sizeof(blob) - 1);
    attrs[0] = weft_attr_str("gen_ai.prompt", blob);
    attrs[1] = weft_attr_str("weft.step.id", "step");
    assert_weft_ok(weft_store_exporter_new(f->store, &ex));
    for (size_t from = 0; from < BIG_TRACE_SPANS; from += 500) {
        struct weft_export_result result = {0};

        for (size_t k = 0; k < 500; k++) {
            size_t i = from + k;
            struct weft_span_data *s = &batch[k];
            size_t parent = i == 0 ? 0 : i <= 200 ? 0 : 1 + (i - 201) / 99;

            memset(s, 0, sizeof(*s));
            memcpy(s->trace_id, "\xb1\x6b\x16\xb1\x6b\x16\xb1\x6b\x16\xb1\x6b\x16\xb1\x6b\x16\xb1",
                   WEFT_TRACE_ID_SIZE);
            s->span_id[0] = 0x5a;
            s->span_id[6] = (uint8_t)((i + 1) >> 8);
            s->span_id[7] = (uint8_t)(i + 1);
            s->span_id[5] = (uint8_t)((i + 1) >> 16);
            if (i > 0) {
                s->has_parent = true;
                s->parent_span_id[0] = 0x5a;
                s->parent_span_id[5] = (uint8_t)((parent + 1) >> 16);
                s->parent_span_id[6] = (uint8_t)((parent + 1) >> 8);
                s->parent_span_id[7] = (uint8_t)(parent + 1);
            }
            s->name = i == 0 ? "invoke_workflow big" : i <= 200 ? "invoke_agent coder" : "tool";
            s->start_time_ns = t0 + (uint64_t)(BIG_TRACE_SPANS - i) * 1000;
            s->end_time_ns = s->start_time_ns + (i == 0 ? 1000000000ull : 500);
            if (i == 0) {
                s->start_time_ns = t0;
            }
            s->attrs = attrs;
            s->attr_count = 2;
            if (i % 7 == 3) {
                event.time_ns = s->start_time_ns;
                s->events = &event;
                s->event_count = 1;
            }
            if (i % 11 == 5) {
                s->status_code = WEFT_STATUS_ERROR;
                s->status_message = "failed";
            }
            ptrs[k] = s;
        }
        assert_weft_ok(ex->ops->export_batch(ex->self, ptrs, 500,
                                             weft_monotonic_ns() + 60000000000ull, &result));
    }
    weft_exporter_free(ex);
}

/* GET the whole-span page of BIG_TRACE at @p offset of @p limit spans; the peak of weft's
 * allocations while it was answered into *peak. */
static json_t *
get_big_page(const struct fx *f, const char *offset, const char *limit, size_t *peak)
{
    struct args a = {{"offset", "limit"}, {offset, limit}};
    unsigned status = 0;
    json_t *doc = NULL;

    counted_live = 0;
    counted_peak = 0;
    assert_weft_ok(weft_set_allocator(counted_malloc, counted_realloc, counted_free));
    doc = get(f, "/api/v1/traces/" BIG_TRACE, &a, &status);
    weft_set_allocator(NULL, NULL, NULL);
    assert_int_equal(status, 200);
    assert_int_equal(counted_live, 0);
    *peak = counted_peak;
    return doc;
}

/* A page of whole spans costs memory for the page, not the trace: the API loaded the whole
 * trace to cut a page from it (over 40 MB of weft's allocations for this one, hundreds of MB for
 * a large real trace, per request), and now orders the trace from its outline and reads only
 * the page's rows whole. The documents are the ones cut from the whole load. */
static void
test_api_whole_span_page_reads_only_the_page(void **state)
{
    struct fx *f = *state;
    struct weft_store *store = NULL;
    struct weft_trace *full = NULL;
    const char *pages[][2] = {
        {"0", "100"}, {"10000", "100"}, {"19950", "100"}, {"20000", "100"}, {"0", "100000"}};
    size_t peak = 0;

    write_big_trace(f);
    assert_weft_ok(weft_store_open(f->store, &store));
    assert_weft_ok(weft_store_load_trace(store, BIG_TRACE, &full));
    weft_store_close(store);
    assert_int_equal(weft_trace_span_count(full), BIG_TRACE_SPANS);
    for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++) {
        size_t offset = strtoul(pages[p][0], NULL, 10);
        size_t limit = strtoul(pages[p][1], NULL, 10);
        json_t *doc = get_big_page(f, pages[p][0], pages[p][1], &peak);
        json_t *want = weft__doc_trace(full, NULL, NULL, offset, limit < 10000 ? limit : 10000);

        assert_non_null(want);
        /* Beyond weft trace show's document the API says where the trace came from: service,
         * resource and what of it was left out, and run_id only for a weft run's trace (absent
         * rather than null). */
        assert_true(json_is_object(json_object_get(doc, "resource")));
        assert_true(json_is_integer(json_object_get(doc, "resource_dropped")));
        json_object_del(doc, "service");
        json_object_del(doc, "resource");
        json_object_del(doc, "resource_dropped");
        if (json_object_get(doc, "run_id") == NULL &&
            json_is_null(json_object_get(want, "run_id"))) {
            json_object_del(want, "run_id");
        }
        if (!json_equal(doc, want)) {
            char *got_text = json_dumps(doc, JSON_COMPACT);

            fail_msg("page %s+%s differs from the whole load's: %.300s", pages[p][0], pages[p][1],
                     got_text);
        }
        assert_int_equal(json_integer_value(json_object_get(doc, "span_count")), BIG_TRACE_SPANS);
        json_decref(want);
        json_decref(doc);
        /* The whole trace holds 40 MB of attributes; the page at most 10,000 spans' worth
         * (20 MB) and the outline ~200 bytes a span (4 MB). */
        if (limit <= 100) {
            assert_true(peak < (8u << 20));
        } else {
            assert_true(peak < (32u << 20));
        }
    }
    weft_trace_free(full);
}

/* One GET on a thread, with no assertion (cmocka's are not for threads). */
struct reader {
    unsigned port;
    const char *path;
    CURLcode rc;
    long status;
    bool has_retry_after;
    atomic_int *done;
};

static size_t
reader_body(char *data, size_t size, size_t n, void *user_data)
{
    (void)data;
    (void)user_data;
    return size * n;
}

static size_t
reader_header(char *data, size_t size, size_t n, void *user_data)
{
    struct reader *r = user_data;

    if (size * n >= 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        r->has_retry_after = true;
    }
    return size * n;
}

static void *
reader_run(void *arg)
{
    struct reader *r = arg;
    CURL *c = curl_easy_init();
    char url[256];

    r->rc = CURLE_FAILED_INIT;
    if (c != NULL) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", r->port, r->path);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, reader_body);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, reader_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
        r->rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_easy_cleanup(c);
    }
    atomic_fetch_add(r->done, 1);
    return NULL;
}

#define READERS 4

/* The reported fault: readers of a locked span store held both of the server's two threads
 * (5 s each, SQLite's busy timeout) and /healthz waited 5.2 s behind them. Now two reads are
 * admitted, the others are answered 503 with Retry-After at once and counted on /metrics,
 * and /healthz answers while the admitted ones wait. */
static void
test_http_reads_of_a_locked_store_leave_healthz_answering(void **state)
{
    struct fx *f = *state;
    struct weft__serve_config cfg;
    struct weft__serve *srv = NULL;
    struct reader readers[READERS];
    pthread_t threads[READERS];
    atomic_int done = 0;
    struct http_answer health;
    struct http_answer m;
    char path[128];
    sqlite3 *db = NULL;
    uint64_t deadline = 0;
    uint64_t t0 = 0;
    uint64_t health_ms = 0;
    int refused_early = 0;
    size_t n503 = 0;

    memset(&cfg, 0, sizeof(cfg));
    cfg.addr = "127.0.0.1:0";
    cfg.api = f->cfg;
    cfg.metrics = no_metrics;
    assert_weft_ok(weft__serve_start(&cfg, &srv));
    /* A writer that keeps the store to itself (exclusive locking mode): every reader waits
     * for SQLite's busy timeout. */
    assert_int_equal(sqlite3_open(f->store, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE", NULL, NULL, NULL),
        SQLITE_OK);
    snprintf(path, sizeof(path), "/api/v1/runs/%s/trace", f->good_a);
    for (size_t i = 0; i < READERS; i++) {
        readers[i] = (struct reader){weft__serve_port(srv), path, 0, 0, false, &done};
        assert_int_equal(pthread_create(&threads[i], NULL, reader_run, &readers[i]), 0);
    }
    deadline = weft__monotonic_ns() + 4000000000ull; /* under the store's 5 s busy timeout */
    while (atomic_load(&done) < READERS - WEFT__API_MAX_ACTIVE && weft__monotonic_ns() < deadline) {
        weft__sleep_ms(5);
    }
    refused_early = atomic_load(&done);
    t0 = weft__monotonic_ns();
    http_get(weft__serve_port(srv), "/healthz", NULL, &health);
    health_ms = (weft__monotonic_ns() - t0) / 1000000u;
    print_message("/healthz answered in %llu ms\n", (unsigned long long)health_ms);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    for (size_t i = 0; i < READERS; i++) {
        pthread_join(threads[i], NULL);
    }
    http_get(weft__serve_port(srv), "/metrics", NULL, &m);
    weft__serve_stop(srv);
    assert_int_equal(refused_early, READERS - WEFT__API_MAX_ACTIVE);
    assert_int_equal(health.status, 200);
    assert_true(health_ms < 1000);
    for (size_t i = 0; i < READERS; i++) {
        assert_int_equal(readers[i].rc, CURLE_OK);
        assert_true(readers[i].status == 200 || readers[i].status == 503);
        if (readers[i].status == 503) {
            assert_true(readers[i].has_retry_after);
            n503++;
        }
    }
    assert_int_equal(n503, READERS - WEFT__API_MAX_ACTIVE);
    assert_non_null(
        strstr(m.body, "weft_http_requests_refused_total{reason=\"busy\",route=\"/api/v1/\"} 2"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_api_runs_list_filters_and_run_documents, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_api_why_names_each_cause, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_trace_is_paged_and_why_names_the_deepest_error,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_compare_and_collaboration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_compare_workflows_and_result_diff, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_api_compare_inputs_differ, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_compare_fork_reused_and_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_compare_span_store_unreadable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_run_document_has_its_flow_loops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_headers_assets_and_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_whole_span_pages_are_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api_whole_span_page_reads_only_the_page, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_reads_of_a_locked_store_leave_healthz_answering,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_ingested_trace_reaches_the_explorer, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/runtime/test_experiment_runner.c - the experiment runner's pool (runtime/experiment/
 * runner.h) over the test's own items: examples/support_triage's refunds forked from their
 * failing step with the fixed workflow pass, each with fewer LLM calls than a full run (from the
 * stored exchanges), and what the forks saved is counted; 1,000 items of a one-command workflow
 * run with memory that does not grow with the item count (peak RSS of 200 vs 1,000 items);
 * items whose run cannot start or whose scoring fails are errored, never passed, and an
 * aborted experiment reports it. */
#include "runtime/experiment/runner.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#define TICKETS 30

struct fx {
    char dir[64];
    char state[128];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-exp-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static struct weft_workflow *
load(const char *rel)
{
    char path[512];
    struct weft_workflow *wf = NULL;

    snprintf(path, sizeof(path), "%s/%s", WEFT_SOURCE_DIR, rel);
    assert_int_equal(weft_workflow_load(path, &wf, NULL), WEFT_OK);
    return wf;
}

/* The test's items: a fixed array, or @p synthetic generated ones (nothing stored). */
struct items {
    struct weft__exp_item *items; /* borrowed strings, copied per page */
    size_t count;
    size_t synthetic;
    /* What put() saw. */
    pthread_mutex_t lock;
    size_t puts;
    size_t passed;
    size_t errored;
    char first_error[256]; /* the first errored item's error */
    char *run_ids[TICKETS];
    char *item_ids[TICKETS];
};

static char *
dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static weft_err
page(void *user, size_t offset, size_t max, struct weft__exp_item *out, size_t *count)
{
    struct items *it = user;
    size_t n = 0;
    size_t total = it->synthetic != 0 ? it->synthetic : it->count;

    for (size_t i = offset; i < total && n < max; i++, n++) {
        char id[32];

        if (it->synthetic != 0) {
            snprintf(id, sizeof(id), "item-%zu", i);
            out[n].id = strdup(id);
            out[n].input = strdup("\"ping\"");
            continue;
        }
        out[n].id = dup_or_null(it->items[i].id);
        out[n].input = dup_or_null(it->items[i].input);
        out[n].run_id = dup_or_null(it->items[i].run_id);
        out[n].fail_step = dup_or_null(it->items[i].fail_step);
    }
    *count = n;
    return WEFT_OK;
}

static weft_err
put(void *user,
    const struct weft__exp_item *item,
    const struct weft__exp_result *r,
    char *err,
    size_t err_len)
{
    struct items *it = user;

    (void)err;
    (void)err_len;
    pthread_mutex_lock(&it->lock);
    if (it->synthetic == 0 && it->puts < TICKETS) {
        it->run_ids[it->puts] = dup_or_null(r->run_id);
        it->item_ids[it->puts] = strdup(item->id);
    }
    it->puts++;
    it->passed += r->outcome == WEFT_EXPERIMENT_PASSED ? 1 : 0;
    if (r->outcome == WEFT_EXPERIMENT_ERRORED && it->errored++ == 0) {
        snprintf(it->first_error, sizeof(it->first_error), "%s",
                 r->error != NULL ? r->error : "(none)");
    }
    pthread_mutex_unlock(&it->lock);
    return WEFT_OK;
}

static void
items_cleanup(struct items *it)
{
    for (size_t i = 0; i < TICKETS; i++) {
        free(it->run_ids[i]);
        free(it->item_ids[i]);
    }
    pthread_mutex_destroy(&it->lock);
}

static size_t
exchanges(const char *state, const char *run_id)
{
    struct weft_run_exchange *ex = NULL;
    size_t count = 0;

    assert_int_equal(weft_run_exchanges_load(state, run_id, &ex, &count), WEFT_OK);
    weft_run_exchanges_free(ex, count);
    return count;
}

/* The 30 tickets run with the original workflow: the ids of the 8 that failed at route, as
 * items from failure (JSON-quoted inputs). */
static size_t
failed_tickets(const struct fx *f, struct weft__exp_item *items, char **keep)
{
    struct weft_workflow *wf = load("examples/support_triage/workflow.json");
    char path[512];
    char line[1024];
    FILE *in = NULL;
    size_t n = 0;
    size_t runs = 0;

    snprintf(path, sizeof(path), "%s/examples/support_triage/tickets.jsonl", WEFT_SOURCE_DIR);
    in = fopen(path, "r");
    assert_non_null(in);
    while (fgets(line, sizeof(line), in) != NULL) {
        json_t *doc = json_loads(line, 0, NULL);
        struct weft_run_options ro;
        struct weft_run_result *r = NULL;
        char error[256] = "";

        assert_non_null(doc);
        memset(&ro, 0, sizeof(ro));
        ro.state_path = f->state;
        ro.input = json_string_value(json_object_get(doc, "input"));
        assert_int_equal(weft_run(wf, &ro, &r, error, sizeof(error)), WEFT_OK);
        runs++;
        if (r->status == WEFT_RUN_FAILED) {
            keep[n] = json_dumps(json_object_get(doc, "input"), JSON_ENCODE_ANY);
            items[n].id = r->run_id; /* the item's id: its run's, for the test */
            items[n].input = keep[n];
            items[n].run_id = r->run_id;
            items[n].fail_step = (char *)"route";
            r->run_id = NULL; /* kept by the item */
            n++;
        }
        weft_run_result_free(r);
        json_decref(doc);
    }
    fclose(in);
    weft_workflow_free(wf);
    assert_int_equal(runs, TICKETS);
    return n;
}

static void
test_from_failure_forks_at_the_failing_step(void **state)
{
    const struct fx *f = *state;
    struct weft__exp_item items[TICKETS];
    char *keep[TICKETS];
    struct items it;
    struct weft__exp_io io;
    struct weft_experiment_options o;
    struct weft_experiment_report rep;
    struct weft_workflow *fixed = NULL;
    char err[256] = "";
    size_t n = 0;

    memset(items, 0, sizeof(items));
    memset(keep, 0, sizeof(keep));
    n = failed_tickets(f, items, keep);
    assert_int_equal(n, 8);
    fixed = load("examples/support_triage/workflow_fixed.json");
    memset(&it, 0, sizeof(it));
    pthread_mutex_init(&it.lock, NULL);
    it.items = items;
    it.count = n;
    memset(&io, 0, sizeof(io));
    io.page = page;
    io.put = put;
    io.user = &it;
    io.total = n;
    io.experiment = "00000000-0000-4000-8000-000000000001";
    io.dataset_version = "1";
    memset(&o, 0, sizeof(o));
    o.state_path = f->state;
    o.workflow = fixed;
    o.dataset = "refunds";
    o.name = "fix";
    o.concurrency = 3;
    o.from_failure = true;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(weft__exp_run(&o, &io, &rep, err, sizeof(err)), WEFT_OK);
    assert_int_equal(rep.items, 8);
    assert_int_equal(rep.passed, 8);
    assert_int_equal(rep.forked, 8);
    assert_int_equal(it.puts, 8);
    /* Each fork made one LLM call (reply) where a full run makes two (classify, reply); the
     * reused classify is what it saved. */
    assert_int_equal(rep.llm_calls, 8);
    assert_int_equal(rep.saved_llm_calls, 8);
    assert_true(rep.saved_tokens > 0);
    for (size_t i = 0; i < 8; i++) {
        struct weft_run_details *d = NULL;

        assert_non_null(it.run_ids[i]);
        assert_int_equal(exchanges(f->state, it.run_ids[i]), 1);
        assert_int_equal(weft_run_load(f->state, it.run_ids[i], &d), WEFT_OK);
        assert_string_equal(d->info.status, "completed");
        assert_string_equal(d->info.origin_kind, "fork");
        assert_string_equal(d->info.origin_run_id, it.item_ids[i]);
        weft_run_details_free(d);
    }
    /* Without --from-failure the same items run from the start: two calls each. */
    o.from_failure = false;
    items_cleanup(&it);
    memset(&it, 0, sizeof(it));
    pthread_mutex_init(&it.lock, NULL);
    it.items = items;
    it.count = n;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(weft__exp_run(&o, &io, &rep, err, sizeof(err)), WEFT_OK);
    assert_int_equal(rep.passed, 8);
    assert_int_equal(rep.forked, 0);
    assert_int_equal(rep.llm_calls, 16);
    assert_int_equal(exchanges(f->state, it.run_ids[0]), 2);
    items_cleanup(&it);
    for (size_t i = 0; i < n; i++) {
        free(items[i].id);
        free(keep[i]);
    }
    weft_workflow_free(fixed);
}

static long
peak_rss_kb(void)
{
    FILE *in = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;

    assert_non_null(in);
    while (fgets(line, sizeof(line), in) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtol(line + 6, NULL, 10);
        }
    }
    fclose(in);
    return kb;
}

static void
run_synthetic(const struct fx *f, const struct weft_workflow *wf, size_t count)
{
    struct items it;
    struct weft__exp_io io;
    struct weft_experiment_options o;
    struct weft_experiment_report rep;
    char err[256] = "";

    memset(&it, 0, sizeof(it));
    pthread_mutex_init(&it.lock, NULL);
    it.synthetic = count;
    memset(&io, 0, sizeof(io));
    io.page = page;
    io.put = put;
    io.user = &it;
    io.total = count;
    io.experiment = "00000000-0000-4000-8000-000000000002";
    memset(&o, 0, sizeof(o));
    o.state_path = f->state;
    o.workflow = wf;
    o.dataset = "pings";
    o.concurrency = 4;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(weft__exp_run(&o, &io, &rep, err, sizeof(err)), WEFT_OK);
    assert_int_equal(rep.items, count);
    assert_int_equal(rep.passed, count);
    assert_int_equal(it.puts, count);
    items_cleanup(&it);
}

/* A workflow of one command step (`true`) that always completes. */
static struct weft_workflow *
tiny_workflow(const struct fx *f)
{
    char path[256];
    FILE *out = NULL;
    struct weft_workflow *wf = NULL;

    snprintf(path, sizeof(path), "%s/tiny_script.json", f->dir);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs("{\"version\": 1, \"responses\": {}}\n", out);
    fclose(out);
    snprintf(path, sizeof(path), "%s/tiny.json", f->dir);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs("{\"name\": \"tiny\", \"models\": {\"s\": {\"provider\": \"scripted\", \"model\": \"s\", "
          "\"script\": \"tiny_script.json\"}}, \"agents\": [{\"name\": \"a\", \"instructions\": "
          "\"x\"}], \"plan\": [{\"id\": \"t\", \"executor\": \"command\", \"task\": \"nothing\", "
          "\"argv\": [\"true\"]}]}\n",
          out);
    fclose(out);
    assert_int_equal(weft_workflow_load(path, &wf, NULL), WEFT_OK);
    return wf;
}

static void
test_a_thousand_items_in_flat_memory(void **state)
{
    const struct fx *f = *state;
    struct weft_workflow *wf = NULL;
    long after_200 = 0;
    long after_1000 = 0;

    wf = tiny_workflow(f);
    run_synthetic(f, wf, 200);
    after_200 = peak_rss_kb();
    run_synthetic(f, wf, 1000);
    after_1000 = peak_rss_kb();
    print_message("peak RSS: %ld KiB after 200 items, %ld KiB after 1,000 more\n", after_200,
                  after_1000);
    /* Five times the items, and the peak grows by less than 8 MiB (SQLite's cache, allocator
     * arenas): nothing is kept per item. */
    assert_true(after_1000 - after_200 < 8 * 1024);
    weft_workflow_free(wf);
}

/* A run function standing for an executor that cannot reach its workers. */
static weft_err
unreachable_run(const struct weft_workflow *workflow,
                const struct weft_run_options *options,
                struct weft_run_result **out,
                char *error,
                size_t error_len,
                void *user_data)
{
    (void)workflow;
    (void)options;
    (void)user_data;
    *out = NULL;
    snprintf(error, error_len, "the broker cannot be reached");
    return WEFT_EIO;
}

/* Scoring that cannot decide (the evaluators ran out of memory). */
static weft_err
failing_score(void *user,
              const struct weft__exp_item *item,
              const struct weft_run_result *result,
              struct weft__exp_verdict *out)
{
    (void)user;
    (void)item;
    (void)result;
    out->outcome = WEFT_EXPERIMENT_PASSED; /* must not be taken for the item's outcome */
    return WEFT_ENOMEM;
}

/* An item whose run cannot start, or whose result cannot be scored, is errored, never passed;
 * an experiment aborted before its items ran says so and has no result for them. */
static void
test_items_that_cannot_run_or_be_scored_are_errored(void **state)
{
    const struct fx *f = *state;
    struct weft_workflow *wf = tiny_workflow(f);
    volatile sig_atomic_t abort_flag = 0;
    struct items it;
    struct weft__exp_io io;
    struct weft_experiment_options o;
    struct weft_experiment_report rep;
    char err[256] = "";

    memset(&it, 0, sizeof(it));
    pthread_mutex_init(&it.lock, NULL);
    it.synthetic = 5;
    memset(&io, 0, sizeof(io));
    io.page = page;
    io.put = put;
    io.user = &it;
    io.total = 5;
    io.experiment = "00000000-0000-4000-8000-000000000003";
    memset(&o, 0, sizeof(o));
    o.state_path = f->state;
    o.workflow = wf;
    o.dataset = "pings";
    o.concurrency = 2;
    o.run = unreachable_run;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(weft__exp_run(&o, &io, &rep, err, sizeof(err)), WEFT_OK);
    assert_int_equal(rep.items, 5);
    assert_int_equal(rep.errored, 5);
    assert_int_equal(rep.passed + rep.failed, 0);
    assert_int_equal(it.passed, 0);
    assert_int_equal(it.errored, 5);
    assert_string_equal(it.first_error, "the broker cannot be reached");
    assert_false(rep.is_aborted);

    /* The runs complete, the scoring fails. */
    items_cleanup(&it);
    memset(&it, 0, sizeof(it));
    pthread_mutex_init(&it.lock, NULL);
    it.synthetic = 3;
    io.total = 3;
    io.score = failing_score;
    o.run = NULL;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(weft__exp_run(&o, &io, &rep, err, sizeof(err)), WEFT_OK);
    assert_int_equal(rep.items, 3);
    assert_int_equal(rep.errored, 3);
    assert_int_equal(rep.passed, 0);
    assert_int_equal(it.errored, 3);
    if (strstr(it.first_error, "could not score") == NULL) {
        fail_msg("first error: %s", it.first_error);
    }

    /* Aborted before anything ran: no item has a result and the report says aborted. */
    items_cleanup(&it);
    memset(&it, 0, sizeof(it));
    pthread_mutex_init(&it.lock, NULL);
    it.synthetic = 3;
    io.score = NULL;
    abort_flag = 1;
    o.abort_flag = &abort_flag;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(weft__exp_run(&o, &io, &rep, err, sizeof(err)), WEFT_OK);
    assert_true(rep.is_aborted);
    assert_int_equal(rep.items, 0);
    assert_int_equal(rep.passed, 0);
    assert_int_equal(it.puts, 0);
    items_cleanup(&it);
    weft_workflow_free(wf);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_from_failure_forks_at_the_failing_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_thousand_items_in_flat_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_items_that_cannot_run_or_be_scored_are_errored, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* cli/eval_show.c - `weft eval list|show|compare`: experiments read back from the state store
 * (include/weft/dataset.h), as a table or one JSON document (schema weft.experiment/v1,
 * weft.experiments/v1, weft.experiment_compare/v1). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#include <weft/dataset.h>

/* An experiment with its items. */
struct exp {
    struct weft_experiment e;
    struct weft_experiment_item *items;
    size_t count;
    json_t *summary; /* the stored summary, {} when none */
};

static void
exp_cleanup(struct exp *x)
{
    weft_experiment_cleanup(&x->e);
    weft_experiment_items_free(x->items, x->count);
    json_decref(x->summary);
    memset(x, 0, sizeof(*x));
}

/* Find @p ref (an id, a prefix of 4+ characters, or a name: its newest experiment) and load it.
 * @return CLI_EXIT_OK or CLI_EXIT_FAIL after saying why. */
static int
exp_load(const char *state, const char *ref, struct exp *x)
{
    char id[37];
    weft_err err = weft_experiment_resolve(state, ref, id);

    memset(x, 0, sizeof(*x));
    if (err == WEFT_ENOTFOUND || err == WEFT_EINVAL) {
        fprintf(stderr, "weft eval: %s: %s (weft eval list shows them)\n", ref,
                err == WEFT_EINVAL ? "names several experiments" : "no such experiment");
        return CLI_EXIT_FAIL;
    }
    if (err != WEFT_OK) {
        fprintf(stderr, "weft eval: cannot list the experiments: %s\n", weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    err = weft_experiment_load(state, id, &x->e, &x->items, &x->count);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft eval: experiment %s: %s\n", ref, weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    x->summary = x->e.summary != NULL ? json_loads(x->e.summary, 0, NULL) : NULL;
    if (!json_is_object(x->summary)) {
        json_decref(x->summary);
        x->summary = json_object();
    }
    return CLI_EXIT_OK;
}

static double
num(const json_t *summary, const char *key)
{
    return json_number_value(json_object_get(summary, key));
}

/* Sums over the items (what compare's deltas are made of). */
struct sums {
    size_t items;
    size_t passed;
    uint64_t tokens;
    double cost;
    uint64_t duration_ns;
    uint64_t loops;
};

static void
sums_of(const struct exp *x, struct sums *s)
{
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < x->count; i++) {
        const struct weft_experiment_item *it = &x->items[i];

        s->items++;
        s->passed += strcmp(it->status, "passed") == 0 ? 1 : 0;
        s->tokens += it->tokens;
        s->cost += it->cost_usd;
        s->duration_ns += it->duration_ns;
        s->loops += it->loops;
    }
}

static json_t *
item_json(const struct weft_experiment_item *it)
{
    json_t *scores = it->scores != NULL ? json_loads(it->scores, 0, NULL) : NULL;

    return json_pack("{s:s, s:s?, s:s, s:o, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:s?}", "item_id",
                     it->item_id, "run_id", it->run_id, "status", it->status, "scores",
                     scores != NULL ? scores : json_array(), "tokens", (json_int_t)it->tokens,
                     "cost_usd", it->cost_usd, "duration_ns", (json_int_t)it->duration_ns, "loops",
                     (json_int_t)it->loops, "stuck_loops", (json_int_t)it->stuck_loops,
                     "corrections", (json_int_t)it->corrections, "llm_calls",
                     (json_int_t)it->llm_calls, "error", it->error);
}

static json_t *
exp_json(const struct exp *x, bool with_items)
{
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:b, s:s, s:I, s:I}", "schema",
                  "weft.experiment/v1", "id", x->e.id, "name", x->e.name, "dataset", x->e.dataset,
                  "dataset_version", (json_int_t)x->e.dataset_version, "workflow", x->e.workflow,
                  "from_failure", x->e.from_failure, "status", x->e.status, "started_ns",
                  (json_int_t)x->e.started_ns, "ended_ns", (json_int_t)x->e.ended_ns);
    json_t *items = with_items ? json_array() : NULL;

    if (doc == NULL) {
        return NULL;
    }
    json_object_set(doc, "summary", x->summary);
    for (size_t i = 0; items != NULL && i < x->count; i++) {
        json_array_append_new(items, item_json(&x->items[i]));
    }
    if (items != NULL) {
        json_object_set_new(doc, "items", items);
    }
    return doc;
}

static void
print_table(const struct exp *x)
{
    const json_t *s = x->summary;
    char dur[32];

    cli_format_duration((uint64_t)num(s, "duration_ns"), dur, sizeof(dur));
    printf("experiment %s  %s\n", x->e.id, x->e.status);
    printf("  name         ");
    cli_put_clean(stdout, x->e.name, 100);
    printf("\n  workflow     ");
    cli_put_clean(stdout, x->e.workflow, 100);
    printf("\n  dataset      ");
    cli_put_clean(stdout, x->e.dataset, 100);
    printf("@%llu%s\n", (unsigned long long)x->e.dataset_version,
           x->e.from_failure ? "  (from failure)" : "");
    printf("  items        %.0f   passed %.0f   failed %.0f   errored %.0f\n", num(s, "items"),
           num(s, "passed"), num(s, "failed"), num(s, "errored"));
    printf("  pass rate    %.1f%%\n", 100.0 * num(s, "pass_rate"));
    printf("  mean reward  %.3f\n", num(s, "mean_reward"));
    printf("  cost         $%.6f\n", num(s, "cost_usd"));
    printf("  tokens       %.0f\n", num(s, "tokens"));
    printf("  LLM calls    %.0f\n", num(s, "llm_calls"));
    printf("  duration     %s\n", dur);
    printf("  loops        %.0f   stuck loops %.0f   corrections %.0f\n", num(s, "loops"),
           num(s, "stuck_loops"), num(s, "corrections"));
    if (x->e.from_failure) {
        printf("  forked       %.0f item(s) from their failing step\n", num(s, "forked"));
        printf("  saved        %.0f LLM call(s), %.0f tokens, $%.6f against full runs\n",
               num(s, "saved_llm_calls"), num(s, "saved_tokens"), num(s, "saved_cost_usd"));
    }
}

int
cli_eval_print(const char *state, const char *id, bool is_json)
{
    struct exp x;
    int status = exp_load(state, id, &x);

    if (status != CLI_EXIT_OK) {
        return status;
    }
    if (is_json) {
        status = cli_json_print(exp_json(&x, true));
    } else {
        print_table(&x);
        for (size_t i = 0; i < x.count && i < 20; i++) {
            const struct weft_experiment_item *it = &x.items[i];

            if (strcmp(it->status, "passed") != 0) {
                printf("  %-8s item %.8s  run %s", it->status, it->item_id,
                       it->run_id != NULL ? it->run_id : "-");
                if (it->error != NULL) {
                    fputs("  ", stdout);
                    cli_put_clean(stdout, it->error, 80);
                }
                fputc('\n', stdout);
            }
        }
    }
    exp_cleanup(&x);
    return status;
}

static int
eval_list(const char *state, const char *dataset, bool is_json)
{
    struct weft_experiment *list = NULL;
    size_t count = 0;
    json_t *arr = is_json ? json_array() : NULL;
    weft_err err = weft_experiments_list(state, dataset, &list, &count);

    if (err != WEFT_OK) {
        fprintf(stderr, "weft eval list: %s\n", weft_strerror(err));
        json_decref(arr);
        return CLI_EXIT_FAIL;
    }
    if (!is_json) {
        printf("%-36s  %-24s  %-20s  %-10s  %s\n", "ID", "NAME", "DATASET", "STATUS", "PASS RATE");
    }
    for (size_t i = 0; i < count; i++) {
        json_t *s = list[i].summary != NULL ? json_loads(list[i].summary, 0, NULL) : NULL;

        if (is_json) {
            json_array_append_new(
                arr, json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:b, s:o}", "id", list[i].id, "name",
                               list[i].name, "dataset", list[i].dataset, "dataset_version",
                               (json_int_t)list[i].dataset_version, "workflow", list[i].workflow,
                               "status", list[i].status, "from_failure", list[i].from_failure,
                               "summary", s != NULL ? s : json_object()));
            continue;
        }
        char ds[2 * WEFT_DATASET_NAME_MAX];

        printf("%-36s  ", list[i].id);
        printf("%*s  ", (int)(24 - cli_put_clean(stdout, list[i].name, 24)), "");
        snprintf(ds, sizeof(ds), "%s@%llu", list[i].dataset,
                 (unsigned long long)list[i].dataset_version);
        printf("%-20s  %-10s  ", ds, list[i].status);
        if (s != NULL) {
            printf("%.1f%% of %.0f\n", 100.0 * num(s, "pass_rate"), num(s, "items"));
        } else {
            printf("-\n");
        }
        json_decref(s);
    }
    weft_experiments_free(list, count);
    return is_json ? cli_json_print(json_pack("{s:s, s:o}", "schema", "weft.experiments/v1",
                                              "experiments", arr))
                   : CLI_EXIT_OK;
}

static const struct weft_experiment_item *
find_item(const struct exp *x, const char *item_id)
{
    for (size_t i = 0; i < x->count; i++) {
        if (strcmp(x->items[i].item_id, item_id) == 0) {
            return &x->items[i];
        }
    }
    return NULL;
}

/* fixed, broken or unchanged (an item in only one of them: added / removed). */
static const char *
change_of(const struct weft_experiment_item *a, const struct weft_experiment_item *b)
{
    bool was = a != NULL && strcmp(a->status, "passed") == 0;
    bool is = b != NULL && strcmp(b->status, "passed") == 0;

    if (a == NULL) {
        return "added";
    }
    if (b == NULL) {
        return "removed";
    }
    return was == is ? "unchanged" : (is ? "fixed" : "broken");
}

static json_t *
deltas(const struct exp *a, const struct exp *b)
{
    struct sums sa;
    struct sums sb;

    sums_of(a, &sa);
    sums_of(b, &sb);
    return json_pack("{s:f, s:f, s:f, s:I, s:I, s:I}", "pass_rate",
                     num(b->summary, "pass_rate") - num(a->summary, "pass_rate"), "mean_reward",
                     num(b->summary, "mean_reward") - num(a->summary, "mean_reward"), "cost_usd",
                     sb.cost - sa.cost, "tokens", (json_int_t)sb.tokens - (json_int_t)sa.tokens,
                     "duration_ns", (json_int_t)sb.duration_ns - (json_int_t)sa.duration_ns,
                     "loops", (json_int_t)sb.loops - (json_int_t)sa.loops);
}

/* Every item of A then those only in B, the changed ones first; counts by change. */
static json_t *
compare_items(const struct exp *a, const struct exp *b, json_t *counts)
{
    json_t *changed = json_array();
    json_t *same = json_array();

    for (size_t pass = 0; pass < 2; pass++) {
        const struct exp *x = pass == 0 ? a : b;

        for (size_t i = 0; i < x->count; i++) {
            const struct weft_experiment_item *ia = pass == 0 ? &x->items[i] : NULL;
            const struct weft_experiment_item *ib =
                pass == 0 ? find_item(b, x->items[i].item_id) : &x->items[i];
            const char *c = NULL;

            if (pass == 1 && find_item(a, x->items[i].item_id) != NULL) {
                continue;
            }
            c = change_of(ia, ib);
            json_object_set_new(counts, c,
                                json_integer(json_integer_value(json_object_get(counts, c)) + 1));
            json_array_append_new(strcmp(c, "unchanged") == 0 ? same : changed,
                                  json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s?}", "item_id",
                                            x->items[i].item_id, "change", c, "a_status",
                                            ia != NULL ? ia->status : NULL, "b_status",
                                            ib != NULL ? ib->status : NULL, "a_run_id",
                                            ia != NULL ? ia->run_id : NULL, "b_run_id",
                                            ib != NULL ? ib->run_id : NULL));
        }
    }
    json_array_extend(changed, same);
    json_decref(same);
    return changed;
}

static void
print_compare(const struct exp *a, const struct exp *b, const json_t *doc)
{
    const json_t *c = json_object_get(doc, "counts");
    const json_t *d = json_object_get(doc, "deltas");
    const json_t *items = json_object_get(doc, "items");
    size_t i = 0;
    json_t *it = NULL;
    char dur[32];
    double dns = num(d, "duration_ns");

    cli_format_duration((uint64_t)(dns < 0 ? -dns : dns), dur, sizeof(dur));
    printf("A %s  ", a->e.id);
    cli_put_clean(stdout, a->e.name, 60);
    printf("\nB %s  ", b->e.id);
    cli_put_clean(stdout, b->e.name, 60);
    printf("\n  fixed %lld   broken %lld   unchanged %lld",
           json_integer_value(json_object_get(c, "fixed")),
           json_integer_value(json_object_get(c, "broken")),
           json_integer_value(json_object_get(c, "unchanged")));
    if (json_object_get(c, "added") != NULL || json_object_get(c, "removed") != NULL) {
        printf("   added %lld   removed %lld", json_integer_value(json_object_get(c, "added")),
               json_integer_value(json_object_get(c, "removed")));
    }
    printf("\n  pass rate %+.1f%%   mean reward %+.3f   cost %+.6f   tokens %+.0f   "
           "duration %s%s   loops %+.0f\n",
           100.0 * num(d, "pass_rate"), num(d, "mean_reward"), num(d, "cost_usd"), num(d, "tokens"),
           dns < 0 ? "-" : "+", dur, num(d, "loops"));
    json_array_foreach(items, i, it)
    {
        const char *change = json_string_value(json_object_get(it, "change"));
        const char *ra = json_string_value(json_object_get(it, "a_run_id"));
        const char *rb = json_string_value(json_object_get(it, "b_run_id"));

        if (strcmp(change, "unchanged") == 0) {
            break; /* the changed ones come first */
        }
        printf("  %-9s item %.8s  A run %s  B run %s\n", change,
               json_string_value(json_object_get(it, "item_id")), ra != NULL ? ra : "-",
               rb != NULL ? rb : "-");
    }
}

static int
eval_compare(const char *state, const char *ra, const char *rb, bool is_json)
{
    struct exp a;
    struct exp b;
    json_t *counts = NULL;
    json_t *doc = NULL;
    int status = exp_load(state, ra, &a);

    if (status != CLI_EXIT_OK) {
        return status;
    }
    status = exp_load(state, rb, &b);
    if (status != CLI_EXIT_OK) {
        exp_cleanup(&a);
        return status;
    }
    counts = json_pack("{s:i, s:i, s:i}", "fixed", 0, "broken", 0, "unchanged", 0);
    doc = json_pack("{s:s, s:o, s:o}", "schema", "weft.experiment_compare/v1", "a",
                    exp_json(&a, false), "b", exp_json(&b, false));
    if (doc != NULL && counts != NULL) {
        json_object_set_new(doc, "items", compare_items(&a, &b, counts));
        json_object_set(doc, "counts", counts);
        json_object_set_new(doc, "deltas", deltas(&a, &b));
    }
    json_decref(counts);
    if (is_json) {
        status = cli_json_print(doc);
    } else {
        if (doc != NULL) {
            print_compare(&a, &b, doc);
        }
        status = doc != NULL ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        json_decref(doc);
    }
    exp_cleanup(&a);
    exp_cleanup(&b);
    return status;
}

int
cli_eval_read(int argc, char **argv)
{
    const char *state = NULL;
    const char *dataset = NULL;
    bool is_json = false;
    bool is_help = false;
    char *positional[2];
    size_t count = 0;
    const struct cli_option options[] = {
        {"state", 0, true, false, &state, NULL},
        {"dataset", 0, true, false, &dataset, NULL},
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    const char *cmd = argv[0];
    size_t want = strcmp(cmd, "list") == 0 ? 0 : (strcmp(cmd, "show") == 0 ? 1 : 2);

    if (cli_parse("eval", argc, argv, options, sizeof(options) / sizeof(options[0]), positional, 2,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_eval_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != want) {
        fprintf(stderr, "weft eval %s: expected %s\n", cmd,
                want == 0   ? "no argument"
                : want == 1 ? "one EXPERIMENT (an id or a name)"
                            : "two experiments A B (ids or names)");
        return CLI_EXIT_USAGE;
    }
    if (want == 0) {
        return eval_list(state, dataset, is_json);
    }
    if (want == 1) {
        return cli_eval_print(state, positional[0], is_json);
    }
    return eval_compare(state, positional[0], positional[1], is_json);
}

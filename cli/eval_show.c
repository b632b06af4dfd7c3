/* cli/eval_show.c - `weft eval list|show|compare`: experiments read back from the state store
 * (include/weft/dataset.h), as a table or one JSON document (schema weft.experiment/v1,
 * weft.experiments/v1, weft.experiment_compare/v1). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#include <weft/dataset.h>

#include "runtime/dataset/exp_load.h"

/* Find @p ref (an id, a prefix of 4+ characters, or a name: its newest experiment) and load it.
 * @return CLI_EXIT_OK or CLI_EXIT_FAIL after saying why. */
static int
exp_load(const char *state, const char *ref, struct weft__exp *x)
{
    weft_err err = weft__exp_load(state, ref, x);

    if (err == WEFT_ENOTFOUND || err == WEFT_EINVAL) {
        fprintf(stderr, "weft eval: %s: %s (weft eval list shows them)\n", ref,
                err == WEFT_EINVAL ? "names several experiments" : "no such experiment");
    } else if (err != WEFT_OK) {
        fprintf(stderr, "weft eval: experiment %s: %s\n", ref, weft_strerror(err));
    }
    if (err != WEFT_OK) {
        weft__exp_cleanup(x);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static double
num(const json_t *summary, const char *key)
{
    return weft__exp_num(summary, key);
}

static void
print_table(const struct weft__exp *x)
{
    const json_t *s = x->summary;
    char dur[32];

    cli_format_duration((uint64_t)num(s, "duration_ns"), dur, sizeof(dur));
    printf("experiment %s  %s\n", x->e.id, x->e.status);
    printf("  name         ");
    cli_put_clean(stdout, x->e.name, 100);
    printf("\n  workflow     ");
    cli_put_clean(stdout, x->e.workflow, 100);
    if (x->e.workflow_hash != NULL) {
        printf("  (%s)", x->e.workflow_hash);
    }
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
    struct weft__exp x;
    int status = exp_load(state, id, &x);

    if (status != CLI_EXIT_OK) {
        return status;
    }
    if (is_json) {
        status = cli_json_print(weft__doc_experiment(&x, true));
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
    weft__exp_cleanup(&x);
    return status;
}

static int
eval_list(const char *state, const char *dataset, bool is_json)
{
    struct weft_experiment *list = NULL;
    size_t count = 0;
    weft_err err = weft_experiments_list(state, dataset, &list, &count);

    if (err != WEFT_OK) {
        fprintf(stderr, "weft eval list: %s\n", weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    if (is_json) {
        int status = cli_json_print(weft__doc_experiments(list, count));

        weft_experiments_free(list, count);
        return status;
    }
    printf("%-36s  %-24s  %-20s  %-10s  %s\n", "ID", "NAME", "DATASET", "STATUS", "PASS RATE");
    for (size_t i = 0; i < count; i++) {
        json_t *s = list[i].summary != NULL ? json_loads(list[i].summary, 0, NULL) : NULL;
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
    return CLI_EXIT_OK;
}

static void
print_compare(const struct weft__exp *a, const struct weft__exp *b, const json_t *doc)
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
    struct weft__exp a;
    struct weft__exp b;
    json_t *doc = NULL;
    int status = exp_load(state, ra, &a);

    if (status != CLI_EXIT_OK) {
        return status;
    }
    status = exp_load(state, rb, &b);
    if (status != CLI_EXIT_OK) {
        weft__exp_cleanup(&a);
        return status;
    }
    doc = weft__doc_experiment_compare(&a, &b);
    if (is_json) {
        status = cli_json_print(doc);
    } else {
        if (doc != NULL) {
            print_compare(&a, &b, doc);
        }
        status = doc != NULL ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        json_decref(doc);
    }
    weft__exp_cleanup(&a);
    weft__exp_cleanup(&b);
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

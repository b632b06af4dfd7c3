/* cli/why_cmd.c - `weft run why RUN`: why a run failed, in the terminal, from the weft.why/v1
 * document the explorer's "Why did it fail?" panel reads (report/why.c builds it), so both say
 * the same: the failing span and the path to it, each failed step's stored error, exception
 * events, the last model answer before the failure, stuck loops with their repetitions and
 * the budget that ran out. --json prints the document itself. */
#include "cli.h"
#include "report/why.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

static const char *
get_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* "name (id)" of a span member of the document, cleaned. */
static void
put_span(const char *name, const char *id)
{
    cli_put_clean(stdout, name != NULL ? name : "?", 80);
    printf(" (%s)", id != NULL ? id : "?");
}

/* A value of a stored error's field: text as a block under its label, anything else as JSON. */
static void
put_field(const char *key, const json_t *value, int indent)
{
    if (json_is_string(value) && json_string_length(value) > 0) {
        const char *text = json_string_value(value);

        printf("%*s%s:\n", indent, "", key);
        cli_put_block(stdout, text, indent + 2);
    } else if (!json_is_null(value) && !json_is_string(value)) {
        char *dumped = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);

        printf("%*s%s: ", indent, "", key);
        cli_put_block(stdout, dumped != NULL ? dumped : "?", 0);
        free(dumped);
    }
}

static void
print_header(const json_t *doc)
{
    const json_t *failed = json_object_get(doc, "failed_span");
    const json_t *path = json_object_get(doc, "path");
    size_t i = 0;
    const json_t *p = NULL;

    printf("run %s %s", get_str(doc, "run_id"), get_str(doc, "status"));
    if (get_str(doc, "reason") != NULL) {
        printf(": ");
        cli_put_clean(stdout, get_str(doc, "reason"), 160);
    }
    printf("\n");
    if (json_is_object(failed)) {
        printf("  failing span: ");
        put_span(get_str(failed, "name"), get_str(failed, "span_id"));
        if (get_str(failed, "error_type") != NULL) {
            printf(" [%s]", get_str(failed, "error_type"));
        }
        if (get_str(failed, "status_message") != NULL) {
            printf(": ");
            cli_put_clean(stdout, get_str(failed, "status_message"), 160);
        }
        printf("\n  path:");
        json_array_foreach(path, i, p)
        {
            printf("%s", i > 0 ? " > " : " ");
            cli_put_clean(stdout, get_str(p, "name"), 60);
        }
        printf("\n");
    } else if (get_str(doc, "status") != NULL && strcmp(get_str(doc, "status"), "completed") == 0) {
        printf("  nothing failed\n");
    } else if (get_str(doc, "trace_id") == NULL) {
        printf("  (the run was not traced: no failing span)\n");
    } else if (!json_is_true(json_object_get(doc, "trace_read"))) {
        printf(
            "  (its trace is not in the span store: tail sampling dropped it, or no store\n"
            "   exporter was on; the steps' stored errors and the budget below still say why)\n");
    } else {
        printf("  no span of its trace has status ERROR\n");
    }
}

static void
print_failed_steps(const json_t *doc)
{
    const json_t *steps = json_object_get(doc, "failed_steps");
    size_t i = 0;
    const json_t *s = NULL;

    if (json_array_size(steps) == 0) {
        return;
    }
    printf("\nFailed steps:\n");
    json_array_foreach(steps, i, s)
    {
        const json_t *error = json_object_get(s, "error");
        const json_t *code = json_object_get(error, "exit_code");
        const char *key = NULL;
        const json_t *value = NULL;

        printf("  %s (%s) failed", get_str(s, "id"),
               get_str(s, "executor") != NULL ? get_str(s, "executor") : "agent");
        if (get_str(s, "error_type") != NULL) {
            printf(" [%s]", get_str(s, "error_type"));
        }
        if (json_integer_value(json_object_get(s, "attempts")) > 1) {
            printf(" after %lld attempts",
                   (long long)json_integer_value(json_object_get(s, "attempts")));
        }
        printf(":\n");
        if (json_is_integer(code)) {
            printf("    exit status %lld\n", (long long)json_integer_value(code));
        } else if (json_is_true(json_object_get(error, "timed_out"))) {
            printf("    timed out\n");
        } else if (get_str(s, "feedback") != NULL) {
            cli_put_block(stdout, get_str(s, "feedback"), 4);
        }
        if (json_is_string(error)) {
            cli_put_block(stdout, json_string_value(error), 4);
        }
        json_object_foreach((json_t *)(uintptr_t)error, key, value)
        {
            if (strcmp(key, "exit_code") != 0 && strcmp(key, "error_type") != 0 &&
                strcmp(key, "timed_out") != 0) {
                put_field(strcmp(key, "stderr_tail") == 0   ? "stderr (last lines)"
                          : strcmp(key, "stdout_tail") == 0 ? "stdout (last lines)"
                                                            : key,
                          value, 4);
            }
        }
    }
}

static void
print_exceptions(const json_t *doc)
{
    const json_t *list = json_object_get(doc, "exceptions");
    size_t i = 0;
    const json_t *e = NULL;

    if (json_array_size(list) == 0) {
        return;
    }
    printf("\nExceptions:\n");
    json_array_foreach(list, i, e)
    {
        printf("  ");
        cli_put_clean(stdout, get_str(e, "type") != NULL ? get_str(e, "type") : "exception", 80);
        if (get_str(e, "message") != NULL) {
            printf(": ");
            cli_put_clean(stdout, get_str(e, "message"), 160);
        }
        printf("  in span ");
        put_span(get_str(e, "span_name"), get_str(e, "span_id"));
        printf("\n");
        if (get_str(e, "stacktrace") != NULL) {
            cli_put_block(stdout, get_str(e, "stacktrace"), 6);
        }
    }
}

static void
print_last_answer(const json_t *doc)
{
    const json_t *a = json_object_get(doc, "last_answer");
    const char *source = get_str(a, "source");
    const json_t *calls = json_object_get(a, "tool_calls");
    size_t i = 0;
    const json_t *c = NULL;

    if (!json_is_object(a)) {
        return;
    }
    printf("\nLast model answer before the failure: ");
    put_span(get_str(a, "span_name"), get_str(a, "span_id"));
    if (get_str(a, "agent") != NULL) {
        printf(", agent %s", get_str(a, "agent"));
    }
    printf("%s\n", source == NULL                    ? ""
                   : strcmp(source, "exchange") == 0 ? ", from the stored exchange"
                                                     : ", from the span");
    if (get_str(a, "text") != NULL) {
        cli_put_block(stdout, get_str(a, "text"), 4);
        if (json_is_true(json_object_get(a, "truncated"))) {
            printf("    ... (cut; the span or `weft replay` has it whole)\n");
        }
    } else if (source == NULL) {
        printf("    (its content was not captured and no stored exchange matches it)\n");
    }
    if (json_array_size(calls) > 0) {
        printf("    tool calls:");
        json_array_foreach(calls, i, c)
        {
            printf(" ");
            cli_put_clean(stdout, json_string_value(c), 60);
        }
        printf("\n");
    }
    if (get_str(a, "error") != NULL) {
        printf("    the call failed: ");
        cli_put_clean(stdout, get_str(a, "error"), 160);
        printf("\n");
    }
}

static void
print_loops(const json_t *doc)
{
    const json_t *loops = json_object_get(doc, "stuck_loops");
    size_t i = 0;
    const json_t *l = NULL;

    json_array_foreach(loops, i, l)
    {
        size_t k = 0;
        const json_t *r = NULL;

        printf("\nStuck loop (%s, policy %s): ", get_str(l, "kind"),
               get_str(l, "policy") != NULL ? get_str(l, "policy") : "?");
        cli_put_clean(stdout, get_str(l, "evidence") != NULL ? get_str(l, "evidence") : "", 200);
        printf("\n  found at ");
        put_span(get_str(l, "span_name"), get_str(l, "span_id"));
        printf("\n  repetitions:\n");
        json_array_foreach(json_object_get(l, "repetitions"), k, r)
        {
            printf("    %zu. ", k + 1);
            put_span(get_str(r, "name") != NULL ? get_str(r, "name") : "(not in the trace)",
                     get_str(r, "span_id"));
            printf("\n");
        }
    }
}

/* A number of the document: an integer as it is, a real with up to 6 significant digits. */
static void
put_number(const json_t *v)
{
    if (json_is_integer(v)) {
        printf("%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        printf("%.6g", json_real_value(v));
    } else {
        printf("?");
    }
}

static void
print_budget(const json_t *doc)
{
    const json_t *b = json_object_get(doc, "budget");

    if (!json_is_object(b)) {
        return;
    }
    printf("\nBudget ran out: %s: limit ", get_str(b, "name"));
    put_number(json_object_get(b, "limit"));
    printf(", used ");
    put_number(json_object_get(b, "used"));
    printf("%s%s\n", get_str(b, "unit") != NULL ? " " : "",
           get_str(b, "unit") != NULL ? get_str(b, "unit") : "");
}

/* The run's why document: its trace from the span store (@p db), its exchanges from the state
 * store. *doc NULL after saying why on stderr. @return CLI_EXIT_OK or CLI_EXIT_FAIL. */
static int
load_why(const char *state, const char *db, const char *ref, json_t **doc)
{
    struct weft_run_details *run = NULL;
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    struct weft_run_exchange *ex = NULL;
    size_t ex_count = 0;
    weft_err err = weft_run_load(state, ref, &run);

    *doc = NULL;
    if (err != WEFT_OK) {
        fprintf(stderr, "weft run why: %s: %s\n", ref,
                err == WEFT_ENOTFOUND ? "no such run (or no state database yet)"
                                      : weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    if (run->info.trace_id != NULL) {
        err = weft_store_open(db, &store);
        if (err == WEFT_OK) {
            err = weft_store_load_trace(store, run->info.trace_id, &trace);
        }
        if (err != WEFT_OK) {
            /* Said, not fatal: the steps' stored errors and the budget still explain it. */
            fprintf(stderr, "weft run why: the run's trace %s cannot be read: %s\n",
                    run->info.trace_id,
                    store != NULL && weft_store_errmsg(store)[0] != '\0' ? weft_store_errmsg(store)
                                                                         : weft_strerror(err));
        }
        (void)weft_run_exchanges_load(state, run->info.run_id, &ex, &ex_count);
    }
    *doc = weft__doc_why(run, trace, ex, ex_count);
    weft_run_exchanges_free(ex, ex_count);
    weft_trace_free(trace);
    weft_store_close(store);
    weft_run_details_free(run);
    if (*doc == NULL) {
        fputs("weft run why: out of memory\n", stderr);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int
cli_run_why(int argc, char **argv)
{
    const char *state = NULL;
    const char *db = NULL;
    bool is_help = false;
    bool is_json = false;
    char *positional[1];
    size_t count = 0;
    const struct cli_option options[] = {
        {"state", 0, true, false, &state, NULL},
        {"db", 0, true, false, &db, NULL},
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    json_t *doc = NULL;
    int rc = CLI_EXIT_OK;

    if (cli_parse("run why", argc, argv, options, sizeof(options) / sizeof(options[0]), positional,
                  1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help || count != 1) {
        cli_runs_usage(is_help ? stdout : stderr);
        return is_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    cli_recover("run why", state);
    rc = load_why(state, db, positional[0], &doc);
    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    if (is_json) {
        return cli_json_print(doc);
    }
    print_header(doc);
    print_failed_steps(doc);
    print_exceptions(doc);
    print_last_answer(doc);
    print_loops(doc);
    print_budget(doc);
    json_decref(doc);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* cli/runs_cmd.c - `weft runs`, `weft runs pin|unpin RUN`, `weft run show RUN_ID` and
 * `weft resume RUN_ID`: the state database read back (include/weft/runtime.h), runs kept from
 * `weft gc` (docs/retention.md) and interrupted runs continued. */
#include "cli.h"
#include "report/docs.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

void
cli_runs_usage(FILE *out)
{
    fputs("usage: weft runs [--limit N] [--state PATH] [--json]\n"
          "       weft runs pin|unpin RUN_ID|prefix|last [--state PATH]\n"
          "       weft run show RUN_ID|prefix|last [--state PATH] [--json]\n"
          "       weft run why RUN_ID|prefix|last [--state PATH] [--db PATH] [--json]\n"
          "\n"
          "  runs       recent runs, newest first: status, duration, steps, loops, reward,\n"
          "             and why a run did not complete; a pinned run's id ends in '*'\n"
          "  runs pin   keep the run from weft gc whatever its age (unpin: no longer);\n"
          "             docs/retention.md\n"
          "  run show   one run's plan as a table, with its DAG-surgery history, the stored\n"
          "             failure text of failed steps, the steps a failed dependency skipped,\n"
          "             and the steps' results\n"
          "  run why    why the run failed: its failing span and the path to it, each failed\n"
          "             step's stored error, exception events, the last model answer before\n"
          "             the failure, stuck loops with their repetitions, the budget that ran\n"
          "             out (the explorer's \"Why did it fail?\", schema weft.why/v1)\n"
          "\n"
          "options:\n"
          "  -n, --limit N     runs to list (default 20)\n"
          "      --state PATH  state: a SQLite file or a postgresql:// URL (default\n"
          "                    $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --db PATH     span store, for run why (default $WEFT_HOME/weft.db)\n"
          "      --json        one JSON document (schema weft.runs/v1, weft.run/v1,\n"
          "                    weft.why/v1: docs/cli-json.md)\n"
          "\n"
          "exit status: 0 ok, 1 no such run or no database, 2 bad usage (also a prefix\n"
          "             that matches several runs, for pin and unpin)\n",
          out);
}

void
cli_resume_usage(FILE *out)
{
    fputs("usage: weft resume RUN_ID [--state PATH] [--workspace DIR] [--json] [-q] [--no-trace]\n"
          "                   [--force] [--executor in_process|amqp] [--broker URL]\n"
          "                   [--queue-prefix P] [--max-in-flight N] [--max-parallel N]\n"
          "\n"
          "Continue a run that was interrupted (killed or aborted): completed steps are kept,\n"
          "the step that was in progress runs again, and the new trace links to the old one.\n"
          "The workflow is loaded from the path the run was started with, or, when that file\n"
          "is gone, from the snapshot stored with the run. One process owns a run at a time:\n"
          "a run still running elsewhere is refused, naming its owner.\n"
          "\n"
          "options:\n"
          "      --force   resume although the workflow file changed since the run started\n"
          "      --executor, --broker, --queue-prefix, --max-in-flight, --max-parallel: as for\n"
          "                weft run\n"
          "\n"
          "exit status: as weft run; 1 also when another live process owns the run,\n"
          "             2 when the workflow file changed (without --force)\n",
          out);
}

static int
explain(const char *cmd, weft_err err, const char *ref)
{
    if (err == WEFT_ENOTFOUND) {
        fprintf(stderr, "weft %s: no run '%s' (or no state database yet)\n", cmd, ref);
        return CLI_EXIT_FAIL;
    }
    fprintf(stderr, "weft %s: %s: %s\n", cmd, ref, weft_strerror(err));
    return err == WEFT_EINVAL ? CLI_EXIT_FAIL : CLI_EXIT_FAIL;
}

static void
format_time(uint64_t ns, char *buf, size_t len)
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;

    if (ns == 0 || localtime_r(&secs, &tm) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

/* Sum of the loop counters in a {"kind": n} JSON text. */
static long
loops_total(const char *loops)
{
    long total = 0;
    const char *p = loops;

    while (p != NULL && (p = strchr(p, ':')) != NULL) {
        total += strtol(p + 1, NULL, 10);
        p++;
    }
    return total;
}

/* What tail sampling decided of a run's trace, after its trace id: " (trace not kept (rule
 * sample))" or " (trace kept by rule failed)"; nothing without a policy. */
static void
put_sampling(const char *sampling)
{
    const char *colon = sampling != NULL ? strchr(sampling, ':') : NULL;

    if (colon == NULL) {
        return;
    }
    if (strncmp(sampling, "dropped:", 8) == 0) {
        printf("  (trace not kept (rule %s))", colon + 1);
    } else {
        printf("  (trace kept by rule %s)", colon + 1);
    }
}

static int
print_runs_json(const struct weft_run_info *runs, size_t count)
{
    json_t *doc = json_object();
    json_t *arr = json_array();

    if (doc == NULL || arr == NULL) {
        json_decref(doc);
        json_decref(arr);
        return cli_json_print(NULL);
    }
    json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_RUNS));
    for (size_t i = 0; i < count; i++) {
        json_array_append_new(arr, weft__doc_run_info(&runs[i]));
    }
    json_object_set_new(doc, "runs", arr);
    return cli_json_print(doc);
}

/* `weft runs pin|unpin RUN`: argv[0] is "pin" or "unpin". */
static int
runs_pin(int argc, char **argv)
{
    const char *state = NULL;
    bool is_help = false;
    bool is_pin = strcmp(argv[0], "pin") == 0;
    char *positional[1];
    char id[96];
    size_t count = 0;
    const struct cli_option options[] = {
        {"state", 0, true, false, &state, NULL},
        {"help", 'h', false, false, NULL, &is_help},
    };
    const char *cmd = is_pin ? "runs pin" : "runs unpin";
    weft_err err = WEFT_OK;

    if (cli_parse(cmd, argc, argv, options, sizeof(options) / sizeof(options[0]), positional, 1,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help || count != 1) {
        cli_runs_usage(is_help ? stdout : stderr);
        return is_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    err = weft_run_pin(state, positional[0], is_pin, id, sizeof(id));
    if (err == WEFT_EINVAL) {
        /* The library logged which (several runs match, or a malformed id). */
        fprintf(stderr, "weft %s: '%s' does not name one run (give more of its id)\n", cmd,
                positional[0]);
        return CLI_EXIT_USAGE;
    }
    if (err != WEFT_OK) {
        return explain(cmd, err, positional[0]);
    }
    printf("%s %s%s\n", is_pin ? "pinned" : "unpinned", id,
           is_pin ? ": weft gc keeps it" : ": weft gc may delete it once it is old enough");
    return CLI_EXIT_OK;
}

int
cli_runs(int argc, char **argv)
{
    const char *state = NULL;
    const char *limit_text = NULL;
    bool is_help = false;
    bool is_json = false;
    size_t limit = 20;
    size_t count = 0;
    struct weft_run_info *runs = NULL;
    const struct cli_option options[] = {
        {"limit", 'n', true, false, &limit_text, NULL},
        {"state", 0, true, false, &state, NULL},
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;
    bool has_pinned = false;

    if (argc > 1 && (strcmp(argv[1], "pin") == 0 || strcmp(argv[1], "unpin") == 0)) {
        return runs_pin(argc - 1, argv + 1);
    }
    if (cli_parse("runs", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL, 0,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_runs_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (limit_text != NULL && !cli_parse_size(limit_text, 1, 100000, &limit)) {
        fprintf(stderr, "weft runs: --limit: expected a number from 1 to 100000\n");
        return CLI_EXIT_USAGE;
    }
    cli_recover("runs", state);
    err = weft_runs_list(state, limit, &runs, &count);
    if (err == WEFT_ENOTFOUND && is_json) {
        return print_runs_json(NULL, 0);
    }
    if (err == WEFT_ENOTFOUND) {
        printf("no runs yet\n");
        return CLI_EXIT_OK;
    }
    if (err != WEFT_OK) {
        return explain("runs", err, "state database");
    }
    if (is_json) {
        int rc = print_runs_json(runs, count);

        weft_run_infos_free(runs, count);
        return rc;
    }
    printf("%-14s %-20s %-17s %-19s %10s %6s %6s %8s  %s\n", "RUN", "WORKFLOW", "STATUS", "STARTED",
           "DURATION", "STEPS", "LOOPS", "REWARD", "WHY");
    for (size_t i = 0; i < count; i++) {
        char started[32];
        char dur[32] = "-";
        size_t id_len = 0;
        format_time(runs[i].started_ns, started, sizeof(started));
        if (runs[i].ended_ns > runs[i].started_ns) {
            /* An interrupted run ran at least until its last sign of life (docs/durability.md),
             * maybe longer: the duration is a lower bound, and says so. */
            bool is_cut = strcmp(runs[i].status, "interrupted") == 0;

            dur[0] = '>';
            cli_format_duration(runs[i].ended_ns - runs[i].started_ns, dur + is_cut,
                                sizeof(dur) - is_cut);
        }
        /* A pinned run's id ends in '*' (weft gc keeps it). */
        id_len = strlen(runs[i].run_id);
        printf("%s%-*s ", runs[i].run_id, id_len < 14 ? (int)(14 - id_len) : 0,
               runs[i].is_pinned ? "*" : "");
        has_pinned = has_pinned || runs[i].is_pinned;
        printf("%*s", (int)(21 - cli_put_clean(stdout, runs[i].workflow, 20)), "");
        printf("%-17s %-19s %10s %6zu %6ld %8.2f", runs[i].status, started, dur, runs[i].step_count,
               loops_total(runs[i].loops), runs[i].reward);
        /* Why a run did not complete (a stuck loop, a failed step, ...), on its line. */
        if (strcmp(runs[i].status, "completed") != 0 && runs[i].reason != NULL) {
            fputs("  ", stdout);
            cli_put_clean(stdout, runs[i].reason, 70);
        }
        if (runs[i].trace_sampling != NULL && strncmp(runs[i].trace_sampling, "dropped:", 8) == 0) {
            put_sampling(runs[i].trace_sampling);
        }
        putchar('\n');
    }
    if (has_pinned) {
        printf("* pinned: weft gc keeps it (weft runs unpin RUN)\n");
    }
    weft_run_infos_free(runs, count);
    return CLI_EXIT_OK;
}

#define BLOCK_MAX_LINES   12  /* lines of one stored text shown by run show */
#define BLOCK_MAX_COLS    160 /* characters of one such line */
#define RESULTS_MAX_STEPS 40  /* step results shown by run show (the last ones) */
#define SECTION_MAX       50  /* failed / not-run steps listed by run show */

/* Length of the UTF-8 sequence at @p p (1 to 4), or 0 when it is invalid. */
static size_t
utf8_len(const unsigned char *p)
{
    size_t want = p[0] < 0x80             ? 1
                  : (p[0] & 0xe0) == 0xc0 ? 2
                  : (p[0] & 0xf0) == 0xe0 ? 3
                  : (p[0] & 0xf8) == 0xf0 ? 4
                                          : 0;

    if (want == 2 && p[0] < 0xc2) {
        return 0; /* overlong */
    }
    for (size_t k = 1; k < want; k++) {
        if ((p[k] & 0xc0) != 0x80) {
            return 0;
        }
    }
    return want;
}

/* Print stored multi-line text, each line after @p indent spaces: UTF-8 kept whole (a long
 * line is cut between characters, never inside one), tabs kept, other control characters
 * and invalid bytes shown as '?' so that stored text cannot drive the terminal. At most
 * BLOCK_MAX_LINES lines; a note says how many more there are. */
void
cli_put_block(FILE *out, const char *text, int indent)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t lines = 0;
    size_t total = 1;
    size_t len = strlen(text);

    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r')) {
        len--; /* a trailing newline is not an empty last line */
    }
    if (len == 0) {
        fputc('\n', out); /* the caller's label ends the line */
        return;
    }
    for (size_t i = 0; i < len; i++) {
        total += text[i] == '\n';
    }
    for (size_t i = 0; i < len && lines < BLOCK_MAX_LINES; lines++) {
        size_t cols = 0;

        fprintf(out, "%*s", indent, "");
        while (i < len && p[i] != '\n') {
            size_t n = utf8_len(p + i);

            if (cols == BLOCK_MAX_COLS) {
                fputs("...", out);
                while (i < len && p[i] != '\n') {
                    i++;
                }
                break;
            }
            if (n == 0) {
                fputc('?', out);
                n = 1;
            } else if (p[i] == '\t') {
                fputc('\t', out);
            } else if (p[i] < 0x20 || p[i] == 0x7f || (p[i] == 0xc2 && p[i + 1] < 0xa0)) {
                fputc('?', out); /* C0, DEL, C1 */
            } else {
                fwrite(p + i, 1, n, out);
            }
            i += n;
            cols++;
        }
        fputc('\n', out);
        i += i < len; /* the newline */
    }
    if (total > lines && len > 0) {
        fprintf(out, "%*s... (%zu more lines; weft run show --json has them all)\n", indent, "",
                total - lines);
    }
}

/* A failed step's stored details: the failure sentence, then each field of the error object
 * (exit code, stderr and stdout tails, ...), multi-line text as indented blocks. */
static void
put_failure(const struct weft_run_details *d, size_t i)
{
    const struct weft_run_step *s = &d->steps[i];
    const struct weft_run_step_extra *x = &d->step_extras[i];
    json_t *error = x->error != NULL ? json_loads(x->error, 0, NULL) : NULL;
    const char *key = NULL;
    json_t *value = NULL;

    printf("  %s (%s) %s", s->id, s->executor, s->status);
    if (x->error_type != NULL) {
        printf(" [%s]", x->error_type);
    }
    printf(":\n");
    if (x->feedback != NULL) {
        cli_put_block(stdout, x->feedback, 4);
    }
    if (error == NULL && x->error != NULL) {
        cli_put_block(stdout, x->error, 4); /* not JSON: as stored */
    }
    json_object_foreach(error, key, value)
    {
        if (strcmp(key, "error_type") == 0) {
            continue;
        }
        if (json_is_string(value)) {
            const char *text = json_string_value(value);

            if (text[0] == '\0') {
                printf("    %s: (empty)\n", key);
            } else if (strchr(text, '\n') == NULL || strchr(text, '\n')[1] == '\0') {
                printf("    %s: ", key);
                cli_put_block(stdout, text, 0);
            } else {
                printf("    %s:\n", key);
                cli_put_block(stdout, text, 6);
            }
        } else if (!json_is_null(value)) {
            char *dumped = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);

            printf("    %s: ", key);
            cli_put_block(stdout, dumped != NULL ? dumped : "?", 0);
            free(dumped);
        }
    }
    json_decref(error);
}

static bool
has_failure(const struct weft_run_details *d, size_t i)
{
    const struct weft_run_step_extra *x = &d->step_extras[i];

    return strcmp(d->steps[i].status, "failed") == 0 ||
           (x->error_type != NULL && strcmp(d->steps[i].status, "completed") != 0) ||
           (strcmp(d->steps[i].status, "paused") == 0 && x->error != NULL);
}

/* A step still pending in a run that is over, not because of a dependency: the run ended
 * first (stuck, out of budget, aborted, ...). */
static bool
is_not_run(const struct weft_run_details *d, size_t i)
{
    const char *run = d->info.status;

    return d->step_extras[i].skipped_dependency == NULL &&
           strcmp(d->steps[i].status, "pending") == 0 && d->info.ended_ns != 0 &&
           strcmp(run, "running") != 0 && strcmp(run, "interrupted") != 0;
}

/* Failed tool calls by agent and kind, as --json's "tool_errors" and `weft run` say them. */
static void
print_tool_errors(const struct weft_run_details *d)
{
    json_t *list = weft__doc_tool_errors(d);
    size_t i = 0;
    json_t *row = NULL;

    if (json_array_size(list) > 0) {
        printf("  tool errors:");
        json_array_foreach(list, i, row)
        {
            printf(" ");
            cli_put_clean(stdout, json_string_value(json_object_get(row, "agent")), 64);
            printf(":");
            cli_put_clean(stdout, json_string_value(json_object_get(row, "kind")), 32);
            printf("=%lld", (long long)json_integer_value(json_object_get(row, "count")));
        }
        printf("\n");
    }
    json_decref(list);
}

/* The run's line: ids, status, times, reward, and why it ended. */
static void
print_run_header(const struct weft_run_details *d)
{
    char started[32];

    format_time(d->info.started_ns, started, sizeof(started));
    printf("run %s  workflow=%s  status=%s  started=%s  reward=%.2f  corrections=%zu\n",
           d->info.run_id, d->info.workflow, d->info.status, started, d->info.reward,
           d->info.corrections);
    printf("  session=%s  trace=%s", d->info.session_id,
           d->info.trace_id != NULL ? d->info.trace_id : "-");
    if (d->info.resumed_from_trace != NULL) {
        printf("  resumed from trace %s", d->info.resumed_from_trace);
    }
    put_sampling(d->info.trace_sampling);
    printf("\n");
    if (d->info.reason != NULL && strchr(d->info.reason, '\n') != NULL) {
        printf("  reason:\n");
        cli_put_block(stdout, d->info.reason, 4);
    } else if (d->info.reason != NULL) {
        printf("  reason: ");
        cli_put_block(stdout, d->info.reason, 0);
    }
    print_tool_errors(d);
}

/* The plan as a table; counts what the sections below it will show. */
static void
print_step_table(const struct weft_run_details *d,
                 size_t *failures,
                 size_t *skipped,
                 size_t *results)
{
    printf("\n%-16s %-12s %-12s %-11s %8s %7s  %-24s %s\n", "STEP", "AGENT", "EXECUTOR", "STATUS",
           "ATTEMPTS", "REWARD", "DEPENDS ON", "TASK");
    for (size_t i = 0; i < d->step_count; i++) {
        const struct weft_run_step *s = &d->steps[i];
        char reward[16] = "-";
        if (s->has_reward) {
            snprintf(reward, sizeof(reward), "%.2f", s->reward);
        }
        printf("%-16s %-12s %-12s %-11s %8u %7s  %-24s ", s->id, s->agent, s->executor,
               weft__doc_step_status(d, i), s->attempts, reward,
               s->depends_on[0] != '\0' ? s->depends_on : "-");
        cli_put_clean(stdout, s->task, 60);
        putchar('\n');
        *failures += has_failure(d, i);
        *skipped += d->step_extras[i].skipped_dependency != NULL || is_not_run(d, i);
        *results += s->result != NULL && s->result[0] != '\0';
    }
}

static void
print_surgery(const struct weft_run_details *d)
{
    if (d->correction_count > 0) {
        printf("\nDAG surgery:\n");
        for (size_t i = 0; i < d->correction_count; i++) {
            const struct weft_run_correction *c = &d->corrections[i];
            printf("  #%u %s failed (%s): inserted %s; depends_on %s -> %s\n", c->seq,
                   c->failed_step, c->error_type != NULL ? c->error_type : "-", c->inserted,
                   c->depends_before, c->depends_after);
        }
    }
}

static void
print_failed_steps(const struct weft_run_details *d, size_t failures)
{
    if (failures > 0) {
        printf("\nFailed steps:\n");
        for (size_t i = 0, n = 0; i < d->step_count; i++) {
            if (has_failure(d, i) && n++ < SECTION_MAX) {
                put_failure(d, i);
            }
        }
        if (failures > SECTION_MAX) {
            printf("  ... %zu more failed steps (weft run show --json has them all)\n",
                   failures - SECTION_MAX);
        }
    }
}

static void
print_not_run(const struct weft_run_details *d, size_t skipped)
{
    if (skipped > 0) {
        printf("\nNot run:\n");
        for (size_t i = 0, n = 0; i < d->step_count; i++) {
            const struct weft_run_step_extra *x = &d->step_extras[i];

            if ((x->skipped_dependency != NULL || is_not_run(d, i)) && n++ >= SECTION_MAX) {
                continue;
            }
            if (x->skipped_dependency != NULL) {
                printf("  %-16s skipped (dependency %s %s)\n", d->steps[i].id,
                       x->skipped_dependency, x->skipped_dependency_status);
            } else if (is_not_run(d, i)) {
                printf("  %-16s not run (the run ended %s first)\n", d->steps[i].id,
                       d->info.status);
            }
        }
        if (skipped > SECTION_MAX) {
            printf("  ... %zu more steps not run (see the table above)\n", skipped - SECTION_MAX);
        }
    }
}

/* The last RESULTS_MAX_STEPS results, multi-line and intact. */
static void
print_results(const struct weft_run_details *d, size_t results)
{
    size_t shown = 0;

    if (results > 0) {
        printf("\nResults:\n");
        if (results > RESULTS_MAX_STEPS) {
            printf("  ... %zu earlier results (weft run show --json has them all)\n",
                   results - RESULTS_MAX_STEPS);
        }
        for (size_t i = 0; i < d->step_count; i++) {
            const char *result = d->steps[i].result;

            if (result == NULL || result[0] == '\0' || ++shown + RESULTS_MAX_STEPS <= results) {
                continue;
            }
            printf("  %s:\n", d->steps[i].id);
            cli_put_block(stdout, result, 4);
        }
    }
}

static void
print_details(const struct weft_run_details *d)
{
    size_t failures = 0;
    size_t skipped = 0;
    size_t results = 0;

    print_run_header(d);
    print_step_table(d, &failures, &skipped, &results);
    print_surgery(d);
    print_failed_steps(d, failures);
    print_not_run(d, skipped);
    print_results(d, results);
}

int
cli_run_show(int argc, char **argv)
{
    const char *state = NULL;
    bool is_help = false;
    bool is_json = false;
    char *positional[1];
    size_t count = 0;
    struct weft_run_details *d = NULL;
    const struct cli_option options[] = {
        {"state", 0, true, false, &state, NULL},
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;
    int rc = CLI_EXIT_OK;

    if (cli_parse("run show", argc, argv, options, sizeof(options) / sizeof(options[0]), positional,
                  1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help || count != 1) {
        cli_runs_usage(is_help ? stdout : stderr);
        return is_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    cli_recover("run show", state);
    err = weft_run_load(state, positional[0], &d);
    if (err != WEFT_OK) {
        return explain("run show", err, positional[0]);
    }
    if (is_json) {
        rc = cli_json_print(weft__doc_run_details(d));
    } else {
        print_details(d);
        rc = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    weft_run_details_free(d);
    return rc;
}

int
cli_resume(int argc, char **argv)
{
    struct cli_run_flags fl;
    bool is_help = false;
    char *positional[1];
    size_t count = 0;
    struct weft_run_details *d = NULL;
    const struct cli_option options[] = {
        {"state", 0, true, false, &fl.state, NULL},
        {"executor", 0, true, false, &fl.executor, NULL},
        {"broker", 0, true, false, &fl.broker, NULL},
        {"queue-prefix", 0, true, false, &fl.queue_prefix, NULL},
        {"max-in-flight", 0, true, false, &fl.max_in_flight, NULL},
        {"max-parallel", 0, true, false, &fl.max_parallel, NULL},
        {"workspace", 0, true, false, &fl.workspace, NULL},
        {"json", 0, false, false, NULL, &fl.is_json},
        {"quiet", 'q', false, false, NULL, &fl.is_quiet},
        {"no-trace", 0, false, false, NULL, &fl.is_no_trace},
        {"force", 0, false, false, NULL, &fl.is_force},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;
    int status = CLI_EXIT_OK;
    char *path = NULL;
    char tmpdir[4096] = "";

    memset(&fl, 0, sizeof(fl));
    if (cli_parse("resume", argc, argv, options, sizeof(options) / sizeof(options[0]), positional,
                  1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help || count != 1) {
        cli_resume_usage(is_help ? stdout : stderr);
        return is_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    cli_recover("resume", fl.state);
    err = weft_run_load(fl.state, positional[0], &d);
    if (err != WEFT_OK) {
        return explain("resume", err, positional[0]);
    }
    /* The run's file, or its snapshot when the file is gone (cli/replay_cmd.c). */
    status = cli_run_workflow("resume", fl.state, d, NULL, true, &path, tmpdir, sizeof(tmpdir));
    if (path != NULL) {
        fl.resume = d->info.run_id;
        fl.snapshot_root = tmpdir[0] != '\0' ? tmpdir : NULL;
        status = cli_execute("resume", path, &fl);
    }
    cli_run_workflow_done(path, tmpdir);
    weft_run_details_free(d);
    return status;
}

/* cli/runs_cmd.c - `weft runs`, `weft run show RUN_ID` and `weft resume RUN_ID`: the state
 * database read back (include/weft/runtime.h) and interrupted runs continued. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

void
cli_runs_usage(FILE *out)
{
    fputs("usage: weft runs [--limit N] [--state PATH]\n"
          "       weft run show RUN_ID|prefix|last [--state PATH]\n"
          "\n"
          "  runs       recent runs, newest first: status, duration, steps, loops, reward\n"
          "  run show   one run's plan as a table, with its DAG-surgery history\n"
          "\n"
          "options:\n"
          "  -n, --limit N     runs to list (default 20)\n"
          "      --state PATH  state database (default $WEFT_HOME/state.db)\n"
          "\n"
          "exit status: 0 ok, 1 no such run or no database, 2 bad usage\n",
          out);
}

void
cli_resume_usage(FILE *out)
{
    fputs("usage: weft resume RUN_ID [--state PATH] [--workspace DIR] [--json] [-q] [--no-trace]\n"
          "\n"
          "Continue a run that was interrupted (killed or aborted): completed steps are kept,\n"
          "the step that was in progress runs again, and the new trace links to the old one.\n"
          "The workflow is loaded from the path the run was started with.\n"
          "\n"
          "exit status: as weft run\n",
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

int
cli_runs(int argc, char **argv)
{
    const char *state = NULL;
    const char *limit_text = NULL;
    bool is_help = false;
    size_t limit = 20;
    size_t count = 0;
    struct weft_run_info *runs = NULL;
    const struct cli_option options[] = {
        {"limit", 'n', true, false, &limit_text, NULL},
        {"state", 0, true, false, &state, NULL},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;

    if (cli_parse("runs", argc, argv, options, 3, NULL, 0, &count) != CLI_EXIT_OK) {
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
    err = weft_runs_list(state, limit, &runs, &count);
    if (err == WEFT_ENOTFOUND) {
        printf("no runs yet\n");
        return CLI_EXIT_OK;
    }
    if (err != WEFT_OK) {
        return explain("runs", err, "state database");
    }
    printf("%-14s %-20s %-17s %-19s %10s %6s %6s %8s\n", "RUN", "WORKFLOW", "STATUS", "STARTED",
           "DURATION", "STEPS", "LOOPS", "REWARD");
    for (size_t i = 0; i < count; i++) {
        char started[32];
        char dur[32] = "-";
        format_time(runs[i].started_ns, started, sizeof(started));
        if (runs[i].ended_ns > runs[i].started_ns) {
            cli_format_duration(runs[i].ended_ns - runs[i].started_ns, dur, sizeof(dur));
        }
        printf("%-14s ", runs[i].run_id);
        printf("%*s", (int)(21 - cli_put_clean(stdout, runs[i].workflow, 20)), "");
        printf("%-17s %-19s %10s %6zu %6ld %8.2f\n", runs[i].status, started, dur,
               runs[i].step_count, loops_total(runs[i].loops), runs[i].reward);
    }
    weft_run_infos_free(runs, count);
    return CLI_EXIT_OK;
}

int
cli_run_show(int argc, char **argv)
{
    const char *state = NULL;
    bool is_help = false;
    char *positional[1];
    size_t count = 0;
    struct weft_run_details *d = NULL;
    const struct cli_option options[] = {
        {"state", 0, true, false, &state, NULL},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;
    char started[32];

    if (cli_parse("run show", argc, argv, options, 2, positional, 1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help || count != 1) {
        cli_runs_usage(is_help ? stdout : stderr);
        return is_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    err = weft_run_load(state, positional[0], &d);
    if (err != WEFT_OK) {
        return explain("run show", err, positional[0]);
    }
    format_time(d->info.started_ns, started, sizeof(started));
    printf("run %s  workflow=%s  status=%s  started=%s  reward=%.2f  corrections=%zu\n",
           d->info.run_id, d->info.workflow, d->info.status, started, d->info.reward,
           d->info.corrections);
    printf("  session=%s  trace=%s", d->info.session_id,
           d->info.trace_id != NULL ? d->info.trace_id : "-");
    if (d->info.resumed_from_trace != NULL) {
        printf("  resumed from trace %s", d->info.resumed_from_trace);
    }
    printf("\n");
    if (d->info.reason != NULL) {
        printf("  reason: ");
        cli_put_clean(stdout, d->info.reason, 200);
        putchar('\n');
    }
    printf("\n%-16s %-12s %-12s %-11s %8s %7s  %-24s %s\n", "STEP", "AGENT", "EXECUTOR", "STATUS",
           "ATTEMPTS", "REWARD", "DEPENDS ON", "TASK");
    for (size_t i = 0; i < d->step_count; i++) {
        const struct weft_run_step *s = &d->steps[i];
        char reward[16] = "-";
        if (s->has_reward) {
            snprintf(reward, sizeof(reward), "%.2f", s->reward);
        }
        printf("%-16s %-12s %-12s %-11s %8u %7s  %-24s ", s->id, s->agent, s->executor, s->status,
               s->attempts, reward, s->depends_on[0] != '\0' ? s->depends_on : "-");
        cli_put_clean(stdout, s->task, 60);
        putchar('\n');
    }
    if (d->correction_count > 0) {
        printf("\nDAG surgery:\n");
        for (size_t i = 0; i < d->correction_count; i++) {
            const struct weft_run_correction *c = &d->corrections[i];
            printf("  #%u %s failed (%s): inserted %s; depends_on %s -> %s\n", c->seq,
                   c->failed_step, c->error_type != NULL ? c->error_type : "-", c->inserted,
                   c->depends_before, c->depends_after);
        }
    }
    weft_run_details_free(d);
    return CLI_EXIT_OK;
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
        {"workspace", 0, true, false, &fl.workspace, NULL},
        {"json", 0, false, false, NULL, &fl.is_json},
        {"quiet", 'q', false, false, NULL, &fl.is_quiet},
        {"no-trace", 0, false, false, NULL, &fl.is_no_trace},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;
    int status = CLI_EXIT_OK;
    char *path = NULL;

    memset(&fl, 0, sizeof(fl));
    if (cli_parse("resume", argc, argv, options, sizeof(options) / sizeof(options[0]), positional,
                  1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help || count != 1) {
        cli_resume_usage(is_help ? stdout : stderr);
        return is_help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    err = weft_run_load(fl.state, positional[0], &d);
    if (err != WEFT_OK) {
        return explain("resume", err, positional[0]);
    }
    if (d->info.workflow_path == NULL) {
        fprintf(stderr, "weft resume: run %s has no stored workflow path\n", d->info.run_id);
        weft_run_details_free(d);
        return CLI_EXIT_FAIL;
    }
    path = strdup(d->info.workflow_path);
    fl.resume = d->info.run_id;
    status = path != NULL ? cli_execute("resume", path, &fl) : CLI_EXIT_FAIL;
    free(path);
    weft_run_details_free(d);
    return status;
}

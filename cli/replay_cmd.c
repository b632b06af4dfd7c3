/* cli/replay_cmd.c - `weft replay RUN` and `weft fork RUN --from STEP` (docs/replay.md).
 *
 * Both are runs of a stored run's workflow (the file it was started with, or --workflow), with
 * its input, through cli_execute() like `weft run` and `weft resume`: the library does the
 * replaying and forking (weft_run_options.replay_run_id, fork_run_id); this file parses the
 * command line, finds the workflow and says what a replay found.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#define MAX_SETS 32

void
cli_replay_usage(FILE *out)
{
    fputs("usage: weft replay RUN_ID [--workflow FILE] [--state PATH] [--workspace DIR] [--json]\n"
          "                   [-q] [--no-trace] [--capture-content] [--color[=WHEN]]\n"
          "\n"
          "Run a finished run again, deterministically: every LLM call is answered from the\n"
          "run's stored exchanges and every tool call (native, MCP, command steps) from its\n"
          "stored tool results. Nothing goes to the network and no tool runs. Each request is\n"
          "compared with the original's at the same position; the first difference (a changed\n"
          "workflow, prompt or tool) stops the replay and is reported as the first differing\n"
          "span. The replay is a run of its own whose trace links to the original's.\n"
          "RUN_ID may be a unique prefix or \"last\".\n"
          "\n"
          "options:\n"
          "      --workflow FILE  replay against this workflow file instead of the stored path\n"
          "\n"
          "exit status: 0 identical (whatever the run's own status), 5 diverged, 1 the replay\n"
          "             could not run (no such run, a run still running), 2 bad usage\n",
          out);
}

void
cli_fork_usage(FILE *out)
{
    fputs("usage: weft fork RUN_ID --from STEP [--workflow FILE] [--set KEY=VALUE]...\n"
          "                 [--state PATH] [--workspace DIR] [--json] [-q] [--no-trace]\n"
          "                 [--capture-content] [--color[=WHEN]]\n"
          "\n"
          "Start a new run that reuses the original run's results for the steps before STEP\n"
          "(marked reused, not run again, no LLM call) and runs STEP and everything after it\n"
          "live, with the changed workflow when --workflow is given: test a fix for a failed\n"
          "plan without paying for the steps that worked. Its trace links to the original's;\n"
          "the run records where it came from (weft run show).\n"
          "\n"
          "options:\n"
          "      --from STEP        the step id to run live from (see weft run show RUN_ID)\n"
          "      --workflow FILE    the workflow to run (default: the one the run used)\n"
          "      --set KEY=VALUE    override a field: agent.NAME.model (a model of the\n"
          "                         workflow's models) or agent.NAME.instructions; repeatable\n"
          "\n"
          "exit status: as weft run; 1 also for an unknown run or a run still running, 2 for\n"
          "             an unknown step or a --set that is refused\n",
          out);
}

void
cli_print_replay(FILE *out, const struct weft_replay_report *r)
{
    if (r == NULL) {
        return;
    }
    if (r->is_identical) {
        fprintf(out,
                "replay of run %s: identical (%zu of %zu LLM calls and %zu of %zu tool calls "
                "answered from the original)\n",
                r->original_run_id, r->llm_calls, r->llm_expected, r->tool_calls, r->tool_expected);
        return;
    }
    fprintf(out, "replay of run %s: DIVERGED at span ", r->original_run_id);
    cli_put_clean(out, r->span != NULL ? r->span : "?", 120);
    if (r->step_id != NULL) {
        fputs(" (step ", out);
        cli_put_clean(out, r->step_id, 80);
        fputs(")", out);
    }
    fprintf(out, ": %s\n  expected: ", r->what != NULL ? r->what : "?");
    cli_put_clean(out, r->expected != NULL ? r->expected : "(no call)", 200);
    fputs("\n  got:      ", out);
    cli_put_clean(out, r->got != NULL ? r->got : "(no call)", 200);
    fputs("\n", out);
}

/* The stored run @p ref: its workflow path (or @p workflow) and input into @p fl, then the run.
 * @return the command's exit status. */
static int
execute_from(const char *cmd, const char *ref, const char *workflow, struct cli_run_flags *fl)
{
    struct weft_run_details *d = NULL;
    char *path = NULL;
    int status = CLI_EXIT_FAIL;
    weft_err err = WEFT_OK;

    cli_recover(cmd, fl->state);
    err = weft_run_load(fl->state, ref, &d);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft %s: %s '%s'\n", cmd,
                err == WEFT_ENOTFOUND ? "no stored run" : "cannot load run", ref);
        return err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    if (strcmp(d->info.status, "running") == 0) {
        fprintf(stderr, "weft %s: run %s is still running; try again once it ended\n", cmd,
                d->info.run_id);
    } else if (workflow == NULL && d->info.workflow_path == NULL) {
        fprintf(stderr, "weft %s: run %s has no stored workflow path; give --workflow\n", cmd,
                d->info.run_id);
    } else {
        path = strdup(workflow != NULL ? workflow : d->info.workflow_path);
        fl->input = d->info.input;
        if (fl->fork_from != NULL) {
            fl->fork_of = d->info.run_id;
        } else {
            fl->replay_of = d->info.run_id;
        }
        status = path != NULL ? cli_execute(cmd, path, fl) : CLI_EXIT_FAIL;
    }
    free(path);
    weft_run_details_free(d);
    return status;
}

/* Take every "--set X" and "--set=X" out of @p argv (kept in @p sets), so the rest parses as
 * usual. @return the new argc, or -1 when there are too many or one lacks its value. */
static int
take_sets(int argc, char **argv, const char **sets, size_t *count)
{
    int out = 0;

    *count = 0;
    for (int i = 0; i < argc; i++) {
        const char *value = NULL;
        if (strcmp(argv[i], "--set") == 0) {
            if (i + 1 >= argc) {
                return -1;
            }
            value = argv[++i];
        } else if (strncmp(argv[i], "--set=", 6) == 0) {
            value = argv[i] + 6;
        } else {
            argv[out++] = argv[i];
            continue;
        }
        if (*count == MAX_SETS) {
            return -1;
        }
        sets[(*count)++] = value;
    }
    return out;
}

/* Options both commands take; @p fl and the locals receive them. */
static int
parse_common(const char *cmd,
             int argc,
             char **argv,
             struct cli_run_flags *fl,
             const char **workflow,
             char **positional,
             size_t *count)
{
    const char *color = NULL;
    bool is_help = false;
    bool is_color_set = false;
    const struct cli_option options[] = {
        {"workflow", 0, true, false, workflow, NULL},
        {"from", 0, true, false, &fl->fork_from, NULL},
        {"state", 0, true, false, &fl->state, NULL},
        {"workspace", 0, true, false, &fl->workspace, NULL},
        {"capture-content", 0, false, false, NULL, &fl->is_capture},
        {"json", 0, false, false, NULL, &fl->is_json},
        {"quiet", 'q', false, false, NULL, &fl->is_quiet},
        {"no-trace", 0, false, false, NULL, &fl->is_no_trace},
        {"color", 0, false, true, &color, &is_color_set},
        {"help", 'h', false, false, NULL, &is_help},
    };

    if (cli_parse(cmd, argc, argv, options, sizeof(options) / sizeof(options[0]), positional, 1,
                  count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        return -1;
    }
    if (is_color_set && color == NULL) {
        color = "always";
    }
    if (!cli_color(color, stdout, &fl->is_color)) {
        fprintf(stderr, "weft %s: --color: expected auto, always or never\n", cmd);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int
cli_replay(int argc, char **argv)
{
    struct cli_run_flags fl;
    const char *workflow = NULL;
    char *positional[1];
    size_t count = 0;
    int status = CLI_EXIT_OK;

    memset(&fl, 0, sizeof(fl));
    status = parse_common("replay", argc, argv, &fl, &workflow, positional, &count);
    if (status < 0) {
        cli_replay_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (status == CLI_EXIT_OK && (count != 1 || fl.fork_from != NULL)) {
        fputs(count != 1 ? "weft replay: expected one RUN_ID\n"
                         : "weft replay: --from belongs to weft fork\n",
              stderr);
        cli_replay_usage(stderr);
        status = CLI_EXIT_USAGE;
    }
    return status != CLI_EXIT_OK ? status : execute_from("replay", positional[0], workflow, &fl);
}

int
cli_fork(int argc, char **argv)
{
    struct cli_run_flags fl;
    const char *workflow = NULL;
    const char *sets[MAX_SETS];
    char *positional[1];
    size_t count = 0;
    int status = CLI_EXIT_OK;

    memset(&fl, 0, sizeof(fl));
    argc = take_sets(argc, argv, sets, &fl.set_count);
    if (argc < 0) {
        fprintf(stderr, "weft fork: --set: expected KEY=VALUE (at most %d)\n", MAX_SETS);
        return CLI_EXIT_USAGE;
    }
    fl.sets = sets;
    status = parse_common("fork", argc, argv, &fl, &workflow, positional, &count);
    if (status < 0) {
        cli_fork_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (status == CLI_EXIT_OK && (count != 1 || fl.fork_from == NULL)) {
        fputs(count != 1 ? "weft fork: expected one RUN_ID\n"
                         : "weft fork: --from STEP is required\n",
              stderr);
        cli_fork_usage(stderr);
        status = CLI_EXIT_USAGE;
    }
    return status != CLI_EXIT_OK ? status : execute_from("fork", positional[0], workflow, &fl);
}

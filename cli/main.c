/* cli/main.c - the `weft` command: installs the stderr log handler and dispatches to the
 * commands in the table below.
 *
 * Exit codes: 0 success, 1 the command failed, 2 bad usage (the usage goes to stderr).
 * Logging: warnings and errors from the library go to stderr; WEFT_DEBUG=1 adds debug lines.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

/* Each command is one line here. */
static const struct cli_command commands[] = {
    {"run", "run WORKFLOW [options]", "run a workflow, with live progress and its trace", cli_run,
     cli_run_usage},
    {"validate", "validate [--offline] WORKFLOW...",
     "check workflow files (and that their MCP servers start), printing every problem",
     cli_validate, cli_validate_usage},
    {"compose", "compose GOAL --workflow FILE [--out DIR]",
     "the architect designs a team for GOAL and saves it as a workflow (docs/architect.md)",
     cli_compose, cli_compose_usage},
    {"mcp", "mcp list|serve ...",
     "list an MCP server's tools; serve weft's runs and traces as MCP tools (docs/mcp.md)", cli_mcp,
     cli_mcp_usage},
    {"runs", "runs [pin|unpin RUN]",
     "list stored runs: status, duration, steps, loops, reward; pin a run to keep it", cli_runs,
     cli_runs_usage},
    {"gc", "gc --older-than AGE",
     "delete runs that ended before then, with their rows and workspaces (docs/retention.md)",
     cli_gc, cli_gc_usage},
    {"resume", "resume RUN_ID [options]", "continue an interrupted run", cli_resume,
     cli_resume_usage},
    {"replay", "replay RUN_ID [--workflow FILE] [--json]",
     "re-run a finished run from its stored LLM answers and tool results; report the first "
     "difference",
     cli_replay, cli_replay_usage},
    {"fork", "fork RUN_ID --from STEP [--workflow FILE] [--set K=V]...",
     "a new run reusing the steps before STEP, running STEP and after live", cli_fork,
     cli_fork_usage},
    {"eval", "eval WORKFLOW --dataset NAME[@V] | eval list|show|compare",
     "run a workflow over a dataset (an experiment), score it, compare experiments "
     "(docs/experiments.md)",
     cli_eval, cli_eval_usage},
    {"worker", "worker [--broker URL] [--concurrency N]",
     "run steps of distributed runs from RabbitMQ (docs/distributed.md)", cli_worker,
     cli_worker_usage},
    {"serve", "serve [--addr HOST:PORT] [--broker URL]",
     "serve /metrics across stored runs, and /healthz", cli_serve, cli_serve_usage},
    {"dataset", "dataset create|add|list|show|rm",
     "datasets of inputs and expectations from failed runs or files (docs/experiments.md)",
     cli_dataset, cli_dataset_usage},
    {"skills", "skills list|show|forget", "inspect and prune skill memory (docs/memory.md)",
     cli_skills, cli_skills_usage},
    {"teams", "teams [--run RUN_ID] [--json]",
     "list the teams architects composed (docs/architect.md)", cli_teams, cli_teams_usage},
    {"trace", "trace list|show ...", "inspect traces in the local store", cli_trace,
     cli_trace_usage},
    {"exporters", "exporters [--json]", "list the exporters OTEL_TRACES_EXPORTER can name",
     cli_exporters, cli_exporters_usage},
    {"version", "version", "print the weft version", cmd_version, NULL},
    {"help", "help [COMMAND]", "show help for weft or one command", cmd_help, NULL},
};

#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static void
usage(FILE *out)
{
    fputs("usage: weft <command> [options]\n"
          "\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        fprintf(out, "  %-22s %s\n", commands[i].synopsis, commands[i].summary);
    }
    fputs("\n"
          "Run 'weft help <command>' for a command's options.\n"
          "Traces are read from $WEFT_TRACE_STORE_URL (a file or postgresql:// URL), else\n"
          "$WEFT_HOME/weft.db (default ./.weft/weft.db); --db overrides.\n"
          "Environment: WEFT_HOME, WEFT_DEBUG=1 (debug logging), NO_COLOR.\n",
          out);
}

static const struct cli_command *
find_command(const char *name)
{
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

static bool
is_help_flag(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

static int
cmd_version(int argc, char **argv)
{
    if (argc > 1 && !is_help_flag(argv[1])) {
        fprintf(stderr, "weft version: unexpected argument '%s'\n", argv[1]);
        return CLI_EXIT_USAGE;
    }
    printf("weft %s\n", WEFT_VERSION);
    return CLI_EXIT_OK;
}

static int
cmd_help(int argc, char **argv)
{
    const struct cli_command *cmd = NULL;

    if (argc < 2) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cmd = find_command(argv[1]);
    if (cmd == NULL) {
        fprintf(stderr, "weft help: unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (cmd->usage != NULL) {
        cmd->usage(stdout);
    } else {
        printf("usage: weft %s\n\n%s\n", cmd->synopsis, cmd->summary);
    }
    return CLI_EXIT_OK;
}

static void
log_to_stderr(weft_log_level level, const char *message, void *user_data)
{
    (void)user_data;
    fprintf(stderr, "weft: %s: %s\n", weft_log_level_name(level), message);
}

int
main(int argc, char **argv)
{
    const char *debug = getenv("WEFT_DEBUG");
    const struct cli_command *cmd = NULL;
    bool is_debug = debug != NULL && debug[0] != '\0' && strcmp(debug, "0") != 0;

    weft_log_set_handler(log_to_stderr, is_debug ? WEFT_LOG_DEBUG : WEFT_LOG_WARN, NULL);
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (is_help_flag(argv[1])) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        return cmd_version(1, argv + 1);
    }
    cmd = find_command(argv[1]);
    if (cmd == NULL) {
        fprintf(stderr, "weft: unknown %s '%s'\n\n", argv[1][0] == '-' ? "option" : "command",
                argv[1]);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    cli_state_home(argc - 1, argv + 1); /* --state FILE: the spans go beside it */
    return cmd->run(argc - 1, argv + 1);
}

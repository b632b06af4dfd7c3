/* cli/replay_cmd.c - `weft replay RUN` and `weft fork RUN --from STEP` (docs/replay.md).
 *
 * Both are runs of a stored run's workflow (the file it was started with, or --workflow), with
 * its input, through cli_execute() like `weft run` and `weft resume`: the library does the
 * replaying and forking (weft_run_options.replay_run_id, fork_run_id); this file parses the
 * command line, finds the workflow and says what a replay found.
 *
 * Finding the workflow (cli_run_workflow(), shared with `weft resume`): a run keeps the
 * absolute path of its workflow and a snapshot of the workflow's files (runtime/state/snapshot.c).
 * The file at the path is used while it is what the run had; when it moved, or changed under
 * a replay or a fork (which reproduce the run), the snapshot is written to a private temporary
 * directory and loaded from there, and one line on stderr says so. Resume keeps its own rule
 * for a changed file (refused without --force) and takes the snapshot only when the file is
 * gone.
 */
#define _GNU_SOURCE /* realpath */
#include "cli.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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
          "RUN_ID may be a unique prefix or \"last\". The workflow is the run's file (by its\n"
          "absolute path), or, when it moved or changed, the snapshot stored with the run.\n"
          "\n"
          "options:\n"
          "      --workflow FILE  replay against this workflow file instead of the run's\n"
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
          "      --workflow FILE    the workflow to run (default: the one the run used: its\n"
          "                         file, or the snapshot stored with the run when the file\n"
          "                         moved or changed)\n"
          "      --set KEY=VALUE    override a field: agent.NAME.model (a model of the\n"
          "                         workflow's models) or agent.NAME.instructions; repeatable\n"
          "                         step.STEP.task (STEP's task) or step.STEP.answer (STEP's\n"
          "                         first LLM call answered with VALUE, not the model); STEP\n"
          "                         is the --from step\n"
          "\n"
          "exit status: as weft run; 1 also for an unknown run or a run still running, 2 for\n"
          "             an unknown step or a --set that is refused\n",
          out);
}

/* Remove @p path and everything under it, never following a link (the snapshot's directory
 * links the workflow's original neighbours: those stay). */
static void
remove_tree(const char *path)
{
    struct stat sb;
    DIR *d = NULL;
    struct dirent *e = NULL;
    char child[4096];

    if (lstat(path, &sb) != 0) {
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        (void)unlink(path);
        return;
    }
    d = opendir(path);
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            snprintf(child, sizeof(child), "%s/%s", path, e->d_name) < (int)sizeof(child)) {
            remove_tree(child);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    (void)rmdir(path);
}

void
cli_run_workflow_done(char *path, char *tmpdir)
{
    free(path);
    if (tmpdir != NULL && tmpdir[0] != '\0') {
        remove_tree(tmpdir);
        tmpdir[0] = '\0';
    }
}

int
cli_run_workflow(const char *cmd,
                 const char *state,
                 const struct weft_run_details *d,
                 const char *workflow,
                 bool is_resume,
                 char **path_out,
                 char *tmpdir,
                 size_t tmpdir_len)
{
    const char *stored = d->info.workflow_path;
    const char *tmp = getenv("TMPDIR");
    struct weft_run_snapshot snap;
    char *copy = NULL;
    char resolved[PATH_MAX];
    bool is_stored = false;
    bool is_snapshot = false;
    weft_err err = WEFT_OK;

    *path_out = NULL;
    tmpdir[0] = '\0';
    if (workflow != NULL) {
        *path_out = strdup(workflow);
        return *path_out != NULL ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    err = weft_run_snapshot_load(state, d->info.run_id, NULL, &snap, NULL);
    is_stored = err == WEFT_OK;
    if (is_stored) {
        /* Resume: a changed file is the runtime's to refuse (or take with --force). */
        is_snapshot =
            is_resume ? !snap.is_workflow_present || (!snap.is_current && !snap.is_workflow_changed)
                      : !snap.is_current;
    }
    if (!is_snapshot) {
        if (stored == NULL || access(stored, R_OK) != 0) {
            fprintf(stderr,
                    "weft %s: run %s: its workflow file %s cannot be opened and the run kept "
                    "no snapshot of it%s\n",
                    cmd, d->info.run_id, stored != NULL ? stored : "(no path stored)",
                    is_resume ? "; restore the file to resume it"
                              : "; give --workflow FILE to name the workflow to use");
            return CLI_EXIT_USAGE;
        }
        *path_out = strdup(stored);
        return *path_out != NULL ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    }
    if (snprintf(tmpdir, tmpdir_len, "%s/weft-snapshot-XXXXXX",
                 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp") >= (int)tmpdir_len ||
        mkdtemp(tmpdir) == NULL) {
        fprintf(stderr, "weft %s: cannot create a directory for the run's snapshot\n", cmd);
        tmpdir[0] = '\0';
        return CLI_EXIT_FAIL;
    }
    /* Resolved, as the loader resolves the files under it: the run names them without it. */
    if (realpath(tmpdir, resolved) != NULL && strlen(resolved) < tmpdir_len) {
        memcpy(tmpdir, resolved, strlen(resolved) + 1);
    }
    err = weft_run_snapshot_load(state, d->info.run_id, tmpdir, &snap, &copy);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft %s: run %s: cannot write its workflow snapshot: %s%s\n", cmd,
                d->info.run_id, weft_strerror(err),
                is_resume ? "" : "; give --workflow FILE to name the workflow to use");
        cli_run_workflow_done(NULL, tmpdir);
        return CLI_EXIT_FAIL;
    }
    fprintf(stderr,
            "weft %s: the workflow moved or changed: using the snapshot stored with the run "
            "(hash %s)%s\n",
            cmd, snap.hash, is_resume ? "" : "; give --workflow FILE to run another file");
    *path_out = strdup(copy);
    weft_run_snapshot_text_free(copy);
    if (*path_out == NULL) {
        cli_run_workflow_done(NULL, tmpdir);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* The stored run @p ref: its workflow path (or @p workflow) and input into @p fl, then the run.
 * @return the command's exit status. */
static int
execute_from(const char *cmd, const char *ref, const char *workflow, struct cli_run_flags *fl)
{
    struct weft_run_details *d = NULL;
    char *path = NULL;
    char tmpdir[4096] = "";
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
    } else {
        status =
            cli_run_workflow(cmd, fl->state, d, workflow, false, &path, tmpdir, sizeof(tmpdir));
    }
    if (path != NULL) {
        fl->input = d->info.input;
        if (fl->fork_from != NULL) {
            fl->fork_of = d->info.run_id;
        } else {
            fl->replay_of = d->info.run_id;
            if (d->info.origin_kind != NULL && strcmp(d->info.origin_kind, "fork") == 0) {
                /* A fork's calls start at its forked step: its replay is the same fork of the
                 * same original, answered from the fork's own calls. */
                fl->fork_of = d->info.origin_run_id;
                fl->fork_from = d->info.origin_step;
            }
        }
        fl->snapshot_root = tmpdir[0] != '\0' ? tmpdir : NULL;
        status = cli_execute(cmd, path, fl);
    }
    cli_run_workflow_done(path, tmpdir);
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

/* The "step.STEP.task" and "step.STEP.answer" sets into @p fl (fork_task, fork_answer), taken
 * out of @p sets (the rest are the workflow's). STEP must be the --from step: the steps after it
 * run live from what it hands them. @return CLI_EXIT_OK, or CLI_EXIT_USAGE after saying why. */
static int
take_step_sets(struct cli_run_flags *fl, const char **sets)
{
    size_t kept = 0;

    for (size_t i = 0; i < fl->set_count; i++) {
        const char *eq = strchr(sets[i], '=');
        const char *dot = NULL;
        size_t id_len = 0;
        bool is_task = false;
        bool is_answer = false;
        if (strncmp(sets[i], "step.", 5) != 0 || eq == NULL) {
            sets[kept++] = sets[i];
            continue;
        }
        for (const char *c = sets[i] + 5; c < eq; c++) {
            dot = *c == '.' ? c : dot;
        }
        id_len = dot != NULL ? (size_t)(dot - sets[i] - 5) : 0;
        is_task = dot != NULL && (size_t)(eq - dot) == 5 && strncmp(dot, ".task", 5) == 0;
        is_answer = dot != NULL && (size_t)(eq - dot) == 7 && strncmp(dot, ".answer", 7) == 0;
        if (id_len == 0 || (!is_task && !is_answer)) {
            fprintf(stderr,
                    "weft fork: --set %.*s: unknown key; supported keys: agent.NAME.model, "
                    "agent.NAME.instructions, step.STEP.task, step.STEP.answer\n",
                    (int)(eq - sets[i]), sets[i]);
            return CLI_EXIT_USAGE;
        }
        if (strlen(fl->fork_from) != id_len || strncmp(sets[i] + 5, fl->fork_from, id_len) != 0) {
            fprintf(stderr,
                    "weft fork: --set %.*s: only the --from step '%s' can be changed (the steps "
                    "after it run live from what it hands them)\n",
                    (int)(eq - sets[i]), sets[i], fl->fork_from);
            return CLI_EXIT_USAGE;
        }
        if (is_task) {
            fl->fork_task = eq + 1;
        } else {
            fl->fork_answer = eq + 1;
        }
    }
    fl->set_count = kept;
    return CLI_EXIT_OK;
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
    status = status == CLI_EXIT_OK ? take_step_sets(&fl, sets) : status;
    return status != CLI_EXIT_OK ? status : execute_from("fork", positional[0], workflow, &fl);
}

/* cli/compose_cmd.c - `weft compose GOAL --workflow FILE [--out DIR] [--attempts N] [--depth N]`:
 * the
 * architect designs a team for GOAL with FILE's models, tools and MCP servers, and the checked
 * team is saved as a workflow file (docs/architect.md).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

void
cli_compose_usage(FILE *out)
{
    fputs("usage: weft compose GOAL --workflow FILE [--out DIR] [--attempts N] [--depth N]\n"
          "                    [--no-trace]\n"
          "\n"
          "The architect (FILE's first agent with \"architect\", its model and instructions;\n"
          "else FILE's supervisor model) designs a team for GOAL: a supervisor-star workflow\n"
          "of single-purpose agents using FILE's tools and MCP servers. A design that does not\n"
          "check out goes back with the reasons (at most N designs, default 3). The team is\n"
          "saved as DIR/<team>.json (default: the architect agent's out_dir, else beside\n"
          "FILE); run it with `weft run`, or give an agent {\"workflow\": \"<team>.json\"} to\n"
          "route to it as one node.\n"
          "\n"
          "options:\n"
          "      --workflow FILE  the models, tools and MCP servers the architect works with\n"
          "      --out DIR        where the team's file goes\n"
          "      --attempts N     designs asked for at most, 1 to 10\n"
          "      --depth N        levels of composition, 1 to 3 (default 1: the team has no\n"
          "                       architect agent of its own)\n"
          "      --no-trace       keep the architect's spans out of the local store\n"
          "  -h, --help           this help\n"
          "\n"
          "exit status: 0 composed, 1 the architect could not run or the file not be written,\n"
          "2 bad usage or every design was rejected\n",
          out);
}

int
cli_compose(int argc, char **argv)
{
    const char *workflow = NULL;
    const char *out = NULL;
    const char *attempts_text = NULL;
    const char *depth_text = NULL;
    bool is_help = false;
    bool is_no_trace = false;
    const struct cli_option options[] = {
        {"workflow", 0, true, false, &workflow, NULL},
        {"out", 0, true, false, &out, NULL},
        {"attempts", 0, true, false, &attempts_text, NULL},
        {"depth", 0, true, false, &depth_text, NULL},
        {"no-trace", 0, false, false, NULL, &is_no_trace},
        {"help", 'h', false, false, NULL, &is_help},
    };
    char *pos[1];
    size_t count = 0;
    size_t attempts = 0;
    size_t depth = 0;
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    struct weft_compose_options o;
    struct cli_telemetry tel;
    char *path = NULL;
    char error[4096] = "";
    weft_err err = WEFT_OK;
    int rc = CLI_EXIT_OK;

    if (cli_parse("compose", argc, argv, options, sizeof(options) / sizeof(options[0]), pos, 1,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_compose_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 1 || workflow == NULL ||
        (attempts_text != NULL && !cli_parse_size(attempts_text, 1, 10, &attempts)) ||
        (depth_text != NULL && !cli_parse_size(depth_text, 1, 3, &depth))) {
        cli_compose_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    err = weft_workflow_load(workflow, &wf, &diags);
    if (err != WEFT_OK) {
        cli_print_diags(workflow, err, &diags);
        weft_diags_cleanup(&diags);
        return CLI_EXIT_USAGE;
    }
    memset(&tel, 0, sizeof(tel));
    if (!is_no_trace && cli_start_tracing("compose", NULL, &tel) != CLI_EXIT_OK) {
        weft_workflow_free(wf);
        return CLI_EXIT_USAGE;
    }
    memset(&o, 0, sizeof(o));
    o.goal = pos[0];
    o.base = wf;
    o.out_dir = out;
    o.max_attempts = (unsigned)attempts;
    o.max_depth = (unsigned)depth;
    o.provider = tel.provider;
    err = weft_compose(&o, &path, error, sizeof(error));
    if (err == WEFT_OK) {
        printf("composed team: %s\n", path);
    } else {
        fprintf(stderr, "weft compose: %s\n", error[0] != '\0' ? error : weft_strerror(err));
        rc = err == WEFT_EPARSE || err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    weft_compose_text_free(path);
    cli_telemetry_stop(&tel);
    weft_workflow_free(wf);
    return rc;
}

void
cli_teams_usage(FILE *out)
{
    fputs("usage: weft teams [--run RUN_ID] [--limit N] [--state PATH] [--json]\n"
          "\n"
          "The teams architects composed (`weft compose`, architect agents during runs), as\n"
          "the state store keeps them: newest first, or one run's in the order they were\n"
          "composed. Each row: name, when, the run it was composed for, its file, the goal.\n"
          "\n"
          "options:\n"
          "      --run RUN_ID  one run's teams (an id, a unique prefix of one, or \"last\")\n"
          "  -n, --limit N     teams to list (default 50, at most 10000)\n"
          "      --state PATH  state: a SQLite file or a postgresql:// URL (default\n"
          "                    $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --json        {\"schema\": \"weft.teams/v1\", \"teams\": [{id, name, path, goal,\n"
          "                    run_id, created, team}]} (team: the design)\n"
          "\n"
          "exit status: 0 ok, 1 the store cannot be read or --run matches no run, 2 bad usage\n",
          out);
}

static int
teams_json(const struct weft_team_record *teams, size_t count)
{
    json_t *list = json_array();

    for (size_t i = 0; list != NULL && i < count; i++) {
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:s, s:s, s:s?, s:I, s:o?}", "id", teams[i].id, "name",
                            teams[i].name, "path", teams[i].path, "goal", teams[i].goal, "run_id",
                            teams[i].run_id, "created_ns", (json_int_t)teams[i].created_ns, "team",
                            json_loads(teams[i].document, 0, NULL)));
    }
    return cli_json_print(json_pack("{s:s, s:o?}", "schema", "weft.teams/v1", "teams", list));
}

int
cli_teams(int argc, char **argv)
{
    const char *state = NULL;
    const char *run = NULL;
    const char *limit_text = NULL;
    bool is_help = false;
    bool is_json = false;
    size_t limit = 50;
    size_t count = 0;
    struct weft_team_record *teams = NULL;
    struct weft_run_details *details = NULL;
    const struct cli_option options[] = {
        {"run", 0, true, false, &run, NULL},         {"limit", 'n', true, false, &limit_text, NULL},
        {"state", 0, true, false, &state, NULL},     {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;
    int rc = CLI_EXIT_OK;

    if (cli_parse("teams", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL, 0,
                  &count) != CLI_EXIT_OK ||
        (limit_text != NULL && !cli_parse_size(limit_text, 1, 10000, &limit))) {
        cli_teams_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_teams_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (run != NULL) {
        /* --run takes what the tables show (an 8-character prefix, or "last") as run show does;
         * a run that matches nothing is an error, not an empty list that reads as "no teams". */
        err = weft_run_load(state, run, &details);
        if (err != WEFT_OK) {
            fprintf(stderr, "weft teams: %s '%s'%s\n",
                    err == WEFT_EINVAL ? "ambiguous run id" : "no run", run,
                    err == WEFT_ENOTFOUND ? " (or no state database yet)" : "");
            return CLI_EXIT_FAIL;
        }
        run = details->info.run_id;
    }
    err = weft_teams_list(state, run, limit, &teams, &count);
    weft_run_details_free(details);
    /* run pointed into details */
    run = NULL;
    if (err != WEFT_OK && err != WEFT_ENOTFOUND) { /* no database yet: no teams */
        fprintf(stderr, "weft teams: cannot read the state store: %s\n", weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    if (is_json) {
        rc = teams_json(teams, count);
    } else if (count == 0) {
        printf("no composed teams yet\n");
    } else {
        printf("%-24s %-19s %-10s %s\n", "TEAM", "COMPOSED", "RUN", "FILE / GOAL");
        for (size_t i = 0; i < count; i++) {
            time_t secs = (time_t)(teams[i].created_ns / 1000000000u);
            struct tm tm;
            char when[32] = "-";
            if (localtime_r(&secs, &tm) != NULL) {
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
            }
            printf("%-24.24s %-19s %-10.8s %s\n", teams[i].name, when,
                   teams[i].run_id != NULL ? teams[i].run_id : "-", teams[i].path);
            printf("%56s", "");
            cli_put_clean(stdout, teams[i].goal, 70);
            putchar('\n');
        }
    }
    weft_teams_free(teams, count);
    return rc;
}

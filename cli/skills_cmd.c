/* cli/skills_cmd.c - `weft skills list|show|forget`: the skill memory kept in the state store
 * (include/weft/skills.h, docs/memory.md), inspected and pruned. */
#include "cli.h"
#include "report/docs.h"

#include <string.h>
#include <time.h>
#include <weft/weft.h>

void
cli_skills_usage(FILE *out)
{
    fputs("usage: weft skills list [--agent A] [--limit N] [--state PATH] [--json]\n"
          "       weft skills show ID|prefix [--state PATH] [--json]\n"
          "       weft skills forget ID|prefix | --agent A [--state PATH]\n"
          "\n"
          "  list     stored skills, newest first: id, agent, reward, uses, task\n"
          "  show     one skill whole: its task, solution and where it came from\n"
          "  forget   delete one skill, or every skill of an agent; prints how many\n"
          "\n"
          "options:\n"
          "      --agent A     one agent's skills\n"
          "  -n, --limit N     skills to list (default 50, at most 10000)\n"
          "      --state PATH  state: a SQLite file or a postgresql:// URL (default\n"
          "                    $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --json        one JSON document (schema weft.skills/v1, weft.skill/v1:\n"
          "                    docs/cli-json.md)\n"
          "\n"
          "exit status: 0 ok, 1 no such skill, an ambiguous prefix or no database, 2 bad usage\n",
          out);
}

static int
explain(const char *cmd, weft_err err, const char *ref)
{
    if (err == WEFT_ENOTFOUND) {
        fprintf(stderr, "weft skills %s: no skill '%s' (or no state database yet)\n", cmd, ref);
    } else if (err == WEFT_EINVAL) {
        fprintf(stderr, "weft skills %s: '%s' is not a skill id or names several skills\n", cmd,
                ref);
    } else {
        fprintf(stderr, "weft skills %s: %s: %s\n", cmd, ref, weft_strerror(err));
    }
    return CLI_EXIT_FAIL;
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

static int
skills_list(int argc, char **argv)
{
    const char *state = NULL;
    const char *agent = NULL;
    const char *limit_text = NULL;
    bool is_help = false;
    bool is_json = false;
    size_t limit = 50;
    size_t count = 0;
    struct weft_skill *skills = NULL;
    const struct cli_option options[] = {
        {"agent", 0, true, false, &agent, NULL},     {"limit", 'n', true, false, &limit_text, NULL},
        {"state", 0, true, false, &state, NULL},     {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;

    if (cli_parse("skills list", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL, 0,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_skills_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (limit_text != NULL && !cli_parse_size(limit_text, 1, 10000, &limit)) {
        fprintf(stderr, "weft skills list: --limit: expected a number from 1 to 10000\n");
        return CLI_EXIT_USAGE;
    }
    err = weft_skills_list(state, agent, limit, &skills, &count);
    if (err == WEFT_ENOTFOUND) {
        err = WEFT_OK; /* no database yet: no skills */
    }
    if (err != WEFT_OK) {
        return explain("list", err, "state database");
    }
    if (is_json) {
        json_t *doc = weft__doc_skills(skills, count);

        weft_skills_free(skills, count);
        return cli_json_print(doc);
    }
    if (count == 0) {
        printf("no skills yet\n");
        return CLI_EXIT_OK;
    }
    printf("%-8s %-16s %7s %5s %-19s %s\n", "ID", "AGENT", "REWARD", "USES", "SAVED", "TASK");
    for (size_t i = 0; i < count; i++) {
        char saved[32];

        format_time(skills[i].created_ns, saved, sizeof(saved));
        printf("%-8.8s ", skills[i].id);
        printf("%*s", (int)(17 - cli_put_clean(stdout, skills[i].agent, 16)), "");
        printf("%7.2f %5llu %-19s ", skills[i].reward, (unsigned long long)skills[i].uses, saved);
        cli_put_clean(stdout, skills[i].task, 60);
        putchar('\n');
    }
    weft_skills_free(skills, count);
    return CLI_EXIT_OK;
}

/* A stored task or solution is multi-line text (code, mostly): its newlines and tabs are printed
 * as such; other control characters (C0, DEL, C1) become '?' so that a stored text cannot move
 * the terminal's cursor or change its colours. At most max_bytes bytes are printed. */
static void
put_text(const char *text, size_t max_bytes)
{
    const unsigned char *p = (const unsigned char *)(text != NULL ? text : "");
    size_t n = 0;

    for (; p[n] != '\0' && n < max_bytes; n++) {
        if (p[n] == '\n' || p[n] == '\t') {
            putchar(p[n]);
        } else if (p[n] < 0x20 || p[n] == 0x7f) {
            putchar('?');
        } else if (p[n] == 0xc2 && p[n + 1] >= 0x80 && p[n + 1] <= 0x9f) {
            putchar('?');
            n++;
        } else {
            putchar(p[n]);
        }
    }
    if (p[n] != '\0') {
        printf("\n... (cut at %zu bytes; weft skills show --json has it all)", max_bytes);
    }
}

static int
skills_show(int argc, char **argv)
{
    const char *state = NULL;
    bool is_help = false;
    bool is_json = false;
    char *ref[1] = {NULL};
    size_t count = 0;
    struct weft_skill *s = NULL;
    char when[32];
    const struct cli_option options[] = {
        {"state", 0, true, false, &state, NULL},
        {"json", 0, false, false, NULL, &is_json},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;

    if (cli_parse("skills show", argc, argv, options, sizeof(options) / sizeof(options[0]), ref, 1,
                  &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_skills_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count != 1) {
        fputs("weft skills show: which skill? give its id or a prefix of it\n", stderr);
        return CLI_EXIT_USAGE;
    }
    err = weft_skill_show(state, ref[0], &s);
    if (err != WEFT_OK) {
        return explain("show", err, ref[0]);
    }
    if (is_json) {
        json_t *doc = json_object();

        if (doc != NULL) {
            json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_SKILL));
            json_object_set_new(doc, "skill", weft__doc_skill(s, true));
        }
        weft_skills_free(s, 1);
        return cli_json_print(doc);
    }
    printf("skill     %s\n", s->id);
    printf("agent     ");
    cli_put_clean(stdout, s->agent, 200);
    printf("\nreward    %.2f\nuses      %llu\n", s->reward, (unsigned long long)s->uses);
    format_time(s->created_ns, when, sizeof(when));
    printf("saved     %s\n", when);
    format_time(s->last_used_ns, when, sizeof(when));
    printf("last used %s\n", when);
    printf("workflow  ");
    cli_put_clean(stdout, s->workflow != NULL ? s->workflow : "-", 200);
    printf("\nrun       ");
    cli_put_clean(stdout, s->run_id != NULL ? s->run_id : "-", 200);
    printf("\ntrace     %s", s->trace_id != NULL ? s->trace_id : "-");
    printf("\nspan      %s\n\ntask:\n", s->span_id != NULL ? s->span_id : "-");
    put_text(s->task, 100000);
    printf("\n\nsolution:\n");
    put_text(s->solution, 100000);
    putchar('\n');
    weft_skills_free(s, 1);
    return CLI_EXIT_OK;
}

static int
skills_forget(int argc, char **argv)
{
    const char *state = NULL;
    const char *agent = NULL;
    bool is_help = false;
    char *ref[1] = {NULL};
    size_t count = 0;
    size_t removed = 0;
    const struct cli_option options[] = {
        {"agent", 0, true, false, &agent, NULL},
        {"state", 0, true, false, &state, NULL},
        {"help", 'h', false, false, NULL, &is_help},
    };
    weft_err err = WEFT_OK;

    if (cli_parse("skills forget", argc, argv, options, sizeof(options) / sizeof(options[0]), ref,
                  1, &count) != CLI_EXIT_OK) {
        return CLI_EXIT_USAGE;
    }
    if (is_help) {
        cli_skills_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (count == 0 && agent == NULL) {
        fputs("weft skills forget: which skills? give an id or prefix, or --agent A\n", stderr);
        return CLI_EXIT_USAGE;
    }
    err = weft_skills_forget(state, count > 0 ? ref[0] : NULL, agent, &removed);
    if (err != WEFT_OK) {
        return explain("forget", err, count > 0 ? ref[0] : agent);
    }
    printf("removed %zu skill%s\n", removed, removed == 1 ? "" : "s");
    return CLI_EXIT_OK;
}

int
cli_skills(int argc, char **argv)
{
    if (argc < 2) {
        fputs("weft skills: which subcommand? list, show or forget\n", stderr);
        cli_skills_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        cli_skills_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "list") == 0) {
        return skills_list(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "show") == 0) {
        return skills_show(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "forget") == 0) {
        return skills_forget(argc - 1, argv + 1);
    }
    fprintf(stderr, "weft skills: unknown subcommand '%s'\n", argv[1]);
    cli_skills_usage(stderr);
    return CLI_EXIT_USAGE;
}

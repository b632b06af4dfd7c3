/* tests/cli/test_skills.c - `weft skills list|show|forget` end to end: the built `weft` binary
 * reads a SQLite state filled through the state interface (runtime/state/state.h) in a temporary
 * WEFT_HOME, as text and as the JSON documents of docs/cli-json.md (parsed and checked type by
 * type); prefixes, an ambiguous prefix, forgetting one skill and an agent's, bad usage, and a
 * missing database; multi-line skills shown as lines; `weft teams --run` with a run prefix. */
#include "runtime/state/state.h"
#include "support/cli_run.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEFT_BIN WEFT_BINARY_DIR "/weft"

static void
save(struct rt_state *st, const char *id, const char *agent, const char *task, double reward)
{
    struct weft__skill s;

    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "%s", id);
    s.agent = (char *)agent;
    s.task = (char *)task;
    s.solution = "step 1: read the file\nstep 2: fix it";
    s.workflow = "wf";
    s.run_id = "run-7";
    memcpy(s.trace_id, "0123456789abcdef0123456789abcdef", 33);
    s.reward = reward;
    assert_weft_ok(weft__state_skill_save(st, &s, NULL));
}

static int
setup(void **state)
{
    struct weft_test_cli *f = weft_test_cli_new(WEFT_BIN, "weft-skills");
    struct rt_state *st = NULL;
    char err[256];

    assert_weft_ok(weft__state_open(f->state, &st, err, sizeof(err)));
    save(st, "aaaa0000-0000-4000-8000-000000000001", "coder", "Fix the JSON parser", 1.0);
    save(st, "aaaa1111-0000-4000-8000-000000000002", "coder", "Write parser tests", 1.5);
    save(st, "bbbb0000-0000-4000-8000-000000000003", "reviewer", "Review the parser fix", 0.5);
    weft__state_close(st);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    weft_test_cli_free(*state);
    return 0;
}

static void
test_skills_list_as_text_and_json(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r = WEFT_TEST_CLI_RUN(f, "skills", "list");
    json_t *doc = NULL;
    json_t *first = NULL;

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "ID"));
    assert_non_null(strstr(r.out, "aaaa0000"));
    assert_non_null(strstr(r.out, "Review the parser fix"));
    r = WEFT_TEST_CLI_RUN(f, "skills", "list", "--agent", "coder", "--limit", "1", "--json");
    assert_int_equal(r.status, 0);
    doc = weft_test_json_parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.skills/v1");
    assert_int_equal(json_array_size(json_object_get(doc, "skills")), 1);
    first = json_array_get(json_object_get(doc, "skills"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "agent")), "coder");
    assert_true(json_is_real(json_object_get(first, "reward")));
    assert_true(json_is_integer(json_object_get(first, "uses")));
    assert_true(json_is_integer(json_object_get(first, "created_ns")));
    assert_true(json_is_string(json_object_get(first, "created")));
    assert_true(json_is_null(json_object_get(first, "last_used_ns")));
    assert_true(json_is_null(json_object_get(first, "span_id")));
    assert_null(json_object_get(first, "solution")); /* lists leave it out */
    json_decref(doc);
    r = WEFT_TEST_CLI_RUN(f, "skills", "list", "--limit", "0");
    assert_int_equal(r.status, 2);
}

static void
test_skills_show_by_prefix(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r = WEFT_TEST_CLI_RUN(f, "skills", "show", "aaaa1");
    json_t *doc = NULL;
    json_t *skill = NULL;

    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "aaaa1111-0000-4000-8000-000000000002"));
    assert_non_null(strstr(r.out, "Write parser tests"));
    assert_non_null(strstr(r.out, "step 2: fix it"));
    r = WEFT_TEST_CLI_RUN(f, "skills", "show", "AAAA0000", "--json");
    assert_int_equal(r.status, 0);
    doc = weft_test_json_parse(r.out);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.skill/v1");
    skill = json_object_get(doc, "skill");
    assert_string_equal(json_string_value(json_object_get(skill, "id")),
                        "aaaa0000-0000-4000-8000-000000000001");
    assert_string_equal(json_string_value(json_object_get(skill, "solution")),
                        "step 1: read the file\nstep 2: fix it");
    assert_string_equal(json_string_value(json_object_get(skill, "run_id")), "run-7");
    assert_string_equal(json_string_value(json_object_get(skill, "trace_id")),
                        "0123456789abcdef0123456789abcdef");
    json_decref(doc);
    /* Ambiguous, unknown, malformed, missing. */
    r = WEFT_TEST_CLI_RUN(f, "skills", "show", "aaaa");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "names several skills"));
    r = WEFT_TEST_CLI_RUN(f, "skills", "show", "cccc");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no skill 'cccc'"));
    r = WEFT_TEST_CLI_RUN(f, "skills", "show", "x'; --");
    assert_int_equal(r.status, 1);
    r = WEFT_TEST_CLI_RUN(f, "skills", "show");
    assert_int_equal(r.status, 2);
}

static void
test_skills_forget_one_or_an_agents(void **state)
{
    struct weft_test_cli *f = *state;
    struct weft_test_cli_result r = WEFT_TEST_CLI_RUN(f, "skills", "forget", "bbbb");

    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "removed 1 skill\n");
    r = WEFT_TEST_CLI_RUN(f, "skills", "forget", "bbbb");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "removed 0 skills\n");
    r = WEFT_TEST_CLI_RUN(f, "skills", "forget", "aaaa");
    assert_int_equal(r.status, 1);
    r = WEFT_TEST_CLI_RUN(f, "skills", "forget", "--agent", "coder");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "removed 2 skills\n");
    r = WEFT_TEST_CLI_RUN(f, "skills", "list");
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "no skills yet\n");
    r = WEFT_TEST_CLI_RUN(f, "skills", "forget");
    assert_int_equal(r.status, 2);
    r = WEFT_TEST_CLI_RUN(f, "skills", "frobnicate");
    assert_int_equal(r.status, 2);
}

/* A stored task or solution is multi-line text: show prints its lines as lines (issue 26: each
 * newline read as '?'), and still turns other control characters (an ESC) into '?'. */
static void
test_skills_show_prints_lines_as_lines(void **state)
{
    struct weft_test_cli *f = *state;
    struct rt_state *st = NULL;
    struct weft__skill s;
    char err[256];
    struct weft_test_cli_result r;

    assert_weft_ok(weft__state_open(f->state, &st, err, sizeof(err)));
    memset(&s, 0, sizeof(s));
    snprintf(s.id, sizeof(s.id), "%s", "dddd0000-0000-4000-8000-000000000004");
    s.agent = "coder";
    s.task = "Write slugify\ninto slug.py";
    s.solution = "def slugify(title):\n\treturn title.lower()\n\x1b[31mred";
    s.run_id = "run-8";
    s.reward = 1.0;
    assert_weft_ok(weft__state_skill_save(st, &s, NULL));
    weft__state_close(st);
    r = WEFT_TEST_CLI_RUN(f, "skills", "show", "dddd");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "task:\nWrite slugify\ninto slug.py\n"));
    assert_non_null(strstr(r.out, "def slugify(title):\n\treturn title.lower()\n?[31mred"));
    assert_null(strchr(r.out, 0x1b));
}

/* `weft teams --run` takes the prefix the tables show (and "last"), as `run show` does; a run
 * that matches nothing is an error, not an empty list (issue 26: the 8-character prefix listed
 * nothing, with exit 0). */
static void
test_teams_take_a_run_prefix(void **state)
{
    struct weft_test_cli *f = *state;
    struct rt_state *st = NULL;
    struct weft__state_team t;
    char err[256];
    char run_id[64];
    char prefix[9];
    json_t *doc = NULL;
    struct weft_test_cli_result r = WEFT_TEST_CLI_RUN(
        f, "run", WEFT_SOURCE_DIR "/examples/correction/workflow.json", "--quiet", "--no-trace");

    assert_int_equal(r.status, 0);
    r = WEFT_TEST_CLI_RUN(f, "runs", "--json");
    assert_int_equal(r.status, 0);
    doc = weft_test_json_parse(r.out);
    snprintf(run_id, sizeof(run_id), "%s",
             json_string_value(
                 json_object_get(json_array_get(json_object_get(doc, "runs"), 0), "run_id")));
    json_decref(doc);
    assert_true(strlen(run_id) > 8);
    snprintf(prefix, sizeof(prefix), "%.8s", run_id);
    assert_weft_ok(weft__state_open(f->state, &st, err, sizeof(err)));
    memset(&t, 0, sizeof(t));
    t.name = "slug_team";
    t.path = "/tmp/slug_team.json";
    t.goal = "Write slugify";
    t.document = "{\"agents\": []}";
    t.run_id = run_id;
    assert_weft_ok(weft__state_team_save(st, &t));
    weft__state_close(st);

    r = WEFT_TEST_CLI_RUN(f, "teams", "--run", run_id);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "slug_team"));
    r = WEFT_TEST_CLI_RUN(f, "teams", "--run", prefix);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "slug_team"));
    r = WEFT_TEST_CLI_RUN(f, "teams", "--run", "last", "--json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "slug_team"));
    r = WEFT_TEST_CLI_RUN(f, "teams", "--run", "ffffffff");
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "no run 'ffffffff'"));
    assert_null(strstr(r.out, "no composed teams yet"));
}

static void
test_skills_without_a_database(void **state)
{
    struct weft_test_cli *f = *state;
    char missing[160];
    struct weft_test_cli_result r;

    snprintf(missing, sizeof(missing), "%s/none.db", f->dir);
    r = WEFT_TEST_CLI_RUN(f, "skills", "list", "--state", missing, "--json");
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "\"skills\": []"));
    r = WEFT_TEST_CLI_RUN(f, "skills", "show", "aaaa0", "--state", missing);
    assert_int_equal(r.status, 1);
    assert_int_equal(access(missing, F_OK), -1); /* reading never creates state */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_skills_list_as_text_and_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skills_show_by_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skills_forget_one_or_an_agents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skills_without_a_database, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skills_show_prints_lines_as_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teams_take_a_run_prefix, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

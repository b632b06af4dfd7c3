/* tests/support/cli_run.c - the built `weft` binary run as a user types it (cli_run.h). */
#include "support/cli_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct weft_test_cli *
weft_test_cli_new(const char *bin, const char *prefix)
{
    struct weft_test_cli *cli = calloc(1, sizeof(*cli));

    assert_non_null(cli);
    assert_true(strlen(prefix) <= 40);
    cli->bin = bin;
    cli->out = malloc(WEFT_TEST_CLI_OUTPUT_MAX);
    cli->err = malloc(WEFT_TEST_CLI_OUTPUT_MAX);
    assert_non_null(cli->out);
    assert_non_null(cli->err);
    cli->out[0] = '\0';
    cli->err[0] = '\0';
    snprintf(cli->dir, sizeof(cli->dir), "/tmp/%s-XXXXXX", prefix);
    assert_non_null(mkdtemp(cli->dir));
    weft_test_setenv("WEFT_HOME", cli->dir);
    snprintf(cli->state, sizeof(cli->state), "%s/state.db", cli->dir);
    return cli;
}

void
weft_test_cli_free(struct weft_test_cli *cli)
{
    if (cli == NULL) {
        return;
    }
    weft_test_rmtree(cli->dir);
    free(cli->out);
    free(cli->err);
    free(cli);
}

struct weft_test_cli_result
weft_test_cli_run(struct weft_test_cli *cli, const char *const *args)
{
    struct weft_test_cli_result r = {0};
    char cwd[4096];

    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(cli->dir), 0);
    r.status = weft_test_run_captured(cli->bin, args, cli->dir, cli->out, WEFT_TEST_CLI_OUTPUT_MAX,
                                      cli->err, WEFT_TEST_CLI_OUTPUT_MAX);
    assert_int_equal(chdir(cwd), 0);
    r.out = cli->out;
    r.err = cli->err;
    return r;
}

json_t *
weft_test_json_parse(const char *text)
{
    json_error_t error;
    json_t *doc = json_loads(text, 0, &error);

    if (doc == NULL) {
        fail_msg("not JSON: %s (line %d): %s", error.text, error.line, text);
    }
    return doc;
}

/* tests/support/cli_run.h - the built `weft` binary run as a user types it: a temporary
 * directory that is WEFT_HOME and the working directory of every run (so the file names a
 * test passes are relative to it), each run's exit status and captured output, and its JSON
 * output parsed. */
#ifndef WEFT_TESTS_SUPPORT_CLI_RUN_H
#define WEFT_TESTS_SUPPORT_CLI_RUN_H

#include "support/weft_test.h"

#include <jansson.h>

#define WEFT_TEST_CLI_OUTPUT_MAX (1u << 20) /* bytes of stdout and of stderr kept per run */

struct weft_test_cli {
    char dir[64];    /* the temporary directory: WEFT_HOME and every run's working directory */
    char state[128]; /* dir/state.db (not created here) */
    const char *bin; /* the weft binary (borrowed) */
    char *out;       /* the last run's stdout, NUL-terminated */
    char *err;       /* the last run's stderr, NUL-terminated */
};

/* One run: its exit status, and its stdout and stderr (the cli's buffers, overwritten by the
 * next run). */
struct weft_test_cli_result {
    int status;
    const char *out;
    const char *err;
};

/* A new cli for @p bin (borrowed) in a new directory /tmp/PREFIX-XXXXXX (@p prefix at most 40
 * bytes), WEFT_HOME set to it. Fails the test when it cannot. Free with weft_test_cli_free(). */
struct weft_test_cli *weft_test_cli_new(const char *bin, const char *prefix);

/* Remove the cli's directory and everything in it, and free the cli; NULL is a no-op. */
void weft_test_cli_free(struct weft_test_cli *cli);

/* Run the binary with @p args (NULL-terminated, without argv[0]) from the cli's directory and
 * wait for it; the working directory is restored after. Fails the test when it cannot run or
 * does not exit normally. */
struct weft_test_cli_result weft_test_cli_run(struct weft_test_cli *cli, const char *const *args);

#define WEFT_TEST_CLI_RUN(cli, ...) \
    weft_test_cli_run((cli), (const char *const[]){__VA_ARGS__, NULL})

/* @p text parsed as one JSON document (json_decref() it); fails the test, printing the text,
 * when it is not JSON. */
json_t *weft_test_json_parse(const char *text);

#endif

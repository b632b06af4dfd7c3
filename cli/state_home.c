/* cli/state_home.c - a run's state and its spans stay together (docs/durability.md).
 *
 * The span store (weft.db), the traces file and the workspaces default to $WEFT_HOME, else
 * ./.weft, while `--state FILE` can put a run's state anywhere: a run started with
 * `--state /tmp/x/state.db` from one directory used to leave its spans in that directory's
 * ./.weft/weft.db, where `weft serve --state /tmp/x/state.db` started from another directory
 * never looked (its explorer answered 404 for the run's trace). So, as the state's default is
 * $WEFT_HOME/state.db, an explicit SQLite `--state` names the home when WEFT_HOME is unset:
 * the directory of the file. Every command goes through here before it runs, writers and
 * readers alike, so they agree on where the spans are. WEFT_HOME, when set, wins (it is the
 * user's explicit choice); a postgresql:// state keeps the run's spans in that database too
 * (WEFT_TRACE_STORE_URL, unless set), as WEFT_STATE_URL does (store/location.c); `weft serve
 * --store` still names the span store itself.
 */
#define _GNU_SOURCE /* realpath, setenv */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The value of the first --state option of @p argv (after the command's name), or NULL. */
static const char *
state_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
        if (strcmp(argv[i], "--state") == 0) {
            return i + 1 < argc ? argv[i + 1] : NULL;
        }
        if (strncmp(argv[i], "--state=", 8) == 0) {
            return argv[i] + 8;
        }
    }
    return NULL;
}

void
cli_state_home(int argc, char **argv)
{
    const char *state = state_arg(argc, argv);
    const char *home = getenv("WEFT_HOME");
    const char *slash = NULL;
    char dir[PATH_MAX];
    char abs[PATH_MAX];
    size_t n = 0;

    if (state != NULL &&
        (strncmp(state, "postgresql://", 13) == 0 || strncmp(state, "postgres://", 11) == 0)) {
        /* A PostgreSQL state keeps its spans there too (as WEFT_STATE_URL does), unless the
         * user named the span store. */
        const char *trace = getenv("WEFT_TRACE_STORE_URL");
        if (trace == NULL || trace[0] == '\0') {
            (void)setenv("WEFT_TRACE_STORE_URL", state, 1);
        }
        return;
    }
    if (state == NULL || state[0] == '\0' || (home != NULL && home[0] != '\0') ||
        strstr(state, "://") != NULL || strcmp(state, ":memory:") == 0 ||
        strncmp(state, "file:", 5) == 0) {
        return;
    }
    slash = strrchr(state, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof(dir), ".");
    } else {
        n = slash == state ? 1 : (size_t)(slash - state);
        if (n >= sizeof(dir)) {
            return;
        }
        memcpy(dir, state, n);
        dir[n] = '\0';
    }
    /* Absolute, so that the spans' place does not depend on where a later reader starts (a
     * directory that does not exist yet is made so by hand, and left to the state database to
     * report). */
    if (realpath(dir, abs) == NULL) {
        char cwd[PATH_MAX];

        if (dir[0] == '/') {
            snprintf(abs, sizeof(abs), "%s", dir);
        } else if (getcwd(cwd, sizeof(cwd)) == NULL ||
                   snprintf(abs, sizeof(abs), "%s/%s", cwd, dir) >= (int)sizeof(abs)) {
            return;
        }
    }
    (void)setenv("WEFT_HOME", abs, 1);
}

/* tests/runtime/test_tools.c - every tool type run for real through weft__tool_run():
 * - read_file / write_file in a mkdtemp workspace: round trips, parents created, atomic
 *   replacement, and every way out refused ("..", absolute paths, a symlinked file, a
 *   symlinked directory component, for reading and for writing), size caps, FIFOs;
 * - command: exit codes, stdout and stderr, a timeout that kills and reaps, output caps that
 *   never block, missing programs, appended arguments without a shell, cwd confinement,
 *   descriptors closed in the child, concurrent calls from several threads;
 * - http_get against the real HTTP server of tests/support/http_receiver.h on 127.0.0.1: the
 *   allowlist (refused requests never reach the server), userinfo tricks, schemes, statuses,
 *   redirects not followed, the body cap;
 * - native tools from a registry, including out-of-memory loops.
 * Complements test_tool_run.c with the edges listed above. */
#define _GNU_SOURCE /* realpath, nftw, F_DUPFD */

#include "runtime/tools/tools.h"
#include "support/failalloc.h"
#include "support/http_receiver.h"
#include "support/weft_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct fx {
    char root[PATH_MAX];   /* mkdtemp directory: holds the workspace and "outside" files */
    char ws[PATH_MAX + 8]; /* the workspace, root/ws */
    struct tool_outcome out;
    json_t *parsed; /* f->out.output parsed */
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char tmpl[] = "/tmp/weft-test-tools-XXXXXX";

    assert_non_null(f);
    assert_non_null(mkdtemp(tmpl));
    /* The real path: /tmp may itself be a symlink, and outputs are compared with it. */
    assert_non_null(realpath(tmpl, f->root));
    snprintf(f->ws, sizeof(f->ws), "%s/ws", f->root);
    assert_int_equal(mkdir(f->ws, 0755), 0);
    *state = f;
    return 0;
}

static int
remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft__tool_outcome_cleanup(&f->out);
    json_decref(f->parsed);
    assert_int_equal(nftw(f->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(f);
    return 0;
}

static void
put(const char *dir, const char *name, const char *text)
{
    char path[3 * PATH_MAX]; /* dir may be a 2 * PATH_MAX buffer: room for "/name" too */
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* The content of dir/name, or "" when it cannot be read (static buffer). */
static const char *
slurp(const char *dir, const char *name)
{
    static char buf[4096];
    char path[3 * PATH_MAX];
    FILE *fp = NULL;
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    buf[0] = '\0';
    fp = fopen(path, "r");
    if (fp != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, fp);
        buf[n] = '\0';
        fclose(fp);
    }
    return buf;
}

static bool
exists(const char *dir, const char *name)
{
    char path[2 * PATH_MAX];
    struct stat st;

    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        return false;
    }
    return lstat(path, &st) == 0;
}

/* Run @p def with @p args_json in the workspace; the outcome stays in f->out, its output
 * parsed in f->parsed (always a JSON object for the built-in tools). */
static void
call(struct fx *f, const struct tool_def *def, const char *args_json)
{
    json_error_t jerr;
    json_t *args = json_loads(args_json, 0, &jerr);

    if (args == NULL) {
        fail_msg("bad test JSON %s: %s", args_json, jerr.text);
    }
    weft__tool_outcome_cleanup(&f->out);
    json_decref(f->parsed);
    f->parsed = NULL;
    assert_weft_ok(weft__tool_run(def, f->ws, args, &f->out));
    assert_non_null(f->out.output);
    json_decref(args);
    if (def->type != TOOL_NATIVE) {
        f->parsed = json_loads(f->out.output, 0, &jerr);
        if (!json_is_object(f->parsed)) {
            fail_msg("output is not a JSON object: %s", f->out.output);
        }
        /* Errors always say what kind they are, in the struct and in the text. */
        if (f->out.is_error && def->type != TOOL_COMMAND && def->type != TOOL_HTTP_GET) {
            const char *type = json_string_value(json_object_get(f->parsed, "type"));
            assert_non_null(type);
            assert_string_equal(type, f->out.error_type);
        }
        if (f->out.is_error) {
            assert_string_not_equal(f->out.error_type, "");
        } else {
            assert_string_equal(f->out.error_type, "");
        }
    }
}

static const char *
field_str(struct fx *f, const char *key)
{
    const char *s = json_string_value(json_object_get(f->parsed, key));
    if (s == NULL) {
        fail_msg("no string \"%s\" in %s", key, f->out.output);
    }
    return s;
}

static json_int_t
field_int(struct fx *f, const char *key)
{
    const json_t *v = json_object_get(f->parsed, key);
    if (!json_is_integer(v)) {
        fail_msg("no integer \"%s\" in %s", key, f->out.output);
    }
    return json_integer_value(v);
}

static void
expect_error(struct fx *f, const char *type)
{
    if (!f->out.is_error || strcmp(f->out.error_type, type) != 0) {
        fail_msg("expected a %s error, got is_error=%d type='%s': %s", type, f->out.is_error,
                 f->out.error_type, f->out.output);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* read_file / write_file                                                                      */

static const struct tool_def read_def = {.type = TOOL_READ_FILE};
static const struct tool_def write_def = {.type = TOOL_WRITE_FILE};

static void
test_tools_write_creates_parents_and_read_returns_it(void **state)
{
    struct fx *f = *state;

    call(f, &write_def, "{\"path\": \"notes/2024/q1/plan.md\", \"content\": \"# Plan\\n\"}");
    assert_false(f->out.is_error);
    assert_int_equal(f->out.exit_code, -1);
    assert_string_equal(field_str(f, "path"), "notes/2024/q1/plan.md");
    assert_int_equal(field_int(f, "bytes"), 7);
    assert_int_equal(json_object_size(f->parsed), 2);
    assert_string_equal(slurp(f->ws, "notes/2024/q1/plan.md"), "# Plan\n");

    call(f, &read_def, "{\"path\": \"notes/2024/q1/plan.md\"}");
    assert_false(f->out.is_error);
    assert_string_equal(field_str(f, "path"), "notes/2024/q1/plan.md");
    assert_string_equal(field_str(f, "content"), "# Plan\n");
    assert_int_equal(field_int(f, "bytes"), 7);
    assert_int_equal(json_object_size(f->parsed), 3);
    /* "." and empty components stay in place. */
    call(f, &read_def, "{\"path\": \"./notes//2024/./q1/plan.md\"}");
    assert_string_equal(field_str(f, "content"), "# Plan\n");
}

static void
test_tools_write_replaces_atomically_without_leftovers(void **state)
{
    struct fx *f = *state;
    DIR *d = NULL;
    struct dirent *e = NULL;
    size_t entries = 0;

    put(f->ws, "a.txt", "old content that is longer");
    call(f, &write_def, "{\"path\": \"a.txt\", \"content\": \"new\"}");
    assert_false(f->out.is_error);
    assert_string_equal(slurp(f->ws, "a.txt"), "new");
    call(f, &write_def, "{\"path\": \"a.txt\", \"content\": \"\"}");
    assert_false(f->out.is_error);
    assert_int_equal(field_int(f, "bytes"), 0);
    assert_string_equal(slurp(f->ws, "a.txt"), "");
    /* No temporary file is left next to it. */
    d = opendir(f->ws);
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            entries++;
            assert_string_equal(e->d_name, "a.txt");
        }
    }
    closedir(d);
    assert_int_equal(entries, 1);
}

static void
test_tools_read_reports_missing_files_and_directories(void **state)
{
    struct fx *f = *state;

    call(f, &read_def, "{\"path\": \"nope.txt\"}");
    expect_error(f, "not_found");
    call(f, &read_def, "{\"path\": \"nodir/nope.txt\"}");
    expect_error(f, "not_found");
    put(f->ws, "plain.txt", "x");
    /* A file used as a directory is an I/O error, not an escape. */
    call(f, &read_def, "{\"path\": \"plain.txt/inner\"}");
    expect_error(f, "io");
    call(f, &write_def, "{\"path\": \"plain.txt/inner\", \"content\": \"x\"}");
    expect_error(f, "io");
    call(f, &write_def, "{\"path\": \"dir/\", \"content\": \"x\"}");
    expect_error(f, "io");
    call(f, &write_def, "{\"path\": \"dir\", \"content\": \"x\"}"); /* dir/ was created above */
    expect_error(f, "io");
    call(f, &read_def, "{\"path\": \"dir\"}");
    expect_error(f, "io");
}

static void
test_tools_refuse_dotdot_and_absolute_paths(void **state)
{
    struct fx *f = *state;
    static const char *const paths[] = {"..",         "../x.txt",    "a/../../x.txt", "a/..",
                                        "a/../b.txt", "/etc/passwd", "/tmp/x.txt",    "./../x.txt"};
    char args[256];

    put(f->root, "x.txt", "TOPSECRET");
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        snprintf(args, sizeof(args), "{\"path\": \"%s\"}", paths[i]);
        call(f, &read_def, args);
        expect_error(f, "path_escape");
        assert_null(strstr(f->out.output, "TOPSECRET"));
        snprintf(args, sizeof(args), "{\"path\": \"%s\", \"content\": \"pwned\"}", paths[i]);
        call(f, &write_def, args);
        expect_error(f, "path_escape");
    }
    assert_string_equal(slurp(f->root, "x.txt"), "TOPSECRET");
    assert_false(exists(f->ws, "a")); /* nothing was created on the way */
}

static void
test_tools_refuse_a_symlinked_file(void **state)
{
    struct fx *f = *state;
    char target[2 * PATH_MAX];
    char link[2 * PATH_MAX];

    put(f->root, "secret.txt", "top secret");
    snprintf(target, sizeof(target), "%s/secret.txt", f->root);
    snprintf(link, sizeof(link), "%s/link.txt", f->ws);
    assert_int_equal(symlink(target, link), 0);
    call(f, &read_def, "{\"path\": \"link.txt\"}");
    expect_error(f, "path_escape");
    assert_null(strstr(f->out.output, "top secret"));
    /* A relative link leaving the workspace is refused the same way. */
    snprintf(link, sizeof(link), "%s/rel.txt", f->ws);
    assert_int_equal(symlink("../secret.txt", link), 0);
    call(f, &read_def, "{\"path\": \"rel.txt\"}");
    expect_error(f, "path_escape");
    /* Writing to the link's name replaces the link; the target is never written. */
    call(f, &write_def, "{\"path\": \"link.txt\", \"content\": \"pwned\"}");
    assert_false(f->out.is_error);
    assert_string_equal(slurp(f->root, "secret.txt"), "top secret");
    assert_string_equal(slurp(f->ws, "link.txt"), "pwned");
}

static void
test_tools_refuse_a_symlinked_directory_component(void **state)
{
    struct fx *f = *state;
    char link[2 * PATH_MAX];
    char outside[2 * PATH_MAX];

    snprintf(outside, sizeof(outside), "%s/outside", f->root);
    assert_int_equal(mkdir(outside, 0755), 0);
    put(outside, "secret.txt", "top secret");
    snprintf(link, sizeof(link), "%s/docs", f->ws);
    assert_int_equal(symlink(outside, link), 0);
    call(f, &read_def, "{\"path\": \"docs/secret.txt\"}");
    expect_error(f, "path_escape");
    assert_null(strstr(f->out.output, "top secret"));
    call(f, &write_def, "{\"path\": \"docs/secret.txt\", \"content\": \"pwned\"}");
    expect_error(f, "path_escape");
    call(f, &write_def, "{\"path\": \"docs/new/file.txt\", \"content\": \"pwned\"}");
    expect_error(f, "path_escape");
    assert_string_equal(slurp(outside, "secret.txt"), "top secret");
    assert_false(exists(outside, "new"));
    /* Deeper in the tree too. */
    snprintf(link, sizeof(link), "%s/sub", f->ws);
    assert_int_equal(mkdir(link, 0755), 0);
    snprintf(link, sizeof(link), "%s/sub/up", f->ws);
    assert_int_equal(symlink("../..", link), 0);
    call(f, &read_def, "{\"path\": \"sub/up/outside/secret.txt\"}");
    expect_error(f, "path_escape");
}

static void
test_tools_enforce_max_bytes(void **state)
{
    struct fx *f = *state;
    struct tool_def rd = {.type = TOOL_READ_FILE, .max_bytes = 10};
    struct tool_def wr = {.type = TOOL_WRITE_FILE, .max_bytes = 10};

    put(f->ws, "ten.txt", "0123456789");
    put(f->ws, "eleven.txt", "0123456789A");
    call(f, &rd, "{\"path\": \"ten.txt\"}");
    assert_false(f->out.is_error);
    call(f, &rd, "{\"path\": \"eleven.txt\"}");
    expect_error(f, "too_large");
    assert_null(strstr(f->out.output, "0123"));
    call(f, &wr, "{\"path\": \"w.txt\", \"content\": \"0123456789\"}");
    assert_false(f->out.is_error);
    call(f, &wr, "{\"path\": \"w2.txt\", \"content\": \"0123456789A\"}");
    expect_error(f, "too_large");
    assert_false(exists(f->ws, "w2.txt"));
}

static void
test_tools_read_refuses_a_fifo_without_blocking(void **state)
{
    struct fx *f = *state;
    char path[2 * PATH_MAX];

    snprintf(path, sizeof(path), "%s/pipe", f->ws);
    assert_int_equal(mkfifo(path, 0600), 0);
    call(f, &read_def, "{\"path\": \"pipe\"}");
    expect_error(f, "io");
}

/* ------------------------------------------------------------------------------------------ */
/* command                                                                                     */

static struct tool_def
command(char **argv, size_t argc)
{
    struct tool_def d;

    memset(&d, 0, sizeof(d));
    d.type = TOOL_COMMAND;
    d.argv = argv;
    d.argc = argc;
    return d;
}

static void
test_tools_command_success_captures_stdout(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"printf", "%s-%s", "a", "b"};
    struct tool_def d = command(argv, 4);

    call(f, &d, "{}");
    assert_false(f->out.is_error);
    assert_int_equal(f->out.exit_code, 0);
    assert_int_equal(field_int(f, "exit_code"), 0);
    assert_string_equal(field_str(f, "stdout"), "a-b");
    assert_string_equal(field_str(f, "stderr"), "");
    assert_true(json_is_false(json_object_get(f->parsed, "truncated")));
    assert_true(json_is_false(json_object_get(f->parsed, "timed_out")));
    assert_int_equal(json_object_size(f->parsed), 5);
}

static void
test_tools_command_environment_has_no_credentials(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"sh", "-c", "echo \"[$OPENAI_API_KEY][$MY_TOKEN][$WEFT_TEST_PLAIN]\""};
    struct tool_def d = command(argv, 3);

    weft_test_setenv("OPENAI_API_KEY", "sk-never-seen-by-commands");
    weft_test_setenv("MY_TOKEN", "t0ken");
    weft_test_setenv("WEFT_TEST_PLAIN", "visible");
    call(f, &d, "{}");
    assert_string_equal(field_str(f, "stdout"), "[][][visible]\n");
    weft_test_setenv("OPENAI_API_KEY", NULL);
    weft_test_setenv("MY_TOKEN", NULL);
    weft_test_setenv("WEFT_TEST_PLAIN", NULL);
}

static void
test_tools_command_failure_captures_stderr(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"sh", "-c", "echo partial; echo 'no such thing' >&2; exit 7"};
    char *killed[] = {"sh", "-c", "kill -TERM $$"};
    struct tool_def d = command(argv, 3);

    call(f, &d, "{}");
    expect_error(f, "exit_status");
    assert_int_equal(f->out.exit_code, 7);
    assert_int_equal(field_int(f, "exit_code"), 7);
    assert_string_equal(field_str(f, "stdout"), "partial\n");
    assert_string_equal(field_str(f, "stderr"), "no such thing\n");
    d = command(killed, 3);
    call(f, &d, "{}");
    expect_error(f, "exit_status");
    assert_int_equal(f->out.exit_code, 128 + 15);
}

static void
test_tools_command_timeout_kills_and_reaps(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"sleep", "5"};
    struct tool_def d = command(argv, 2);
    uint64_t t0 = weft_monotonic_ns();

    d.timeout_ms = 200;
    call(f, &d, "{}");
    /* Far below the 5 s sleep even under sanitizers. */
    assert_true(weft_monotonic_ns() - t0 < 3000000000ull);
    expect_error(f, "timeout");
    assert_int_equal(f->out.exit_code, 128 + 9);
    assert_true(json_is_true(json_object_get(f->parsed, "timed_out")));
    /* No zombie: the child was reaped, and no other child is left. */
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static bool
is_alive(pid_t pid)
{
    char path[64];
    char stat[512] = "";
    const char *paren = NULL;
    FILE *fp = NULL;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    fp = fopen(path, "r");
    if (fp == NULL) {
        return false;
    }
    if (fgets(stat, sizeof(stat), fp) == NULL) {
        stat[0] = '\0';
    }
    fclose(fp);
    paren = strrchr(stat, ')');
    return paren != NULL && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

static void
test_tools_command_timeout_kills_the_process_group(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"sh", "-c", "sleep 30 & echo $!; wait"};
    struct tool_def d = command(argv, 3);
    long grandchild = 0;

    d.timeout_ms = 300;
    call(f, &d, "{}");
    expect_error(f, "timeout");
    grandchild = strtol(field_str(f, "stdout"), NULL, 10);
    assert_true(grandchild > 1);
    /* The background sleep died with the group. It was reparented, so it may linger as a
     * zombie until its new parent reaps it: dead means gone or in state Z. SIGKILL delivery
     * is asynchronous, so allow it a moment. */
    for (int i = 0; i < 200 && is_alive((pid_t)grandchild); i++) {
        usleep(10000);
    }
    assert_false(is_alive((pid_t)grandchild));
}

static void
test_tools_command_output_cap_never_blocks(void **state)
{
    struct fx *f = *state;
    char *zeros[] = {"head", "-c", "1000000", "/dev/zero"};
    char *yes[] = {"yes"};
    struct tool_def d = command(zeros, 4);

    d.max_output = 1000;
    call(f, &d, "{}");
    /* The child wrote all of its megabyte (we kept draining) and exited normally. */
    assert_false(f->out.is_error);
    assert_int_equal(f->out.exit_code, 0);
    assert_true(f->out.is_truncated);
    assert_true(json_is_true(json_object_get(f->parsed, "truncated")));
    assert_int_equal(strlen(field_str(f, "stdout")), 1000); /* NUL bytes shown as '?' */
    assert_int_equal(field_str(f, "stdout")[0], '?');
    /* A child that never stops writing ends at the timeout, still capped. */
    d = command(yes, 1);
    d.max_output = 64;
    d.timeout_ms = 300;
    call(f, &d, "{}");
    expect_error(f, "timeout");
    assert_true(f->out.is_truncated);
    assert_int_equal(strlen(field_str(f, "stdout")), 64);
}

static void
test_tools_command_output_cap_is_shared_by_both_streams(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"sh", "-c", "printf 0123456789; printf abcdefghij >&2"};
    struct tool_def d = command(argv, 3);

    d.max_output = 15;
    call(f, &d, "{}");
    assert_true(f->out.is_truncated);
    assert_int_equal(strlen(field_str(f, "stdout")) + strlen(field_str(f, "stderr")), 15);
}

static void
test_tools_command_output_that_is_not_utf8_is_cleaned(void **state)
{
    struct fx *f = *state;
    /* 0xFF, a UTF-16 surrogate encoded in UTF-8 (ED A0 80), then valid text. */
    char *argv[] = {"printf", "\\377\\355\\240\\200ok \xc3\xa9"};
    struct tool_def d = command(argv, 2);

    call(f, &d, "{}");
    assert_false(f->out.is_error);
    assert_string_equal(field_str(f, "stdout"), "????ok \xc3\xa9");
}

static void
test_tools_command_missing_program(void **state)
{
    struct fx *f = *state;
    char *missing[] = {"weft-no-such-program-xyz", "arg"};
    char *missing_path[] = {"/nonexistent/bin/tool"};
    struct tool_def d = command(missing, 2);

    call(f, &d, "{}");
    expect_error(f, "spawn_failed");
    assert_non_null(strstr(f->out.output, "weft-no-such-program-xyz"));
    d = command(missing_path, 1);
    call(f, &d, "{}");
    expect_error(f, "spawn_failed");
}

static void
test_tools_command_append_args_without_a_shell(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"printf", "[%s]"};
    struct tool_def d = command(argv, 2);

    d.append_args = true;
    call(f, &d, "{\"args\": [\"a b\", \"$HOME\", \"; rm -rf /\", \"`id`\"]}");
    assert_false(f->out.is_error);
    assert_string_equal(field_str(f, "stdout"), "[a b][$HOME][; rm -rf /][`id`]");
    call(f, &d, "{}");
    assert_string_equal(field_str(f, "stdout"), "[]");
    /* Without append_args the model's args are ignored. */
    d.append_args = false;
    call(f, &d, "{\"args\": [\"x\"]}");
    assert_string_equal(field_str(f, "stdout"), "[]");
}

static void
test_tools_command_cwd_is_confined(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"pwd"};
    struct tool_def d = command(argv, 1);
    char path[2 * PATH_MAX];
    char expected[2 * PATH_MAX];
    static const char *const escapes[] = {"..", "../", "sub/../..", "/tmp", "out", "sub/out"};

    snprintf(path, sizeof(path), "%s/sub", f->ws);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/out", f->ws);
    assert_int_equal(symlink(f->root, path), 0);
    snprintf(path, sizeof(path), "%s/sub/out", f->ws);
    assert_int_equal(symlink("../..", path), 0);

    call(f, &d, "{}");
    snprintf(expected, sizeof(expected), "%s\n", f->ws);
    assert_string_equal(field_str(f, "stdout"), expected);
    d.cwd = "sub";
    call(f, &d, "{}");
    snprintf(expected, sizeof(expected), "%s/sub\n", f->ws);
    assert_string_equal(field_str(f, "stdout"), expected);
    for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
        d.cwd = (char *)escapes[i];
        call(f, &d, "{}");
        expect_error(f, "path_escape");
    }
    d.cwd = "missing";
    call(f, &d, "{}");
    expect_error(f, "io");
}

static void
test_tools_command_closes_inherited_descriptors(void **state)
{
    struct fx *f = *state;
    char *argv[] = {"ls", "/proc/self/fd"};
    struct tool_def d = command(argv, 2);
    /* A descriptor without FD_CLOEXEC, as a careless host program might hold. */
    int leaky = open("/dev/null", O_RDONLY);
    int high = fcntl(leaky, F_DUPFD, 77);
    char needle[16];

    assert_true(leaky >= 0);
    assert_int_equal(high >= 77, 1);
    call(f, &d, "{}");
    assert_false(f->out.is_error);
    snprintf(needle, sizeof(needle), "\n%d\n", high);
    assert_null(strstr(field_str(f, "stdout"), needle));
    /* stdin is /dev/null: a reader gets EOF at once instead of hanging. */
    {
        char *cat[] = {"cat"};
        struct tool_def c = command(cat, 1);
        c.timeout_ms = 5000;
        call(f, &c, "{}");
        assert_false(f->out.is_error);
        assert_string_equal(field_str(f, "stdout"), "");
    }
    close(high);
    close(leaky);
}

struct worker {
    const char *ws;
    int id;
    int failures;
    uint64_t slowest_ns;
};

static void *
run_commands(void *arg)
{
    struct worker *w = arg;
    char word[32];
    char *argv[] = {"echo", word};
    struct tool_def d = command(argv, 2);
    json_t *args = json_object();

    for (int i = 0; i < 10; i++) {
        struct tool_outcome out;
        char expected[64];
        uint64_t t0 = weft_monotonic_ns();

        snprintf(word, sizeof(word), "w%d-%d", w->id, i);
        snprintf(expected, sizeof(expected), "\"stdout\":\"w%d-%d\\n\"", w->id, i);
        if (weft__tool_run(&d, w->ws, args, &out) != WEFT_OK) {
            w->failures++;
            continue;
        }
        if (out.is_error || strstr(out.output, expected) == NULL) {
            w->failures++;
        }
        weft__tool_outcome_cleanup(&out);
        if (weft_monotonic_ns() - t0 > w->slowest_ns) {
            w->slowest_ns = weft_monotonic_ns() - t0;
        }
    }
    json_decref(args);
    return NULL;
}

struct sleeper {
    const char *ws;
    weft_err err;
    struct tool_outcome out;
};

static void *
run_sleeper(void *arg)
{
    struct sleeper *s = arg;
    char *argv[] = {"sleep", "3"};
    struct tool_def d = command(argv, 2);
    json_t *args = json_object();

    d.timeout_ms = 20000;
    s->err = weft__tool_run(&d, s->ws, args, &s->out);
    json_decref(args);
    return NULL;
}

/* Commands spawned concurrently from several threads each get their own output, and a long
 * command never holds a quick one's pipe open: were one of the quick commands' write ends
 * inherited by the 3 s sleeper, that quick call would wait for the sleeper to exit. */
static void
test_tools_command_runs_concurrently_from_threads(void **state)
{
    struct fx *f = *state;
    pthread_t threads[4];
    pthread_t sleeper_thread;
    struct worker workers[4];
    struct sleeper sleeper;

    memset(&sleeper, 0, sizeof(sleeper));
    sleeper.ws = f->ws;
    assert_int_equal(pthread_create(&sleeper_thread, NULL, run_sleeper, &sleeper), 0);
    for (int i = 0; i < 4; i++) {
        memset(&workers[i], 0, sizeof(workers[i]));
        workers[i].ws = f->ws;
        workers[i].id = i;
        assert_int_equal(pthread_create(&threads[i], NULL, run_commands, &workers[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        assert_int_equal(workers[i].failures, 0);
        assert_true(workers[i].slowest_ns < 2500000000ull);
    }
    assert_int_equal(pthread_join(sleeper_thread, NULL), 0);
    assert_weft_ok(sleeper.err);
    assert_false(sleeper.out.is_error);
    weft__tool_outcome_cleanup(&sleeper.out);
}

/* ------------------------------------------------------------------------------------------ */
/* http_get                                                                                    */

struct http_fx {
    struct http_receiver *rx;
    char *hosts[2];
    struct tool_def def;
    char url[128];
};

static void
http_begin(struct http_fx *h)
{
    memset(h, 0, sizeof(*h));
    assert_int_equal(http_receiver_start(&h->rx), 0);
    h->hosts[0] = "example.invalid";
    h->hosts[1] = "127.0.0.1";
    h->def.type = TOOL_HTTP_GET;
    h->def.allow_hosts = h->hosts;
    h->def.allow_host_count = 2;
    h->def.timeout_ms = 10000;
}

/* Call with {"url": @p url_fmt}, where "%u" is replaced by the server's port. */
static void
http_call(struct fx *f, struct http_fx *h, const char *url_fmt)
{
    char url[300];
    char args[400];

    const char *mark = strstr(url_fmt, "%u");

    if (mark == NULL) {
        snprintf(url, sizeof(url), "%s", url_fmt);
    } else {
        snprintf(url, sizeof(url), "%.*s%u%s", (int)(mark - url_fmt), url_fmt,
                 (unsigned)http_receiver_port(h->rx), mark + 2);
    }
    snprintf(args, sizeof(args), "{\"url\": \"%s\"}", url);
    call(f, &h->def, args);
}

static void
test_tools_http_get_allowed_host_gets_the_body(void **state)
{
    struct fx *f = *state;
    struct http_fx h;
    struct http_response ok = {.status = 200, .body = "{\"v\": 1}", .content_type = "text/json"};

    http_begin(&h);
    http_receiver_push(h.rx, &ok);
    http_call(f, &h, "http://127.0.0.1:%u/api/v?x=1");
    assert_false(f->out.is_error);
    assert_int_equal(f->out.exit_code, 200);
    assert_int_equal(field_int(f, "status"), 200);
    assert_string_equal(field_str(f, "body"), "{\"v\": 1}");
    assert_true(json_is_false(json_object_get(f->parsed, "truncated")));
    assert_int_equal(http_receiver_count(h.rx), 1);
    assert_string_equal(http_receiver_request(h.rx, 0)->method, "GET");
    assert_string_equal(http_receiver_request(h.rx, 0)->path, "/api/v?x=1");
    http_receiver_stop(h.rx);
}

static void
test_tools_http_get_refuses_before_any_request(void **state)
{
    struct fx *f = *state;
    struct http_fx h;
    static const char *const refused[] = {
        "http://localhost:%u/",                 /* same server, name not on the list */
        "http://127.0.0.1.nip.io:%u/",          /* prefix tricks */
        "http://127.0.0.1@localhost:%u/",       /* userinfo naming an allowed host */
        "http://example.invalid@localhost:%u/", /* ... the other allowed host */
        "http://user:pw@127.0.0.1:%u/",         /* credentials, even to an allowed host */
        "ftp://127.0.0.1:%u/file",              /* scheme */
        "file:///etc/passwd",                   /* scheme */
        "gopher://127.0.0.1:%u/",               /* scheme */
    };

    http_begin(&h);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        http_call(f, &h, refused[i]);
        expect_error(f, "not_allowed");
    }
    call(f, &h.def, "{\"url\": \"not a url\"}");
    assert_true(f->out.is_error);
    /* Give a stray connection time to show up before asserting there was none. */
    assert_false(http_receiver_wait(h.rx, 1, 200));
    assert_int_equal(http_receiver_count(h.rx), 0);
    http_receiver_stop(h.rx);
}

static void
test_tools_http_get_error_statuses_and_redirects(void **state)
{
    struct fx *f = *state;
    struct http_fx h;
    struct http_response missing = {.status = 404, .body = "no page", .content_type = "text/plain"};
    struct http_response moved = {.status = 302,
                                  .headers = "Location: http://evil.invalid/steal\r\n",
                                  .body = "",
                                  .content_type = "text/plain"};

    http_begin(&h);
    http_receiver_push(h.rx, &missing);
    http_receiver_push(h.rx, &moved);
    http_call(f, &h, "http://127.0.0.1:%u/missing");
    expect_error(f, "http_status");
    assert_int_equal(f->out.exit_code, 404);
    assert_int_equal(field_int(f, "status"), 404);
    assert_string_equal(field_str(f, "body"), "no page");
    /* The redirect is reported, not followed. */
    http_call(f, &h, "http://127.0.0.1:%u/old");
    expect_error(f, "http_status");
    assert_int_equal(f->out.exit_code, 302);
    assert_string_equal(field_str(f, "location"), "http://evil.invalid/steal");
    assert_int_equal(http_receiver_count(h.rx), 2);
    http_receiver_stop(h.rx);
}

static void
test_tools_http_get_caps_the_body(void **state)
{
    struct fx *f = *state;
    struct http_fx h;
    struct http_response big = {.status = 200,
                                .body = "hello world, this body is longer than the cap",
                                .content_type = "text/plain"};
    /* "héé": the cap at 4 bytes falls inside the second é. */
    struct http_response accents = {
        .status = 200, .body = "h\xc3\xa9\xc3\xa9", .content_type = "text/plain"};

    http_begin(&h);
    http_receiver_push(h.rx, &big);
    http_receiver_push(h.rx, &accents);
    h.def.max_output = 5;
    http_call(f, &h, "http://127.0.0.1:%u/big");
    assert_false(f->out.is_error);
    assert_true(f->out.is_truncated);
    assert_true(json_is_true(json_object_get(f->parsed, "truncated")));
    assert_string_equal(field_str(f, "body"), "hello");
    h.def.max_output = 4;
    http_call(f, &h, "http://127.0.0.1:%u/accents");
    assert_true(f->out.is_truncated);
    assert_string_equal(field_str(f, "body"), "h\xc3\xa9");
    http_receiver_stop(h.rx);
}

static void
test_tools_http_get_connection_failure(void **state)
{
    struct fx *f = *state;
    struct http_fx h;
    unsigned short port = 0;
    char args[128];

    http_begin(&h);
    port = http_receiver_port(h.rx);
    http_receiver_stop(h.rx); /* nothing listens on the port any more */
    snprintf(args, sizeof(args), "{\"url\": \"http://127.0.0.1:%u/\"}", (unsigned)port);
    call(f, &h.def, args);
    expect_error(f, "connection");
}

/* ------------------------------------------------------------------------------------------ */
/* Native tools                                                                                */

struct native_calls {
    int count;
    char last_args[256];
};

static weft_err
native_tool(void *user_data, const char *arguments_json, struct weft_tool_result *result)
{
    struct native_calls *calls = user_data;
    const char *mode = NULL;
    json_t *args = json_loads(arguments_json, 0, NULL);
    weft_err err = WEFT_OK;

    calls->count++;
    snprintf(calls->last_args, sizeof(calls->last_args), "%s", arguments_json);
    mode = json_string_value(json_object_get(args, "mode"));
    if (mode == NULL || strcmp(mode, "ok") == 0) {
        err = weft_tool_result_set(result, "first", false);
        if (err == WEFT_OK) {
            err = weft_tool_result_set(result, "{\"answer\":42}", false); /* replaces */
        }
    } else if (strcmp(mode, "tool_error") == 0) {
        err = weft_tool_result_set(result, "{\"error\":\"no such order\"}", true);
    } else if (strcmp(mode, "fail") == 0) {
        (void)weft_tool_result_set(result, "ignored", false);
        err = WEFT_ETIMEDOUT;
    }
    /* "silent": sets nothing. */
    json_decref(args);
    return err;
}

static void
test_tools_native_registry_validates_names(void **state)
{
    struct weft_tools *tools = NULL;
    struct native_calls calls = {0, ""};
    char long_name[80];
    static const char *const bad_names[] = {
        "",          "has space",  "semi;colon",    "\xc3\xa9t\xc3\xa9",
        "read_file", "write_file", "request_agent", "dot.name"};

    (void)state;
    assert_weft_err(weft_tools_new(NULL), WEFT_EINVAL);
    assert_weft_ok(weft_tools_new(&tools));
    assert_int_equal(weft__tool_registry_count(tools), 0);
    assert_null(weft__tool_registry_get(tools, 0));
    assert_weft_ok(weft_tools_add(tools, "lookup-order_2", "Find an order",
                                  "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":"
                                  "\"string\"}}}",
                                  native_tool, &calls));
    assert_weft_err(weft_tools_add(tools, "lookup-order_2", NULL, NULL, native_tool, &calls),
                    WEFT_EINVAL);
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        assert_weft_err(weft_tools_add(tools, bad_names[i], NULL, NULL, native_tool, &calls),
                        WEFT_EINVAL);
    }
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    assert_weft_ok(weft_tools_add(tools, long_name, NULL, NULL, native_tool, &calls));
    long_name[64] = 'a';
    long_name[65] = '\0';
    assert_weft_err(weft_tools_add(tools, long_name, NULL, NULL, native_tool, &calls), WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, NULL, NULL, NULL, native_tool, &calls), WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "no_fn", NULL, NULL, NULL, &calls), WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "array", NULL, "[1]", native_tool, &calls), WEFT_EINVAL);
    assert_weft_err(weft_tools_add(tools, "broken", NULL, "{\"type\":", native_tool, &calls),
                    WEFT_EINVAL);
    assert_weft_err(weft_tools_add(NULL, "x", NULL, NULL, native_tool, &calls), WEFT_EINVAL);
    /* Failed adds changed nothing. */
    assert_int_equal(weft__tool_registry_count(tools), 2);
    {
        const struct tool_def *d = weft__tool_registry_get(tools, 0);
        const struct tool_def *d2 = weft__tool_registry_get(tools, 1);
        assert_string_equal(d->name, "lookup-order_2");
        assert_string_equal(d->description, "Find an order");
        assert_int_equal(d->type, TOOL_NATIVE);
        assert_true(
            json_is_object(json_object_get(json_object_get(d->schema, "properties"), "id")));
        /* A NULL schema means {"type":"object"}; a NULL description stays NULL. */
        assert_string_equal(json_string_value(json_object_get(d2->schema, "type")), "object");
        assert_null(d2->description);
        assert_null(weft__tool_registry_get(tools, 2));
    }
    assert_int_equal(calls.count, 0);
    weft_tools_free(tools);
    weft_tools_free(NULL);
    assert_int_equal(weft__tool_registry_count(NULL), 0);
    assert_null(weft__tool_registry_get(NULL, 0));
}

static void
test_tools_native_calls_and_outcomes(void **state)
{
    struct fx *f = *state;
    struct weft_tools *tools = NULL;
    struct native_calls calls = {0, ""};
    const struct tool_def *d = NULL;

    assert_weft_ok(weft_tools_new(&tools));
    assert_weft_ok(weft_tools_add(tools, "orders", NULL, NULL, native_tool, &calls));
    d = weft__tool_registry_get(tools, 0);

    call(f, d, "{\"mode\": \"ok\", \"n\": [1, 2]}");
    assert_false(f->out.is_error);
    assert_string_equal(f->out.error_type, "");
    assert_string_equal(f->out.output, "{\"answer\":42}");
    /* The function gets compact JSON. */
    assert_null(strchr(calls.last_args, ' '));
    assert_non_null(strstr(calls.last_args, "\"n\":[1,2]"));

    call(f, d, "{\"mode\": \"tool_error\"}");
    assert_true(f->out.is_error);
    assert_string_equal(f->out.output, "{\"error\":\"no such order\"}");

    call(f, d, "{\"mode\": \"fail\"}");
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "tool_failed");
    assert_non_null(strstr(f->out.output, weft_strerror(WEFT_ETIMEDOUT)));
    assert_null(strstr(f->out.output, "ignored"));

    call(f, d, "{\"mode\": \"silent\"}");
    assert_true(f->out.is_error);
    assert_string_equal(f->out.error_type, "tool_failed");
    assert_non_null(strstr(f->out.output, "tool returned nothing"));
    assert_int_equal(calls.count, 4);
    weft_tools_free(tools);
}

static void
test_tools_run_rejects_bad_calls(void **state)
{
    struct fx *f = *state;
    struct tool_def agent = {.type = TOOL_REQUEST_AGENT};
    json_t *args = json_pack("{s:s, s:s}", "agent", "a", "query", "q");
    struct tool_outcome out;

    assert_weft_err(weft__tool_run(&agent, f->ws, args, &out), WEFT_EINVAL);
    assert_weft_err(weft__tool_run(NULL, f->ws, args, &out), WEFT_EINVAL);
    assert_weft_err(weft__tool_run(&read_def, f->ws, NULL, &out), WEFT_EINVAL);
    assert_weft_err(weft__tool_run(&read_def, NULL, args, &out), WEFT_EINVAL);
    assert_weft_err(weft__tool_run(&read_def, f->ws, args, NULL), WEFT_EINVAL);
    assert_weft_err(weft_tool_result_set(NULL, "x", false), WEFT_EINVAL);
    json_decref(args);
}

/* ------------------------------------------------------------------------------------------ */
/* Out of memory                                                                               */

static void
test_tools_native_add_out_of_memory(void **state)
{
    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0;; budget++) {
        struct weft_tools *tools = NULL;
        weft_err err = WEFT_OK;
        size_t added = 0;
        char name[16];

        failalloc_budget = budget;
        err = weft_tools_new(&tools);
        /* Five adds: the array grows past its first capacity of 4. */
        for (int i = 0; err == WEFT_OK && i < 5; i++) {
            snprintf(name, sizeof(name), "t%d", i);
            err = weft_tools_add(tools, name, i % 2 == 0 ? "described" : NULL,
                                 i == 0 ? "{\"type\":\"object\"}" : NULL, native_tool, NULL);
            if (err == WEFT_OK) {
                added++;
            }
        }
        failalloc_budget = -1;
        if (err == WEFT_OK) {
            assert_int_equal(weft__tool_registry_count(tools), 5);
            weft_tools_free(tools);
            assert_true(budget > 0);
            break;
        }
        assert_int_equal(err, WEFT_ENOMEM);
        /* The failed add left the registry as it was. */
        assert_int_equal(weft__tool_registry_count(tools), added);
        weft_tools_free(tools);
    }
    weft_set_allocator(NULL, NULL, NULL);
}

/* Every tool type under allocation failures: WEFT_ENOMEM with no output, or a full outcome. */
static void
test_tools_run_out_of_memory(void **state)
{
    struct fx *f = *state;
    struct weft_tools *tools = NULL;
    struct native_calls calls = {0, ""};
    char *argv[] = {"echo", "hi"};
    struct tool_def cmd = command(argv, 2);
    const struct tool_def *defs[4] = {&read_def, &write_def, &cmd, NULL};
    static const char *const arg_texts[] = {"{\"path\": \"f.txt\"}",
                                            "{\"path\": \"d/f.txt\", \"content\": \"text\"}", "{}",
                                            "{\"mode\": \"ok\"}"};

    assert_weft_ok(weft_tools_new(&tools));
    assert_weft_ok(weft_tools_add(tools, "n", NULL, NULL, native_tool, &calls));
    defs[3] = weft__tool_registry_get(tools, 0);
    put(f->ws, "f.txt", "content");
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (size_t t = 0; t < 4; t++) {
        json_t *args = json_loads(arg_texts[t], 0, NULL);
        assert_non_null(args);
        for (long budget = 0;; budget++) {
            struct tool_outcome out;
            weft_err err = WEFT_OK;

            memset(&out, 0, sizeof(out));
            failalloc_budget = budget;
            err = weft__tool_run(defs[t], f->ws, args, &out);
            failalloc_budget = -1;
            if (err == WEFT_OK) {
                assert_non_null(out.output);
                assert_false(out.is_error);
                weft__tool_outcome_cleanup(&out);
                break;
            }
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(out.output);
            assert_true(budget < 1000);
        }
        json_decref(args);
    }
    weft_set_allocator(NULL, NULL, NULL);
    weft_tools_free(tools);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_tools_write_creates_parents_and_read_returns_it),
        T(test_tools_write_replaces_atomically_without_leftovers),
        T(test_tools_read_reports_missing_files_and_directories),
        T(test_tools_refuse_dotdot_and_absolute_paths),
        T(test_tools_refuse_a_symlinked_file),
        T(test_tools_refuse_a_symlinked_directory_component),
        T(test_tools_enforce_max_bytes),
        T(test_tools_read_refuses_a_fifo_without_blocking),
        T(test_tools_command_success_captures_stdout),
        T(test_tools_command_environment_has_no_credentials),
        T(test_tools_command_failure_captures_stderr),
        T(test_tools_command_timeout_kills_and_reaps),
        T(test_tools_command_timeout_kills_the_process_group),
        T(test_tools_command_output_cap_never_blocks),
        T(test_tools_command_output_cap_is_shared_by_both_streams),
        T(test_tools_command_output_that_is_not_utf8_is_cleaned),
        T(test_tools_command_missing_program),
        T(test_tools_command_append_args_without_a_shell),
        T(test_tools_command_cwd_is_confined),
        T(test_tools_command_closes_inherited_descriptors),
        T(test_tools_command_runs_concurrently_from_threads),
        T(test_tools_http_get_allowed_host_gets_the_body),
        T(test_tools_http_get_refuses_before_any_request),
        T(test_tools_http_get_error_statuses_and_redirects),
        T(test_tools_http_get_caps_the_body),
        T(test_tools_http_get_connection_failure),
        cmocka_unit_test(test_tools_native_registry_validates_names),
        T(test_tools_native_calls_and_outcomes),
        T(test_tools_run_rejects_bad_calls),
        cmocka_unit_test(test_tools_native_add_out_of_memory),
        T(test_tools_run_out_of_memory),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}

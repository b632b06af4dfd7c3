/* tests/support/weft_test.c - environment and log-capture helpers for tests. */
#include "weft_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536];
static size_t log_len;

void
weft_test_setenv(const char *name, const char *value)
{
    if (value == NULL) {
        unsetenv(name);
    } else {
        setenv(name, value, 1);
    }
}

void
weft_test_rmtree(const char *dir)
{
    char cmd[4200];

    assert_non_null(dir);
    assert_null(strchr(dir, '\''));
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void
capture(weft_log_level level, const char *message, void *user_data)
{
    size_t n = strlen(message);

    (void)user_data;
    pthread_mutex_lock(&log_lock);
    if (log_len + n + 16 < sizeof(log_text)) {
        log_len += (size_t)snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s: %s\n",
                                    weft_log_level_name(level), message);
    }
    pthread_mutex_unlock(&log_lock);
}

void
weft_test_capture_logs(void)
{
    weft_test_clear_logs();
    weft_log_set_handler(capture, WEFT_LOG_DEBUG, NULL);
}

const char *
weft_test_logs(void)
{
    /* A copy taken under the lock: a server's threads may still be logging. */
    static char snapshot[sizeof(log_text)];

    pthread_mutex_lock(&log_lock);
    memcpy(snapshot, log_text, log_len + 1);
    pthread_mutex_unlock(&log_lock);
    return snapshot;
}

void
weft_test_clear_logs(void)
{
    pthread_mutex_lock(&log_lock);
    log_len = 0;
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_lock);
}

void
weft_test_write_file(const char *dir, const char *name, const char *text)
{
    char path[1024];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    out = fopen(path, "w");
    assert_non_null(out);
    assert_true(fputs(text, out) >= 0);
    assert_int_equal(fclose(out), 0);
}

char *
weft_test_read_file(const char *path)
{
    FILE *in = fopen(path, "rb");
    char *text = NULL;
    long len = 0;

    if (in == NULL) {
        return NULL;
    }
    if (fseek(in, 0, SEEK_END) == 0 && (len = ftell(in)) >= 0 && fseek(in, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)len + 1)) != NULL) {
        if (fread(text, 1, (size_t)len, in) != (size_t)len) {
            free(text);
            text = NULL;
        } else {
            text[len] = '\0';
        }
    }
    fclose(in);
    return text;
}

bool
weft_test_prom_has(struct weft_meter *meter, const char *needle)
{
    char *text = NULL;
    size_t len = 0;
    bool has = false;

    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    has = strstr(text, needle) != NULL;
    if (!has) {
        print_message("%s not in:\n%.3000s\n", needle, text);
    }
    free(text);
    return has;
}

/* The whole of @p path (at most @p len - 1 bytes) into @p buf. */
static void
read_capture(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    assert_non_null(fp);
    n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

int
weft_test_run_captured(const char *bin,
                       const char *const *args,
                       const char *dir,
                       char *out,
                       size_t out_len,
                       char *err,
                       size_t err_len)
{
    char out_path[4200];
    char err_path[4200];
    char *argv[32];
    size_t argc = 0;
    posix_spawn_file_actions_t actions;
    pid_t pid = 0;
    int status = 0;

    snprintf(out_path, sizeof(out_path), "%s/stdout", dir);
    snprintf(err_path, sizeof(err_path), "%s/stderr", dir);
    argv[argc++] = (char *)(uintptr_t)bin;
    for (; args[argc - 1] != NULL; argc++) {
        assert_true(argc < 31);
        argv[argc] = (char *)(uintptr_t)args[argc - 1];
    }
    argv[argc] = NULL;
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(
        posix_spawn_file_actions_addopen(&actions, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        0);
    assert_int_equal(posix_spawn(&pid, bin, &actions, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    read_capture(out_path, out, out_len);
    read_capture(err_path, err, err_len);
    return WEXITSTATUS(status);
}

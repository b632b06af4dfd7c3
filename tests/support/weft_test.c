/* tests/support/weft_test.c - environment and log-capture helpers for tests. */
#include "weft_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return log_text;
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

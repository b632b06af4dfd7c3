/* tests/support/serve_proc.c - see serve_proc.h. */
#include "serve_proc.h"

#include "server_proc.h"
#include "weft_test.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int
serve_proc_run(const char *bin, const char *home, const char *out_path, const char *const *args)
{
    const char *argv[64];
    size_t n = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid = 0;
    int status = 0;

    argv[n++] = bin;
    for (size_t i = 0; args[i] != NULL && n < 63; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    weft_test_setenv("WEFT_HOME", home);
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path != NULL ? out_path : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pid_t
serve_proc_spawn(const char *const *argv,
                 const char *const *env,
                 const char *cwd,
                 const char *log_path,
                 unsigned *port)
{
    long deadline = weft_test_now_ms() + 15000;
    pid_t pid = 0;

    *port = 0;
    unlink(log_path);
    pid = weft_test_spawn(argv, env, cwd, log_path, true);
    assert_true(pid > 0);
    for (;;) {
        int status = 0;
        char *text = weft_test_log_tail(log_path, 4000);
        const char *p = strstr(text, "listening on port ");

        *port = p != NULL ? (unsigned)strtoul(p + 18, NULL, 10) : 0;
        free(text);
        if (*port != 0) {
            return pid;
        }
        if (weft_test_has_exited(pid, &status) || weft_test_now_ms() > deadline) {
            char *tail = weft_test_log_tail(log_path, 2000);
            if (!weft_test_has_exited(pid, &status)) {
                weft_test_kill_group(pid, 1000);
            }
            fail_msg("weft serve did not start (exit %d): %s", status, tail);
        }
        weft_test_sleep_ms(20);
    }
}

pid_t
serve_proc_start(const char *bin, const char *home, unsigned *port)
{
    const char *argv[] = {bin, "serve", "--addr", "127.0.0.1:0", NULL};
    posix_spawn_file_actions_t fa;
    char err_path[512];
    pid_t pid = 0;

    *port = 0;
    snprintf(err_path, sizeof(err_path), "%s/serve.err", home);
    weft_test_setenv("WEFT_HOME", home);
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, (char *const *)argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    /* Poll its stderr for the port line: the server prints it once it listens. */
    for (int i = 0; i < 1000 && *port == 0; i++) {
        char text[1024] = "";
        FILE *fp = fopen(err_path, "r");
        const char *p = NULL;

        if (fp != NULL) {
            size_t got = fread(text, 1, sizeof(text) - 1, fp);
            text[got] = '\0';
            fclose(fp);
        }
        p = strstr(text, "listening on port ");
        if (p != NULL) {
            *port = (unsigned)strtoul(p + 18, NULL, 10);
        } else {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
    }
    assert_true(*port > 0);
    return pid;
}

void
serve_proc_stop(pid_t pid)
{
    int status = 0;

    assert_int_equal(kill(pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

void
serve_proc_home_init(struct serve_proc_home *h, const char *prefix)
{
    memset(h, 0, sizeof(*h));
    h->dir = weft_test_mkdtemp(prefix);
    assert_non_null(h->dir);
    snprintf(h->home_env, sizeof(h->home_env), "WEFT_HOME=%s", h->dir);
    snprintf(h->log, sizeof(h->log), "%s/serve.log", h->dir);
}

void
serve_proc_home_start(struct serve_proc_home *h,
                      const char *bin,
                      const char *addr,
                      const char *const *extra,
                      const char *const *env_extra)
{
    const char *argv[16] = {bin, "serve", "--addr", addr};
    const char *env[8] = {h->home_env, "WEFT_SERVE_TOKEN*", "WEFT_STATE_URL*"};
    size_t n = 4;
    size_t e = 3;

    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        assert_true(n < 15);
        argv[n++] = extra[i];
    }
    for (size_t i = 0; env_extra != NULL && env_extra[i] != NULL; i++) {
        assert_true(e < 7);
        env[e++] = env_extra[i];
    }
    h->pid = serve_proc_spawn(argv, env, h->dir, h->log, &h->port);
}

void
serve_proc_home_stop(struct serve_proc_home *h)
{
    assert_int_equal(kill(h->pid, SIGTERM), 0);
    assert_int_equal(weft_test_wait(h->pid, 20000), 0);
    h->pid = 0;
}

void
serve_proc_home_cleanup(struct serve_proc_home *h)
{
    if (h->pid > 0) {
        weft_test_kill_group(h->pid, 5000);
        h->pid = 0;
    }
    if (h->dir != NULL) {
        weft_test_rm_rf(h->dir);
        free(h->dir);
        h->dir = NULL;
    }
}

struct body {
    char *data;
    size_t len;
};

static size_t
on_data(char *p, size_t size, size_t n, void *ud)
{
    struct body *b = ud;
    char *grown = realloc(b->data, b->len + size * n + 1);

    if (grown == NULL) {
        return 0;
    }
    b->data = grown;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

char *
serve_proc_get(unsigned port, const char *path, long timeout_ms, long *status)
{
    CURL *curl = curl_easy_init();
    struct body b = {NULL, 0};
    char url[256];
    CURLcode rc = CURLE_OK;

    *status = 0;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    rc = curl_easy_perform(curl);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    }
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK) {
        free(b.data);
        return NULL;
    }
    return b.data != NULL ? b.data : strdup("");
}

static size_t
append(char *buf, size_t cap, size_t *used, const char *p, size_t len)
{
    size_t room = cap - 1 - *used;
    size_t n = len < room ? len : room;

    memcpy(buf + *used, p, n);
    *used += n;
    buf[*used] = '\0';
    return len;
}

static size_t
on_answer_body(char *p, size_t size, size_t n, void *ud)
{
    struct serve_proc_answer *a = ud;

    return append(a->body, sizeof(a->body), &a->len, p, size * n);
}

static size_t
on_answer_header(char *p, size_t size, size_t n, void *ud)
{
    struct serve_proc_answer *a = ud;

    return append(a->headers, sizeof(a->headers), &a->headers_len, p, size * n);
}

void
serve_proc_request(unsigned port,
                   const char *path,
                   const char *header,
                   const char *header2,
                   const char *body,
                   struct serve_proc_answer *a)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[256];

    assert_non_null(c);
    memset(a, 0, sizeof(*a));
    if (header != NULL) {
        h = curl_slist_append(h, header);
    }
    if (header2 != NULL) {
        h = curl_slist_append(h, header2);
    }
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_answer_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_answer_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

double
serve_proc_sum(const char *text, const char *name, const char *const *labels, size_t *count)
{
    size_t name_len = strlen(name);
    double sum = 0;
    size_t n = 0;

    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);

        if (line[0] != '#' && len > name_len && strncmp(line, name, name_len) == 0 &&
            (line[name_len] == '{' || line[name_len] == ' ')) {
            char buf[2048];
            const char *value = NULL;
            bool is_match = true;

            snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
            value = strrchr(buf, ' ');
            for (size_t i = 0; labels != NULL && labels[i] != NULL; i++) {
                is_match = is_match && strstr(buf, labels[i]) != NULL;
            }
            if (is_match && value != NULL) {
                sum += strtod(value + 1, NULL);
                n++;
            }
        }
        line = end != NULL ? end + 1 : NULL;
    }
    if (count != NULL) {
        *count = n;
    }
    return sum;
}

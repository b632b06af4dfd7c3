/* tests/serve/test_host.c - who may reach `weft serve` (serve/http.c, cli/serve_cmd.c,
 * cli/serve_access.c, base/http_host.c): on loopback the explorer, its API and ingest answer only
 * to loopback Host names and --allow-host names (421 otherwise, so that a page using DNS
 * rebinding reads nothing), while /metrics and /healthz stay open; each refusal is counted on
 * /metrics; a token comes from --token-file (refused when others may read it) or
 * WEFT_SERVE_TOKEN and then never shows in the process's argv.
 *
 * The server is the built `weft` binary, started as a user starts it, and spoken to over real
 * HTTP on 127.0.0.1 (libcurl, or a raw socket for a request without a Host header). The Host
 * rule's parser is also checked on its own, name by name.
 */
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include "base/http_host.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEFT  WEFT_BINARY_DIR "/weft"
#define TOKEN "correct-horse-battery-staple-42"
#define EVIL  "attacker.example:9464"

struct fx {
    struct serve_proc_home h;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    serve_proc_home_init(&f->h, "weft-serve-host-");
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    serve_proc_home_cleanup(&f->h);
    free(f);
    return 0;
}

/* Start `weft serve --addr 127.0.0.1:0 EXTRA...` with @p env_extra (may be NULL). */
static void
start_serve(struct fx *f, const char *const *extra, const char *const *env_extra)
{
    serve_proc_home_start(&f->h, WEFT, "127.0.0.1:0", extra, env_extra);
}

struct answer {
    long status;
    char body[1 << 18]; /* /metrics fits */
    size_t len;
};

static size_t
on_body(char *p, size_t size, size_t n, void *ud)
{
    struct answer *a = ud;
    size_t len = size * n;
    size_t room = sizeof(a->body) - 1 - a->len;

    memcpy(a->body + a->len, p, len < room ? len : room);
    a->len += len < room ? len : room;
    a->body[a->len] = '\0';
    return len;
}

/* @p method @p path on the server with "Host: @p host" (NULL: curl's own, 127.0.0.1:PORT)
 * and @p header (may be NULL); a POST sends @p body as OTLP JSON. The status in a->status. */
static void
request(const struct fx *f,
        const char *method,
        const char *path,
        const char *host,
        const char *header,
        const char *body,
        struct answer *a)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[256];
    char host_line[300];

    assert_non_null(c);
    memset(a, 0, sizeof(*a));
    if (host != NULL) {
        snprintf(host_line, sizeof(host_line), "Host: %s", host);
        h = curl_slist_append(h, host_line);
    }
    if (header != NULL) {
        h = curl_slist_append(h, header);
    }
    if (body != NULL) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", f->h.port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static long
get_status(const struct fx *f, const char *path, const char *host, const char *header)
{
    struct answer a;

    request(f, "GET", path, host, header, NULL, &a);
    return a.status;
}

/* The status line's code of a raw @p text request sent as is (no Host header unless in it). */
static long
raw_status(const struct fx *f, const char *text)
{
    struct sockaddr_in sa;
    char buf[512] = "";
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {15, 0};

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)f->h.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    while (got < 12) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    assert_true(strncmp(buf, "HTTP/1.", 7) == 0);
    return strtol(buf + 9, NULL, 10);
}

/* weft_serve_access_denied_total{reason=@p reason} as /metrics shows it. */
static double
denied(const struct fx *f, const char *reason)
{
    struct answer a;
    char label[64];
    const char *labels[] = {label, NULL};
    size_t count = 0;
    double v = 0;

    snprintf(label, sizeof(label), "reason=\"%s\"", reason);
    request(f, "GET", "/metrics", NULL, NULL, NULL, &a);
    assert_int_equal(a.status, 200);
    v = serve_proc_sum(a.body, "weft_serve_access_denied_total", labels, &count);
    if (count != 1) {
        fail_msg("weft_serve_access_denied_total{%s} is not on /metrics once:\n%s", label, a.body);
    }
    return v;
}

static void
write_token(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    assert_int_equal(close(fd), 0);
}

/* The process's argv as one string, NULs turned to spaces. */
static void
cmdline_of(pid_t pid, char *out, size_t len)
{
    char path[64];
    size_t got = 0;
    FILE *in = NULL;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    in = fopen(path, "r");
    assert_non_null(in);
    got = fread(out, 1, len - 1, in);
    fclose(in);
    for (size_t i = 0; i < got; i++) {
        out[i] = out[i] == '\0' ? ' ' : out[i];
    }
    out[got] = '\0';
}

/* ---------------------------------------------------------------------------------------- */

/* The rule itself: which Host values are loopback, which are allowed, which names may be. */
static void
test_host_rule_names(void **state)
{
    static const char *const loopback[] = {
        "localhost",    "localhost:9464",  "LocalHost:1", "127.0.0.1",  "127.0.0.1:9464",
        "127.1.2.3:80", "127.255.255.254", "[::1]",       "[::1]:9464", "[0:0:0:0:0:0:0:1]:9"};
    static const char *const foreign[] = {"attacker.example:9464",
                                          "attacker.example",
                                          "localhost.attacker.example",
                                          "127.0.0.1.attacker.example:9464",
                                          "localhost:9464.attacker.example",
                                          "localhost:",
                                          "localhost:123456",
                                          "localhost:80:80",
                                          "localhost ",
                                          "128.0.0.1",
                                          "10.0.0.1:9464",
                                          "127.1",
                                          "0x7f000001",
                                          "[::2]:9464",
                                          "[::ffff:127.0.0.1]",
                                          "[::1",
                                          "[::1]x",
                                          "",
                                          NULL};
    static const char *const allowed[] = {"weft.internal", "Box"};
    char log[16];

    (void)state;
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++) {
        if (!weft__http_host_is_loopback(loopback[i])) {
            fail_msg("%s should be a loopback Host", loopback[i]);
        }
    }
    for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
        if (weft__http_host_is_loopback(foreign[i]) ||
            weft__http_host_is_allowed(foreign[i], allowed, 2)) {
            fail_msg("%s should be refused", foreign[i] != NULL ? foreign[i] : "(no Host)");
        }
    }
    assert_true(weft__http_host_is_allowed("weft.internal:9464", allowed, 2));
    assert_true(weft__http_host_is_allowed("WEFT.Internal", allowed, 2));
    assert_true(weft__http_host_is_allowed("box:1", allowed, 2));
    assert_true(weft__http_host_is_allowed("localhost:1", NULL, 0));
    assert_false(weft__http_host_is_allowed("weft.internal.evil:9464", allowed, 2));
    assert_false(weft__http_host_is_allowed("weft:9464", allowed, 2));
    assert_true(weft__http_host_name_ok("weft.internal"));
    assert_true(weft__http_host_name_ok("10.0.0.7"));
    assert_true(weft__http_host_name_ok("[fd00::7]"));
    assert_false(weft__http_host_name_ok("weft.internal:9464"));
    assert_false(weft__http_host_name_ok(""));
    assert_false(weft__http_host_name_ok("a b"));
    assert_false(weft__http_host_name_ok("http://x"));
    /* What a log line shows of a Host: printable, cut. */
    assert_string_equal(weft__http_host_for_log("evil\r\nX: y", log, sizeof(log)), "evil??X:?y");
    assert_string_equal(weft__http_host_for_log(NULL, log, sizeof(log)), "(none)");
    assert_string_equal(weft__http_host_for_log("abcdefghij", log, 5), "abcd");
}

/* The report: a page at attacker.example that rebinds its name to 127.0.0.1 asks with
 * "Host: attacker.example:9464". It gets 421 on the explorer, its API and ingest, whatever
 * else it sends; scrapers keep /metrics and /healthz; loopback names pass; each refusal is
 * counted. */
static void
test_serve_foreign_host_refused_on_loopback(void **state)
{
    struct fx *f = *state;
    struct answer a;
    char local[64];
    long refused = 0;

    start_serve(f, NULL, NULL);
    request(f, "GET", "/api/v1/runs", EVIL, NULL, NULL, &a);
    assert_int_equal(a.status, 421);
    assert_non_null(strstr(a.body, "--allow-host"));
    assert_null(strstr(a.body, "\"runs\""));
    assert_int_equal(get_status(f, "/", EVIL, NULL), 421);
    assert_int_equal(get_status(f, "/assets/app.js", EVIL, NULL), 421);
    assert_int_equal(get_status(f, "/api/v1/metrics", "ATTACKER.example", NULL), 421);
    assert_int_equal(get_status(f, "/api/v1/runs", "localhost.attacker.example:9464", NULL), 421);
    request(f, "POST", "/v1/traces", EVIL, NULL, "{\"resourceSpans\": []}", &a);
    assert_int_equal(a.status, 421);
    /* HTTP/1.1 and HTTP/1.0 without a Host header. */
    assert_int_equal(raw_status(f, "GET /api/v1/runs HTTP/1.1\r\nConnection: close\r\n\r\n"), 421);
    assert_int_equal(raw_status(f, "GET /api/v1/runs HTTP/1.0\r\n\r\n"), 421);
    refused = 8;
    /* Aggregates stay open to scrapers, whatever the name. */
    assert_int_equal(get_status(f, "/metrics", EVIL, NULL), 200);
    assert_int_equal(get_status(f, "/healthz", EVIL, NULL), 200);
    /* Loopback names, any case, any port. */
    snprintf(local, sizeof(local), "localhost:%u", f->h.port);
    assert_int_equal(get_status(f, "/api/v1/runs", NULL, NULL), 200);
    assert_int_equal(get_status(f, "/api/v1/runs", local, NULL), 200);
    assert_int_equal(get_status(f, "/api/v1/runs", "LOCALHOST", NULL), 200);
    assert_int_equal(get_status(f, "/", "127.9.8.7:1", NULL), 200);
    assert_int_equal(get_status(f, "/api/v1/runs", "[::1]:9464", NULL), 200);
    assert_int_equal(raw_status(f, "GET /healthz HTTP/1.0\r\n\r\n"), 200);
    /* Counted, and only the refusals. */
    assert_true(denied(f, "host") == (double)refused);
    assert_true(denied(f, "token") == 0);
    assert_true(weft_test_file_contains(f->h.log, "Host attacker.example:9464"));
    serve_proc_home_stop(&f->h);
}

/* --allow-host NAME (repeatable) serves NAME, with any port and case; other names still get
 * 421; a malformed name is refused at start. */
static void
test_serve_allow_host_serves_that_name(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--allow-host", "attacker.example", "--allow-host=weft.box", NULL};
    const char *bad[] = {WEFT,           "serve",        "--addr", "127.0.0.1:0",
                         "--allow-host", "x.example:80", NULL};
    const char *env[] = {f->h.home_env, NULL};

    start_serve(f, args, NULL);
    assert_int_equal(get_status(f, "/api/v1/runs", EVIL, NULL), 200);
    assert_int_equal(get_status(f, "/", "Attacker.Example", NULL), 200);
    assert_int_equal(get_status(f, "/api/v1/runs", "weft.box:8080", NULL), 200);
    assert_int_equal(get_status(f, "/api/v1/runs", "other.example:9464", NULL), 421);
    assert_int_equal(get_status(f, "/api/v1/runs", "attacker.example.evil:9464", NULL), 421);
    assert_int_equal(get_status(f, "/api/v1/runs", "localhost", NULL), 200);
    assert_true(denied(f, "host") == 2);
    serve_proc_home_stop(&f->h);
    assert_int_equal(weft_test_run(bad, env, f->h.dir, f->h.log, 15000), 2);
    assert_true(weft_test_file_contains(f->h.log, "--allow-host x.example:80"));
}

/* --token-file: the token works (401 without it, 200 with it), never shows in the process's
 * argv, and the Host rule still holds with it; a file others may read is refused, and so are
 * --token with --token-file together. */
static void
test_serve_token_file_kept_out_of_argv(void **state)
{
    struct fx *f = *state;
    char path[700];
    char loose[700];
    char cmdline[4096];
    const char *args[] = {"--token-file", path, NULL};
    const char *env[] = {f->h.home_env, "WEFT_SERVE_TOKEN*", NULL};
    const char *open_file[] = {WEFT, "serve", "--addr", "127.0.0.1:0", "--token-file", loose, NULL};
    const char *both[] = {WEFT,  "serve",        "--addr", "127.0.0.1:0", "--token",
                          TOKEN, "--token-file", path,     NULL};

    snprintf(path, sizeof(path), "%s/token", f->h.dir);
    snprintf(loose, sizeof(loose), "%s/token-0644", f->h.dir);
    write_token(path, TOKEN "\n", 0600);
    start_serve(f, args, NULL);
    cmdline_of(f->h.pid, cmdline, sizeof(cmdline));
    assert_non_null(strstr(cmdline, "--token-file"));
    assert_null(strstr(cmdline, TOKEN));
    assert_int_equal(get_status(f, "/api/v1/runs", NULL, NULL), 401);
    /* The file's trailing newline is not part of the token. */
    assert_int_equal(get_status(f, "/api/v1/runs", NULL, "Authorization: Bearer " TOKEN), 200);
    assert_int_equal(get_status(f, "/api/v1/runs", EVIL, "Authorization: Bearer " TOKEN), 421);
    assert_true(denied(f, "token") == 1);
    assert_true(denied(f, "host") == 1);
    serve_proc_home_stop(&f->h);

    write_token(loose, TOKEN "\n", 0644);
    assert_int_equal(weft_test_run(open_file, env, f->h.dir, f->h.log, 15000), 2);
    assert_true(weft_test_file_contains(f->h.log, "chmod 600"));
    assert_int_equal(weft_test_run(both, env, f->h.dir, f->h.log, 15000), 2);
}

/* WEFT_SERVE_TOKEN: the token from the environment works and is not in argv either. */
static void
test_serve_token_from_environment(void **state)
{
    struct fx *f = *state;
    char cmdline[4096];
    const char *env[] = {"WEFT_SERVE_TOKEN=" TOKEN, NULL};

    start_serve(f, NULL, env);
    cmdline_of(f->h.pid, cmdline, sizeof(cmdline));
    assert_null(strstr(cmdline, TOKEN));
    assert_int_equal(get_status(f, "/api/v1/runs", NULL, NULL), 401);
    assert_int_equal(get_status(f, "/api/v1/runs", NULL, "Authorization: Bearer " TOKEN), 200);
    assert_int_equal(get_status(f, "/metrics", NULL, NULL), 200);
    serve_proc_home_stop(&f->h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_rule_names),
        cmocka_unit_test_setup_teardown(test_serve_foreign_host_refused_on_loopback, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_serve_allow_host_serves_that_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_token_file_kept_out_of_argv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_token_from_environment, setup, teardown),
    };
    int rc = 0;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

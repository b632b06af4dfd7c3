/* tests/serve/test_token.c - the explorer's token (cli/serve_cmd.c, serve/http.c), as a user
 * meets it: a token shorter than 16 characters, or with a character a cookie cannot carry as
 * it is, is refused at start (exit 2) and one of 16 is taken; /?token=T logs a browser in with
 * an HttpOnly, SameSite=Strict cookie and sends it back to / without the token in the address;
 * that cookie opens the API, a wrong cookie does not (401, counted); and beyond loopback
 * without a token the explorer and ingest are off (the CLI says so, 403, counted) while
 * /metrics and /healthz still answer. test_host.c has the Host rule, --token-file and
 * WEFT_SERVE_TOKEN.
 *
 * The server is the built `weft` binary, spoken to over real HTTP on 127.0.0.1 (libcurl).
 */
#include "support/serve_proc.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WEFT  WEFT_BINARY_DIR "/weft"
#define TOKEN "correct-horse-battery-staple-42"

struct fx {
    struct serve_proc_home h;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    serve_proc_home_init(&f->h, "weft-serve-token-");
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

/* Start `weft serve --addr ADDR EXTRA...` (WEFT_SERVE_TOKEN unset). */
static void
start_serve(struct fx *f, const char *addr, const char *const *extra)
{
    serve_proc_home_start(&f->h, WEFT, addr, extra, NULL);
}

/* GET @p path on 127.0.0.1 with @p header (may be NULL); redirects are not followed. */
static void
get(const struct fx *f, const char *path, const char *header, struct serve_proc_answer *a)
{
    serve_proc_request(f->h.port, path, header, NULL, NULL, a);
}

static long
get_status(const struct fx *f, const char *path, const char *header)
{
    static struct serve_proc_answer a;

    get(f, path, header, &a);
    return a.status;
}

/* weft_serve_access_denied_total{reason=@p reason} as /metrics shows it. */
static double
denied(const struct fx *f, const char *reason)
{
    static struct serve_proc_answer a;
    char label[64];
    const char *labels[] = {label, NULL};
    size_t count = 0;
    double v = 0;

    snprintf(label, sizeof(label), "reason=\"%s\"", reason);
    get(f, "/metrics", NULL, &a);
    assert_int_equal(a.status, 200);
    v = serve_proc_sum(a.body, "weft_serve_access_denied_total", labels, &count);
    if (count != 1) {
        fail_msg("weft_serve_access_denied_total{%s} is not on /metrics once:\n%s", label, a.body);
    }
    return v;
}

/* A token of 15 characters, or one a cookie cannot carry, is refused before the server
 * starts (exit 2, saying what a token must be); 16 characters are enough. */
static void
test_token_needs_16_cookie_safe_characters(void **state)
{
    struct fx *f = *state;
    const char *env[] = {f->h.home_env, "WEFT_SERVE_TOKEN*", NULL};
    const char *short_token[] = {WEFT,      "serve",           "--addr", "127.0.0.1:0",
                                 "--token", "abcdefghijklmno", NULL};
    const char *semicolon[] = {
        WEFT, "serve", "--addr", "127.0.0.1:0", "--token", "abcdefgh;ijklmnopq", NULL};
    const char *short_env[] = {f->h.home_env, "WEFT_SERVE_TOKEN=abcdefghijklmno", NULL};
    const char *from_env[] = {WEFT, "serve", "--addr", "127.0.0.1:0", NULL};
    const char *sixteen[] = {"--token", "abcdefghijklmnop", NULL};

    assert_int_equal(weft_test_run(short_token, env, f->h.dir, f->h.log, 15000), 2);
    assert_true(weft_test_file_contains(f->h.log, "expected a token of at least 16"));
    assert_int_equal(weft_test_run(semicolon, env, f->h.dir, f->h.log, 15000), 2);
    assert_true(weft_test_file_contains(f->h.log, "expected a token of at least 16"));
    /* The environment's token is held to the same rule. */
    assert_int_equal(weft_test_run(from_env, short_env, f->h.dir, f->h.log, 15000), 2);
    assert_true(weft_test_file_contains(f->h.log, "WEFT_SERVE_TOKEN"));
    start_serve(f, "127.0.0.1:0", sixteen);
    assert_int_equal(get_status(f, "/api/v1/runs", NULL), 401);
    assert_int_equal(get_status(f, "/api/v1/runs", "Authorization: Bearer abcdefghijklmnop"), 200);
    serve_proc_home_stop(&f->h);
}

/* /?token=T: a 303 back to / (the token leaves the address bar) with the token as an
 * HttpOnly, SameSite=Strict cookie on path /; that cookie opens the API; a wrong cookie or a
 * wrong /?token= does not, and each refusal is counted. */
static void
test_token_cookie_login_is_strict_and_checked(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--token", TOKEN, NULL};
    static struct serve_proc_answer a;
    double before = 0;

    start_serve(f, "127.0.0.1:0", args);
    get(f, "/?token=" TOKEN, NULL, &a);
    assert_int_equal(a.status, 303);
    if (strstr(a.headers, "Set-Cookie: weft_token=" TOKEN ";") == NULL ||
        strstr(a.headers, "; HttpOnly") == NULL || strstr(a.headers, "; SameSite=Strict") == NULL ||
        strstr(a.headers, "; Path=/") == NULL || strstr(a.headers, "Location: /\r\n") == NULL) {
        fail_msg("the login's answer lacks the strict cookie or the redirect:\n%s", a.headers);
    }
    assert_int_equal(get_status(f, "/api/v1/runs", "Cookie: weft_token=" TOKEN), 200);
    assert_int_equal(get_status(f, "/", "Cookie: weft_token=" TOKEN), 200);
    before = denied(f, "token");
    assert_int_equal(get_status(f, "/api/v1/runs", "Cookie: weft_token=" TOKEN "x"), 401);
    assert_int_equal(get_status(f, "/api/v1/runs", "Cookie: weft_token=wrong-horse-battery-42"),
                     401);
    /* A prefix of the token is not the token. */
    assert_int_equal(get_status(f, "/api/v1/runs", "Cookie: weft_token=correct-horse"), 401);
    assert_true(denied(f, "token") == before + 3);
    /* A wrong token in the login sets no cookie. */
    get(f, "/?token=wrong-horse-battery-42", NULL, &a);
    assert_int_equal(a.status, 401);
    assert_null(strstr(a.headers, "Set-Cookie"));
    serve_proc_home_stop(&f->h);
}

/* Beyond loopback without a token: the CLI says the explorer is off, its pages, API and ingest
 * answer 403 (counted as reason "off") and /metrics and /healthz still answer. With a token on
 * the same address the explorer is on (behind the token). */
static void
test_explorer_off_beyond_loopback_without_token(void **state)
{
    struct fx *f = *state;
    const char *args[] = {"--token", TOKEN, NULL};

    start_serve(f, "0.0.0.0:0", NULL);
    assert_true(weft_test_file_contains(f->h.log, "is not loopback and no token was given: the "
                                                  "explorer is off"));
    assert_int_equal(get_status(f, "/", NULL), 403);
    assert_int_equal(get_status(f, "/api/v1/runs", NULL), 403);
    assert_int_equal(get_status(f, "/api/v1/runs", "Authorization: Bearer " TOKEN), 403);
    assert_int_equal(get_status(f, "/healthz", NULL), 200);
    assert_true(denied(f, "off") == 3);
    serve_proc_home_stop(&f->h);

    start_serve(f, "0.0.0.0:0", args);
    assert_false(weft_test_file_contains(f->h.log, "explorer is off"));
    assert_int_equal(get_status(f, "/api/v1/runs", NULL), 401);
    assert_int_equal(get_status(f, "/api/v1/runs", "Authorization: Bearer " TOKEN), 200);
    serve_proc_home_stop(&f->h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_token_needs_16_cookie_safe_characters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_token_cookie_login_is_strict_and_checked, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_explorer_off_beyond_loopback_without_token, setup,
                                        teardown),
    };
    int rc = 0;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}

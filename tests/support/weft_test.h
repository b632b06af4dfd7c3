/* tests/support/weft_test.h - what every weft test includes: cmocka, the public API, and
 * assertion helpers that print weft_strerror() on failure. */
#ifndef WEFT_TESTS_SUPPORT_WEFT_TEST_H
#define WEFT_TESTS_SUPPORT_WEFT_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <weft/weft.h>

#define assert_weft_ok(expr)                                            \
    do {                                                                \
        weft_err weft_test_err_ = (expr);                               \
        if (weft_test_err_ != WEFT_OK) {                                \
            fail_msg("%s returned %d (%s)", #expr, (int)weft_test_err_, \
                     weft_strerror(weft_test_err_));                    \
        }                                                               \
    } while (0)

#define assert_weft_err(expr, expected)                                                        \
    do {                                                                                       \
        weft_err weft_test_err_ = (expr);                                                      \
        if (weft_test_err_ != (expected)) {                                                    \
            fail_msg("%s returned %d (%s), expected %d (%s)", #expr, (int)weft_test_err_,      \
                     weft_strerror(weft_test_err_), (int)(expected), weft_strerror(expected)); \
        }                                                                                      \
    } while (0)

/* Set an environment variable for the test (NULL unsets). */
void weft_test_setenv(const char *name, const char *value);

/* Remove directory @p dir and everything in it (a test's temp dir); fails the test when that
 * does not work. */
void weft_test_rmtree(const char *dir);

/* Write @p text to @p dir/@p name (a test's fixture file); fails the test when it cannot. */
void weft_test_write_file(const char *dir, const char *name, const char *text);

/* The whole of file @p path, NUL-terminated (free() it), or NULL when it cannot be read. */
char *weft_test_read_file(const char *path);

/* Run @p bin with @p args (NULL-terminated, without argv[0]; at most 30) and this process's
 * environment, and wait for it; its stdout and stderr go through files in @p dir (named stdout
 * and stderr) into @p out and @p err (each cut at its length, NUL-terminated). Fails the test
 * when it cannot run or does not exit normally. @return its exit status. */
int weft_test_run_captured(const char *bin,
                           const char *const *args,
                           const char *dir,
                           char *out,
                           size_t out_len,
                           char *err,
                           size_t err_len);

/* Does @p meter's Prometheus text contain @p needle? Prints the text when not. */
bool weft_test_prom_has(struct weft_meter *meter, const char *needle);

/* Collect log lines so tests can assert on warnings. */
void weft_test_capture_logs(void);
const char *weft_test_logs(void); /* all captured lines joined by '\n' */
void weft_test_clear_logs(void);

#endif

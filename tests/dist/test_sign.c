/* tests/dist/test_sign.c - message signatures (runtime/dist/sign.h): the canonical form is
 * the documented byte string; a signed message verifies, and a change to its body or to any
 * signed header, another key, a missing or malformed signature do not; the previous key still
 * verifies and never signs; keys load from the environment, and a key file others may read is
 * refused. Also the amqps:// settings the broker checks before connecting (broker.h). */
#include "base/buf.h"
#include "runtime/dist/broker.h"
#include "runtime/dist/sign.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char key_a[] = "0123456789abcdef-key-a";
static const char key_b[] = "fedcba9876543210-key-b";
static const char body[] = "{\"type\":\"weft.task.v1\",\"argv\":[\"true\"]}";

static void
task_msg(struct weft__broker_msg *m)
{
    memset(m, 0, sizeof(*m));
    m->type = "weft.task.v1";
    m->message_id = "123e4567-e89b-42d3-a456-426614174000";
    m->correlation_id = "123e4567-e89b-42d3-a456-426614174000";
    m->reply_to = "task_results_queue";
    m->traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    m->attempt = 2;
    m->timestamp_ms = 1700000000123ull;
}

static void
keys_init(struct weft__dist_keys *k, const char *cur, const char *prev)
{
    char err[256] = "";

    memset(k, 0, sizeof(*k));
    assert_weft_ok(weft__dist_keys_set(k, cur, strlen(cur), prev, prev != NULL ? strlen(prev) : 0,
                                       err, sizeof(err)));
}

static void
test_canonical_form_is_length_prefixed_and_sorted(void **state)
{
    struct weft__broker_msg m;
    struct weft__buf out;
    const char *want = "weft-sig-v1\n"
                       "9:attempt=2\n"
                       "51:correlation_id=123e4567-e89b-42d3-a456-426614174000\n"
                       "47:message_id=123e4567-e89b-42d3-a456-426614174000\n"
                       "27:reply_to=task_results_queue\n"
                       "21:sent_ms=1700000000123\n"
                       "67:traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"
                       "17:type=weft.task.v1\n"
                       "39:{\"type\":\"weft.task.v1\",\"argv\":[\"true\"]}";

    (void)state;
    task_msg(&m);
    m.bounces = 3;                  /* not covered: an orchestrator raises it */
    m.delivery_count = 4;           /* added by the broker */
    m.signature = "v1=00000000:00"; /* never covers itself */
    weft__buf_init(&out, 0);
    assert_weft_ok(weft__dist_canonical(&m, body, strlen(body), &out));
    assert_string_equal(out.data, want);
    /* An absent header is left out, and differs from an empty one. */
    weft__buf_reset(&out);
    m.reply_to = NULL;
    assert_weft_ok(weft__dist_canonical(&m, body, strlen(body), &out));
    assert_null(strstr(out.data, "reply_to"));
    weft__buf_reset(&out);
    m.reply_to = "";
    assert_weft_ok(weft__dist_canonical(&m, body, strlen(body), &out));
    assert_non_null(strstr(out.data, "\n9:reply_to=\n"));
    weft__buf_cleanup(&out);
}

static void
test_signed_message_verifies(void **state)
{
    struct weft__dist_keys k;
    struct weft__broker_msg m;
    char sig[WEFT__SIGN_LEN];

    (void)state;
    keys_init(&k, key_a, NULL);
    task_msg(&m);
    assert_weft_ok(weft__dist_sign(&k, &m, body, strlen(body), sig));
    assert_ptr_equal(m.signature, sig);
    assert_int_equal(strlen(sig), WEFT__SIGN_LEN - 1);
    assert_memory_equal(sig, "v1=", 3);
    assert_memory_equal(sig + 3, k.current.id, 8);
    assert_int_equal(sig[11], ':');
    assert_int_equal(weft__dist_verify(&k, &m, body, strlen(body)), WEFT__VERIFY_OK);
    /* The broker's own headers may change on the way: still verifies. */
    m.delivery_count = 3;
    m.bounces = 1;
    assert_int_equal(weft__dist_verify(&k, &m, body, strlen(body)), WEFT__VERIFY_OK);
    weft__dist_keys_cleanup(&k);
}

static void
test_tampered_body_is_forged(void **state)
{
    struct weft__dist_keys k;
    struct weft__broker_msg m;
    char sig[WEFT__SIGN_LEN];
    char other[sizeof(body)];

    (void)state;
    keys_init(&k, key_a, NULL);
    task_msg(&m);
    assert_weft_ok(weft__dist_sign(&k, &m, body, strlen(body), sig));
    memcpy(other, body, sizeof(body));
    other[strlen(other) - 4] = 'X'; /* "true" -> "trXe" */
    assert_int_equal(weft__dist_verify(&k, &m, other, strlen(other)), WEFT__VERIFY_FORGED);
    /* One byte less is another message too. */
    assert_int_equal(weft__dist_verify(&k, &m, body, strlen(body) - 1), WEFT__VERIFY_FORGED);
    weft__dist_keys_cleanup(&k);
}

static void
test_tampered_header_is_forged(void **state)
{
    struct weft__dist_keys k;
    struct weft__broker_msg m, t;
    char sig[WEFT__SIGN_LEN];

    (void)state;
    keys_init(&k, key_a, NULL);
    task_msg(&m);
    assert_weft_ok(weft__dist_sign(&k, &m, body, strlen(body), sig));
    t = m;
    t.type = "weft.result.v1";
    assert_int_equal(weft__dist_verify(&k, &t, body, strlen(body)), WEFT__VERIFY_FORGED);
    t = m;
    t.message_id = "223e4567-e89b-42d3-a456-426614174000";
    assert_int_equal(weft__dist_verify(&k, &t, body, strlen(body)), WEFT__VERIFY_FORGED);
    t = m;
    t.traceparent = "00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert_int_equal(weft__dist_verify(&k, &t, body, strlen(body)), WEFT__VERIFY_FORGED);
    t = m;
    t.attempt = 3;
    assert_int_equal(weft__dist_verify(&k, &t, body, strlen(body)), WEFT__VERIFY_FORGED);
    t = m;
    t.tracestate = "vendor=x"; /* a header added */
    assert_int_equal(weft__dist_verify(&k, &t, body, strlen(body)), WEFT__VERIFY_FORGED);
    /* The MAC itself changed by one digit. */
    t = m;
    sig[WEFT__SIGN_LEN - 2] = sig[WEFT__SIGN_LEN - 2] == '0' ? '1' : '0';
    assert_int_equal(weft__dist_verify(&k, &t, body, strlen(body)), WEFT__VERIFY_FORGED);
    weft__dist_keys_cleanup(&k);
}

static void
test_wrong_key_is_refused(void **state)
{
    struct weft__dist_keys a, b;
    struct weft__broker_msg m;
    char sig[WEFT__SIGN_LEN];

    (void)state;
    keys_init(&a, key_a, NULL);
    keys_init(&b, key_b, NULL);
    task_msg(&m);
    assert_weft_ok(weft__dist_sign(&b, &m, body, strlen(body), sig));
    assert_int_equal(weft__dist_verify(&a, &m, body, strlen(body)), WEFT__VERIFY_UNKNOWN_KEY);
    /* A forger who copies the key id still needs the key. */
    memcpy(sig + 3, a.current.id, 8);
    assert_int_equal(weft__dist_verify(&a, &m, body, strlen(body)), WEFT__VERIFY_FORGED);
    assert_string_equal(weft__verify_reason(WEFT__VERIFY_FORGED), "forged");
    assert_string_equal(weft__verify_reason(WEFT__VERIFY_UNKNOWN_KEY), "unknown_key");
    /* Key ids name the keys apart, without being the key. */
    assert_string_not_equal(a.current.id, b.current.id);
    assert_null(strstr(key_a, a.current.id));
    weft__dist_keys_cleanup(&a);
    weft__dist_keys_cleanup(&b);
}

static void
test_previous_key_verifies_but_never_signs(void **state)
{
    struct weft__dist_keys old, rotated;
    struct weft__broker_msg m;
    char sig[WEFT__SIGN_LEN];

    (void)state;
    keys_init(&old, key_a, NULL);
    keys_init(&rotated, key_b, key_a); /* new current key b, previous a */
    task_msg(&m);
    assert_weft_ok(weft__dist_sign(&old, &m, body, strlen(body), sig));
    assert_int_equal(weft__dist_verify(&rotated, &m, body, strlen(body)), WEFT__VERIFY_OK);
    /* The rotated side signs with b: an old side (a only) does not know it. */
    assert_weft_ok(weft__dist_sign(&rotated, &m, body, strlen(body), sig));
    assert_memory_equal(sig + 3, rotated.current.id, 8);
    assert_int_equal(weft__dist_verify(&old, &m, body, strlen(body)), WEFT__VERIFY_UNKNOWN_KEY);
    weft__dist_keys_cleanup(&old);
    weft__dist_keys_cleanup(&rotated);
}

static void
test_unsigned_refused_only_with_a_key(void **state)
{
    struct weft__dist_keys k, none;
    struct weft__broker_msg m;

    (void)state;
    keys_init(&k, key_a, NULL);
    memset(&none, 0, sizeof(none));
    task_msg(&m);
    assert_int_equal(weft__dist_verify(&k, &m, body, strlen(body)), WEFT__VERIFY_UNSIGNED);
    assert_string_equal(weft__verify_reason(WEFT__VERIFY_UNSIGNED), "unsigned");
    assert_int_equal(weft__dist_verify(&none, &m, body, strlen(body)), WEFT__VERIFY_OK);
    assert_false(weft__dist_keys_enabled(&none));
    assert_int_equal(weft__dist_sign(&none, &m, body, strlen(body), (char[WEFT__SIGN_LEN]){0}),
                     WEFT_EINVAL);
    m.signature = "v1=zzzz:1234";
    assert_int_equal(weft__dist_verify(&k, &m, body, strlen(body)), WEFT__VERIFY_MALFORMED);
    m.signature = "";
    assert_int_equal(weft__dist_verify(&k, &m, body, strlen(body)), WEFT__VERIFY_MALFORMED);
    weft__dist_keys_cleanup(&k);
}

static void
clear_key_env(void)
{
    weft_test_setenv("WEFT_DIST_KEY", NULL);
    weft_test_setenv("WEFT_DIST_KEY_FILE", NULL);
    weft_test_setenv("WEFT_DIST_KEY_PREVIOUS", NULL);
    weft_test_setenv("WEFT_DIST_KEY_PREVIOUS_FILE", NULL);
}

static void
test_keys_from_env(void **state)
{
    struct weft__dist_keys k, direct;
    char err[512] = "";

    (void)state;
    clear_key_env();
    assert_weft_ok(weft__dist_keys_from_env(&k, err, sizeof(err)));
    assert_false(weft__dist_keys_enabled(&k));
    weft__dist_keys_cleanup(&k);

    weft_test_setenv("WEFT_DIST_KEY", key_a);
    weft_test_setenv("WEFT_DIST_KEY_PREVIOUS", key_b);
    assert_weft_ok(weft__dist_keys_from_env(&k, err, sizeof(err)));
    keys_init(&direct, key_a, key_b);
    assert_string_equal(k.current.id, direct.current.id);
    assert_string_equal(k.previous.id, direct.previous.id);
    weft__dist_keys_cleanup(&k);
    weft__dist_keys_cleanup(&direct);

    /* Too short to be a key. */
    weft_test_setenv("WEFT_DIST_KEY", "short");
    assert_weft_err(weft__dist_keys_from_env(&k, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "WEFT_DIST_KEY: expected 16 to 4096 bytes, got 5"));
    assert_null(strstr(err, "short")); /* the key is never in the text */
    weft__dist_keys_cleanup(&k);

    /* A previous key alone would verify what nobody signs. */
    weft_test_setenv("WEFT_DIST_KEY", NULL);
    assert_weft_err(weft__dist_keys_from_env(&k, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "without WEFT_DIST_KEY"));
    weft__dist_keys_cleanup(&k);
    clear_key_env();
}

static void
test_key_file_must_be_private(void **state)
{
    struct weft__dist_keys k, direct;
    char *dir = weft_test_mkdtemp("weft-sign-");
    char path[600];
    char err[512] = "";

    (void)state;
    assert_non_null(dir);
    clear_key_env();
    weft_test_write_file(dir, "key", "0123456789abcdef-key-a\n"); /* the newline is dropped */
    snprintf(path, sizeof(path), "%s/key", dir);
    weft_test_setenv("WEFT_DIST_KEY_FILE", path);

    assert_int_equal(chmod(path, 0640), 0);
    assert_weft_err(weft__dist_keys_from_env(&k, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "group or others may access it (mode 640)"));
    assert_non_null(strstr(err, "chmod 600"));
    assert_null(strstr(err, "key-a"));
    weft__dist_keys_cleanup(&k);

    assert_int_equal(chmod(path, 0604), 0);
    assert_weft_err(weft__dist_keys_from_env(&k, err, sizeof(err)), WEFT_EINVAL);
    weft__dist_keys_cleanup(&k);

    assert_int_equal(chmod(path, 0600), 0);
    assert_weft_ok(weft__dist_keys_from_env(&k, err, sizeof(err)));
    keys_init(&direct, key_a, NULL);
    assert_string_equal(k.current.id, direct.current.id); /* same key as the variable's */
    weft__dist_keys_cleanup(&k);
    weft__dist_keys_cleanup(&direct);

    /* Both the key and its file: which one is meant? */
    weft_test_setenv("WEFT_DIST_KEY", key_b);
    assert_weft_err(weft__dist_keys_from_env(&k, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "WEFT_DIST_KEY and WEFT_DIST_KEY_FILE are both set"));
    weft__dist_keys_cleanup(&k);
    weft_test_setenv("WEFT_DIST_KEY", NULL);

    snprintf(path, sizeof(path), "%s/missing", dir);
    weft_test_setenv("WEFT_DIST_KEY_FILE", path);
    assert_weft_err(weft__dist_keys_from_env(&k, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "cannot open"));
    weft__dist_keys_cleanup(&k);
    clear_key_env();
    weft_test_rmtree(dir);
    free(dir);
}

/* amqps:// with a CA file that is not there fails when the handle is made, naming the
 * variable and the path (not at each reconnect, with librabbitmq's vaguer words). */
static void
test_amqps_missing_ca_file_fails_clearly(void **state)
{
    struct weft__broker_config cfg;
    struct weft__broker *b = NULL;
    char err[512] = "";

    (void)state;
    memset(&cfg, 0, sizeof(cfg));
    cfg.url = "amqps://guest:secret@127.0.0.1:5671/";
    weft_test_setenv("WEFT_AMQP_CACERT", "/nonexistent/ca.pem");
    assert_weft_err(weft__broker_new(&cfg, &b, err, sizeof(err)), WEFT_EINVAL);
    assert_null(b);
    assert_non_null(strstr(err, "WEFT_AMQP_CACERT /nonexistent/ca.pem: cannot read"));
    assert_null(strstr(err, "secret"));

    /* A client certificate without its key. */
    weft_test_setenv("WEFT_AMQP_CACERT", "/dev/null");
    weft_test_setenv("WEFT_AMQP_CERT", "/dev/null");
    assert_weft_err(weft__broker_new(&cfg, &b, err, sizeof(err)), WEFT_EINVAL);
    assert_non_null(strstr(err, "set both"));

    /* Readable files: the handle is made (the connection comes later). */
    weft_test_setenv("WEFT_AMQP_KEY", "/dev/null");
    assert_weft_ok(weft__broker_new(&cfg, &b, err, sizeof(err)));
    weft__broker_free(b);
    b = NULL;

    /* Plain amqp:// never looks at them. */
    weft_test_setenv("WEFT_AMQP_CACERT", "/nonexistent/ca.pem");
    cfg.url = "amqp://guest:guest@127.0.0.1:5672/";
    assert_weft_ok(weft__broker_new(&cfg, &b, err, sizeof(err)));
    weft__broker_free(b);
    weft_test_setenv("WEFT_AMQP_CACERT", NULL);
    weft_test_setenv("WEFT_AMQP_CERT", NULL);
    weft_test_setenv("WEFT_AMQP_KEY", NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_form_is_length_prefixed_and_sorted),
        cmocka_unit_test(test_signed_message_verifies),
        cmocka_unit_test(test_tampered_body_is_forged),
        cmocka_unit_test(test_tampered_header_is_forged),
        cmocka_unit_test(test_wrong_key_is_refused),
        cmocka_unit_test(test_previous_key_verifies_but_never_signs),
        cmocka_unit_test(test_unsigned_refused_only_with_a_key),
        cmocka_unit_test(test_keys_from_env),
        cmocka_unit_test(test_key_file_must_be_private),
        cmocka_unit_test(test_amqps_missing_ca_file_fails_clearly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/support_servers/test_amqp.c - the RabbitMQ test broker (tests/support/amqp_server.h):
 * it listens on loopback only, librabbitmq speaks to it the way issue 14's executor will
 * (durable queue, persistent messages with publisher confirms, manual acks, headers with a
 * W3C traceparent), a durable queue's persistent message survives a broker restart, a failed
 * start names its log, and stopping - or the test dying - leaves nothing behind.
 *
 * One broker serves the first group (a start takes seconds); its teardown checks the stop. */
#include "support/amqp_server.h"
#include "support/server_proc.h"
#include "support/weft_test.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRACEPARENT "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TRACESTATE  "weft=step-7,congo=t61rcWkgMzE"

static struct weft_test_amqp *broker;

static int
start_broker(void **state)
{
    char err[4096];
    long t0 = weft_test_now_ms();

    (void)state;
    broker = weft_test_amqp_start(err, sizeof(err));
    if (broker == NULL) {
        fail_msg("%s", err);
    }
    print_message("RabbitMQ started in %ld ms at %s (node %s)\n", weft_test_now_ms() - t0,
                  weft_test_amqp_url(broker), weft_test_amqp_node(broker));
    return 0;
}

/* No process of the node left (zombies aside), the directory gone, the port closed. */
static void
assert_nothing_left(const char *node_env, const char *dir, unsigned port)
{
    long deadline = weft_test_now_ms() + 10000;
    pid_t pids[16];
    size_t n = 0;
    struct stat st;
    amqp_connection_state_t conn = NULL;
    amqp_socket_t *sock = NULL;
    struct timeval tv = {1, 0};

    for (;;) {
        bool is_dir_gone = stat(dir, &st) != 0 && errno == ENOENT;

        n = weft_test_find_procs(node_env, pids, 16);
        if (n == 0 && is_dir_gone) {
            break;
        }
        if (weft_test_now_ms() >= deadline) {
            fail_msg("after 10 s: %zu processes of %s (the first pid %ld), directory %s %s", n,
                     node_env, n > 0 ? (long)pids[0] : 0L, dir,
                     is_dir_gone ? "gone" : "still there");
        }
        weft_test_sleep_ms(100);
    }
    conn = amqp_new_connection();
    sock = amqp_tcp_socket_new(conn);
    assert_int_not_equal(amqp_socket_open_noblock(sock, "127.0.0.1", (int)port, &tv), 0);
    amqp_destroy_connection(conn);
}

static int
stop_broker(void **state)
{
    char node_env[160];
    char dir[512];
    unsigned port = weft_test_amqp_port(broker);
    long t0 = weft_test_now_ms();

    (void)state;
    snprintf(node_env, sizeof(node_env), "RABBITMQ_NODENAME=%s", weft_test_amqp_node(broker));
    snprintf(dir, sizeof(dir), "%s", weft_test_amqp_dir(broker));
    assert_int_equal(weft_test_amqp_stop(broker), 0);
    broker = NULL;
    print_message("RabbitMQ stopped in %ld ms\n", weft_test_now_ms() - t0);
    assert_nothing_left(node_env, dir, port);
    return 0;
}

static void
assert_reply_ok(amqp_rpc_reply_t reply, const char *what)
{
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
        fail_msg("%s: reply type %d, library error %d (%s)", what, (int)reply.reply_type,
                 reply.library_error, amqp_error_string2(reply.library_error));
    }
}

/* A connection logged in as guest with channel 1 open. */
static amqp_connection_state_t
connect_broker(unsigned port)
{
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    struct timeval tv = {5, 0};

    assert_non_null(sock);
    assert_int_equal(amqp_socket_open_noblock(sock, "127.0.0.1", (int)port, &tv), 0);
    assert_int_equal(amqp_set_rpc_timeout(conn, &tv), 0);
    assert_reply_ok(amqp_login(conn, "/", 0, 131072, 30, AMQP_SASL_METHOD_PLAIN, "guest", "guest"),
                    "login");
    amqp_channel_open(conn, 1);
    assert_reply_ok(amqp_get_rpc_reply(conn), "channel.open");
    return conn;
}

static void
disconnect(amqp_connection_state_t conn)
{
    amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
}

static void
declare_durable(amqp_connection_state_t conn, const char *queue)
{
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue), 0, 1, 0, 0, amqp_empty_table);
    assert_reply_ok(amqp_get_rpc_reply(conn), "queue.declare");
}

/* Messages ready in @p queue (a passive declare). */
static uint32_t
ready_count(amqp_connection_state_t conn, const char *queue)
{
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(conn, 1, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);

    assert_reply_ok(amqp_get_rpc_reply(conn), "queue.declare passive");
    assert_non_null(ok);
    return ok->message_count;
}

/* Publish a persistent message with the trace headers and wait for the broker's confirm. */
static void
publish_confirmed(amqp_connection_state_t conn,
                  const char *queue,
                  const char *body,
                  const char *message_id,
                  uint64_t expected_tag)
{
    amqp_table_entry_t headers[4];
    amqp_basic_properties_t props;
    amqp_frame_t frame;
    struct timeval tv = {10, 0};

    headers[0].key = amqp_cstring_bytes("traceparent");
    headers[0].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[0].value.value.bytes = amqp_cstring_bytes(TRACEPARENT);
    headers[1].key = amqp_cstring_bytes("tracestate");
    headers[1].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[1].value.value.bytes = amqp_cstring_bytes(TRACESTATE);
    headers[2].key = amqp_cstring_bytes("x-weft-task-id");
    headers[2].value.kind = AMQP_FIELD_KIND_UTF8;
    headers[2].value.value.bytes = amqp_cstring_bytes("6f1c2a4e-9b7d-4c3e-8a1f-0d2e3c4b5a69");
    headers[3].key = amqp_cstring_bytes("x-weft-attempt");
    headers[3].value.kind = AMQP_FIELD_KIND_I32;
    headers[3].value.value.i32 = 2;
    memset(&props, 0, sizeof(props));
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = AMQP_DELIVERY_PERSISTENT;
    props.message_id = amqp_cstring_bytes(message_id);
    props.headers.num_entries = 4;
    props.headers.entries = headers;
    assert_int_equal(amqp_basic_publish(conn, 1, amqp_empty_bytes, amqp_cstring_bytes(queue), 1, 0,
                                        &props, amqp_cstring_bytes(body)),
                     AMQP_STATUS_OK);
    /* The confirm: basic.ack with our delivery tag (a nack or a return would be a failure). */
    assert_int_equal(amqp_simple_wait_frame_noblock(conn, &frame, &tv), AMQP_STATUS_OK);
    assert_int_equal(frame.frame_type, AMQP_FRAME_METHOD);
    if (frame.payload.method.id != AMQP_BASIC_ACK_METHOD) {
        fail_msg("expected basic.ack, got method 0x%08x", (unsigned)frame.payload.method.id);
    }
    assert_int_equal(((amqp_basic_ack_t *)frame.payload.method.decoded)->delivery_tag,
                     expected_tag);
}

static const amqp_field_value_t *
find_header(const amqp_table_t *table, const char *key)
{
    for (int i = 0; i < table->num_entries; i++) {
        const amqp_table_entry_t *e = &table->entries[i];

        if (e->key.len == strlen(key) && memcmp(e->key.bytes, key, e->key.len) == 0) {
            return &e->value;
        }
    }
    return NULL;
}

static void
assert_bytes(amqp_bytes_t bytes, const char *expected)
{
    if (bytes.len != strlen(expected) || memcmp(bytes.bytes, expected, bytes.len) != 0) {
        fail_msg("got \"%.*s\", expected \"%s\"", (int)bytes.len, (const char *)bytes.bytes,
                 expected);
    }
}

static void
assert_text_header(const amqp_table_t *table, const char *key, const char *expected)
{
    const amqp_field_value_t *v = find_header(table, key);

    if (v == NULL) {
        fail_msg("header %s missing", key);
    }
    /* RabbitMQ hands strings back as long strings ('S'). */
    assert_int_equal(v->kind, AMQP_FIELD_KIND_UTF8);
    assert_bytes(v->value.bytes, expected);
}

/* Consume one message with manual acknowledgement, check everything that travelled with it,
 * and ack it. */
static void
consume_and_check(amqp_connection_state_t conn,
                  const char *queue,
                  const char *body,
                  const char *message_id)
{
    amqp_envelope_t env;
    struct timeval tv = {10, 0};
    const amqp_basic_properties_t *p = NULL;
    const amqp_field_value_t *attempt = NULL;

    amqp_basic_qos(conn, 1, 0, 1, 0);
    assert_reply_ok(amqp_get_rpc_reply(conn), "basic.qos");
    amqp_basic_consume(conn, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0 /* no_ack */, 0,
                       amqp_empty_table);
    assert_reply_ok(amqp_get_rpc_reply(conn), "basic.consume");
    amqp_maybe_release_buffers(conn);
    assert_reply_ok(amqp_consume_message(conn, &env, &tv, 0), "consume");
    p = &env.message.properties;
    assert_bytes(env.message.body, body);
    assert_bytes(env.routing_key, queue);
    assert_true(p->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG);
    assert_int_equal(p->delivery_mode, AMQP_DELIVERY_PERSISTENT);
    assert_bytes(p->content_type, "application/json");
    assert_bytes(p->message_id, message_id);
    assert_true(p->_flags & AMQP_BASIC_HEADERS_FLAG);
    assert_int_equal(p->headers.num_entries, 4);
    assert_text_header(&p->headers, "traceparent", TRACEPARENT);
    assert_text_header(&p->headers, "tracestate", TRACESTATE);
    assert_text_header(&p->headers, "x-weft-task-id", "6f1c2a4e-9b7d-4c3e-8a1f-0d2e3c4b5a69");
    attempt = find_header(&p->headers, "x-weft-attempt");
    assert_non_null(attempt);
    assert_int_equal(attempt->kind, AMQP_FIELD_KIND_I32);
    assert_int_equal(attempt->value.i32, 2);
    assert_int_equal(amqp_basic_ack(conn, 1, env.delivery_tag, 0), 0);
    amqp_destroy_envelope(&env);
}

static void
test_amqp_listens_on_loopback_only(void **state)
{
    char node_env[160];
    char addrs[1024];
    char amqp_addr[64];
    pid_t pids[32];
    size_t n = 0;
    size_t count = 0;

    (void)state;
    assert_true(strncmp(weft_test_amqp_url(broker), "amqp://guest:guest@127.0.0.1:", 29) == 0);
    snprintf(node_env, sizeof(node_env), "RABBITMQ_NODENAME=%s", weft_test_amqp_node(broker));
    n = weft_test_find_procs(node_env, pids, 32);
    assert_true(n >= 3 && n <= 32); /* the script, the VM, epmd and the VM's helpers */
    count = weft_test_listen_addrs(pids, n, addrs, sizeof(addrs));
    print_message("listening: %s\n", addrs);
    assert_true(count >= 3); /* AMQP, Erlang distribution, epmd */
    snprintf(amqp_addr, sizeof(amqp_addr), "127.0.0.1:%u", weft_test_amqp_port(broker));
    assert_non_null(strstr(addrs, amqp_addr));
    /* Every listener is on loopback: 127.0.0.1, or ::1 where epmd adds it. */
    for (const char *a = addrs; *a != '\0';) {
        size_t len = strcspn(a, " ");

        if (strncmp(a, "127.0.0.1:", 10) != 0 && strncmp(a, "[::1]:", 6) != 0) {
            fail_msg("listening beyond loopback: %.*s", (int)len, a);
        }
        a += len;
        a += *a == ' ';
    }
}

static void
test_amqp_confirmed_persistent_round_trip_with_headers(void **state)
{
    amqp_connection_state_t conn = connect_broker(weft_test_amqp_port(broker));
    const char *body = "{\"task_id\": \"6f1c2a4e\", \"attempt\": 2, \"text\": \"caf\xc3\xa9\"}";

    (void)state;
    amqp_confirm_select(conn, 1);
    assert_reply_ok(amqp_get_rpc_reply(conn), "confirm.select");
    declare_durable(conn, "weft.smoke.round_trip");
    publish_confirmed(conn, "weft.smoke.round_trip", body, "msg-1", 1);
    assert_int_equal(ready_count(conn, "weft.smoke.round_trip"), 1);
    consume_and_check(conn, "weft.smoke.round_trip", body, "msg-1");
    disconnect(conn);
    /* Acked: the queue is empty for the next connection. */
    conn = connect_broker(weft_test_amqp_port(broker));
    assert_int_equal(ready_count(conn, "weft.smoke.round_trip"), 0);
    disconnect(conn);
}

static void
test_amqp_ctl_lists_queues(void **state)
{
    static const char *const args[] = {"list_queues", "-q", "name", "durable", NULL};
    amqp_connection_state_t conn = connect_broker(weft_test_amqp_port(broker));
    char *out = NULL;

    (void)state;
    declare_durable(conn, "weft.smoke.listed");
    disconnect(conn);
    assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
    assert_non_null(out);
    assert_non_null(strstr(out, "weft.smoke.listed\ttrue"));
    free(out);
}

/* Issue 14's broker-restart fault, in miniature: a confirmed persistent message in a durable
 * queue is there after the broker restarts, on the same URL; the old connection is dead. */
static void
test_amqp_restart_keeps_durable_persistent_message(void **state)
{
    static const char *const args[] = {"list_queues", "-q", "name", "messages", NULL};
    amqp_connection_state_t conn = connect_broker(weft_test_amqp_port(broker));
    char url[128];
    char err[4096];
    char *out = NULL;
    long t0 = 0;

    (void)state;
    snprintf(url, sizeof(url), "%s", weft_test_amqp_url(broker));
    amqp_confirm_select(conn, 1);
    assert_reply_ok(amqp_get_rpc_reply(conn), "confirm.select");
    declare_durable(conn, "weft.smoke.restart");
    publish_confirmed(conn, "weft.smoke.restart", "survives", "msg-restart", 1);

    t0 = weft_test_now_ms();
    if (weft_test_amqp_restart(broker, err, sizeof(err)) != 0) {
        fail_msg("%s", err);
    }
    print_message("RabbitMQ restarted in %ld ms\n", weft_test_now_ms() - t0);
    assert_string_equal(weft_test_amqp_url(broker), url);
    {
        amqp_queue_declare(conn, 1, amqp_cstring_bytes("weft.smoke.restart"), 1, 0, 0, 0,
                           amqp_empty_table);
        assert_int_not_equal(amqp_get_rpc_reply(conn).reply_type, AMQP_RESPONSE_NORMAL);
        amqp_destroy_connection(conn);
    }
    assert_int_equal(weft_test_amqp_ctl(broker, args, &out), 0);
    assert_non_null(strstr(out, "weft.smoke.restart\t1"));
    free(out);
    conn = connect_broker(weft_test_amqp_port(broker));
    assert_int_equal(ready_count(conn, "weft.smoke.restart"), 1);
    consume_and_check(conn, "weft.smoke.restart", "survives", "msg-restart");
    disconnect(conn);
}

/* A broker that cannot start fails with an error naming its log and quoting it. The
 * "broker" here is a script that fails at once, in a bin directory of our own. */
static void
test_amqp_failed_start_names_the_log(void **state)
{
    char *bindir = weft_test_mkdtemp("weft-amqp-bin-");
    char script[600];
    char err[4096];
    char dir[512];
    const char *see = NULL;
    const char *end = NULL;
    FILE *fp = NULL;
    struct stat st;
    struct weft_test_amqp *amqp = NULL;

    (void)state;
    assert_non_null(bindir);
    snprintf(script, sizeof(script), "%s/rabbitmq-server", bindir);
    fp = fopen(script, "w");
    assert_non_null(fp);
    fputs("#!/bin/sh\necho \"boot failed: node $RABBITMQ_NODENAME on port "
          "$RABBITMQ_NODE_PORT\" >&2\nexit 3\n",
          fp);
    fclose(fp);
    assert_int_equal(chmod(script, 0755), 0);
    weft_test_setenv("WEFT_TEST_RABBITMQ_BINDIR", bindir);
    amqp = weft_test_amqp_start(err, sizeof(err));
    weft_test_setenv("WEFT_TEST_RABBITMQ_BINDIR", NULL);
    assert_int_equal(weft_test_rm_rf(bindir), 0);
    free(bindir);
    assert_null(amqp);
    print_message("the error reads: %s\n", err);
    assert_non_null(strstr(err, "exited with status 3"));
    assert_non_null(strstr(err, "boot failed: node weft-test-"));
    see = strstr(err, "; see ");
    assert_non_null(see);
    end = strstr(see, "/server.out");
    assert_non_null(end);
    snprintf(dir, sizeof(dir), "%.*s", (int)(end - see - 6), see + 6);
    assert_int_equal(stat(dir, &st), 0); /* the logs stay for the reader */
    assert_int_equal(weft_test_rm_rf(dir), 0);
    /* Its epmd is gone too. */
    {
        char node_env[160];
        pid_t pids[4];
        const char *node = strstr(err, "node weft-test-") + 5;

        snprintf(node_env, sizeof(node_env), "RABBITMQ_NODENAME=%.*s", (int)strcspn(node, " "),
                 node);
        assert_int_equal(weft_test_find_procs(node_env, pids, 4), 0);
    }
}

static void
test_amqp_missing_server_fails_clearly(void **state)
{
    char err[1024];
    struct weft_test_amqp *amqp = NULL;

    (void)state;
    weft_test_setenv("WEFT_TEST_RABBITMQ_BINDIR", "/nonexistent/rabbitmq/bin");
    amqp = weft_test_amqp_start(err, sizeof(err));
    weft_test_setenv("WEFT_TEST_RABBITMQ_BINDIR", NULL);
    assert_null(amqp);
    assert_non_null(strstr(err, "/nonexistent/rabbitmq/bin/rabbitmq-server not found"));
    assert_non_null(strstr(err, "rabbitmq-server;"));
}

/* A test that dies with its broker running: the guard kills the broker and its epmd and
 * removes the directory. The "test" is a forked child that starts a broker and exits. */
static void
test_amqp_guard_cleans_up_after_a_dead_test(void **state)
{
    int fds[2];
    char line[700] = "";
    char node[160] = "";
    char dir[512] = "";
    unsigned port = 0;
    pid_t child = 0;
    FILE *fp = NULL;
    int status = 0;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char err[4096];
        struct weft_test_amqp *amqp = NULL;

        close(fds[0]);
        amqp = weft_test_amqp_start(err, sizeof(err));
        if (amqp != NULL) {
            dprintf(fds[1], "%s %s %u\n", weft_test_amqp_node(amqp), weft_test_amqp_dir(amqp),
                    weft_test_amqp_port(amqp));
        } else {
            dprintf(fds[1], "error %s\n", err);
        }
        _exit(amqp != NULL ? 0 : 1); /* dies without weft_test_amqp_stop */
    }
    close(fds[1]);
    fp = fdopen(fds[0], "r");
    assert_non_null(fp);
    if (fgets(line, sizeof(line), fp) == NULL) {
        line[0] = '\0';
    }
    fclose(fp);
    assert_int_equal(waitpid(child, &status, 0), child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail_msg("the child could not start a broker: %s", line);
    }
    assert_int_equal(sscanf(line, "%140s %511s %u", node + 18, dir, &port), 3);
    memcpy(node, "RABBITMQ_NODENAME=", 18);
    assert_nothing_left(node, dir, port);
}

int
main(void)
{
    const struct CMUnitTest with_broker[] = {
        cmocka_unit_test(test_amqp_listens_on_loopback_only),
        cmocka_unit_test(test_amqp_confirmed_persistent_round_trip_with_headers),
        cmocka_unit_test(test_amqp_ctl_lists_queues),
        cmocka_unit_test(test_amqp_restart_keeps_durable_persistent_message),
    };
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_amqp_failed_start_names_the_log),
        cmocka_unit_test(test_amqp_missing_server_fails_clearly),
        cmocka_unit_test(test_amqp_guard_cleans_up_after_a_dead_test),
    };
    int failed = cmocka_run_group_tests_name("amqp_server", with_broker, start_broker, stop_broker);

    failed += cmocka_run_group_tests_name("amqp_server_lifecycle", alone, NULL, NULL);
    return failed;
}

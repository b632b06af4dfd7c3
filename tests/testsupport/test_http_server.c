/* tests/testsupport/test_http_server.c - the shared test HTTP server (tests/support/http_server)
 * as a module: Content-Length and chunked bodies, keep-alive with pipelined requests, extra
 * headers, a dropped connection, malformed and oversized requests closing the connection, and
 * a stop that cuts a delayed answer short. A raw socket client sends exactly the bytes each case
 * needs. */
#include "support/http_server.h"
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct seen {
    pthread_mutex_t lock;
    size_t count;
    char method[4][16];
    char path[4][512];
    char body[4][64];
    size_t body_len[4];
    unsigned conn[4];
    unsigned delay_ms;
    bool drop;
};

static void
handler(void *user_data, struct http_server_request *req, struct http_server_response *resp)
{
    struct seen *s = user_data;
    char text[640];
    size_t i = 0;

    pthread_mutex_lock(&s->lock);
    i = s->count++ % 4;
    snprintf(s->method[i], sizeof(s->method[i]), "%s", req->method);
    snprintf(s->path[i], sizeof(s->path[i]), "%s", req->path);
    snprintf(s->body[i], sizeof(s->body[i]), "%s", req->body);
    s->body_len[i] = req->body_len;
    s->conn[i] = req->conn_id;
    resp->delay_ms = s->delay_ms;
    resp->drop = s->drop;
    pthread_mutex_unlock(&s->lock);
    snprintf(text, sizeof(text), "got %zu bytes at %s", req->body_len, req->path);
    resp->status = 201;
    resp->content_type = strdup("text/plain");
    resp->headers = strdup("X-Test: yes\r\n");
    resp->body = strdup(text);
    resp->body_len = strlen(text);
}

static void
pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int
connect_to(struct http_server *srv)
{
    struct sockaddr_in addr;
    struct timeval tv = {5, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(http_server_port(srv));
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void
send_text(int fd, const char *text)
{
    assert_int_equal(send(fd, text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
}

/* Read until @p n answers arrived (each body says "got ...") and the line goes quiet, or,
 * with @p n 0, until the server closes the connection. */
static size_t
read_all(int fd, char *buf, size_t cap, size_t n)
{
    size_t len = 0;
    bool is_quiet_wait = false;

    while (len + 1 < cap) {
        ssize_t got = recv(fd, buf + len, cap - 1 - len, 0);
        size_t done = 0;
        if (got <= 0) {
            break;
        }
        len += (size_t)got;
        buf[len] = '\0';
        for (const char *p = buf; (p = strstr(p, "got ")) != NULL; p++) {
            done++;
        }
        if (n > 0 && done >= n && !is_quiet_wait) {
            struct timeval tv = {0, 200000};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            is_quiet_wait = true;
        }
    }
    buf[len] = '\0';
    return len;
}

struct fx {
    struct seen seen;
    struct http_server *srv;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    pthread_mutex_init(&f->seen.lock, NULL);
    assert_int_equal(http_server_start(handler, &f->seen, &f->srv), 0);
    assert_true(http_server_port(f->srv) > 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    http_server_stop(f->srv);
    pthread_mutex_destroy(&f->seen.lock);
    free(f);
    return 0;
}

static void
test_http_server_reads_content_length_and_answers(void **state)
{
    struct fx *f = *state;
    char buf[2048];
    int fd = connect_to(f->srv);

    send_text(fd,
              "POST /v1/things?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world");
    read_all(fd, buf, sizeof(buf), 1);
    assert_non_null(strstr(buf, "HTTP/1.1 201 "));
    assert_non_null(strstr(buf, "Content-Type: text/plain\r\n"));
    assert_non_null(strstr(buf, "X-Test: yes\r\n"));
    assert_non_null(strstr(buf, "Content-Length: 30\r\n"));
    assert_non_null(strstr(buf, "\r\n\r\ngot 11 bytes at /v1/things?x=1"));
    close(fd);
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.count, 1);
    assert_string_equal(f->seen.method[0], "POST");
    assert_string_equal(f->seen.body[0], "hello world");
    assert_int_equal(f->seen.conn[0], 1);
    pthread_mutex_unlock(&f->seen.lock);
}

static void
test_http_server_decodes_chunked_bodies(void **state)
{
    struct fx *f = *state;
    char buf[2048];
    int fd = connect_to(f->srv);

    /* Sent in pieces, a chunk extension and a trailer included. */
    send_text(fd, "PUT /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\nhel");
    pause_ms(30);
    send_text(fd, "lo\r\nA;ext=1\r\n, chunked!\r\n0\r\nX-Trailer: t\r\n\r\n");
    read_all(fd, buf, sizeof(buf), 1);
    assert_non_null(strstr(buf, "got 15 bytes at /c"));
    close(fd);
    pthread_mutex_lock(&f->seen.lock);
    assert_string_equal(f->seen.body[0], "hello, chunked!");
    assert_int_equal(f->seen.body_len[0], 15);
    pthread_mutex_unlock(&f->seen.lock);
}

static void
test_http_server_keeps_the_connection_for_pipelined_requests(void **state)
{
    struct fx *f = *state;
    char buf[4096];
    int fd = connect_to(f->srv);
    int fd2 = -1;

    send_text(fd, "GET /one HTTP/1.1\r\n\r\nPOST /two HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                  "POST /three HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n");
    read_all(fd, buf, sizeof(buf), 3);
    assert_non_null(strstr(buf, "got 0 bytes at /one"));
    assert_non_null(strstr(buf, "got 3 bytes at /two"));
    assert_non_null(strstr(buf, "got 1 bytes at /three"));
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.count, 3);
    assert_int_equal(f->seen.conn[2], 1);
    assert_string_equal(f->seen.body[2], "z");
    pthread_mutex_unlock(&f->seen.lock);
    /* A new connection while this one is idle: the server moves to it. */
    fd2 = connect_to(f->srv);
    send_text(fd2, "GET /four HTTP/1.1\r\n\r\n");
    read_all(fd2, buf, sizeof(buf), 1);
    assert_non_null(strstr(buf, "got 0 bytes at /four"));
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.conn[3], 2);
    pthread_mutex_unlock(&f->seen.lock);
    close(fd2);
    close(fd);
}

static void
test_http_server_drops_and_rejects_bad_requests(void **state)
{
    struct fx *f = *state;
    char buf[1024];
    int fd = -1;

    /* A scripted drop: the connection closes without an answer. */
    pthread_mutex_lock(&f->seen.lock);
    f->seen.drop = true;
    pthread_mutex_unlock(&f->seen.lock);
    fd = connect_to(f->srv);
    send_text(fd, "GET /drop HTTP/1.1\r\n\r\n");
    assert_int_equal(read_all(fd, buf, sizeof(buf), 0), 0);
    close(fd);
    pthread_mutex_lock(&f->seen.lock);
    f->seen.drop = false;
    pthread_mutex_unlock(&f->seen.lock);
    /* A malformed request line, a bad chunk size, an oversized body: closed, no handler call. */
    fd = connect_to(f->srv);
    send_text(fd, "NONSENSE\r\n\r\n");
    assert_int_equal(read_all(fd, buf, sizeof(buf), 0), 0);
    close(fd);
    fd = connect_to(f->srv);
    send_text(fd, "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert_int_equal(read_all(fd, buf, sizeof(buf), 0), 0);
    close(fd);
    fd = connect_to(f->srv);
    send_text(fd, "POST /x HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n");
    assert_int_equal(read_all(fd, buf, sizeof(buf), 0), 0);
    close(fd);
    pthread_mutex_lock(&f->seen.lock);
    assert_int_equal(f->seen.count, 1); /* only the dropped one reached the handler */
    pthread_mutex_unlock(&f->seen.lock);
}

static void
test_http_server_stop_cuts_a_delay_short(void **state)
{
    struct fx *f = *state;
    char buf[256];
    struct timespec t0;
    struct timespec t1;
    int fd = -1;

    pthread_mutex_lock(&f->seen.lock);
    f->seen.delay_ms = 60000;
    pthread_mutex_unlock(&f->seen.lock);
    fd = connect_to(f->srv);
    send_text(fd, "GET /slow HTTP/1.1\r\n\r\n");
    while (true) {
        size_t n = 0;
        pthread_mutex_lock(&f->seen.lock);
        n = f->seen.count;
        pthread_mutex_unlock(&f->seen.lock);
        if (n > 0) {
            break;
        }
        pause_ms(1);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    http_server_stop(f->srv);
    f->srv = NULL;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true(t1.tv_sec - t0.tv_sec < 5);
    assert_int_equal(read_all(fd, buf, sizeof(buf), 0), 0); /* closed, unanswered */
    close(fd);
}

static void
test_http_server_header_helpers(void **state)
{
    const char *headers = "Host: a\r\ncontent-TYPE:  text/x \r\nX-Empty:\r\n";
    char buf[8];
    size_t vlen = 0;

    (void)state;
    assert_non_null(http_find_header(headers, "Content-Type", &vlen));
    assert_int_equal(vlen, 7); /* trailing white space is kept */
    assert_string_equal(http_header_copy(headers, "content-type", buf, sizeof(buf)), "text/x ");
    assert_string_equal(http_header_copy(headers, "X-Empty", buf, sizeof(buf)), "");
    assert_null(http_header_copy(headers, "Host2", buf, sizeof(buf)));
    assert_null(http_header_copy(headers, "Host", buf, 0));
    assert_null(http_find_header(NULL, "Host", &vlen));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_server_reads_content_length_and_answers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_server_decodes_chunked_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_http_server_keeps_the_connection_for_pipelined_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_server_drops_and_rejects_bad_requests, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_server_stop_cuts_a_delay_short, setup, teardown),
        cmocka_unit_test(test_http_server_header_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* tests/exporters/test_metrics_server.c - what the metrics server parses itself: the route of
 * a request and the listen address (exporters/metrics_server.h). The server end to end is
 * tested in runtime/prometheus_scrape and runtime/run_metrics. */
#include "exporters/metrics_server.h"
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <string.h>

static void
test_metrics_server_routes_by_method_and_exact_path(void **state)
{
    (void)state;
    assert_int_equal(weft__metrics_server_route("GET", "/metrics"), WEFT__ROUTE_METRICS);
    assert_int_equal(weft__metrics_server_route("HEAD", "/healthz"), WEFT__ROUTE_HEALTHZ);
    assert_int_equal(weft__metrics_server_route("POST", "/metrics"), WEFT__ROUTE_BAD_METHOD);
    assert_int_equal(weft__metrics_server_route("get", "/metrics"), WEFT__ROUTE_BAD_METHOD);
    assert_int_equal(weft__metrics_server_route("GET", "/metrics/"), WEFT__ROUTE_NOT_FOUND);
    assert_int_equal(weft__metrics_server_route("GET", "/metrics?x"), WEFT__ROUTE_NOT_FOUND);
    assert_int_equal(weft__metrics_server_route(NULL, "/metrics"), WEFT__ROUTE_NOT_FOUND);
}

static void
test_metrics_server_address_parses_host_and_port(void **state)
{
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN];

    (void)state;
    assert_weft_ok(weft__metrics_server_parse_addr("0.0.0.0:9100", &sa));
    assert_int_equal(sa.sin_family, AF_INET);
    assert_int_equal(ntohs(sa.sin_port), 9100);
    assert_non_null(inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)));
    assert_string_equal(host, "0.0.0.0");
    assert_weft_ok(weft__metrics_server_parse_addr(":0", &sa));
    assert_int_equal(ntohs(sa.sin_port), 0);
    assert_non_null(inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)));
    assert_string_equal(host, "127.0.0.1");
    assert_weft_ok(weft__metrics_server_parse_addr(NULL, &sa));
    assert_int_equal(ntohs(sa.sin_port), 9464);
}

/* strtol alone took an empty port as 0 (a random port instead of an error), and a sign or
 * leading blanks too. */
static void
test_metrics_server_address_port_must_be_digits(void **state)
{
    static const char *const bad[] = {"127.0.0.1:",   "127.0.0.1: 80", "127.0.0.1:+80",
                                      "127.0.0.1:-0", "127.0.0.1:80x", "127.0.0.1:65536",
                                      "localhost:80", "9464",          "1.2.3.4.5:1"};
    struct sockaddr_in sa;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&sa, 0x55, sizeof(sa));
        assert_int_equal(weft__metrics_server_parse_addr(bad[i], &sa), WEFT_EINVAL);
        assert_int_equal(sa.sin_family, 0);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_server_routes_by_method_and_exact_path),
        cmocka_unit_test(test_metrics_server_address_parses_host_and_port),
        cmocka_unit_test(test_metrics_server_address_port_must_be_digits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#!/bin/sh
# scripts/deps.sh - install the Debian packages weft needs to build and test, if missing.
# Usage: scripts/deps.sh [build|test|servers|peers]
#   build    what `make` needs; test: also the test tools and servers (`make test`);
#   servers  the build packages plus rabbitmq-server and postgresql-15 (`make distributed`);
#   peers    the build packages plus Go and the OpenTelemetry Go SDK (`make bench-peers`)
# Installs with apt-get when run as root; otherwise lists what is missing and fails.
set -eu

# libpq-dev: the PostgreSQL state backend (WEFT_STATE_URL=postgresql://...) links libpq;
# librabbitmq-dev: the AMQP executor and `weft worker` link librabbitmq;
# libstemmer-dev: skill memory compares tasks by word stems (Snowball's English stemmer);
# libssl-dev: libcrypto's HMAC-SHA256 signs distributed runs' messages (WEFT_DIST_KEY).
pkgs="gcc make cmake pkg-config libcurl4-openssl-dev libjansson-dev zlib1g-dev libdeflate-dev libsqlite3-dev libmicrohttpd-dev librabbitmq-dev libpq-dev libstemmer-dev libssl-dev"
# The trace explorer (`weft serve`) embeds pinned browser libraries (graph layout, charts) that
# npm installs into dashboards/ui at build time (npm_ci below): node and npm from Debian.
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs npm"
peer_pkgs="golang-go golang-opentelemetry-otel-dev"
if [ "${1:-build}" = test ]; then
    # prometheus brings promtool for the alert-rule unit tests; python3-yaml checks deploy/;
    # clang with libclang-rt-14-dev (libFuzzer, ASan, UBSan runtimes) builds tests/fuzz.
    pkgs="$pkgs libcmocka-dev protobuf-compiler prometheus python3-yaml clang libclang-rt-14-dev"
    # The explorer's browser tests (tests/ui) drive Debian's chromium with playwright-core.
    pkgs="$pkgs chromium"
    # Distributed runs (issue 14): the `servers` tests start a real RabbitMQ broker and a real
    # PostgreSQL 15 (binaries in /usr/lib/postgresql/15/bin) and talk to them with librabbitmq
    # (both in the build list: the library links them).
    pkgs="$pkgs rabbitmq-server postgresql-15"
    # bench/peers/otel_go_span_bench builds offline from Debian's Go and OpenTelemetry Go SDK
    # sources (ctest scripts/bench_peers, tests/scripts/check-bench-peers.sh, checks that it
    # builds and prints its JSON lines).
    pkgs="$pkgs $peer_pkgs"
elif [ "${1:-build}" = servers ]; then
    # `make distributed` (scripts/distributed.sh) starts a throwaway broker and cluster of its
    # own, the same way as the tests; it needs none of the test tools.
    pkgs="$pkgs rabbitmq-server postgresql-15"
elif [ "${1:-build}" = peers ]; then
    # `make bench-peers` (scripts/bench-peers.sh) measures the OpenTelemetry SDKs for Go and
    # JavaScript beside weft: Go 1.19 and the Go SDK's sources (/usr/share/gocode/src), built
    # offline in GOPATH mode; the JS SDK comes from npm into the build directory (the script).
    pkgs="$pkgs $peer_pkgs"
elif [ "${1:-build}" != build ]; then
    echo "usage: scripts/deps.sh [build|test|servers|peers]" >&2
    exit 2
fi

# `npm ci` in DIR (as the current user, root or not) when its node_modules is missing or older
# than the lockfile: dashboards/ui (the explorer's libraries, every build),
# examples/mcp_filesystem (the MCP example's server, every build), tests/mcp (the MCP
# client's tests start real MCP servers from npm), tests/ui (playwright-core, and the
# OpenTelemetry JS SDK its traces-list check sends a trace with) and tests/ingest (the
# OpenTelemetry JS SDK the ingest test sends spans with).
npm_ci() {
    dir="$(cd "$(dirname "$0")/.." && pwd)/$1"
    # npm writes node_modules/.package-lock.json last: without it an install was cut short
    # (or its files removed), and the folder alone proves nothing.
    if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
        [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
        echo "weft: installing $2 (npm ci in $1)" >&2
        (cd "$dir" && npm ci --no-audit --no-fund) && touch "$dir/node_modules"
    fi
}
npm_packages() {
    npm_ci dashboards/ui "the explorer's browser libraries"
    # The README's MCP example starts the filesystem reference server from npm: installed
    # with the build, so `make run` users can run it as the README says.
    npm_ci examples/mcp_filesystem "the MCP example's filesystem server"
    if [ "${1:-build}" = test ]; then
        npm_ci tests/mcp "the MCP test servers"
        npm_ci tests/ui "playwright-core and the OpenTelemetry JS SDK for the explorer's browser tests"
        npm_ci tests/ingest "the OpenTelemetry JS SDK for the ingest test"
    fi
}

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    npm_packages "${1:-build}"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "weft: missing Debian packages:$missing" >&2
    echo "weft: run 'make deps' as root, or: sudo apt-get install$missing" >&2
    exit 1
fi
echo "weft: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have empty package lists; refresh them once if the install fails.
# shellcheck disable=SC2086
apt-get install -y --no-install-recommends $missing ||
    { apt-get update && apt-get install -y --no-install-recommends $missing; }

# Debian starts a system-wide broker and cluster on install where services may start (not in
# containers with policy-rc.d). The tests start their own on free loopback ports, but an idle
# system broker (5672, 25672, epmd's 4369 on every interface) and cluster (5432) only take memory
# and ports: stop them and keep them from starting at boot (scripts/distributed.sh starts its own
# too).
stop_service() {
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        systemctl disable --now "$1" >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
        service "$1" stop >/dev/null 2>&1 || true
        if command -v update-rc.d >/dev/null 2>&1; then
            update-rc.d "$1" disable >/dev/null 2>&1 || true
        fi
    fi
}
case " $missing " in
*" rabbitmq-server "*)
    stop_service rabbitmq-server
    # Whatever the init system: no system node, and no epmd on the default port 4369 (the
    # tests run their own epmd on a free port; `epmd -kill` leaves one with nodes alone).
    if pgrep -u rabbitmq beam.smp >/dev/null 2>&1; then
        rabbitmqctl stop >/dev/null 2>&1 || true
    fi
    epmd -kill >/dev/null 2>&1 || true
    ;;
esac
case " $missing " in
*" postgresql-15 "*) stop_service postgresql ;;
esac

npm_packages "${1:-build}"

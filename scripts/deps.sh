#!/bin/sh
# scripts/deps.sh - install the Debian packages weft needs to build and test, if missing.
# Usage: scripts/deps.sh [build|test]
# Installs with apt-get when run as root; otherwise lists what is missing and fails.
set -eu

pkgs="gcc make cmake pkg-config libcurl4-openssl-dev libjansson-dev zlib1g-dev libdeflate-dev libsqlite3-dev libmicrohttpd-dev"
if [ "${1:-build}" = test ]; then
    # prometheus brings promtool for the alert-rule unit tests; python3-yaml checks deploy/;
    # clang with libclang-rt-14-dev (libFuzzer, ASan, UBSan runtimes) builds tests/fuzz.
    pkgs="$pkgs libcmocka-dev protobuf-compiler prometheus python3-yaml clang libclang-rt-14-dev"
fi

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

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

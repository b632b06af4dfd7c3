# Makefile - wraps CMake. `make run` and `make test` are the README's two commands; both
# install missing Debian packages first (as root), and so does `make distributed`, the optional
# third. Every target is documented in README.md.
BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
CTEST      := ctest --output-on-failure -j $(JOBS)

.PHONY: all deps deps-test deps-servers deps-peers build run distributed test test-plain test-asan \
	test-tsan test-fuzz fuzz bench bench-skills bench-explorer bench-dist bench-ingest \
	bench-ingest-pg bench-payloads bench-peers install format format-check clean

all: build

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

# After deps: two apt-get runs at once (make -j) would fight over dpkg's lock.
deps-servers: deps
	@scripts/deps.sh servers

deps-peers: deps
	@scripts/deps.sh peers

# Plain `make`: install what is missing, then build library, CLI, examples and benchmarks.
build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_BUILD_TESTS=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The code-review example on the scripted provider: live progress, the run's summary and its
# trace tree from the local store ($$WEFT_HOME, default ./.weft).
run: build
	@$(BUILD)/weft run examples/code_review/workflow.json \
		--input "Add a login endpoint to the user service"

# The same example distributed on this machine: a throwaway RabbitMQ and PostgreSQL 15 on free
# loopback ports, WORKERS (2) `weft worker` processes, `weft run --executor amqp` with
# WEFT_STATE_URL, its summary and trace tree; then everything stopped and removed (KEEP=1 leaves
# it running). Exit status: the run's. scripts/distributed.sh lists the options.
distributed: build deps-servers
	@WEFT_BIN=$(BUILD)/weft scripts/distributed.sh

test: deps deps-test test-plain test-asan test-tsan test-fuzz

test-plain:
	cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DWEFT_WERROR=ON $(CMAKE_ARGS) >/dev/null
	cmake --build build-test -j $(JOBS)
	cd build-test && $(CTEST)

test-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWEFT_WERROR=ON \
		-DWEFT_SANITIZE=address,undefined -DWEFT_BUILD_BENCH=OFF $(CMAKE_ARGS) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(CTEST)

test-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DWEFT_WERROR=ON \
		-DWEFT_SANITIZE=thread -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_EXAMPLES=OFF $(CMAKE_ARGS) >/dev/null
	cmake --build build-tsan -j $(JOBS)
	# setarch -R: without ASLR, TSan never trips over high-entropy mmap layouts on newer kernels.
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		setarch $$(uname -m) -R $(CTEST) -L concurrency

# libFuzzer harnesses (tests/fuzz, clang, ASan+UBSan) in build-fuzz. test-fuzz runs each for
# FUZZ_TEST_TIME seconds through ctest (label fuzz); `make fuzz` runs each, one at a time, for
# FUZZ_TIME seconds and prints executions and coverage. New corpus entries and crash inputs go
# to build-fuzz/fuzz-work, never into the committed seed corpus.
FUZZ_TIME      ?= 60
FUZZ_TEST_TIME ?= 5
FUZZ_CMAKE = cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
	-DWEFT_FUZZ=ON -DWEFT_WERROR=ON -DWEFT_FUZZ_TEST_SECONDS=$(FUZZ_TEST_TIME) $(CMAKE_ARGS)

test-fuzz:
	$(FUZZ_CMAKE) >/dev/null
	cmake --build build-fuzz -j $(JOBS)
	cd build-fuzz && $(CTEST) -L fuzz

fuzz: deps deps-test
	$(FUZZ_CMAKE) >/dev/null
	cmake --build build-fuzz -j $(JOBS)
	@rc=0; for h in $$(cd tests/fuzz && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$$//'); do \
		sh tests/fuzz/run-fuzz.sh build-fuzz/fuzz_$$h $$h $(FUZZ_TIME) tests/fuzz \
			build-fuzz/fuzz-work || rc=1; \
	done; exit $$rc

bench: build
	$(BUILD)/span_bench
	$(BUILD)/run_bench
	$(BUILD)/flow_bench
	$(BUILD)/metrics_bench
	$(BUILD)/tail_bench
	$(BUILD)/spool_bench
	$(BUILD)/payload_bench

# Distributed runs end to end (no-op tasks through RabbitMQ, `weft worker` processes and
# PostgreSQL state): starts its own throwaway servers, so it needs the test packages and is
# kept out of `make bench`. DIST_BENCH_ARGS: e.g. --tasks 5000 --cases throughput.
DIST_BENCH_ARGS ?=
bench-skills: build
	$(BUILD)/skills_bench $(SKILLS_BENCH_ARGS)

# The explorer at size (docs/PERFORMANCE.md, "Explorer"): API latency over 10,000 runs and
# traces of 10,000 and 100,000 spans (bytes sent, as decoded and gzipped, per span), then each
# trace's page in Chromium: time to the first rows and to every row loaded (needs `make
# deps-test` for chromium and playwright-core).
bench-explorer: build deps-test
	@rm -rf $(BUILD)/explorer-bench && $(BUILD)/explorer_bench --keep $(BUILD)/explorer-bench
	@WEFT_BIN=$(BUILD)/weft node bench/explorer_render.mjs $(BUILD)/explorer-bench

# OTLP ingest (`weft serve`'s POST /v1/traces without the network): decode, and decode plus
# store, of 512-span batches; INGEST_BENCH_ARGS: e.g. --batches 400 --runs 7.
bench-ingest: build
	$(BUILD)/ingest_bench $(INGEST_BENCH_ARGS)

# The same decode_store cases into SQLite and into a throwaway PostgreSQL 15 (fsync on, on a
# free loopback port, removed afterwards: scripts/bench-pg.sh), 1 and 2 clients, 1 and 2
# instances, with bytes on disk per span (docs/PERFORMANCE.md, "Span store backends").
# Needs postgresql-15 (`make deps-servers`); INGEST_PG_BENCH_ARGS as above.
INGEST_PG_BENCH_ARGS ?= --only decode_store:protobuf
bench-ingest-pg: build
	@scripts/bench-pg.sh $(BUILD)/ingest_bench $(INGEST_PG_BENCH_ARGS)

# Content-addressed payloads (docs/payloads.md): bytes that repeated runs of a 25-step,
# 50-agent-LLM-call conversation with content capture leave in the stores, payloads off and on,
# SQLite, then a throwaway PostgreSQL 15 (`make deps-servers`). PAYLOAD_BENCH_ARGS: --runs N.
PAYLOAD_BENCH_ARGS ?= --runs 5
bench-payloads: build
	@python3 scripts/payload-bytes.py --weft $(BUILD)/weft $(PAYLOAD_BENCH_ARGS)
	@scripts/bench-pg.sh python3 scripts/payload-bytes.py --weft $(BUILD)/weft $(PAYLOAD_BENCH_ARGS)

# weft beside its peers (docs/PERFORMANCE.md, "Peers side by side"): span_bench's attrs5 case,
# the same scenario in the OpenTelemetry Go SDK (Debian's golang-go and
# golang-opentelemetry-otel-dev, built offline into $(BUILD)/peers) and in the OpenTelemetry JS
# SDK (pinned by bench/peers/package-lock.json, `npm ci` into $(BUILD)/peers/js), alternating
# three rounds, then the medians and ratios (scripts/bench-peers.sh). A few minutes.
# PEERS_BENCH_ARGS: e.g. --spans 200000 --runs 5 --rounds 3 --threads 1.
PEERS_BENCH_ARGS ?=
bench-peers: build deps-peers
	@scripts/bench-peers.sh --build $(BUILD) $(PEERS_BENCH_ARGS)

bench-dist: build deps-servers
	$(BUILD)/dist_bench --weft $(BUILD)/weft $(DIST_BENCH_ARGS)

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(C_SOURCES)

format-check:
	clang-format --dry-run --Werror $(C_SOURCES)

clean:
	rm -rf $(BUILD) build-test build-asan build-tsan build-fuzz

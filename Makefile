# voucherd: the README's two commands are `make run` and `make test`; both do
# all the machine set-up they need (scripts/setup.sh) first.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Go lives here on the development and CI machines; a go already on PATH wins.
export PATH := $(PATH):/usr/local/go/bin

# Defaults for the local services that scripts/setup.sh makes (the voucher
# role logs in from localhost without a password); the environment overrides
# each.
DATABASE_URL      ?= postgres://voucher@127.0.0.1:5432/voucher?sslmode=disable
REDIS_URL         ?= redis://127.0.0.1:6379/0
TEST_DATABASE_URL ?= postgres://voucher@127.0.0.1:5432/voucher_test?sslmode=disable
TEST_REDIS_URL    ?= redis://127.0.0.1:6379/0

# Where generated code lives: sqlc's package, gqlgen's output (and the
# resolver files it rewrites), templ's *_templ.go files.
# GENERATED_SUMS prints "checksum  path" for each of them.
GENERATED_SUMS := { find sql/db graph web -type f \
	\( -path 'sql/db/*' -o -path 'graph/*.go' -o -name '*_templ.go' \) 2>/dev/null || true; } \
	| LC_ALL=C sort | xargs -r sha256sum

# sqlc's output is a function of sqlc.yaml, the migrations' *.sql files (its
# schema; it reads no other file of migrations/), sql/queries and sqlc's
# version. make generate records one checksum of
# those inputs and of the output in sql/db/sqlc.sum; verify runs sqlc only
# when that checksum has changed (an input or the output edited since), so a
# fresh machine does not build sqlc's cgo PostgreSQL parser (140 s of
# make test's first run) to learn that nothing changed.
SQLC_RECORD := sql/db/sqlc.sum
SQLC_SUM := { { LC_ALL=C find sqlc.yaml sql/queries sql/db -type f ! -path $(SQLC_RECORD); \
	LC_ALL=C find migrations -type f -name '*.sql'; } | LC_ALL=C sort | xargs sha256sum; \
	grep -E '^[[:space:]]*github.com/sqlc-dev/sqlc ' go.mod; } | sha256sum | cut -d' ' -f1

CONTRACT_CHECK := ../shared/tools/contract-check

# golangci-lint is pinned and installed into bin/ by verify when missing (a
# go.mod tool dependency would pull its hundreds of modules into go.mod).
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := bin/golangci-lint

.PHONY: help setup migrate run broker build generate verify lint lint-install prefetch check test test-unit test-e2e test-explore test-race verify-tidy bench bench-wrk fuzz explore

help:
	@echo "make run       set up PostgreSQL and Redis, start the service"
	@echo "make test      set up (with Chromium), verify, the tests (end-to-end ones without -race)"
	@echo "make test-race set up (with Chromium), every test under -race (slower)"
	@echo "make check     the quick loop: go vet, then go test -short ./... (no browser, no spawned process)"
	@echo "make setup     scripts/setup.sh: install and start what is missing"
	@echo "make migrate   apply the database migrations to DATABASE_URL"
	@echo "make broker    a development Kafka broker on 127.0.0.1:9092 that outlives a crash of serve"
	@echo "make generate  sqlc, gqlgen and templ code generation"
	@echo "make verify    fail on stale generated code, gofmt, an untidy go.mod, golangci-lint (go vet's analyzers among its linters), the GraphQL contract"
	@echo "make lint      golangci-lint (.golangci.yml), installed into bin/ when missing"
	@echo "make build     bin/voucherd"
	@echo "make bench     the flash-sale benchmark (cmd/flashbench; BENCH_FLAGS='-h' lists its flags)"
	@echo "make bench-wrk a cross-check of the sale with wrk (bench/wrk), on a database of its own"
	@echo "make fuzz      every fuzz target of every package for FUZZTIME each (default 30s)"
	@echo "make explore   the seeded fault explorer: SEEDS=N seeds from FIRST (default 20 from 1), or SEED=s again (docs/explore.md)"

setup:
	bash scripts/setup.sh

migrate:
	DATABASE_URL='$(DATABASE_URL)' go run ./cmd/voucherd migrate

# serve applies the migrations itself before it listens.
run:
	bash scripts/setup.sh --run
	DATABASE_URL='$(DATABASE_URL)' REDIS_URL='$(REDIS_URL)' go run ./cmd/voucherd serve

# A development Kafka-protocol broker in its own process, for
# KAFKA_BROKERS=127.0.0.1:9092 FLASH_WRITE_PATH=kafka make run: its events
# outlive a crash of the server (the in-process broker's die with it).
broker:
	go run ./cmd/voucherd broker

build:
	go build -o bin/voucherd ./cmd/voucherd

generate:
	@if [ -n "$(SQLC_UNCHANGED)" ]; then \
		echo "sqlc: inputs and output as $(SQLC_RECORD) records them, not run"; \
	else \
		echo "go tool sqlc generate"; \
		go tool sqlc generate; \
		$(SQLC_SUM) > $(SQLC_RECORD); \
	fi
	@if [ -f gqlgen.yml ]; then \
		echo "go tool gqlgen generate --config gqlgen.yml"; \
		go tool gqlgen generate --config gqlgen.yml; \
	else \
		echo "gqlgen: no gqlgen.yml yet, skipped"; \
	fi
	@if [ -d web ]; then \
		echo "go tool templ generate -path web"; \
		go tool templ generate -path web; \
	else \
		echo "templ: no web/ yet, skipped"; \
	fi

# Stale generated code is found by regenerating and comparing checksums of the
# generated files before and after, so files that are fresh but not yet
# committed pass; on a clean clone (CI) it is the same as `git status`.
# go vet is not run apart: the linter's govet runs go vet's analyzers (v2.15.0's
# default list is Go 1.26's cmd/vet suite, plus inline) over the same packages
# and their tests. It saves no time: on a fresh machine go vet took 91 s and
# the linter's run after it 45 s; alone, the linter's run took 147 s (it
# compiles what go vet had compiled).
verify:
	@before=$$($(GENERATED_SUMS)); \
	unchanged=; [ "$$($(SQLC_SUM))" = "$$(cat $(SQLC_RECORD) 2>/dev/null)" ] && unchanged=1; \
	$(MAKE) --no-print-directory generate SQLC_UNCHANGED=$$unchanged; \
	after=$$($(GENERATED_SUMS)); \
	stale=$$(diff <(echo "$$before") <(echo "$$after") | sed -n 's/^[<>] [0-9a-f]*  //p' | LC_ALL=C sort -u || true); \
	if [ -n "$$stale" ]; then \
		echo "verify: generated code was stale; make generate changed these files (commit them):"; \
		echo "$$stale" | sed 's/^/  /'; \
		exit 1; \
	fi; \
	echo "verify: generated code is up to date"
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then \
		echo "verify: gofmt -l lists files that need gofmt -w:"; \
		echo "$$unformatted" | sed 's/^/  /'; \
		exit 1; \
	fi; \
	echo "verify: gofmt clean"
	@$(MAKE) --no-print-directory -j2 --output-sync=target verify-tidy lint
	@if [ -e $(CONTRACT_CHECK) ]; then \
		echo "$(CONTRACT_CHECK) 'graph/**/*.graphqls'"; \
		$(CONTRACT_CHECK) 'graph/**/*.graphqls'; \
	else \
		echo "verify: $(CONTRACT_CHECK) not found, contract check skipped"; \
	fi

# go mod tidy -diff mostly downloads (35 s on a fresh machine): it runs
# beside the linter, after the generators, which rewrite Go files it reads.
verify-tidy:
	@if ! tidy=$$(go mod tidy -diff 2>&1); then \
		echo "verify: go.mod or go.sum is not tidy; run go mod tidy and commit the result:"; \
		echo "$$tidy" | sed 's/^/  /'; \
		exit 1; \
	fi; \
	echo "verify: go.mod and go.sum are tidy"

# The pinned version is installed when bin/ has none or another one. A
# second run at once (another worktree's make test) waits for the first
# instead of failing with "parallel golangci-lint is running".
lint: lint-install
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

# Linked without a symbol table or DWARF, as the linter's own releases are
# (-s -w): nobody debugs it here, and its link is the shorter for it.
lint-install:
	@if ! $(GOLANGCI_LINT) version 2>/dev/null | grep -q "version $(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) "; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into bin/"; \
		GOBIN="$(CURDIR)/bin" go install -ldflags='-s -w' github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); \
	fi

# Fills Go's caches ahead of verify and the tests: every module go.mod
# requires (go mod download fetches them side by side, where verify's
# generators, go mod tidy -diff and the lanes' builds fetched them one
# build at a time), then the go.mod tools that verify and the lanes run
# (go tool caches what it builds). Not sqlc: verify runs it only when
# sql/db/sqlc.sum is stale.
prefetch:
	go mod download
	go tool gqlgen version >/dev/null
	go tool templ version >/dev/null
	go tool gotestsum --version >/dev/null

# The suite runs in three lanes side by side (output grouped per lane):
# - test-unit: every package but the end-to-end ones, under -race: the gate,
#   the Kafka consumer, the jobs, the store and the dashboard are concurrent
#   code tested in process, where the race detector sees them.
# - test-e2e: internal/e2e and internal/faults, which run whole servers (in
#   process, or as OS processes) over HTTP, without -race (it made them three
#   times slower on 2 cores, and the servers' code is raced in test-unit's
#   packages), four tests at a time. A test's subtests run one after
#   another: subtests waiting for a slot kept their test's servers, and
#   those servers' connections, open meanwhile (PostgreSQL's 100 ran out
#   at -parallel 4 with 85 held by internal/e2e; 45 to 66 at most since,
#   66 beside a CPU hog).
# - test-explore: the explorer's two smoke seeds (each runs two or three
#   servers, a broker, a Redis pair and a PostgreSQL cluster of its own, and
#   mostly waits for them), from the start: after test-unit's packages they
#   were the run's last minute, a core idle.
# `make test-race` runs all of it under -race, as before a release.
#
# gotestsum (a tool of go.mod) runs go test and prints a line per package,
# then every failed test's output again under "=== Failed", and last one
# summary line: "DONE 412 tests, 2 failures in 380.1s". GOTESTSUM_FORMAT
# (e.g. testname, standard-verbose) changes the per-package lines.
GOTESTSUM_FORMAT ?= pkgname-and-test-fails
E2E_PKGS := ./internal/e2e ./internal/faults
GOTESTSUM = TEST_DATABASE_URL='$(TEST_DATABASE_URL)' TEST_REDIS_URL='$(TEST_REDIS_URL)' \
	go tool gotestsum --format '$(GOTESTSUM_FORMAT)' --format-hide-empty-pkg --
# The tests run on a database made empty for the run and dropped after it,
# unless TEST_DATABASE_URL is given: the shared voucher_test grew by about
# 800 vouchers a run, and every server a test starts scans the live ones
# (warm-up, reconciliation, the dashboard's samples, the expiry sweep):
# warm runs took 485, 549 and 586 s as it grew from 760 to 4,200 vouchers.
# On a fresh machine the linter's build (110 to 210 s) and prefetch start
# while setup.sh waits on apt-get (Chromium: 12 to 60 s, the CPU mostly
# idle); their output follows setup's. Where Go itself is missing, setup.sh
# says so.
test:
	@logs=$$(mktemp -d); \
	$(MAKE) --no-print-directory lint-install >"$$logs/lint" 2>&1 & lint=$$!; \
	$(MAKE) --no-print-directory prefetch >"$$logs/prefetch" 2>&1 & prefetch=$$!; \
	bash scripts/setup.sh --test --with-chromium || { kill $$lint $$prefetch 2>/dev/null; rm -rf "$$logs"; exit 1; }; \
	failed=0; wait $$lint || failed=1; wait $$prefetch || failed=1; \
	cat "$$logs/lint" "$$logs/prefetch"; rm -rf "$$logs"; exit $$failed
	$(MAKE) --no-print-directory verify
	@if [ "$(origin TEST_DATABASE_URL)" = file ] && command -v psql >/dev/null; then \
		db=voucher_test_run_$$(date +%s)_$$$$; \
		url=$$(printf '%s' '$(TEST_DATABASE_URL)' | sed "s#/voucher_test?#/$$db?#"); \
		psql '$(TEST_DATABASE_URL)' -qc "CREATE DATABASE $$db"; \
		trap "psql '$(TEST_DATABASE_URL)' -qc 'DROP DATABASE IF EXISTS $$db WITH (FORCE)'" EXIT INT TERM; \
		echo "make test: the tests run on $$db, a database made for this run and dropped after it"; \
	else \
		url='$(TEST_DATABASE_URL)'; \
	fi; \
	$(MAKE) --no-print-directory -j3 --output-sync=target test-unit test-e2e test-explore TEST_DATABASE_URL="$$url"

test-unit:
	$(GOTESTSUM) -race -count=1 -timeout 30m \
		$$(go list ./... | grep -v -E '/internal/(e2e|faults|explore)$$')

# Without -race: the explorer judges voucherd processes built without it
# (testproc.Binary); under -race its test binary compiled every dependency
# again beside test-unit's compile of the same on a fresh machine.
test-explore:
	$(GOTESTSUM) -count=1 -timeout 10m ./internal/explore

test-e2e:
	$(GOTESTSUM) -count=1 -parallel 4 -timeout 30m $(E2E_PKGS)

test-race:
	bash scripts/setup.sh --test --with-chromium
	$(GOTESTSUM) -race -count=1 -timeout 45m ./...

# The quick loop while changing code: go vet, then the unit and in-process
# tests against the shared test PostgreSQL and Redis. -short skips what
# starts a browser or an OS process (internal/testenv SkipShort, called by
# the harnesses: testproc, testpg, testredis, the browser tests, the setup
# script's tests); make test runs those. One process stays: internal/gate's
# TestMain starts its throwaway redis-server (its tests' order keys need an
# empty Redis, and the shared one must not be flushed). internal/e2e is left
# out: each of its tests runs whole servers (about 5 minutes together). No
# -race, no set-up, no verify: make test is still what CI runs.
check:
	go vet ./...
	TEST_DATABASE_URL='$(TEST_DATABASE_URL)' TEST_REDIS_URL='$(TEST_REDIS_URL)' \
		go tool gotestsum --format '$(GOTESTSUM_FORMAT)' --format-hide-empty-pkg -- -short -count=1 -timeout 10m \
		$$(go list ./... | grep -v '/internal/e2e$$')

bench:
	bash scripts/setup.sh --run
	DATABASE_URL='$(DATABASE_URL)' REDIS_URL='$(REDIS_URL)' go run ./cmd/flashbench $(BENCH_FLAGS)

# The wrk cross-check runs on a database of its own (a sale leaves its
# reservations behind): WRK_DATABASE_URL, made on DATABASE_URL's server
# when missing.
WRK_DATABASE_URL ?= postgres://voucher@127.0.0.1:5432/voucher_wrk?sslmode=disable
WRK_SECONDS      ?= 10
bench-wrk:
	bash scripts/setup.sh --run
	@command -v wrk >/dev/null || { echo "apt-get install wrk"; apt-get install -y -q wrk >/dev/null; }
	@psql '$(WRK_DATABASE_URL)' -Atc 'SELECT 1' >/dev/null 2>&1 || \
		psql '$(DATABASE_URL)' -qc "CREATE DATABASE $$(basename '$(WRK_DATABASE_URL)' | cut -d'?' -f1)"
	bash bench/wrk/run.sh '$(WRK_DATABASE_URL)' '$(REDIS_URL)' $(WRK_SECONDS)

# Every Fuzz function of every package is found with `go test -list` (a new
# one needs no change here) and run for FUZZTIME, against the same services
# as the tests. Seeds are in each package's testdata/fuzz; a failing input is
# written there too, and `go test` then replays it.
FUZZTIME ?= 30s
# Each new input is minimized for at most this long: an input of the fast
# path's differential target makes three vouchers and three requests, so
# go test's default of 60 s an input stalls a short run.
FUZZMINIMIZETIME ?= 5s
fuzz:
	bash scripts/setup.sh --test
	@targets=$$(go test -list '^Fuzz' ./... | awk '/^Fuzz/ { f[n++] = $$1 } /^ok/ { for (i = 0; i < n; i++) print $$2 " " f[i]; n = 0 }'); \
	if [ -z "$$targets" ]; then echo "fuzz: no fuzz targets found"; exit 1; fi; \
	echo "$$targets" | while read -r pkg name; do \
		echo "go test -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) $$pkg"; \
		TEST_DATABASE_URL='$(TEST_DATABASE_URL)' TEST_REDIS_URL='$(TEST_REDIS_URL)' \
			go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) "$$pkg"; \
	done

# The seeded fault explorer (docs/explore.md): SEEDS=N seeds from FIRST, or
# SEED=s (comma-separated) again as a failure names it; each seed's logs and
# history go to $(EXPLORE_DIR)/seed-N. JOBS=J runs the seeds in J processes
# at once, each its own consecutive slice (a seed mostly waits for its
# processes to become quiet: 4 jobs fit two cores); their output goes to
# $(EXPLORE_DIR)/job-j.log, and the run fails if any job failed.
SEEDS       ?= 20
FIRST       ?= 1
JOBS        ?= 1
EXPLORE_DIR ?= /tmp/voucherd-explore
EXPLORE_RUN  = TEST_DATABASE_URL='$(TEST_DATABASE_URL)' go test ./internal/explore -run '^TestExplore$$' -count=1 -timeout 0 -v
explore:
	@if [ -n "$(SEED)" ] || [ "$(JOBS)" -le 1 ]; then \
		$(EXPLORE_RUN) $(if $(SEED),-explore.seed=$(SEED),-explore.seeds=$(SEEDS) -explore.first=$(FIRST)) \
			$(if $(SHORT),-explore.short) -explore.dir='$(EXPLORE_DIR)' \
			| grep -v '^=== \(RUN\|PAUSE\|CONT\)'; \
		exit; \
	fi; \
	mkdir -p '$(EXPLORE_DIR)'; go test -c -o '$(EXPLORE_DIR)/explore.test' ./internal/explore; \
	per=$$(( ($(SEEDS) + $(JOBS) - 1) / $(JOBS) )); pids=(); \
	for j in $$(seq 0 $$(( $(JOBS) - 1 ))); do \
		first=$$(( $(FIRST) + j * per )); n=$$(( $(FIRST) + $(SEEDS) - first )); \
		[ "$$n" -gt "$$per" ] && n=$$per; [ "$$n" -gt 0 ] || continue; \
		echo "explore: job $$j runs seeds $$first..$$(( first + n - 1 )), output in $(EXPLORE_DIR)/job-$$j.log"; \
		(cd internal/explore && TEST_DATABASE_URL='$(TEST_DATABASE_URL)' '$(EXPLORE_DIR)/explore.test' -test.run '^TestExplore$$' -test.count=1 -test.timeout 0 -test.v \
			-explore.seeds=$$n -explore.first=$$first $(if $(SHORT),-explore.short) -explore.dir='$(EXPLORE_DIR)' \
			> '$(EXPLORE_DIR)/job-'$$j.log 2>&1) & pids+=($$!); \
	done; \
	failed=0; for p in "$${pids[@]}"; do wait $$p || failed=1; done; \
	grep -h '^        seed [0-9]*:' '$(EXPLORE_DIR)'/job-*.log | sort -k2,2n; \
	echo "explore: $$(grep -h '^        seed [0-9]*:' '$(EXPLORE_DIR)'/job-*.log | grep -c ' 0 violation') of $(SEEDS) seed(s) clean"; \
	exit $$failed

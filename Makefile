# keel: `make run` starts the embedded stack with a demo run; `make test`
# is everything CI runs.

# go.temporal.io/server v1.32.2 needs Go >= 1.26.10; the Go module proxy
# serves this toolchain, so a machine with any Go 1.21+ fetches it.
export GOTOOLCHAIN := go1.27.3

GO      ?= go
# keel is two Go modules in one workspace (go.work; docs/ARCHITECTURE.md,
# "Modules"): the root module is the light client, ./server is everything
# that runs keel. In workspace mode ./... stops at a module boundary, so
# targets name packages by import path.
PKGS    := github.com/keelrun/keel/...
SERVER  := github.com/keelrun/keel/server
MODULES  = $(shell $(GO) work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p')
BIN     ?= bin/keel
BENCH_BIN ?= bin/keel-bench
DATA    ?= .keel
TIMEOUT ?= 40m

.PHONY: all build build-production run dev test lint vet fmt tidy tidy-check bench keel-bench bench-table clean replay-release fuzz

all: build

build:
	$(GO) build -o $(BIN) $(SERVER)/cmd/keel

# keel for a production worker or gateway (the Dockerfile's): -tags nodev
# leaves out `keel dev`'s embedded Temporal server, Web UI and NATS server.
build-production:
	$(GO) build -tags nodev -trimpath -o bin/keel-production $(SERVER)/cmd/keel

# The embedded Temporal server (SQLite under $(DATA)), its Web UI, NATS, a
# worker, and a demo run streaming to the terminal. Ctrl-C stops it all.
run: build
	./$(BIN) dev --data-dir $(DATA) --demo

# The stack without the demo run.
dev: build
	./$(BIN) dev --data-dir $(DATA)

# The tests run with -race: scripts/race-test builds every package's test
# binary once, in the background, while the built ones run LANES at a time,
# the slowest packages (SLOW) first; a package with fuzz targets fuzzes
# each for FUZZTIME after its tests, with the race detector on. It prints
# each package's wall and CPU time and the slowest. One lane: with two,
# each package ran about 1.5 times longer and tests that hold wall-clock
# bounds failed under the load (docs/testing.md).
LANES ?= 1
SLOW := $(addprefix $(SERVER)/,e2e cmd/keel worker gateway e2e/client bench bench/cmd/keel-bench workflows)
test: lint
	@FIRST="$(SLOW)" LANES=$(LANES) TIMEOUT=$(TIMEOUT) FUZZTIME=3s scripts/race-test $(PKGS)

# keel on more than one machine: the embedded server on PostgreSQL and two
# `keel worker` processes of $(BIN), one killed with SIGKILL mid-turn, then
# the server restarted (server/e2e/cluster). Needs a PostgreSQL URL whose user may
# create databases, e.g.
# KEEL_POSTGRES_DSN='postgres://keel:keel@127.0.0.1:5432/?sslmode=disable';
# .ci/run starts Debian's PostgreSQL for it.
.PHONY: test-postgres
test-postgres: build
	@test -n "$$KEEL_POSTGRES_DSN" || { echo "test-postgres: set KEEL_POSTGRES_DSN (see the Makefile)"; exit 1; }
	KEEL_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -p 1 -timeout 15m -run 'Postgres' -v $(SERVER)/devserver $(SERVER)/cmd/keel $(SERVER)/e2e/cluster

# keel on a Temporal cluster under faults (server/e2e/cluster,
# TestClusterUnderFaults; docs/operations.md, "A cluster under faults"):
# Temporal's history (4 shards), matching, frontend and worker services
# each in a process of its own on PostgreSQL, three `keel worker`s, two
# `keel serve`s, NATS and an S3-protocol store, and 100 sessions put
# through it without a fault, then under each fault: workers killed, each
# Temporal service killed and started again, a worker cut off, NATS and
# the store unreachable, PostgreSQL restarted (with
# KEEL_POSTGRES_RESTART, a command that restarts the server of
# KEEL_POSTGRES_DSN). It prints the table docs/operations.md keeps.
.PHONY: test-cluster
test-cluster: build
	@test -n "$$KEEL_POSTGRES_DSN" || { echo "test-cluster: set KEEL_POSTGRES_DSN (see test-postgres)"; exit 1; }
	$(GO) build -o bin/clusternode $(SERVER)/e2e/cluster/clusternode
	KEEL_CLUSTER_FAULTS=1 KEEL_BIN=$(CURDIR)/$(BIN) KEEL_CLUSTERNODE_BIN=$(CURDIR)/bin/clusternode \
	  $(GO) test -race -count=1 -timeout 20m -run 'TestClusterUnderFaults' -v $(SERVER)/e2e/cluster

# The release gate alone: the workflows' testdata as committed at the
# release RELEASE names, replayed with today's workflows (make test runs it
# too, as TestReplayPreviousRelease in server/workflows).
replay-release:
	$(GO) test -count=1 -run TestReplayPreviousRelease -v $(SERVER)/workflows

lint: fmt vet tidy-check

# Both modules' go.mod and go.sum as `go mod tidy` would write them; each
# is tidied on its own (GOWORK=off), the server module through its one
# replace directive.
tidy:
	@set -e; for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy); done

tidy-check:
	@set -e; for m in $(MODULES); do \
	  (cd $$m && GOWORK=off $(GO) mod tidy -diff > /dev/null) || { echo "tidy-check: $$m is not tidy; run make tidy"; exit 1; }; \
	done

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# Benchmarks: the embedded server's tuning, keel's overheads and the live
# channel (all measured by package bench), each printed as a ratio against
# its baseline measured in the same run; then the HTTP gateway's delta
# latency against NATS and its 1,000 concurrent event streams.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 200x $(SERVER)/devserver $(SERVER)/bench
	$(GO) test -run '^$$' -bench . -benchtime 10x $(SERVER)/gateway

# keel-bench, the measurement command, apart from keel (which links no
# measurement code): `$(BENCH_BIN) --worker-process` prints keel's
# overheads against bare Temporal with their targets, and
# `$(BENCH_BIN) concurrency` many streaming sessions (docs/performance.md).
keel-bench:
	$(GO) build -o $(BENCH_BIN) $(SERVER)/bench/cmd/keel-bench

# keel-bench's whole table, with deltas crossing processes.
bench-table: keel-bench
	./$(BENCH_BIN) --worker-process

# Fuzzing: every Go fuzz target of the parsers of outside input (event
# envelopes, the live channel, the SSE writer, request bodies and cursors,
# AG-UI input, API key lines, Host and Content-Type, keel.yaml, scripted
# scripts, MCP results, the encryption codec), FUZZTIME each (make test
# fuzzes each for 3 s, under -race, after its package's tests). Each package's
# instrumented test binary is built once and runs each of its targets, with
# the corpus go test would keep (GOCACHE/fuzz).
FUZZTIME ?= 30s
fuzz:
	@set -e; bin=$$(mktemp -d); trap 'rm -rf $$bin' EXIT; cache=$$($(GO) env GOCACHE)/fuzz; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' $(PKGS) | while read -r pkg dir; do \
	  targets=$$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | cut -d' ' -f2); \
	  [ -n "$$targets" ] || continue; \
	  $(GO) test -c -fuzz . -o $$bin/fuzz.test $$pkg; \
	  for t in $$targets; do \
	    echo "== $$pkg $$t ($(FUZZTIME))"; \
	    (cd $$dir && $$bin/fuzz.test -test.run '^$$' -test.fuzz "^$$t$$" -test.fuzztime $(FUZZTIME) -test.fuzzcachedir $$cache/$$pkg); \
	  done; \
	done

clean:
	rm -rf bin

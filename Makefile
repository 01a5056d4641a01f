# pgq — make demo runs the main job, make test runs the whole suite.
GO ?= go
PKGS := ./...
# Packages that run goroutines concurrently: tested with -race too (./e2e/...:
# the cross-package end-to-end tests, pgq with a bridge and a broker).
RACE_PKGS := ./journal/... ./index/... ./feedback/... ./ingest/... ./consumers/... ./client/... ./bridge/... ./internal/wal/... ./backfill/... ./httpapi/... ./e2e/...

# make test-matrix: ingest's integration tests (fidelity against
# test_decoding, every op and type, continuity, streaming of large
# transactions, DDL capture) on each major below, from the npm bundle that
# scripts/pg-server.sh fetches and caches. make test covers the installed
# server (15 on Debian bookworm).
MATRIX_MAJORS ?= 14 16 17 18
MATRIX_RUN := TestFidelityAgainstTestDecoding|TestInitialLoad|TestEveryOpAndType|TestGap|TestNoGap|TestStream|TestMultiPartLayout|TestDDL|TestFailover|TestSlotFailover|TestSlotDroppedIsFatal

.PHONY: all build test test-matrix vet demo bench bench-compare fuzz clean

all: build

# The version pgq reports (pgq version): the git description when built
# from a checkout; Go's build information adds the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	$(GO) build -buildvcs=auto -ldflags "-X main.version=$(VERSION)" -o bin/pgq ./cmd/pgq

vet:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

test: vet build
	$(GO) test -count=1 -timeout 20m $(PKGS)
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)
	cd deploy/prometheus && $(GO) test -count=1 -timeout 10m ./...

# Each leg first proves (internal/pgtest TestServerMajor) that the harness
# runs the major asked for, so a leg cannot pass on the installed server.
test-matrix:
	@set -e; for m in $(MATRIX_MAJORS); do \
	  bin=$$(./scripts/pg-server.sh $$m); \
	  echo "==> PostgreSQL $$m ($$bin)"; \
	  PGQ_PG_BINDIR=$$bin PGQ_PG_MAJOR=$$m $(GO) test -count=1 -timeout 10m -run 'TestServerMajor' ./internal/pgtest; \
	  PGQ_PG_BINDIR=$$bin PGQ_PG_MAJOR=$$m $(GO) test -count=1 -timeout 15m -run '$(MATRIX_RUN)' ./ingest; \
	done

demo: build
	./scripts/demo.sh

# -peer adds the peer rows: Conduit, built from its own module under
# benchmarks/peers/conduit (pgq's go.mod does not depend on it); if that
# build fails, the rows say so and the rest still runs.
bench: build
	$(GO) run ./benchmarks/cmd/pgqbench -peer
	$(GO) run ./benchmarks/cmd/pgqbench -only readers -out benchmarks/results/readers.json
	$(GO) run ./benchmarks/cmd/bigtx -rows 2000000 -fetch
	$(GO) test -run '^$$' -bench 'SharedScaling|SharedNoop|BridgeVsRawPublish|EndToEndLatency|WebhookVsPlainPost' -benchtime=1x ./client ./bridge ./bridge/webhook

# make bench-compare REF=<commit> [ROUNDS=6] [BENCH_FLAGS=-scale 0.05]:
# REF's pgq binary against the working tree's, alternately on the same
# pre-generated WAL (ingest vs pg_recvlogical per workload, peak RSS, data
# dir vs pgoutput, commit → consumer p99 gap), then benchstat of both
# (benchmarks/README.md). The driver is the working tree's.
ROUNDS ?= 6
BENCH_FLAGS ?=
bench-compare:
	@test -n "$(REF)" || { echo "usage: make bench-compare REF=<commit> [ROUNDS=6] [BENCH_FLAGS=...]" >&2; exit 2; }
	./scripts/bench-compare.sh '$(REF)' '$(ROUNDS)' $(BENCH_FLAGS)

fuzz:
	$(GO) test ./pgoutput -run '^$$' -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./record -run '^$$' -fuzz FuzzRecord -fuzztime 30s
	$(GO) test ./internal/msgp -run '^$$' -fuzz FuzzSkip -fuzztime 30s
	$(GO) test ./client -run '^$$' -fuzz FuzzDecodeFetch -fuzztime 30s
	$(GO) test ./httpapi -run '^$$' -fuzz FuzzMsgpackAnswer -fuzztime 30s
	$(GO) test ./backfill -run '^$$' -fuzz FuzzWhere -fuzztime 30s

clean:
	rm -rf bin

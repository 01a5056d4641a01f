#!/usr/bin/env bash
# make bench-compare REF=<commit> [ROUNDS=6] [BENCH_FLAGS=...]: builds the
# pgq binary of REF (from `git archive`, in a temporary directory) and of
# the working tree, and the benchmark driver (pgqbench) from the working
# tree only, so an older REF whose driver lacks today's flags still
# compares. pgqbench runs both pgq binaries alternately, ROUNDS rounds, on
# the same pre-generated WAL in one throwaway cluster, prints a summary
# and writes each build's rounds in Go benchmark format, which benchstat
# then compares. Results stay in benchmarks/results/compare-<REF>/.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: bench-compare.sh REF [ROUNDS] [pgqbench flags...]}
rounds=${2:-6}
shift $(( $# < 2 ? $# : 2 ))
. scripts/ensure-postgres.sh

# benchstat, pinned: run through the Go module proxy, not a dependency of
# pgq's module.
benchstat=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da

sha=$(git rev-parse --verify "$ref^{commit}")
short=$(git rev-parse --short "$sha")
head=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
out=benchmarks/results/compare-$short
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "==> building pgq at $ref ($short)"
mkdir "$work/ref"
git archive "$sha" | tar -x -C "$work/ref"
(cd "$work/ref" && go build -buildvcs=false -ldflags "-X main.version=$short" -o "$work/pgq-ref" ./cmd/pgq)
echo "==> building pgq and pgqbench from the working tree ($head)"
go build -ldflags "-X main.version=$head" -o "$work/pgq-head" ./cmd/pgq
go build -o "$work/pgqbench" ./benchmarks/cmd/pgqbench

echo "==> $rounds rounds, REF and HEAD alternately"
"$work/pgqbench" -pgq "$work/pgq-head" -compare-ref "$work/pgq-ref" -compare-ref-name "$short" \
  -compare-out "$out" -rounds "$rounds" "$@" | tee "$out/summary.txt"

echo
echo "==> benchstat ref=$short head=$head"
if ! go run "$benchstat" "ref=$out/ref.txt" "head=$out/head.txt" >"$out/benchstat.txt"; then
  echo "benchstat did not run (no module proxy?); the summary above and $out/*.txt stand" >&2
  exit 0
fi
cat "$out/benchstat.txt"

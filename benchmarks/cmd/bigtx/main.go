// Command bigtx measures pgq's peak RSS while one large transaction passes
// through (see package benchmarks/bigtx):
//
//	go build -o bin/pgq ./cmd/pgq
//	go run ./benchmarks/cmd/bigtx -rows 5000000,10000000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/pgq-dev/pgq/benchmarks/bigtx"
)

func main() {
	rows := flag.String("rows", "5000000,10000000", "comma-separated transaction sizes in rows")
	bin := flag.String("pgq", "bin/pgq", "pgq binary")
	work := flag.String("work", "", "work directory (default: a new temporary directory)")
	pgqArgs := flag.String("pgq-args", "", "extra `pgq run` arguments, space-separated")
	fetch := flag.Bool("fetch", false, "also fetch the transaction whole through the HTTP API (peak RSS, time against COPY)")
	flag.Parse()
	if err := run(*rows, *bin, *work, strings.Fields(*pgqArgs), *fetch); err != nil {
		fmt.Fprintln(os.Stderr, "bigtx:", err)
		os.Exit(1)
	}
}

func run(rowsFlag, bin, work string, pgqArgs []string, fetch bool) error {
	var rows []int
	for _, s := range strings.Split(rowsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -rows entry %q", s)
		}
		rows = append(rows, n)
	}
	if work == "" {
		d, err := os.MkdirTemp("", "pgq-bigtx-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rs, err := bigtx.Run(ctx, bigtx.Options{PGQBin: bin, Rows: rows, WorkDir: work, PGQArgs: pgqArgs, Fetch: fetch})
	if len(rs) > 0 {
		if werr := bigtx.WriteTable(os.Stdout, rs); werr != nil && err == nil {
			err = werr
		}
		if fetch {
			if werr := bigtx.WriteFetchTable(os.Stdout, rs); werr != nil && err == nil {
				err = werr
			}
		}
	}
	return err
}

// Command pgtestd starts a throwaway PostgreSQL cluster (see package
// pgtest), prints its connection URL on the first line of stdout and a free
// TCP port on the second, then waits for SIGINT/SIGTERM or for stdin to
// close, and removes the cluster. make demo and the benchmarks use it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

func main() {
	var settings multiFlag
	flag.Var(&settings, "set", "extra postgresql.conf line (repeatable)")
	watchStdin := flag.Bool("stdin", false, "also stop when stdin closes")
	flag.Parse()
	c, err := pgtest.Start(pgtest.Options{Settings: settings})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtestd:", err)
		os.Exit(1)
	}
	defer c.Stop()
	port, err := pgtest.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtestd:", err)
		return
	}
	fmt.Println(c.URL("postgres"))
	fmt.Println(port)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}
	<-ctx.Done()
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

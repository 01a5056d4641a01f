package server_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/server"
)

// Example embeds pgq in a Go program: Open prepares every part (the data
// dir, the journal, the index, the groups, the HTTP listener), Run streams
// the slot into the journal until its context is cancelled, Status answers
// what GET /v1/status does, and Close releases a server that is never run.
// It needs a PostgreSQL with wal_level=logical, so it has no output to
// check.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	s, err := server.Open(ctx, server.Options{
		DataDir: "pgq-data",
		Listen:  "127.0.0.1:0", // a free port: see Addr
		Ingest: ingest.Options{
			PGURL:             "postgres://pgq@localhost/app",
			Slot:              "pgq",
			Publication:       "pgq",
			CreateSlot:        true,
			CreatePublication: "all",
		},
	})
	if err != nil {
		log.Print(err) // one line; a refusal names the option that mends it (opterr)
		return
	}
	fmt.Println("pgq listens on", s.Addr())

	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }() // Run closes everything when it returns

	st := s.Status()
	fmt.Println("connected:", st.Connected, "journal at offset", st.JournalLastOffset)

	if err := <-done; err != nil { // nil once ctx is cancelled
		log.Print(err)
	}
}

// Example_close opens a server only to close it again: Close releases the
// data dir's lock and the listener of a Server that is never run.
func Example_close() {
	s, err := server.Open(context.Background(), server.Options{
		DataDir: "pgq-data",
		Ingest:  ingest.Options{PGURL: "postgres://pgq@localhost/app", Slot: "pgq", Publication: "pgq"},
	})
	if err != nil {
		log.Print(err)
		return
	}
	defer s.Close()
}

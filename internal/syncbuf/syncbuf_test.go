package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWritesAndReads: lines written by several goroutines
// while another reads all arrive whole, and Bytes hands out a copy that
// later writes leave alone. (Under -race, an unguarded buffer fails here.)
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(&b, "w%d line %d\n", w, i)
			}
		})
	}
	stop := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-stop:
				return
			default:
				_ = b.String()
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-read

	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	seen := map[string]bool{}
	for _, l := range got {
		seen[l] = true
	}
	for w := range writers {
		for i := range lines {
			if l := fmt.Sprintf("w%d line %d", w, i); !seen[l] {
				t.Fatalf("line %q missing or torn", l)
			}
		}
	}

	snap := b.Bytes()
	want := string(snap)
	snap[0] = 'X'
	_, _ = b.Write([]byte("more\n"))
	if b.String() != want+"more\n" {
		t.Fatal("changing what Bytes returned changed the buffer")
	}
}

package ingest

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/journal"
)

// TestMaxRecordBytesBounds: Options.MaxRecordBytes is zero (the default)
// or 4KiB to 1GiB; anything else is a configuration error naming the flag.
func TestMaxRecordBytesBounds(t *testing.T) {
	j, err := journal.Open(journal.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	base := Options{PGURL: "postgres://x", Slot: "s", Publication: "p", Journal: j, Committer: journal.NewCommitter(j, journal.CommitterOptions{})}
	for in, want := range map[int]int{0: DefaultMaxRecordBytes, MinMaxRecordBytes: MinMaxRecordBytes, 64 << 10: 64 << 10, MaxMaxRecordBytes: MaxMaxRecordBytes} {
		o := base
		o.MaxRecordBytes = in
		if err := o.Validate(); err != nil || o.MaxRecordBytes != want {
			t.Errorf("MaxRecordBytes %d: validated to %d, %v; want %d", in, o.MaxRecordBytes, err, want)
		}
	}
	for _, bad := range []int{-1, 1, 10, MinMaxRecordBytes - 1, MaxMaxRecordBytes + 1} {
		o := base
		o.MaxRecordBytes = bad
		if err := o.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Options.MaxRecordBytes") {
			t.Errorf("MaxRecordBytes %d: %v; want a configuration error naming --max-record-bytes", bad, err)
		}
	}
}

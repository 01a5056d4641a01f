package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/journal"
)

// JournalCmd is `pgq journal`.
type JournalCmd struct {
	Dump   JournalDumpCmd   `cmd:"" help:"Print records as NDJSON."`
	Verify JournalVerifyCmd `cmd:"" help:"Check every record's framing and CRC."`
	Repair JournalRepairCmd `cmd:"" help:"Cut a corrupt journal at an offset (pgq stopped): the records cut are lost unless the slot re-sends them."`
}

// JournalDumpCmd is `pgq journal dump`.
type JournalDumpCmd struct {
	DataDir string   `name:"data-dir" required:"" env:"PGQ_DATA_DIR" type:"existingdir" help:"pgq data directory."`
	From    uint64   `help:"First offset to print (default: the journal's first)."`
	Limit   uint64   `help:"Print at most N records (0: all)."`
	Follow  bool     `short:"f" help:"Keep printing records as pgq appends them (until interrupted)."`
	Poll    Duration `default:"200ms" help:"With --follow: how often to look for new records."`
}

func journalDir(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "journal")
	if _, err := os.Stat(dir); err != nil {
		return "", usage(fmt.Errorf("no journal in %s: %w", dataDir, err))
	}
	return dir, nil
}

// Run prints the records; with --follow it then waits for more, reading
// the segment files beside the running pgq, until interrupted.
func (c *JournalDumpCmd) Run(ctx context.Context) error {
	dir, err := journalDir(c.DataDir)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	var buf []byte
	n := uint64(0)
	next := pgq.Offset(c.From)
	for {
		err = journal.Scan(dir, next, func(tx *pgq.Transaction) error {
			if c.Limit > 0 && n >= c.Limit {
				return io.EOF
			}
			n++
			next = tx.Offset + 1
			buf = format.AppendJSON(buf[:0], tx)
			buf = append(buf, '\n')
			_, err := w.Write(buf)
			return err
		})
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil || !c.Follow {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.Poll.D()):
		}
	}
}

// JournalVerifyCmd is `pgq journal verify`.
type JournalVerifyCmd struct {
	DataDir string `name:"data-dir" required:"" env:"PGQ_DATA_DIR" type:"existingdir" help:"pgq data directory."`
	OutputFlag
}

// Run checks the journal.
func (c *JournalVerifyCmd) Run() error {
	dir, err := journalDir(c.DataDir)
	if err != nil {
		return err
	}
	sum, err := journal.Verify(dir)
	if err != nil {
		return err
	}
	if c.json() {
		return printJSON(verifyOutput{FirstOffset: sum.First, LastEndLSN: sum.LastEndLSN, LastOffset: sum.Last, OK: true, Records: sum.Records})
	}
	_, err = fmt.Fprintf(stdout, "ok: %d records, offsets %d..%d, last end LSN %s\n", sum.Records, sum.First, sum.Last, sum.LastEndLSN)
	return err
}

// verifyOutput is what `pgq journal verify -o json` prints. Its fields
// are in alphabetical order of their keys, the order it has always had.
type verifyOutput struct {
	FirstOffset pgq.Offset `json:"first_offset"`
	LastEndLSN  pgq.LSN    `json:"last_end_lsn"`
	LastOffset  pgq.Offset `json:"last_offset"`
	OK          bool       `json:"ok"`
	Records     uint64     `json:"records"`
}

// repairOutput is what `pgq journal repair -o json` prints (fields in
// alphabetical order of their keys, as verifyOutput's).
type repairOutput struct {
	CutBytes        int64      `json:"cut_bytes"`
	CutEntries      uint64     `json:"cut_entries"`
	KeptLastOffset  pgq.Offset `json:"kept_last_offset"`
	OK              bool       `json:"ok"`
	RemovedSegments int        `json:"removed_segments"`
	Segment         string     `json:"segment"`
}

// JournalRepairCmd is `pgq journal repair`: the operator's explicit cut
// of a corrupt journal; `pgq run` never cuts corruption by itself.
type JournalRepairCmd struct {
	DataDir    string `name:"data-dir" required:"" env:"PGQ_DATA_DIR" type:"existingdir" help:"pgq data directory."`
	TruncateAt uint64 `name:"truncate-at" required:"" help:"Remove the record at this offset and every later one (keep those before it)."`
	OutputFlag
}

// Run cuts the journal; it refuses while pgq runs (the journal's lock).
func (c *JournalRepairCmd) Run(logger *slog.Logger) error {
	dir, err := journalDir(c.DataDir)
	if err != nil {
		return err
	}
	logger.Warn("cutting the journal: the records from this offset on were fsynced and may have been confirmed to PostgreSQL; what the slot cannot send again is lost (pgq run then refuses the gap unless --accept-gap)",
		"dir", dir, "truncate_at", c.TruncateAt)
	res, err := journal.TruncateAt(journal.Options{Dir: dir, Logger: logger}, pgq.Offset(c.TruncateAt))
	if errors.Is(err, journal.ErrNotFound) {
		return usage(err)
	}
	if err != nil {
		return err
	}
	if c.json() {
		return printJSON(repairOutput{CutBytes: res.CutBytes, CutEntries: res.CutEntries, KeptLastOffset: res.KeptLast,
			OK: true, RemovedSegments: res.RemovedSegments, Segment: res.Segment})
	}
	_, err = fmt.Fprintf(stdout, "cut: kept offsets up to %d, removed %d entries (%d bytes, %d later segment files)\n",
		res.KeptLast, res.CutEntries, res.CutBytes, res.RemovedSegments)
	return err
}

package backfill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq/ingest"
)

// SnapshotOptions is what LoadSnapshot needs besides the request.
type SnapshotOptions struct {
	// PGURL of the database (required); each reader holds one connection.
	PGURL string
	// Publication is pgq's publication (required): only the tables, columns
	// and rows it publishes are read, as for a backfill.
	Publication string
	// Logger; zero → slog.Default().
	Logger *slog.Logger
}

// Validate checks the required fields and fills the defaults.
func (o *SnapshotOptions) Validate() error {
	if o.PGURL == "" || o.Publication == "" {
		return errors.New("backfill: a snapshot load needs a URL and a publication")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// loadChunkBytes is the size a load chunk aims at: each FETCH asks for as
// many rows as fitted it last time (loadMinRows to loadMaxRows).
const (
	loadChunkBytes = 2 << 20
	loadMinRows    = 64
	loadMaxRows    = 20_000
	loadFirstRows  = 1_000
)

// snapshotNameRE is the form of an exported snapshot's name
// (00000003-0000001B-1): it is pasted into SET TRANSACTION SNAPSHOT,
// which takes no parameter.
var snapshotNameRE = regexp.MustCompile(`^[0-9A-Fa-f-]{1,64}$`)

// loadTask is one piece of a load: a table, or one of its ranges of
// pages (ctid ranges: from page lo, up to page hi; hi < 0: to its end).
type loadTask struct {
	t      *table
	lo, hi int64
	ranged bool
}

// LoadSnapshot reads req's tables under the exported snapshot req.Snapshot
// (ingest.InitialLoad.Read), as pg_dump -j does: req.Parallelism
// connections (zero → DefaultParallelism) each open a REPEATABLE READ
// transaction and import the snapshot first, then take tasks from one
// queue: a table, or on PostgreSQL 14+ a range of its pages (a TID range
// scan, as PeerDB reads), so that one large table is read in parallel
// too, with or without a key. Each task is read through a cursor, one
// FETCH per chunk, in PostgreSQL's text forms like every backfill chunk
// (readChunk), and each chunk is handed to emit as it is read; a
// reader's memory is one chunk (about loadChunkBytes). The first error
// stops every reader.
func LoadSnapshot(ctx context.Context, o SnapshotOptions, req ingest.LoadRequest, emit func(ingest.LoadChunk) error) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if !snapshotNameRE.MatchString(req.Snapshot) {
		return fmt.Errorf("backfill: invalid snapshot name %q", req.Snapshot)
	}
	n, err := checkParallelism(req.Parallelism)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conns, err := importSnapshot(ctx, o.PGURL, req.Snapshot, n)
	defer func() {
		for _, c := range conns {
			c.Close(context.WithoutCancel(ctx))
		}
	}()
	if err != nil {
		return err
	}
	tasks, err := loadTasks(ctx, conns[0], o.Publication, req.Tables, n)
	if err != nil {
		return err
	}
	queue := make(chan loadTask, len(tasks))
	for _, t := range tasks {
		queue <- t
	}
	close(queue)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := &chunkBuf{}
			for t := range queue {
				if err := readTask(ctx, c, t, i, req.ID, buf, emit); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	o.Logger.Info("initial load read", "tables", len(req.Tables), "tasks", len(tasks), "parallelism", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// importSnapshot opens n connections, each in a REPEATABLE READ READ ONLY
// transaction that imported snapshot. It returns the connections opened
// so far with an error too: the caller closes them.
func importSnapshot(ctx context.Context, url, snapshot string, n int) ([]*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("backfill: snapshot load: %w", err)
	}
	// Journaled text is UTF-8 whatever the database's encoding (as ingest).
	cfg.RuntimeParams["client_encoding"] = "UTF8"
	conns := make([]*pgx.Conn, 0, n)
	for range n {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return conns, fmt.Errorf("backfill: snapshot load: connect: %w", err)
		}
		conns = append(conns, c)
		if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
			return conns, fmt.Errorf("backfill: snapshot load: begin: %w", err)
		}
		if _, err := c.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return conns, fmt.Errorf("backfill: snapshot load: import snapshot %s: %w", snapshot, err)
		}
	}
	return conns, nil
}

// loadTasks describes each table (what the publication publishes of it,
// a key where it has one) and cuts it into tasks: on PostgreSQL 14+ an
// ordinary table of more than n pages into n ranges of pages, the last
// one open-ended; else the table whole.
func loadTasks(ctx context.Context, conn *pgx.Conn, pub string, names []string, n int) ([]loadTask, error) {
	var tasks []loadTask
	ranges := serverMajor(conn) >= 14
	for _, name := range names {
		t, err := describePublishedTable(ctx, conn, pub, name, false)
		if err != nil {
			return nil, err
		}
		var pages int64
		var kind string
		err = conn.QueryRow(ctx, `SELECT c.relkind::text, pg_relation_size(c.oid) / current_setting('block_size')::int
			FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace WHERE ns.nspname = $1 AND c.relname = $2`, t.schema, t.name).Scan(&kind, &pages)
		if err != nil {
			return nil, fmt.Errorf("backfill: size of %s: %w", t.qualified(), err)
		}
		if !ranges || kind != "r" || n == 1 || pages < int64(n) {
			tasks = append(tasks, loadTask{t: t})
			continue
		}
		// Pages past the last range's start (the table grew since the
		// snapshot) hold no row it sees; the range is open all the same.
		step := (pages + int64(n) - 1) / int64(n)
		for lo := int64(0); lo < pages; lo += step {
			hi := lo + step
			if hi >= pages {
				hi = -1
			}
			tasks = append(tasks, loadTask{t: t, lo: lo, hi: hi, ranged: true})
		}
	}
	return tasks, nil
}

// sql is the task's query: the published columns and rows of its table,
// in its range of pages.
func (lt loadTask) sql() string {
	t := lt.t
	var b strings.Builder
	b.WriteString("SELECT ")
	t.writeColumns(&b)
	b.WriteString(" FROM ")
	b.WriteString(pgx.Identifier{t.schema, t.name}.Sanitize())
	var conds []string
	if t.rowFilter != "" {
		conds = append(conds, "("+t.rowFilter+")")
	}
	if lt.ranged {
		if lt.lo > 0 {
			conds = append(conds, "ctid >= '("+strconv.FormatInt(lt.lo, 10)+",0)'::tid")
		}
		if lt.hi >= 0 {
			conds = append(conds, "ctid < '("+strconv.FormatInt(lt.hi, 10)+",0)'::tid")
		}
	}
	if len(conds) > 0 {
		b.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	return b.String()
}

// readTask reads one task through a cursor, a chunk per FETCH, and hands
// each chunk to emit.
func readTask(ctx context.Context, conn *pgx.Conn, lt loadTask, worker int, id string, buf *chunkBuf, emit func(ingest.LoadChunk) error) error {
	cursor := "pgq_load_" + strconv.Itoa(worker)
	if _, err := conn.Exec(ctx, "DECLARE "+cursor+" NO SCROLL CURSOR FOR "+lt.sql()); err != nil {
		return fmt.Errorf("backfill: load %s: %w", lt.t.qualified(), err)
	}
	rows := loadFirstRows
	pc := conn.PgConn()
	for {
		rr := pc.ExecParams(ctx, "FETCH FORWARD "+strconv.Itoa(rows)+" FROM "+cursor, nil, nil, nil, nil)
		c, err := readChunk(rr, lt.t, nil, id, buf)
		if _, cerr := rr.Close(); cerr != nil || err != nil {
			return fmt.Errorf("backfill: load %s: %w", lt.t.qualified(), errors.Join(cerr, err))
		}
		if c.rows == 0 {
			break
		}
		if err := emit(ingest.LoadChunk{Table: lt.t.qualified(), Rows: c.rows, Encoded: c.encoded}); err != nil {
			return err
		}
		rows = nextFetch(rows, c.rows, len(c.encoded))
	}
	if _, err := conn.Exec(ctx, "CLOSE "+cursor); err != nil {
		return fmt.Errorf("backfill: load %s: %w", lt.t.qualified(), err)
	}
	return nil
}

// nextFetch is the row count of the next FETCH: as many rows as fit
// loadChunkBytes at the size the last chunk's rows had.
func nextFetch(asked, got, bytes int) int {
	if got < asked || bytes == 0 {
		return asked // the last chunk of the task
	}
	n := int(int64(loadChunkBytes) * int64(got) / int64(bytes))
	return min(max(n, loadMinRows), loadMaxRows)
}

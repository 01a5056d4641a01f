package benchmarks

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCPUByRole attributes PostgreSQL's CPU time during a phase to its
// processes' roles (pg_stat_activity: backend_type, application_name),
// sampling them every 200 ms from a goroutine of its own, so that the
// backfill rows can say which of PostgreSQL's processes cost more than
// COPY's one backend: pgq's connections (chunk reads, watermarks),
// walsenders, the benchmark's stream (pgbench), background processes. A
// process that ends between two samples keeps the time it had at the
// last one; what ended unseen is the rest of the cluster's total.
type pgCPUByRole struct {
	conn    *pgx.Conn // its own: the phase uses the env's meanwhile
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex // guards started, first, last, role and sample
	started bool
	first   map[int]time.Duration
	last    map[int]time.Duration
	role    map[int]string
	sample  error
}

// startPGCPUByRole starts sampling; stop ends it and returns the CPU time
// per role since the start.
func (e *env) startPGCPUByRole(ctx context.Context) *pgCPUByRole {
	s := &pgCPUByRole{stop: make(chan struct{}), done: make(chan struct{}),
		first: map[int]time.Duration{}, last: map[int]time.Duration{}, role: map[int]string{}}
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		s.sample = fmt.Errorf("connect: %w", err)
		close(s.done)
		return s
	}
	s.conn = conn
	s.take(ctx)
	go func() {
		defer close(s.done)
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.take(ctx)
				return
			case <-ctx.Done():
				return
			case <-t.C:
				s.take(ctx)
			}
		}
	}()
	return s
}

// take samples every process of the cluster once.
func (s *pgCPUByRole) take(ctx context.Context) {
	roles, err := pgRoles(ctx, s.conn)
	if err != nil {
		s.mu.Lock()
		s.sample = err
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, r := range roles {
		f, err := procStat(pid)
		if err != nil {
			continue // ended meanwhile
		}
		t := ticks(f, 11, 12)
		if _, ok := s.first[pid]; !ok {
			// A process started after the phase began counts from zero.
			s.first[pid] = 0
			if !s.started {
				s.first[pid] = t
			}
		}
		s.last[pid], s.role[pid] = t, r
	}
	s.started = true
}

// end stops the sampling and returns the CPU time per role, sorted by
// time, as "role 1.23" pairs per million rows.
func (s *pgCPUByRole) end(rows int, total time.Duration) string {
	if s.conn != nil {
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sample != nil {
		return "by process: unknown (" + trimErr(s.sample) + ")"
	}
	by := map[string]time.Duration{}
	var seen time.Duration
	for pid, t := range s.last {
		d := t - s.first[pid]
		by[s.role[pid]] += d
		seen += d
	}
	if rest := total - seen; rest > 0 {
		by["ended unseen"] += rest
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return by[names[i]] > by[names[j]] })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, by[n].Seconds()*1e6/float64(rows)))
	}
	return "PostgreSQL's by process: " + strings.Join(parts, ", ")
}

// pgRoles returns the role of each process of the cluster: the
// sampler's own backend, pgbench's (the stream), other clients' (pgq's
// and the benchmark's, idle meanwhile), walsenders, and the background
// processes by their type.
func pgRoles(ctx context.Context, conn *pgx.Conn) (map[int]string, error) {
	rows, err := conn.Query(ctx, `SELECT pid, backend_type, coalesce(application_name, ''), pid = pg_backend_pid() FROM pg_stat_activity`)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_activity: %w", err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var (
			pid       int
			typ, app  string
			benchSelf bool
		)
		if err := rows.Scan(&pid, &typ, &app, &benchSelf); err != nil {
			return nil, err
		}
		switch {
		case benchSelf:
			out[pid] = "the sampler's own"
		case typ == "walsender":
			out[pid] = "walsenders"
		case typ == "client backend" && app == "pgbench":
			out[pid] = "stream (pgbench)"
		case typ == "client backend":
			out[pid] = "pgq's backends"
		default:
			out[pid] = "background"
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return nil, fmt.Errorf("no /proc: %w", err)
	}
	return out, nil
}

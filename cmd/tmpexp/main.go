package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

func main() {
	ctx := context.Background()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Stop()
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		panic(err)
	}
	_, err = conn.Exec(ctx, `CREATE TABLE bench_backfill (id bigint PRIMARY KEY, account int, amount numeric(12,2), note text, created timestamptz);
		INSERT INTO bench_backfill SELECT g, g % 1000, (g % 10000) / 100.0, 'backfilled row ' || g, now() FROM generate_series(1, 1000000) g`)
	conn.Exec(ctx, "VACUUM ANALYZE bench_backfill")
	if err != nil {
		panic(err)
	}
	pc := conn.PgConn()
	for round := 0; round < 3; round++ {
		t := time.Now()
		pc.CopyTo(ctx, io.Discard, "COPY (SELECT * FROM bench_backfill) TO STDOUT")
		fmt.Println("copy all", time.Since(t))
		t = time.Now()
		for k := 0; k < 1000000; k += 10000 {
			pc.CopyTo(ctx, io.Discard, fmt.Sprintf("COPY (SELECT * FROM bench_backfill WHERE id > %d ORDER BY id LIMIT 10000) TO STDOUT", k))
		}
		fmt.Println("copy chunks", time.Since(t))
		t = time.Now()
		n := 0
		for k := 0; k < 1000000; k += 10000 {
			rr := pc.ExecParams(ctx, "SELECT * FROM bench_backfill WHERE id > $1 ORDER BY id LIMIT 10000", [][]byte{[]byte(fmt.Sprint(k))}, nil, nil, nil)
			for rr.NextRow() {
				n += len(rr.Values())
			}
			rr.Close()
		}
		fmt.Println("select chunks", time.Since(t), n)
		t = time.Now()
		for k := 0; k < 1000000; k += 10000 {
			rr := pc.ExecParams(ctx, "SELECT * FROM bench_backfill WHERE id > $1 ORDER BY id LIMIT 10000", [][]byte{[]byte(fmt.Sprint(k))}, nil, nil, []int16{1})
			for rr.NextRow() {
				n += len(rr.Values())
			}
			rr.Close()
		}
		fmt.Println("select chunks binary", time.Since(t), n)
		var _ = pgconn.ResultReader{}
	}
}

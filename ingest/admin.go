package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/opterr"
)

// SlotInfo is a slot's state and how much WAL it makes the server keep.
type SlotInfo struct {
	Slot              string  `json:"slot"`
	Plugin            string  `json:"plugin"`
	Active            bool    `json:"active"`
	ActivePID         *int32  `json:"active_pid"`
	RestartLSN        pgq.LSN `json:"restart_lsn"`
	ConfirmedFlushLSN pgq.LSN `json:"confirmed_flush_lsn"`
	CurrentWALLSN     pgq.LSN `json:"current_wal_lsn"`
	// LagBytes is current WAL − confirmed_flush_lsn: what is not yet
	// confirmed. RetainedBytes is current WAL − restart_lsn: what the
	// server keeps for the slot.
	LagBytes      int64 `json:"lag_bytes"`
	RetainedBytes int64 `json:"retained_bytes"`
}

// SlotLag samples a slot's lag over a normal connection.
func SlotLag(ctx context.Context, url, slot string) (SlotInfo, error) {
	if err := ValidateSlotName(slot); err != nil {
		return SlotInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return SlotInfo{}, connectError(err, url)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	info := SlotInfo{Slot: slot}
	var restart, confirmed, current *string
	err = conn.QueryRow(ctx, `SELECT coalesce(plugin, ''), active, active_pid, restart_lsn::text, confirmed_flush_lsn::text, pg_current_wal_lsn()::text
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&info.Plugin, &info.Active, &info.ActivePID, &restart, &confirmed, &current)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, fmt.Errorf("%w: replication slot %q does not exist", ErrSlotMissing, slot)
	}
	if err != nil {
		return info, fmt.Errorf("ingest: read slot %q: %w", slot, err)
	}
	for _, p := range []struct {
		s   *string
		dst *pgq.LSN
	}{{restart, &info.RestartLSN}, {confirmed, &info.ConfirmedFlushLSN}, {current, &info.CurrentWALLSN}} {
		if p.s != nil {
			if *p.dst, err = pgq.ParseLSN(*p.s); err != nil {
				return info, err
			}
		}
	}
	info.LagBytes = int64(info.CurrentWALLSN) - int64(info.ConfirmedFlushLSN)
	info.RetainedBytes = int64(info.CurrentWALLSN) - int64(info.RestartLSN)
	return info, nil
}

// DropSlot drops a slot. With force it first terminates the backend
// using it.
func DropSlot(ctx context.Context, url, slot string, force bool) error {
	if err := ValidateSlotName(slot); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return connectError(err, url)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var active bool
	var pid *int32
	err = conn.QueryRow(ctx, "SELECT active, active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active, &pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: replication slot %q does not exist", ErrSlotMissing, slot)
	}
	if err != nil {
		return fmt.Errorf("ingest: read slot %q: %w", slot, err)
	}
	if active {
		if !force || pid == nil {
			return opterr.New(ErrSlotInUse, "slot %q is in use; stop pgq first or pass {}", opterr.Of("ingest.DropSlot(force)"), slot)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", *pid); err != nil {
			return fmt.Errorf("ingest: terminate backend %d: %w", *pid, err)
		}
		// The walsender releases the slot asynchronously.
		for i := 0; i < 100; i++ {
			if err := conn.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active); err != nil || !active {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
		return fmt.Errorf("ingest: drop slot %q: %w", slot, err)
	}
	return nil
}

package ingest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// sameServer makes sure the replication connection reached the server
// preflight checked. With a multi-host --pg-url the two are dialed
// separately, and a failover between the dials could put them on two
// servers: the slot checked on one, streamed from the other. That is a
// moment of a failover, so it is retried, not fatal.
func sameServer(pre *pgx.Conn, repl *pgconn.PgConn) error {
	a, b := pre.PgConn().Conn().RemoteAddr().String(), repl.Conn().RemoteAddr().String()
	if a != b {
		return fmt.Errorf("ingest: the preflight connection reached %s but the replication connection %s (a failover under way?)", a, b)
	}
	return nil
}

// warnFailover warns once per process, when physical standbys are
// attached (without one there is nothing to fail over to), about a slot
// that a failover would break:
//   - a failover slot while the primary's synchronized_standby_slots is
//     empty: the walsender may send pgq a transaction no standby has
//     received, and after a promotion the journal holds a change the new
//     primary never had (a phantom, whose commit LSN the new primary can
//     reuse for another transaction: ids derived from it can collide);
//   - a slot that is not a failover slot: a promotion loses it.
func (in *Ingester) warnFailover(ctx context.Context, conn *pgx.Conn, info ServerInfo) {
	if info.VersionNum < failoverMinVersion || in.o.SlotLifecycle == LifecycleTemporary ||
		in.warned["failover"] {
		return
	}
	var standbys int
	var syncSlots string
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_stat_replication r
			WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')),
		current_setting('synchronized_standby_slots')`).Scan(&standbys, &syncSlots)
	if err != nil {
		in.o.Logger.Warn("cannot check the standbys for failover", "error", err)
		return
	}
	switch {
	case standbys == 0:
	case info.SlotFailover && syncSlots == "":
		in.warned["failover"] = true
		in.o.Logger.Warn("the slot is a failover slot but synchronized_standby_slots is empty on the primary: after a failover the journal can hold transactions the promoted server never had (phantoms, whose commit LSNs the new primary may reuse, so bridge message ids made from them can collide); set synchronized_standby_slots to the standbys' physical slots",
			"slot", in.o.Slot, "standbys", standbys, "setting", "synchronized_standby_slots")
	case !info.SlotFailover:
		in.warned["failover"] = true
		in.o.Logger.Warn("physical standbys are attached but the slot is not a failover slot: a promotion loses it (create it with ingest.Options.CreateSlot and ingest.Options.SlotFailover auto or on, and set sync_replication_slots on the standbys)",
			"slot", in.o.Slot, "standbys", standbys, "setting", "failover")
	}
}

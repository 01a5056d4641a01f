// Package ingest reads a PostgreSQL logical replication slot (pgoutput) and
// hands every committed transaction to the journal's group committer.
//
// # Start and preflight
//
// Before streaming, a normal connection checks the server and fails with a
// FatalError wrapping one of the sentinel errors (ErrUnreachable,
// ErrWALLevel, ErrSlotMissing, ErrSlotPlugin, ErrSlotInUse, ErrPubMissing,
// ErrPrivilege, ErrConfig): pgq exits with one line instead of looping.
// --create-slot and --create-publication create what is missing; every
// identifier is quoted or passed as a parameter, and slot names are
// validated because START_REPLICATION cannot take a parameter.
//
// # Receive loop
//
// One goroutine (Run → session.loop) owns the replication connection. It
// decodes XLogData with package pgoutput, assembles transactions between
// Begin and Commit and submits them to the journal.Committer. Empty
// transactions and transactions whose end LSN is at or below the newest
// journaled one (re-sends after a restart) produce no record but are
// reported to the feedback.Tracker so the slot still advances.
// Non-transactional logical messages become records of their own with end
// LSN = message LSN + 1.
//
// # Feedback
//
// Standby status updates set write, flush and apply to
// feedback.Tracker.Confirmable: never past the newest fsynced record while
// anything is pending, the server's WAL end when idle. The committer's
// OnAppend hook (another goroutine) marks batches durable and wakes the
// receive loop by setting a past read deadline on the socket — the only
// cross-goroutine touch of the connection, and one net.Conn allows — so
// confirmations go out right after each fsync, not at the next message.
// Updates are also sent every StatusInterval and whenever the server asks.
//
// # Reconnect and stop
//
// Transient errors reconnect with exponential backoff between ReconnectMin
// and ReconnectMax (reset after a session that streamed). Configuration
// errors found on reconnect (slot or publication dropped, privilege revoked)
// are fatal. When ctx is cancelled, the session waits for the in-flight
// group commit, sends the final confirmation and Run returns nil.
package ingest

// Package jetstream is the NATS JetStream publisher of package bridge
// (nats.go's jetstream package).
//
// Every message is published asynchronously with at most Options.Window
// in flight, with the header Nats-Msg-Id set to the message's ID
// ("<commit LSN>.<ordinal>"), the expected stream set to Options.Stream
// and Nats-Expected-Last-Sequence set to the stream sequence the message
// before it got (or will get), so the stream stores what is sent as a
// prefix: once a message is not stored, every later one in flight is
// refused too. Acknowledgements and failures (including
// Options.AckTimeout) come to nats.go's async ack and error callbacks,
// which record them for the Publish in progress and free its window
// slot; a callback that comes after Publish returned (its context ended)
// changes nothing.
//
// A Publish sends one bridge batch, at most bridge.Options.MaxInFlight
// messages (a transaction larger is published in several, each
// acknowledged before the next), Window of them unacknowledged at once.
//
// At start, after a reconnect, a failed Publish and a duplicate
// acknowledgement, Publish first reads the stream's last sequence and
// last message: the message's position (bridge.ParseID of its
// Nats-Msg-Id) is the highest the stream holds, and every message at or
// before it is counted acknowledged without being sent (Skipped). So a
// batch re-published after a bridge crash, a lost acknowledgement or a
// node loss (a new pgq replaying a held slot) is not stored twice, however
// long the bridge was down (see package bridge for why this is exact). A
// stream whose last message has no pgq id or is another group's
// (pgq-group) is refused (bridge.ErrShared): a stream takes one bridge.
// The stream's duplicate window (StreamConfig.Duplicates, 2 minutes by
// default; --create-stream uses Options.Duplicates) stays as a second
// guard: it drops a message whose id it stored within the window.
//
// Headers: Nats-Msg-Id, Nats-Expected-Stream, Nats-Expected-Last-Sequence,
// pgq-offset, pgq-xid, pgq-lsn, pgq-op, pgq-table, pgq-group and pgq-key
// (the bridge key). Subjects: the template with each
// placeholder value made a valid subject token; a schema change event
// (Debezium's format, Options.SchemaChangeSubject, bridge.SchemaChanger)
// goes to that subject, in the same stream, so the stream's last message
// still names the bridge's position.
//
// The connection reconnects forever, without a reconnect buffer: a
// publish while disconnected fails at once, so nothing is sent after a
// message that was lost with the connection, and the unacknowledged
// messages are re-sent in order (per-key order holds across a broker
// restart). JetStream acknowledges a message once it is stored; with the
// server's default sync_interval a server crash (not a clean stop) can
// lose acknowledged messages: configure sync_interval: always where that
// matters.
//
// A Publisher is used by one goroutine at a time (the bridge's publishing
// goroutine); Publisher.mu guards the state the callbacks share with it,
// and the callbacks (and the reconnect handler) ask for a new read of the
// stream's end through an atomic flag.
package jetstream

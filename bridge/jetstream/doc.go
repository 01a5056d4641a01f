// Package jetstream is the NATS JetStream publisher of package bridge
// (nats.go's jetstream package).
//
// Every message is published asynchronously with at most Options.Window
// in flight, with the header Nats-Msg-Id set to the message's ID
// ("<offset>.<index>") and the expected stream set to Options.Stream.
// Acknowledgements and failures (including Options.AckTimeout) come to
// nats.go's async ack and error callbacks, which record them for the
// Publish in progress and free its window slot; a callback that comes
// after Publish returned (its context ended) changes nothing.
// The stream drops a message whose id it stored within its duplicate
// window (StreamConfig.Duplicates, 2 minutes by default), so a batch
// re-published after a bridge crash or a lost acknowledgement is stored
// once: exactly once as long as the bridge comes back within the window.
// Raise the window (--create-stream uses Options.Duplicates) when the
// bridge may stay down longer; a batch re-published after the window has
// passed is stored twice.
//
// Headers: Nats-Msg-Id, pgq-offset, pgq-xid, pgq-lsn, pgq-op, pgq-table
// and pgq-key (the bridge key). Subjects: the template with each
// placeholder value made a valid subject token.
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
// goroutine); Publisher.mu guards the state the callbacks share with it.
package jetstream

// Package webhook is the bridge's HTTP sink (`pgq bridge webhook`): a
// bridge.Publisher that POSTs a consumer group's changes to a URL in
// batches.
//
// # Requests
//
// Each request carries up to Options.BatchSize changes, in order, as a
// JSON array: pgq's payloads (the bridge's wire format), Debezium values
// (format debezium), both as application/json, or, in the cloudevents
// format, a CloudEvents JSON batch (structured mode,
// application/cloudevents-batch+json: an array of events, one per
// change, each carrying its stable id as "id"). The body names each
// change, signed with it: a pgq payload by commit_lsn and ordinal, a
// CloudEvent by id, a Debezium value by source.sequence (package format).
// No header grows with the batch (a list of the batch's ids did, as
// Pgq-Ids: 75 KB at 5,000 changes, past common header limits, a 431
// forever). Headers:
//
//	webhook-id: pgq_<32 hex>             BatchID: the batch's idempotency key
//	webhook-timestamp: <unix seconds>    the attempt's time
//	webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>
//	Pgq-Batch: <first id>..<last id>     names the batch
//	Pgq-Attempt: 1                       attempts of this batch so far
//	Pgq-Group: <group>
//	Pgq-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<t>.<body>")>
//
// The signatures are the Standard Webhooks scheme
// (https://www.standardwebhooks.com; receivers verify with its libraries
// in any language) and, deprecated and sent for one more release,
// pgq's earlier Pgq-Signature, which does not cover the id. Both are sent
// only with Options.Secret, the key: ParseSecret turns a "whsec_" +
// base64 secret into it (at least MinKeyLen bytes) and takes a plain
// secret's bytes as its key (deprecated; "whsec_" + its base64 is the
// same key). webhook-id is BatchID of the group, the format and the
// stable ids of the request's changes (from PostgreSQL's history, never
// a journal offset): every attempt of the same changes has the same one,
// also after a restart or on a fresh data dir, and a batch cut
// differently (other ends, another BatchSize or Concurrency) another.
//
// The signatures are computed as the body is built (Signing, an
// io.Writer the body is written to). A body larger than
// Options.MaxBodyMemory (8 MiB) is built in a temporary file in
// Options.SpoolDir (pgq-webhook-*.json; default os.TempDir()) instead of
// memory and sent from it with its Content-Length; the file is removed
// once the attempt ended, failed or not (a retry builds it again).
//
// A batch is whatever the bridge fetched, cut into BatchSize requests.
// It leaves as soon as it is fetched, unless the bridge lingers
// (bridge.Options.Linger, `pgq bridge webhook --linger`): then a batch
// below the linger target (the command sets it to --batch-size) waits
// up to the linger for more changes.
//
// # Delivery
//
// A 2xx answer acknowledges the request's changes. Anything else (another
// status, a 3xx included: no redirect is followed, since Go's client would
// resend a POST as a bodiless GET and its 2xx would acknowledge changes
// the receiver never got; a network error, no answer within Options.Timeout) fails it:
// the bridge waits (capped, jittered backoff) and sends it again, and no
// later request is sent before it is acknowledged, so per-key order (all
// order) holds. With Options.Concurrency N above 1 the changes are shared
// out over N lanes by their key (FNV-1a of bridge.AppendKey's key), each
// lane one request at a time as above: per-key order holds, and a lane's
// failure leaves the other lanes' acknowledged requests acknowledged
// (only the failed lane's changes are sent again). With Options.MaxAttempts the publisher gives up after
// that many failed attempts of one batch with an error naming it
// (bridge.ErrGaveUp; `pgq bridge webhook` exits non-zero). The group's
// cursor moves only past acknowledged changes.
//
// Delivery is at least once: a receiver that stored a batch whose answer
// was lost (a timeout, a crash of the bridge before its commit) gets it
// again. Receivers deduplicate by the stable ids in the body (an id names
// one change forever) or by webhook-id (one batch).
//
// # Verifying the signature
//
// With a Standard Webhooks library (in Go
// github.com/standard-webhooks/standard-webhooks/libraries/go):
//
//	wh, err := standardwebhooks.NewWebhook(secret) // "whsec_…"
//	body, _ := io.ReadAll(r.Body)
//	if err := wh.Verify(body, r.Header); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//
// By hand: HMAC-SHA256 with the key over "<webhook-id>.<webhook-timestamp>.<raw
// body>", its standard base64 after "v1," compared in constant time with
// each space-separated signature of webhook-signature, and a timestamp
// too far from now refused (replays). SignStandard computes it; Verify
// checks the deprecated Pgq-Signature.
//
// # Concurrency
//
// The bridge calls Publish from one goroutine at a time; a Publisher
// keeps one request body buffer per lane (and at most one spool file
// per lane, while its request is sent) and the attempt count of the
// failing batch. ParseSecret, BatchID, SignStandard, Sign and Verify are
// safe anywhere; a Signing belongs to one request.
package webhook

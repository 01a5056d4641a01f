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
// change, each carrying its stable id as "id"). Headers:
//
//	Pgq-Ids: 0/1A2B3C8.0,0/1A2B3C8.1,…   stable ids, in body order
//	Pgq-Batch: <first id>..<last id>     names the batch
//	Pgq-Attempt: 1                       attempts of this batch so far
//	Pgq-Group: <group>
//	Pgq-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// The signature is computed as the body is built. A body larger than
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
// again. Receivers deduplicate by the stable ids (Pgq-Ids, or the
// CloudEvents id): an id names one change forever.
//
// # Verifying the signature
//
// Verify does it in Go; in any language: split the header at ',' into
// t and v1, compute HMAC-SHA256 with the shared secret over the bytes
// "<t>.<raw body>", compare its hex with v1 in constant time, and refuse
// a t too far from now (replays):
//
//	sig := r.Header.Get("Pgq-Signature")
//	body, _ := io.ReadAll(r.Body)
//	if err := webhook.Verify(secret, body, sig, time.Now(), 5*time.Minute); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//
// # Concurrency
//
// The bridge calls Publish from one goroutine at a time; a Publisher
// keeps one request body buffer per lane (and at most one spool file
// per lane, while its request is sent) and the attempt count of the
// failing batch. Sign and Verify are safe anywhere.
package webhook

package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Header names of the Standard Webhooks scheme
// (https://www.standardwebhooks.com): every request carries HeaderID and
// HeaderTimestamp, and HeaderWebhookSignature when Options.Secret is set.
const (
	// HeaderID is the batch's idempotency key (BatchID): the same for
	// every attempt of the same changes, another for any other batch.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the attempt's time, in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderWebhookSignature is "v1,<base64 of HMAC-SHA256(key,
	// "<webhook-id>.<webhook-timestamp>.<body>")>" (SignStandard).
	HeaderWebhookSignature = "webhook-signature"
)

// SecretPrefix starts a Standard Webhooks secret: "whsec_" + the key in
// base64.
const SecretPrefix = "whsec_"

// MinKeyLen is the shortest key ParseSecret accepts from a whsec_
// secret, in bytes (the Standard Webhooks specification's 24).
const MinKeyLen = 24

// ErrSecret is ParseSecret's error for a secret it cannot use.
var ErrSecret = errors.New("webhook: bad secret")

// ParseSecret returns the signing key of a secret (`pgq bridge webhook
// --secret`): for "whsec_<base64>" the decoded bytes, at least MinKeyLen
// of them. Anything else is a plain secret, deprecated: its bytes are the
// key, as before the Standard Webhooks scheme, and legacy is true (the
// caller warns). A plain secret becomes the whsec_ secret of the same
// key as "whsec_" + its standard base64 (`printf %s "$OLD" | base64`).
func ParseSecret(s string) (key []byte, legacy bool, err error) {
	if s == "" {
		return nil, false, nil
	}
	b64, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return []byte(s), true, nil
	}
	key, err = base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, false, fmt.Errorf("%w: what follows %s is not standard base64: %w", ErrSecret, SecretPrefix, err)
	}
	if len(key) < MinKeyLen {
		return nil, false, fmt.Errorf("%w: the key of the %s secret is %d bytes, want at least %d (e.g. %s$(head -c 32 /dev/urandom | base64))", ErrSecret, SecretPrefix, len(key), MinKeyLen, SecretPrefix)
	}
	return key, false, nil
}

// BatchID returns the HeaderID of a request: "pgq_" and 32 hex digits of
// SHA-256 over the group, the format and the stable ids of the request's
// changes in body order ("<commit LSN>.<ordinal>", from PostgreSQL's
// history, never a journal offset): the same for every attempt of the
// same changes, even after a restart or on a fresh data dir, and another
// for a batch cut differently (other ends, another --batch-size or
// --concurrency), so a receiver may skip a webhook-id it has processed.
// It holds no '.', as the specification wants.
func BatchID(group, format string, ids func(yield func(string) bool)) string {
	h := sha256.New()
	h.Write([]byte(group))
	h.Write([]byte{0})
	h.Write([]byte(format))
	for id := range ids {
		h.Write([]byte{0})
		h.Write([]byte(id))
	}
	var sum [sha256.Size]byte
	return "pgq_" + hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// Signing computes the signatures of one request as its body is written
// to it (an io.Writer: the body is fed to it as it is built, also when it
// is spooled to a file, so it is never read twice): the Standard Webhooks
// one (Signature) and the deprecated HeaderSignature (LegacySignature),
// both with the same key.
type Signing struct {
	std, legacy hash.Hash
	ts          string
}

// NewSigning returns the Signing of the request id at t under key.
func NewSigning(key []byte, id string, t time.Time) *Signing {
	s := &Signing{std: hmac.New(sha256.New, key), legacy: hmac.New(sha256.New, key), ts: strconv.FormatInt(t.Unix(), 10)}
	s.std.Write([]byte(id))
	s.std.Write([]byte{'.'})
	s.std.Write([]byte(s.ts))
	s.std.Write([]byte{'.'})
	s.legacy.Write([]byte(s.ts))
	s.legacy.Write([]byte{'.'})
	return s
}

// Write feeds body bytes to both signatures; it never fails.
func (s *Signing) Write(p []byte) (int, error) {
	s.std.Write(p)
	s.legacy.Write(p)
	return len(p), nil
}

// Signature is the HeaderWebhookSignature value of the body written so
// far: "v1,<base64 of HMAC-SHA256(key, "<id>.<t>.<body>")>".
func (s *Signing) Signature() string {
	return "v1," + base64.StdEncoding.EncodeToString(s.std.Sum(nil))
}

// LegacySignature is the deprecated HeaderSignature value of the body
// written so far: "t=<unix seconds>,v1=<hex of HMAC-SHA256(key,
// "<t>.<body>")>".
func (s *Signing) LegacySignature() string {
	return "t=" + s.ts + ",v1=" + hex.EncodeToString(s.legacy.Sum(nil))
}

// SignStandard returns the HeaderWebhookSignature value of body sent
// with webhook-id id at t.
func SignStandard(key []byte, id string, t time.Time, body []byte) string {
	s := NewSigning(key, id, t)
	_, _ = s.Write(body)
	return s.Signature()
}

// Sign returns the deprecated HeaderSignature value of body at t:
// "t=<unix seconds>,v1=<hex of HMAC-SHA256(secret, "<t>.<body>")>".
//
// Deprecated: verify HeaderWebhookSignature with a Standard Webhooks
// library (or SignStandard); HeaderSignature is sent for one more
// release.
func Sign(secret, body []byte, t time.Time) string {
	s := NewSigning(secret, "", t)
	_, _ = s.Write(body)
	return s.LegacySignature()
}

// ErrSignature is Verify's error for a missing, malformed, wrong or
// too old signature.
var ErrSignature = errors.New("webhook: bad signature")

// Verify checks a HeaderSignature value against body: the HMAC matches
// and t is within tolerance of now (a replay guard; zero → no check).
//
// Deprecated: HeaderSignature does not cover the request's id; verify
// HeaderWebhookSignature with a Standard Webhooks library.
func Verify(secret, body []byte, header string, now time.Time, tolerance time.Duration) error {
	var ts, v1 string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || v1 == "" {
		return fmt.Errorf("%w: malformed %q", ErrSignature, header)
	}
	want := Sign(secret, body, time.Unix(sec, 0))
	if !hmac.Equal([]byte(want[strings.Index(want, "v1=")+3:]), []byte(v1)) {
		return fmt.Errorf("%w: mismatch", ErrSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); tolerance > 0 && (d > tolerance || d < -tolerance) {
		return fmt.Errorf("%w: timestamp %s off by %s", ErrSignature, ts, d)
	}
	return nil
}

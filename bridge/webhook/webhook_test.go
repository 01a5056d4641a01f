package webhook

import (
	"errors"
	"testing"
	"time"
)

// TestSignVector checks Sign against a signature computed independently
// (openssl dgst -sha256 -hmac s3cret over `1700000000.[{"a":1}]`).
func TestSignVector(t *testing.T) {
	got := Sign([]byte("s3cret"), []byte(`[{"a":1}]`), time.Unix(1700000000, 0))
	want := "t=1700000000,v1=716fa740652aadd0b58e3e5afeb9107ea23adfe5275da0f786ead23710e2c7f2"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

// TestVerify accepts the signature of the body and refuses another body,
// another secret, a stale timestamp and garbage.
func TestVerify(t *testing.T) {
	secret, body, now := []byte("k"), []byte(`[1,2]`), time.Unix(1700000000, 0)
	sig := Sign(secret, body, now)
	if err := Verify(secret, body, sig, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"body":    Verify(secret, []byte(`[1,3]`), sig, now, time.Minute),
		"secret":  Verify([]byte("x"), body, sig, now, time.Minute),
		"stale":   Verify(secret, body, sig, now.Add(10*time.Minute), time.Minute),
		"garbage": Verify(secret, body, "v1=zz", now, time.Minute),
	} {
		if !errors.Is(err, ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
	}
}

// TestOptionsValidate refuses what cannot work.
func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{}, {URL: "ftp://x"}, {URL: "http://x", BatchSize: -1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: valid", o)
		}
	}
	if err := (Options{URL: "https://example.com/hook"}).Validate(); err != nil {
		t.Error(err)
	}
}

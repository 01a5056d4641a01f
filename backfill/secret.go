package backfill

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// secretKey is the store key of the watermark secret.
var secretKey = []byte("wmsecret")

// loadWatermarkSecret hands the registry the secret its watermark keys
// are made with (ingest.Backfills.SetSecret), created on the store's
// first open. Kept with the data dir rather than per process: after a
// restart PostgreSQL sends again the watermarks emitted since the slot's
// last confirmation, and only the same secret tells them from messages
// some other role wrote with the prefix (those are journaled as
// messages). Anyone who can read the data dir can read the journal too.
func (m *Manager) loadWatermarkSecret() error {
	v, closer, err := m.store.db.Get(secretKey)
	switch {
	case err == nil:
		secret := slices.Clone(v)
		_ = closer.Close()
		m.o.Registry.SetSecret(secret)
		return nil
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("backfill: read the watermark secret: %w", err)
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // crypto/rand.Read never fails (Go 1.24+)
	if err := m.store.commit(func(b *pebble.Batch) error { return b.Set(secretKey, secret, nil) }); err != nil {
		return fmt.Errorf("backfill: store the watermark secret: %w", err)
	}
	m.o.Registry.SetSecret(secret)
	return nil
}

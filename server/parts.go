package server

import "github.com/pgq-dev/pgq/internal/serverparts"

// The Server's components are unexported; pgq's own tests in other
// packages reach them through internal/serverparts.
func init() {
	serverparts.Of = func(v any) serverparts.Parts {
		s, ok := v.(*Server)
		if !ok {
			return serverparts.Parts{}
		}
		return serverparts.Parts{
			Journal: s.journal, Index: s.index, Committer: s.committer, Ingester: s.ingester,
			Registry: s.registry, Consumers: s.consumers, Backfills: s.backfills,
		}
	}
}

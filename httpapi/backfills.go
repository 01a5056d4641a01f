package httpapi

import (
	"net/http"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/backfill"
)

// backfills serves /v1/backfills over a backfill.Manager:
//
//	POST   /v1/backfills        start ({"tables":[...],"chunk_size":N,"where":"...","max_rate":R,"parallelism":P}) → 201 + the backfill
//	GET    /v1/backfills        every backfill, oldest first
//	GET    /v1/backfills/{id}   one backfill
//	PATCH  /v1/backfills/{id}   change a running one ({"max_rate":R}, 0 lifts the cap) → the backfill
//	DELETE /v1/backfills/{id}   cancel → the backfill (state canceled)
type backfills struct {
	m *backfill.Manager
}

func (b *backfills) start(w http.ResponseWriter, r *http.Request) {
	var req api.BackfillRequest
	if !decoded(w, r, &req) {
		return
	}
	st, err := b.m.Start(r.Context(), req)
	if err != nil {
		WriteError(w, err)
		return
	}
	replyJSONShaped(w, r, http.StatusCreated, st)
}

func (b *backfills) list(w http.ResponseWriter, r *http.Request) {
	replyJSONShaped(w, r, http.StatusOK, b.m.List())
}

func (b *backfills) get(w http.ResponseWriter, r *http.Request) {
	st, err := b.m.Get(r.PathValue("id"))
	if err != nil {
		WriteError(w, err)
		return
	}
	replyJSONShaped(w, r, http.StatusOK, st)
}

func (b *backfills) update(w http.ResponseWriter, r *http.Request) {
	var req api.BackfillUpdate
	if !decoded(w, r, &req) {
		return
	}
	if req.MaxRate == nil {
		WriteError(w, api.Errorf(api.ErrBadRequest, `want {"max_rate": rows per second} (0 lifts the cap)`))
		return
	}
	st, err := b.m.Throttle(r.PathValue("id"), *req.MaxRate)
	if err != nil {
		WriteError(w, err)
		return
	}
	replyJSONShaped(w, r, http.StatusOK, st)
}

func (b *backfills) cancel(w http.ResponseWriter, r *http.Request) {
	st, err := b.m.Cancel(r.PathValue("id"))
	if err != nil {
		WriteError(w, err)
		return
	}
	replyJSONShaped(w, r, http.StatusOK, st)
}

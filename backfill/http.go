package backfill

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
)

// Register mounts the backfill API on mux:
//
//	POST   /v1/backfills        start ({"tables":[...],"chunk_size":N,"where":"...","max_rate":R}) → 201 + the backfill
//	GET    /v1/backfills        every backfill, oldest first
//	GET    /v1/backfills/{id}   one backfill
//	PATCH  /v1/backfills/{id}   change a running one ({"max_rate":R}, 0 lifts the cap) → the backfill
//	DELETE /v1/backfills/{id}   cancel → the backfill (state canceled)
func (m *Manager) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/backfills", m.handleStart)
	mux.HandleFunc("GET /v1/backfills", func(w http.ResponseWriter, r *http.Request) { reply(w, http.StatusOK, m.List()) })
	mux.HandleFunc("GET /v1/backfills/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, err := m.Get(r.PathValue("id"))
		if err != nil {
			consumers.WriteError(w, err)
			return
		}
		reply(w, http.StatusOK, st)
	})
	mux.HandleFunc("PATCH /v1/backfills/{id}", m.handleUpdate)
	mux.HandleFunc("DELETE /v1/backfills/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, err := m.Cancel(r.PathValue("id"))
		if err != nil {
			consumers.WriteError(w, err)
			return
		}
		reply(w, http.StatusOK, st)
	})
}

func (m *Manager) handleStart(w http.ResponseWriter, r *http.Request) {
	var req Request
	if !decode(w, r, &req) {
		return
	}
	st, err := m.Start(r.Context(), req)
	if err != nil {
		consumers.WriteError(w, err)
		return
	}
	reply(w, http.StatusCreated, st)
}

func (m *Manager) handleUpdate(w http.ResponseWriter, r *http.Request) {
	var req api.BackfillUpdate
	if !decode(w, r, &req) {
		return
	}
	if req.MaxRate == nil {
		consumers.WriteError(w, fmt.Errorf("%w: want {\"max_rate\": rows per second} (0 lifts the cap)", api.ErrBadRequest))
		return
	}
	st, err := m.Throttle(r.PathValue("id"), *req.MaxRate)
	if err != nil {
		consumers.WriteError(w, err)
		return
	}
	reply(w, http.StatusOK, st)
}

// decode reads a request's JSON object into v as the consumers API does
// (consumers.DecodeRequest); on failure it answers the error and reports
// false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := consumers.DecodeRequest(w, r, v); err != nil {
		consumers.WriteError(w, err)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		consumers.WriteError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

package httpapi

import (
	"net/http"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/format"
)

// fetchSharedFormat answers a shared group's fetch whose body asks for a
// format other than pgq's: {"messages":[…]} as fetchShared writes it,
// each message's change rendered by package format (one JSON value: the
// event, null when the format has none, an array when several). msgpack
// when asked for: the same maps, json values as strings of their text.
func (g *groups) fetchSharedFormat(w http.ResponseWriter, r *http.Request, req api.FetchBody, f format.Format) {
	mp := wantsMsgpack(r)
	rd, err := g.renderer(f, jsonValuesFor(mp))
	if err != nil {
		WriteError(w, err)
		return
	}
	msgs, err := g.m.FetchShared(r.Context(), r.PathValue("name"), consumers.FetchRequest{Member: req.Member, Max: req.Max,
		MaxBytes: req.MaxBytes, Wait: time.Duration(req.Wait),
		RenderChange: func(b []byte, tx *pgq.Transaction, idx int) []byte { return rd.AppendChangeEvents(b, tx, idx) }})
	if err != nil {
		WriteError(w, err)
		return
	}
	if !mp {
		writeBody(w, http.StatusOK, "application/json", appendMessagesJSON(make([]byte, 0, 512*len(msgs)+16), msgs))
		return
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	replyJSONShaped(w, r, http.StatusOK, api.MessagesResponse{Messages: msgs})
}

// renderer returns a renderer of format f for one answer, json values as
// jv says.
func (g *groups) renderer(f format.Format, jv format.JSONValues) (*format.Renderer, error) {
	o := g.formats
	o.JSONValues, o.Now = jv, nil
	return format.New(f, o)
}

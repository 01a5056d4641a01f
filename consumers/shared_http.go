package consumers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pgq-dev/pgq/api"
)

// AckBody is the body of a shared group's ack, nak, term, requeue and drop.
type AckBody = api.AckBody

// fetchShared answers a shared group's fetch: {"messages":[…]}, each
// change as in `pgq journal dump`. msgpack when asked for (either msgpack
// media type): the same maps.
func (h *Handler) fetchShared(w http.ResponseWriter, r *http.Request, req FetchBody) {
	msgs, err := h.m.FetchShared(r.Context(), r.PathValue("name"), FetchRequest{Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: time.Duration(req.Wait)})
	if err != nil {
		WriteError(w, err)
		return
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	h.replyJSONShaped(w, r, api.MessagesResponse{Messages: msgs})
}

// replyJSONShaped writes v as JSON, or as the msgpack form of that JSON
// (so that embedded raw JSON becomes maps, not strings).
func (h *Handler) replyJSONShaped(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, fmt.Errorf("%w: encode response: %v", ErrInternal, err))
		return
	}
	b = append(b, '\n')
	if wantsMsgpack(r) || r.Header.Get("Accept") == api.MediaRecords {
		mp, err := jsonToMsgpack(b)
		if err != nil {
			WriteError(w, fmt.Errorf("%w: encode response: %v", ErrInternal, err))
			return
		}
		writeBody(w, http.StatusOK, MediaMsgpack, mp)
		return
	}
	writeBody(w, http.StatusOK, "application/json", b)
}

func (h *Handler) settle(kind int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req AckBody
		if err := decode(w, r, &req); err != nil {
			WriteError(w, err)
			return
		}
		if req.All || (kind != ackNak && req.Delay != 0) {
			WriteError(w, errf(ErrBadRequest, "all is for parked requeue and drop; delay for nak"))
			return
		}
		n, err := h.m.settle(r.PathValue("name"), req.AckIDs, kind, time.Duration(req.Delay))
		if err != nil {
			WriteError(w, err)
			return
		}
		h.reply(w, r, http.StatusOK, api.AckResult{Count: n})
	}
}

func (h *Handler) parked(w http.ResponseWriter, r *http.Request) {
	ps, err := h.m.Parked(r.Context(), r.PathValue("name"))
	if err != nil {
		WriteError(w, err)
		return
	}
	h.replyJSONShaped(w, r, api.ParkedResponse{Parked: ps})
}

func (h *Handler) parkedAction(requeue bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req AckBody
		if err := decode(w, r, &req); err != nil {
			WriteError(w, err)
			return
		}
		if req.Delay != 0 {
			WriteError(w, errf(ErrBadRequest, "delay is for nak"))
			return
		}
		n, err := h.m.parkedAction(r.PathValue("name"), req.AckIDs, req.All, requeue)
		if err != nil {
			WriteError(w, err)
			return
		}
		h.reply(w, r, http.StatusOK, api.AckResult{Count: n})
	}
}

package consumers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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
	if !wantsMsgpack(r) && r.Header.Get("Accept") != api.MediaRecords {
		writeBody(w, http.StatusOK, "application/json", appendMessagesJSON(make([]byte, 0, 256*len(msgs)+16), msgs))
		return
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	h.replyJSONShaped(w, r, api.MessagesResponse{Messages: msgs})
}

// appendMessagesJSON appends {"messages":[…]} and a newline, as
// json.Marshal of api.MessagesResponse would (without its reflection and
// the revalidation of each change); the changes are compact JSON from
// pgq.AppendChangeJSON, ack ids and LSNs need no escaping.
func appendMessagesJSON(b []byte, msgs []api.Message) []byte {
	b = append(b, `{"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"offset":`...)
		b = strconv.AppendUint(b, uint64(m.Offset), 10)
		b = append(b, `,"xid":`...)
		b = strconv.AppendUint(b, uint64(m.Xid), 10)
		b = append(b, `,"commit_lsn":"`...)
		b = append(b, m.CommitLSN...)
		b = append(b, `","commit_time":"`...)
		b = m.CommitTime.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","index":`...)
		b = strconv.AppendInt(b, int64(m.Index), 10)
		b = append(b, `,"change":`...)
		b = append(b, m.Change...)
		b = append(b, `,"delivery":`...)
		b = strconv.AppendInt(b, int64(m.Delivery), 10)
		b = append(b, `,"ack_id":"`...)
		b = append(b, m.AckID...)
		b = append(b, `"}`...)
	}
	return append(b, "]}\n"...)
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
		if err := DecodeRequest(w, r, &req); err != nil {
			WriteError(w, err)
			return
		}
		if req.All || (kind != ackNak && (req.Delay != 0 || req.Unhandled)) {
			WriteError(w, errf(ErrBadRequest, "all is for parked requeue and drop; delay and unhandled for nak"))
			return
		}
		k := kind
		if req.Unhandled {
			if req.Delay != 0 {
				WriteError(w, errf(ErrBadRequest, "unhandled messages are delivered again at once: no delay"))
				return
			}
			k = ackRelease
		}
		n, err := h.m.settle(r.PathValue("name"), req.AckIDs, k, time.Duration(req.Delay))
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
		if err := DecodeRequest(w, r, &req); err != nil {
			WriteError(w, err)
			return
		}
		if req.Delay != 0 || req.Unhandled {
			WriteError(w, errf(ErrBadRequest, "delay and unhandled are for nak"))
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

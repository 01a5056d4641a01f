package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/format"
)

// fetchShared answers a shared group's fetch: {"messages":[…]}, each
// change rendered in format f (one JSON value: pgq's own, as in `pgq
// journal dump`, by default; in another format the event, null when the
// format has none, an array when several). msgpack when asked for: the
// same maps, json values as strings of their text. The records form when
// asked for (as for an exclusive fetch: Accept naming api.MediaRecords;
// pgq's format only), which the Go client decodes into typed changes
// (writeSharedRecords).
func (g *groups) fetchShared(w http.ResponseWriter, r *http.Request, req api.FetchBody, rn rendering) {
	freq := consumers.FetchRequest{Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: time.Duration(req.Wait)}
	if strings.Contains(r.Header.Get("Accept"), api.MediaRecords) {
		recs, err := g.m.FetchSharedRecords(r.Context(), r.PathValue("name"), freq)
		if err != nil {
			WriteError(w, err)
			return
		}
		writeSharedRecords(w, recs)
		return
	}
	mp := wantsMsgpack(r)
	rd, err := g.renderer(rn, jsonValuesFor(mp))
	if err != nil {
		WriteError(w, err)
		return
	}
	sm, err := g.m.FetchShared(r.Context(), r.PathValue("name"), freq)
	if err != nil {
		WriteError(w, err)
		return
	}
	msgs := apiMessages(sm, rd)
	if !mp {
		writeBody(w, http.StatusOK, "application/json", appendMessagesJSON(make([]byte, 0, 256*len(msgs)+16), msgs))
		return
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	replyJSONShaped(w, r, http.StatusOK, api.MessagesResponse{Messages: msgs})
}

// apiMessages renders a shared group's messages as the answers carry
// them, each change as one JSON value of rd's format
// (format.Renderer.AppendChangeEvents); nil for none.
func apiMessages(msgs []consumers.SharedMessage, rd *format.Renderer) []api.Message {
	if msgs == nil {
		return nil
	}
	out := make([]api.Message, len(msgs))
	var arena []byte
	for i := range msgs {
		out[i], arena = apiMessage(&msgs[i], rd, arena)
	}
	return out
}

// apiMessage renders m, its change appended to arena (returned, grown);
// a message without its record (a parked one that retention removed)
// has the change null and no transaction fields.
func apiMessage(m *consumers.SharedMessage, rd *format.Renderer, arena []byte) (api.Message, []byte) {
	start := len(arena)
	if m.Tx == nil {
		arena = append(arena, "null"...)
		return api.Message{Offset: m.Offset, Index: m.Index, Change: arena[start:len(arena):len(arena)], Delivery: m.Delivery, AckID: m.AckID}, arena
	}
	arena = rd.AppendChangeEvents(arena, m.Tx, m.Index)
	return api.Message{Offset: m.Offset, Xid: m.Tx.Xid, CommitLSN: m.Tx.CommitLSN.String(), CommitTime: m.Tx.CommitTime.UTC(),
		Index: m.Index, Change: arena[start:len(arena):len(arena)], Delivery: m.Delivery, AckID: m.AckID}, arena
}

type (
	// wireMessages is the records (api.MediaRecords) form of a shared
	// fetch's answer.
	wireMessages struct {
		Messages []wireMessage `msgpack:"messages"`
	}
	// wireMessage is [offset, index, delivery, ack_id, record body]: Body
	// is a record body holding the message's change alone, under its
	// transaction's header and with its ordinal
	// (consumers.SharedRecord).
	wireMessage struct {
		_msgpack struct{} `msgpack:",as_array"`
		Offset   uint64
		Index    int
		Delivery int
		AckID    string
		Body     msgpack.RawMessage
	}
)

// writeSharedRecords answers a shared fetch in the records form.
func writeSharedRecords(w http.ResponseWriter, recs []consumers.SharedRecord) {
	wm := wireMessages{Messages: make([]wireMessage, len(recs))}
	for i, rec := range recs {
		wm.Messages[i] = wireMessage{Offset: uint64(rec.Offset), Index: rec.Index, Delivery: rec.Delivery, AckID: rec.AckID, Body: rec.Body}
	}
	b := getBuf()
	defer putBuf(b)
	enc := msgpack.GetEncoder()
	enc.Reset(b)
	err := enc.Encode(&wm)
	msgpack.PutEncoder(enc)
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	writeBody(w, http.StatusOK, api.MediaRecords, b.Bytes())
}

// appendMessagesJSON appends {"messages":[…]} and a newline, as
// json.Marshal of api.MessagesResponse would (without its reflection and
// the revalidation of each change); the changes are compact JSON from
// format.AppendChangeJSON, ack ids and LSNs need no escaping.
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

// jsonValuesFor is how changes render json values for an answer: as
// strings of their text when it will be msgpack (see format.JSONAsText).
func jsonValuesFor(msgpack bool) format.JSONValues {
	if msgpack {
		return format.JSONAsText
	}
	return format.JSONEmbedded
}

// settleKind is what a settle route does with a shared group's messages.
type settleKind int

const (
	settleAck settleKind = iota
	settleNak
	settleTerm
	settleProgress
)

func (g *groups) settle(kind settleKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.AckBody
		if !decoded(w, r, &req) {
			return
		}
		if req.All || (kind != settleNak && (req.Delay != 0 || req.Unhandled)) {
			WriteError(w, api.Errorf(api.ErrBadRequest, "all is for parked requeue and drop; delay and unhandled for nak"))
			return
		}
		if req.Unhandled && req.Delay != 0 {
			WriteError(w, api.Errorf(api.ErrBadRequest, "unhandled messages are delivered again at once: no delay"))
			return
		}
		name, ctx := r.PathValue("name"), r.Context()
		var (
			n   int
			err error
		)
		switch {
		case req.Unhandled:
			n, err = g.m.ReleaseUnhandled(ctx, name, req.AckIDs)
		case kind == settleAck:
			n, err = g.m.Ack(ctx, name, req.AckIDs)
		case kind == settleNak:
			n, err = g.m.Nak(ctx, name, req.AckIDs, time.Duration(req.Delay))
		case kind == settleTerm:
			n, err = g.m.Term(ctx, name, req.AckIDs)
		default:
			n, err = g.m.InProgress(ctx, name, req.AckIDs)
		}
		if err != nil {
			WriteError(w, err)
			return
		}
		reply(w, r, http.StatusOK, api.AckResult{Count: n})
	}
}

func (g *groups) parked(w http.ResponseWriter, r *http.Request) {
	mp := wantsMsgpack(r) || r.Header.Get("Accept") == api.MediaRecords
	rd, err := g.renderer(rendering{f: format.PGQ}, jsonValuesFor(mp))
	if err != nil {
		WriteError(w, err)
		return
	}
	ps, err := g.m.Parked(r.Context(), r.PathValue("name"))
	if err != nil {
		WriteError(w, err)
		return
	}
	out := make([]api.ParkedMessage, len(ps))
	var arena []byte
	for i := range ps {
		out[i].Parked, out[i].Reason = ps[i].Parked, ps[i].Reason
		out[i].Message, arena = apiMessage(&ps[i].SharedMessage, rd, arena)
	}
	replyJSONShaped(w, r, http.StatusOK, api.ParkedResponse{Parked: out})
}

func (g *groups) parkedAction(requeue bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.AckBody
		if !decoded(w, r, &req) {
			return
		}
		if req.Delay != 0 || req.Unhandled {
			WriteError(w, api.Errorf(api.ErrBadRequest, "delay and unhandled are for nak"))
			return
		}
		act := g.m.Drop
		if requeue {
			act = g.m.Requeue
		}
		n, err := act(r.Context(), r.PathValue("name"), req.AckIDs, req.All)
		if err != nil {
			WriteError(w, err)
			return
		}
		reply(w, r, http.StatusOK, api.AckResult{Count: n})
	}
}

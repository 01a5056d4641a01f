package httpapi

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/format"
)

// groups serves /v1/groups over a consumers.Manager.
type groups struct {
	m       *consumers.Manager
	formats format.Options
}

type (
	// wireFetch is the records (api.MediaRecords) form of a fetch response.
	wireFetch struct {
		Transactions []wireTx  `msgpack:"transactions"`
		NextOffset   uint64    `msgpack:"next_offset"`
		Committed    uint64    `msgpack:"committed_offset"`
		LastOffset   uint64    `msgpack:"last_offset"`
		LeaseExpires time.Time `msgpack:"lease_expires"`
		Generation   uint64    `msgpack:"generation"`
	}
	// wireTx is [offset, record body]: pgq.Transaction's msgpack form
	// does not carry the offset. Body is the record body (the journaled
	// bytes after the header when the record passes the filter unchanged),
	// written verbatim.
	wireTx struct {
		_msgpack struct{} `msgpack:",as_array"`
		Offset   uint64
		Body     msgpack.RawMessage
	}
)

func (g *groups) create(w http.ResponseWriter, r *http.Request) {
	var req consumers.CreateRequest
	if !decoded(w, r, &req) {
		return
	}
	gi, err := g.m.Create(r.Context(), req)
	if err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusCreated, gi)
}

func (g *groups) list(w http.ResponseWriter, r *http.Request) {
	reply(w, r, http.StatusOK, api.ListResponse{Groups: g.m.List(r.Context())})
}

func (g *groups) get(w http.ResponseWriter, r *http.Request) {
	gi, err := g.m.Info(r.Context(), r.PathValue("name"))
	if err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusOK, gi)
}

func (g *groups) delete(w http.ResponseWriter, r *http.Request) {
	if err := g.m.Delete(r.Context(), r.PathValue("name")); err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusOK, api.OKResponse{OK: true})
}

func (g *groups) reset(w http.ResponseWriter, r *http.Request) {
	var req api.ResetBody
	if !decoded(w, r, &req) {
		return
	}
	if req.To == "" {
		WriteError(w, api.Errorf(api.ErrBadPosition, `"to" is required`))
		return
	}
	res, err := g.m.Reset(r.Context(), r.PathValue("name"), req.To, req.DryRun)
	if err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusOK, res)
}

// fetch answers both modes: a shared group's messages (fetchShared), an
// exclusive group's transactions as records (the Go client), as JSON (each
// transaction a `pgq journal dump` line) or as the msgpack form of that
// JSON. A body's format renders the changes of the JSON (and msgpack)
// answers in that format (package format); the envelope stays.
func (g *groups) fetch(w http.ResponseWriter, r *http.Request) {
	var req api.FetchBody
	if !decoded(w, r, &req) {
		return
	}
	f, err := format.Parse(req.Format)
	if err != nil {
		WriteError(w, api.Errorf(api.ErrBadRequest, "format %q: want pgq, debezium or cloudevents", req.Format))
		return
	}
	records := strings.Contains(r.Header.Get("Accept"), api.MediaRecords)
	if f != format.PGQ && records {
		WriteError(w, api.Errorf(api.ErrBadRequest, "format %q is for the JSON and msgpack answers, not %s", req.Format, api.MediaRecords))
		return
	}
	if g.m.IsShared(r.PathValue("name")) {
		if f != format.PGQ {
			g.fetchSharedFormat(w, r, req, f)
			return
		}
		g.fetchShared(w, r, req)
		return
	}
	res, err := g.m.FetchRecords(r.Context(), r.PathValue("name"), consumers.FetchRequest{
		Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: time.Duration(req.Wait),
		FailFast: req.FailFast, LeaseTTL: time.Duration(req.LeaseTTL), Session: req.Session, From: req.From,
	}, !records)
	if err != nil {
		WriteError(w, err)
		return
	}
	if records {
		writeRecords(w, res)
		return
	}
	b := getBuf()
	defer putBuf(b)
	mp := wantsMsgpack(r)
	rd, err := g.renderer(f, jsonValuesFor(mp))
	if err != nil {
		WriteError(w, err)
		return
	}
	if mp {
		mp, err := fetchMsgpack(b, res, rd)
		if err != nil {
			WriteError(w, errEncode(err))
			return
		}
		writeBody(w, http.StatusOK, api.MediaMsgpack, mp)
		return
	}
	appendFetchJSON(b, res, rd)
	writeBody(w, http.StatusOK, "application/json", b.Bytes())
}

// fetchMsgpack is the language-neutral msgpack form of an exclusive
// fetch: the JSON answer's maps, except that json and jsonb values are
// strings of their JSON text (rd renders with pgq.JSONAsText). b is
// scratch space.
func fetchMsgpack(b *bytes.Buffer, res *consumers.RecordBatch, rd *format.Renderer) ([]byte, error) {
	appendFetchJSON(b, res, rd)
	return jsonToMsgpack(b.Bytes())
}

// writeRecords answers a fetch in the records form: each record body
// spliced verbatim.
func writeRecords(w http.ResponseWriter, res *consumers.RecordBatch) {
	wf := wireFetch{NextOffset: uint64(res.NextOffset), Committed: uint64(res.Committed), LastOffset: uint64(res.LastOffset),
		LeaseExpires: res.LeaseExpires, Generation: res.Generation, Transactions: make([]wireTx, len(res.Records))}
	for i := range res.Records {
		wf.Transactions[i] = wireTx{Offset: uint64(res.Records[i].Offset), Body: res.Records[i].Body}
	}
	b := getBuf()
	defer putBuf(b)
	enc := msgpack.GetEncoder()
	enc.Reset(b)
	err := enc.Encode(&wf)
	msgpack.PutEncoder(enc)
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	writeBody(w, http.StatusOK, api.MediaRecords, b.Bytes())
}

// appendFetchJSON writes an exclusive fetch's JSON answer, each
// transaction as a `pgq journal dump` line (exactly so in the pgq format)
// rendered by rd.
func appendFetchJSON(b *bytes.Buffer, res *consumers.RecordBatch, rd *format.Renderer) {
	buf := make([]byte, 0, 4096)
	b.WriteString(`{"transactions":[`)
	for i := range res.Records {
		if i > 0 {
			b.WriteByte(',')
		}
		buf = rd.AppendTransaction(buf[:0], res.Records[i].Tx)
		b.Write(buf)
	}
	b.WriteString(`],"next_offset":`)
	b.WriteString(strconv.FormatUint(uint64(res.NextOffset), 10))
	b.WriteString(`,"committed_offset":`)
	b.WriteString(strconv.FormatUint(uint64(res.Committed), 10))
	b.WriteString(`,"last_offset":`)
	b.WriteString(strconv.FormatUint(uint64(res.LastOffset), 10))
	b.WriteString(`,"lease_expires":"`)
	b.WriteString(res.LeaseExpires.UTC().Format(time.RFC3339Nano))
	b.WriteString(`","generation":`)
	b.WriteString(strconv.FormatUint(res.Generation, 10))
	b.WriteString("}\n")
}

func (g *groups) commit(w http.ResponseWriter, r *http.Request) {
	var req api.CommitBody
	if !decoded(w, r, &req) {
		return
	}
	res, err := g.m.CommitGen(r.Context(), r.PathValue("name"), req.Member, req.Offset, time.Duration(req.LeaseTTL), req.Generation)
	if err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusOK, res)
}

func (g *groups) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.MemberBody
	if !decoded(w, r, &req) {
		return
	}
	exp, err := g.m.Heartbeat(r.Context(), r.PathValue("name"), req.Member, time.Duration(req.LeaseTTL))
	if err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusOK, api.LeaseResponse{LeaseExpires: exp})
}

func (g *groups) release(w http.ResponseWriter, r *http.Request) {
	var req api.MemberBody
	if !decoded(w, r, &req) {
		return
	}
	if err := g.m.Release(r.Context(), r.PathValue("name"), req.Member); err != nil {
		WriteError(w, err)
		return
	}
	reply(w, r, http.StatusOK, api.OKResponse{OK: true})
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
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
	rn, err := parseRendering(req)
	if err != nil {
		WriteError(w, err)
		return
	}
	records := strings.Contains(r.Header.Get("Accept"), api.MediaRecords)
	if rn.f != format.PGQ && records {
		WriteError(w, api.Errorf(api.ErrBadRequest, "format %q is for the JSON and msgpack answers, not %s", req.Format, api.MediaRecords))
		return
	}
	if g.m.IsShared(r.PathValue("name")) {
		g.fetchShared(w, r, req, rn)
		return
	}
	mp := wantsMsgpack(r)
	var rd *format.Renderer
	if !records {
		if rd, err = g.renderer(rn, jsonValuesFor(mp)); err != nil {
			WriteError(w, err)
			return
		}
	}
	s, err := g.m.FetchStream(r.Context(), r.PathValue("name"), consumers.FetchRequest{
		Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: time.Duration(req.Wait),
		FailFast: req.FailFast, LeaseTTL: time.Duration(req.LeaseTTL), Session: req.Session, From: req.From,
	}, !records)
	if err != nil {
		WriteError(w, err)
		return
	}
	ct, form := "application/json", formJSON
	switch {
	case records:
		ct, form = api.MediaRecords, formRecords
	case mp:
		ct, form = api.MediaMsgpack, formMsgpack
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	a := fetchAnswer{NextOffset: s.NextOffset, Committed: s.Committed, LastOffset: s.LastOffset, LeaseExpires: s.LeaseExpires,
		Generation: s.Generation, Len: s.Len, Records: s.Records()}
	if err := writeFetch(w, a, form, rd); err != nil {
		// The 200 is sent: only a body cut short (the connection closed
		// before the end of its chunked encoding) tells the client the
		// answer is incomplete. consumers logged and counted a read
		// failure; a write failure is the client's connection.
		panic(http.ErrAbortHandler)
	}
}

// fetchForm is the encoding of an exclusive fetch's answer.
type fetchForm int

const (
	formJSON    fetchForm = iota // each transaction a `pgq journal dump` line
	formMsgpack                  // the msgpack form of that JSON
	formRecords                  // api.MediaRecords: wireFetch
)

// fetchAnswer is what writeFetch writes: consumers.RecordStream's fields
// and its records.
type fetchAnswer struct {
	NextOffset, Committed, LastOffset pgq.Offset
	LeaseExpires                      time.Time
	Generation                        uint64
	Len                               int
	Records                           iter.Seq2[consumers.FetchedRecord, error]
}

// writeFetch writes an exclusive fetch's answer as s reads its records,
// one write per record, so that it holds one record at a time: the
// records form is wireFetch's msgpack with the five fields before the
// transactions (then the transactions' count, s.Len), the JSON form appendFetchJSON's
// text, the msgpack form the msgpack of that JSON (a map of the same six
// keys, each transaction converted alone). rd renders the JSON and
// msgpack forms. An error means the body is incomplete.
func writeFetch(w io.Writer, s fetchAnswer, form fetchForm, rd *format.Renderer) error {
	b := getBuf()
	defer putBuf(b)
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(b)
	var err error
	switch form {
	case formJSON:
		b.WriteString(`{"transactions":[`)
	case formRecords:
		// The five fields first: a client reading the answer as it
		// arrives knows the lease generation and the cursor before the
		// first transaction (the Go client's FetchStream).
		err = errors.Join(enc.EncodeMapLen(6), encodeFetchTrailer(enc, s, true), enc.EncodeString("transactions"), enc.EncodeArrayLen(s.Len))
	default:
		err = errors.Join(enc.EncodeMapLen(6), enc.EncodeString("transactions"), enc.EncodeArrayLen(s.Len))
	}
	buf := make([]byte, 0, 4096)
	i := 0
	for rec, rerr := range s.Records {
		if err = errors.Join(err, rerr); err != nil {
			return err
		}
		switch form {
		case formRecords:
			err = enc.Encode(&wireTx{Offset: uint64(rec.Offset), Body: rec.Body})
		case formJSON:
			if i > 0 {
				b.WriteByte(',')
			}
			buf = rd.AppendTransaction(buf[:0], rec.Tx)
			b.Write(buf)
		case formMsgpack:
			buf = rd.AppendTransaction(buf[:0], rec.Tx)
			var m []byte
			if m, err = jsonToMsgpack(buf); err == nil {
				b.Write(m)
			}
		}
		i++
		if err == nil {
			_, err = w.Write(b.Bytes())
		}
		if err != nil {
			return err
		}
		b.Reset()
	}
	if i != s.Len {
		return fmt.Errorf("httpapi: fetch answer: %d records of %d", i, s.Len)
	}
	switch form {
	case formJSON:
		appendFetchTrailer(b, s)
	case formMsgpack:
		err = encodeFetchTrailer(enc, s, false)
	}
	if err == nil {
		_, err = w.Write(b.Bytes())
	}
	return err
}

// encodeFetchTrailer encodes the five fields after the transactions:
// as wireFetch's fields (records) or as jsonToMsgpack converts them from
// the JSON (integers as int64, the lease's end as its RFC 3339 text).
func encodeFetchTrailer(enc *msgpack.Encoder, s fetchAnswer, records bool) error {
	var lease any = s.LeaseExpires
	num := func(v uint64) any { return v }
	if !records {
		lease = s.LeaseExpires.UTC().Format(time.RFC3339Nano)
		num = func(v uint64) any { return numbersOf(json.Number(strconv.FormatUint(v, 10))) }
	}
	for _, kv := range []struct {
		k string
		v any
	}{
		{"next_offset", num(uint64(s.NextOffset))}, {"committed_offset", num(uint64(s.Committed))},
		{"last_offset", num(uint64(s.LastOffset))}, {"lease_expires", lease}, {"generation", num(s.Generation)},
	} {
		if err := errors.Join(enc.EncodeString(kv.k), enc.Encode(kv.v)); err != nil {
			return err
		}
	}
	return nil
}

// appendFetchTrailer writes the JSON answer's fields after the
// transactions.
func appendFetchTrailer(b *bytes.Buffer, s fetchAnswer) {
	b.WriteString(`],"next_offset":`)
	b.WriteString(strconv.FormatUint(uint64(s.NextOffset), 10))
	b.WriteString(`,"committed_offset":`)
	b.WriteString(strconv.FormatUint(uint64(s.Committed), 10))
	b.WriteString(`,"last_offset":`)
	b.WriteString(strconv.FormatUint(uint64(s.LastOffset), 10))
	b.WriteString(`,"lease_expires":"`)
	b.WriteString(s.LeaseExpires.UTC().Format(time.RFC3339Nano))
	b.WriteString(`","generation":`)
	b.WriteString(strconv.FormatUint(s.Generation, 10))
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

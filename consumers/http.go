package consumers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// MaxRequestBytes is the largest request body the API reads.
const MaxRequestBytes = 1 << 20

// MediaMsgpack is the media type of msgpack responses.
const MediaMsgpack = api.MediaMsgpack

// Duration is a time.Duration written as a Go duration string (api.Duration).
type Duration = api.Duration

// Request bodies of the HTTP API (package api).
type (
	ResetBody  = api.ResetBody
	FetchBody  = api.FetchBody
	CommitBody = api.CommitBody
	MemberBody = api.MemberBody
)

// Response bodies that are not Manager types.
type (
	listResponse  = api.ListResponse
	leaseResponse = api.LeaseResponse
	okResponse    = api.OKResponse
	errorBody     = api.ErrorBody
	// wireFetch is the msgpack form of a fetch response.
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

// Handler serves the consumer-group API of a Manager.
type Handler struct {
	m   *Manager
	log *slog.Logger
}

// NewHandler returns the API handler; Register mounts it.
func NewHandler(m *Manager) *Handler { return &Handler{m: m, log: m.o.Logger} }

// Register adds the /v1/groups routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/groups", h.create)
	mux.HandleFunc("GET /v1/groups", h.list)
	mux.HandleFunc("GET /v1/groups/{name}", h.get)
	mux.HandleFunc("DELETE /v1/groups/{name}", h.delete)
	mux.HandleFunc("POST /v1/groups/{name}/reset", h.reset)
	mux.HandleFunc("POST /v1/groups/{name}/fetch", h.fetch)
	mux.HandleFunc("POST /v1/groups/{name}/commit", h.commit)
	mux.HandleFunc("POST /v1/groups/{name}/heartbeat", h.heartbeat)
	mux.HandleFunc("POST /v1/groups/{name}/release", h.release)
	mux.HandleFunc("POST /v1/groups/{name}/ack", h.settle(ackAck))
	mux.HandleFunc("POST /v1/groups/{name}/nak", h.settle(ackNak))
	mux.HandleFunc("POST /v1/groups/{name}/term", h.settle(ackTerm))
	mux.HandleFunc("POST /v1/groups/{name}/progress", h.settle(ackProgress))
	mux.HandleFunc("GET /v1/groups/{name}/parked", h.parked)
	mux.HandleFunc("POST /v1/groups/{name}/parked/requeue", h.parkedAction(true))
	mux.HandleFunc("POST /v1/groups/{name}/parked/drop", h.parkedAction(false))
}

// JSONErrors wraps a ServeMux so that its own replies for an unknown route
// (404) and a known route with another method (405, with Allow) are JSON
// errors like every other: not_found and method_not_allowed.
func JSONErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r}, r)
	})
}

// muxErrorWriter replaces the mux's plain-text 404 and 405 bodies.
type muxErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool // the mux's body is being dropped
}

func (w *muxErrorWriter) WriteHeader(code int) {
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.replaced = true
		err := errf(ErrNotFound, "no route %s %s", w.r.Method, w.r.URL.Path)
		if code == http.StatusMethodNotAllowed {
			err = errf(ErrMethod, "%s %s: allowed: %s", w.r.Method, w.r.URL.Path, w.Header().Get("Allow"))
		}
		WriteError(w.ResponseWriter, err)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *muxErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *muxErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// internalErrors numbers the internal errors logged by WriteError.
var internalErrors atomic.Uint64

// WriteError writes err as {"error":{"code","message"}} with its status.
func WriteError(w http.ResponseWriter, err error) {
	code, status := classify(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code, status = CodeUnavailable, http.StatusServiceUnavailable
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		// Internal detail (paths, storage errors) stays in pgq's log; the
		// client gets an id to find it there.
		id := internalErrors.Add(1)
		slog.Error("api: internal error", "error_id", id, "error", err)
		msg = fmt.Sprintf("internal error (pgq logged it with error_id=%d)", id)
	}
	b, _ := json.Marshal(errorBody{Error: Error{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func wantsMsgpack(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), MediaMsgpack)
}

// bufPool holds response buffers; buffers over maxPooledBuf are dropped.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuf = 8 << 20

func getBuf() *bytes.Buffer {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuf {
		bufPool.Put(b)
	}
}

// writeBody writes a complete response with its Content-Length, so that a
// client can read it into one buffer of the right size.
func writeBody(w http.ResponseWriter, status int, ct string, b []byte) {
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (h *Handler) reply(w http.ResponseWriter, r *http.Request, status int, v any) {
	buf := getBuf()
	defer putBuf(buf)
	var (
		err error
		ct  string
	)
	if wantsMsgpack(r) {
		enc := msgpack.GetEncoder()
		enc.Reset(buf)
		err = enc.Encode(v)
		msgpack.PutEncoder(enc)
		ct = MediaMsgpack
	} else {
		var b []byte
		b, err = json.Marshal(v)
		buf.Write(b)
		buf.WriteByte('\n')
		ct = "application/json"
	}
	if err != nil {
		WriteError(w, fmt.Errorf("%w: encode response: %v", ErrInternal, err))
		return
	}
	writeBody(w, status, ct, buf.Bytes())
}

// DecodeRequest reads a JSON body strictly: at most MaxRequestBytes, no
// unknown fields, exactly one value. Its errors are ErrBadRequest or
// ErrTooLarge, for WriteError. The backfill API shares it.
func DecodeRequest(w http.ResponseWriter, r *http.Request, dst any) error {
	// Bodies are JSON whatever they are labelled: curl -d sends
	// application/x-www-form-urlencoded. Only types that cannot be JSON are
	// refused.
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "multipart/") || strings.HasPrefix(ct, MediaMsgpack) {
		return errf(ErrBadRequest, "Content-Type %q: request bodies are JSON", ct)
	}
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return errf(ErrTooLarge, "request body over %d bytes", MaxRequestBytes)
		case errors.Is(err, io.EOF):
			return errf(ErrBadRequest, "empty request body: want a JSON object")
		}
		return errf(ErrBadRequest, "invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errf(ErrTooLarge, "request body over %d bytes", MaxRequestBytes)
		}
		return errf(ErrBadRequest, "invalid JSON body: trailing data after the object")
	}
	return nil
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var req CreateRequest
	if err := DecodeRequest(w, r, &req); err != nil {
		WriteError(w, err)
		return
	}
	gi, err := h.m.Create(r.Context(), req)
	if err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusCreated, gi)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	h.reply(w, r, http.StatusOK, listResponse{Groups: h.m.List(r.Context())})
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	gi, err := h.m.Info(r.Context(), r.PathValue("name"))
	if err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusOK, gi)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	if err := h.m.Delete(r.Context(), r.PathValue("name")); err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusOK, okResponse{OK: true})
}

func (h *Handler) reset(w http.ResponseWriter, r *http.Request) {
	var req ResetBody
	if err := DecodeRequest(w, r, &req); err != nil {
		WriteError(w, err)
		return
	}
	if req.To == "" {
		WriteError(w, errf(ErrBadPosition, `"to" is required`))
		return
	}
	res, err := h.m.Reset(r.Context(), r.PathValue("name"), req.To, req.DryRun)
	if err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusOK, res)
}

func (h *Handler) fetch(w http.ResponseWriter, r *http.Request) {
	var req FetchBody
	if err := DecodeRequest(w, r, &req); err != nil {
		WriteError(w, err)
		return
	}
	if g := h.m.lookup(r.PathValue("name")); g != nil && g.exclusive() != nil {
		h.fetchShared(w, r, req)
		return
	}
	records := strings.Contains(r.Header.Get("Accept"), api.MediaRecords)
	res, err := h.m.fetch(r.Context(), r.PathValue("name"), FetchRequest{
		Member: req.Member, Max: req.Max, MaxBytes: req.MaxBytes, Wait: time.Duration(req.Wait),
		FailFast: req.FailFast, LeaseTTL: time.Duration(req.LeaseTTL), Session: req.Session, From: req.From,
	}, !records)
	if err != nil {
		WriteError(w, err)
		return
	}
	if records {
		wf := wireFetch{NextOffset: uint64(res.next), Committed: uint64(res.committed), LastOffset: uint64(res.last), LeaseExpires: res.leaseExpires, Generation: res.gen, Transactions: make([]wireTx, len(res.recs))}
		for i := range res.recs {
			wf.Transactions[i] = wireTx{Offset: uint64(res.recs[i].off), Body: res.recs[i].body()}
		}
		b := getBuf()
		defer putBuf(b)
		enc := msgpack.GetEncoder()
		enc.Reset(b)
		err := enc.Encode(&wf)
		msgpack.PutEncoder(enc)
		if err != nil {
			WriteError(w, fmt.Errorf("%w: encode response: %v", ErrInternal, err))
			return
		}
		writeBody(w, http.StatusOK, api.MediaRecords, b.Bytes())
		return
	}
	// JSON: each transaction exactly as a `pgq journal dump` line.
	b := getBuf()
	defer putBuf(b)
	buf := make([]byte, 0, 4096)
	b.WriteString(`{"transactions":[`)
	for i := range res.recs {
		if i > 0 {
			b.WriteByte(',')
		}
		buf = pgq.AppendJSON(buf[:0], res.recs[i].tx)
		b.Write(buf)
	}
	b.WriteString(`],"next_offset":`)
	b.WriteString(strconv.FormatUint(uint64(res.next), 10))
	b.WriteString(`,"committed_offset":`)
	b.WriteString(strconv.FormatUint(uint64(res.committed), 10))
	b.WriteString(`,"last_offset":`)
	b.WriteString(strconv.FormatUint(uint64(res.last), 10))
	b.WriteString(`,"lease_expires":"`)
	b.WriteString(res.leaseExpires.UTC().Format(time.RFC3339Nano))
	b.WriteString(`","generation":`)
	b.WriteString(strconv.FormatUint(res.gen, 10))
	b.WriteString("}\n")
	if wantsMsgpack(r) {
		// The language-neutral msgpack form: the JSON response's maps.
		mp, err := jsonToMsgpack(b.Bytes())
		if err != nil {
			WriteError(w, fmt.Errorf("%w: encode response: %v", ErrInternal, err))
			return
		}
		writeBody(w, http.StatusOK, MediaMsgpack, mp)
		return
	}
	writeBody(w, http.StatusOK, "application/json", b.Bytes())
}

// jsonToMsgpack re-encodes a JSON document as msgpack: objects as maps,
// integers as integers, other numbers as float64.
func jsonToMsgpack(js []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return msgpack.Marshal(numbersOf(v))
}

func numbersOf(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbersOf(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersOf(e)
		}
	}
	return v
}

func (h *Handler) commit(w http.ResponseWriter, r *http.Request) {
	var req CommitBody
	if err := DecodeRequest(w, r, &req); err != nil {
		WriteError(w, err)
		return
	}
	res, err := h.m.CommitGen(r.Context(), r.PathValue("name"), req.Member, req.Offset, time.Duration(req.LeaseTTL), req.Generation)
	if err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusOK, res)
}

func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req MemberBody
	if err := DecodeRequest(w, r, &req); err != nil {
		WriteError(w, err)
		return
	}
	exp, err := h.m.Heartbeat(r.Context(), r.PathValue("name"), req.Member, time.Duration(req.LeaseTTL))
	if err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusOK, leaseResponse{LeaseExpires: exp})
}

func (h *Handler) release(w http.ResponseWriter, r *http.Request) {
	var req MemberBody
	if err := DecodeRequest(w, r, &req); err != nil {
		WriteError(w, err)
		return
	}
	if err := h.m.Release(r.Context(), r.PathValue("name"), req.Member); err != nil {
		WriteError(w, err)
		return
	}
	h.reply(w, r, http.StatusOK, okResponse{OK: true})
}

// RequireBearer wraps next so that every request except GET /healthz needs
// "Authorization: Bearer <token>" (compared in constant time). An empty
// token disables the check.
func RequireBearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pgq"`)
			WriteError(w, errf(ErrUnauthorized, "missing or wrong bearer token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

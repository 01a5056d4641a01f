package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq/api"
)

// internalErrors numbers the internal errors logged by WriteError.
var internalErrors atomic.Uint64

// WriteError writes err as {"error":{"code","message"}} with the status of
// its code (api.Classify); the message is err's own text. An internal
// error names an id under which pgq logged the error (slog.Default), not
// its text: paths and storage errors stay in pgq's log. (journal_corrupt,
// also a 500, keeps its message: the offset, without paths.)
func WriteError(w http.ResponseWriter, err error) {
	code, status := api.Classify(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code, status = api.CodeUnavailable, http.StatusServiceUnavailable
	}
	msg := err.Error()
	if code == api.CodeInternal {
		id := internalErrors.Add(1)
		slog.Error("api: internal error", "error_id", id, "error", err)
		msg = fmt.Sprintf("internal error (pgq logged it with error_id=%d)", id)
	}
	b, _ := json.Marshal(api.ErrorBody{Error: api.Error{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// decodeRequest reads a JSON body strictly: labelled application/json,
// at most MaxRequestBytes, then decoded by decodeStrict (strict.go): one
// object whose keys are exactly the documented ones, none twice, no
// null the document does not allow, required keys present, durations 0
// or at least api.MinDuration. Its errors are api.ErrMediaType,
// api.ErrBadRequest or api.ErrTooLarge.
func decodeRequest(w http.ResponseWriter, r *http.Request, dst any) error {
	// Only application/json: a web page can send text/plain, a form or
	// multipart cross-site without a CORS preflight, never
	// application/json (the Origin check is the other half).
	// An empty body is malformed whatever its label (bad_request below).
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); r.ContentLength != 0 && (err != nil || mt != "application/json") {
		return api.Errorf(api.ErrMediaType, "Content-Type %q: request bodies are application/json", r.Header.Get("Content-Type"))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return api.Errorf(api.ErrTooLarge, "request body over %d bytes", MaxRequestBytes)
	case err != nil:
		return api.Errorf(api.ErrBadRequest, "reading the request body: %v", err)
	}
	return decodeStrict(data, dst)
}

// decoded reads the request's JSON body into dst; on failure it answers
// the error and reports false.
func decoded(w http.ResponseWriter, r *http.Request, dst any) bool {
	if err := decodeRequest(w, r, dst); err != nil {
		WriteError(w, err)
		return false
	}
	return true
}

func wantsMsgpack(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), api.MediaMsgpack)
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

// reply writes v as JSON, or as msgpack when the request asks for it (v's
// msgpack encoding: the same field names).
func reply(w http.ResponseWriter, r *http.Request, status int, v any) {
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
		ct = api.MediaMsgpack
	} else {
		var b []byte
		b, err = json.Marshal(v)
		buf.Write(b)
		buf.WriteByte('\n')
		ct = "application/json"
	}
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	writeBody(w, status, ct, buf.Bytes())
}

// replyJSONShaped writes v as JSON, or as the msgpack form of that JSON
// (so that embedded raw JSON, a shared group's changes, becomes maps, not
// strings, and types without msgpack tags keep their JSON names). Changes
// in v meant for msgpack must have been rendered with format.JSONAsText: the
// conversion parses numbers.
func replyJSONShaped(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, errEncode(err))
		return
	}
	b = append(b, '\n')
	if wantsMsgpack(r) || r.Header.Get("Accept") == api.MediaRecords {
		mp, err := jsonToMsgpack(b)
		if err != nil {
			WriteError(w, errEncode(err))
			return
		}
		writeBody(w, status, api.MediaMsgpack, mp)
		return
	}
	writeBody(w, status, "application/json", b)
}

// jsonToMsgpack re-encodes a JSON document as msgpack: objects as maps,
// strings byte for byte, integers as integers, other numbers as float64.
// It is for pgq's own answers, whose only other numbers are counters and
// rates: json and jsonb values reach it as strings (format.JSONAsText), so
// their numbers and duplicate keys are never parsed.
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
	case map[string]any: // a decoded JSON object: open-ended
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

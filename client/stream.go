package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/msgp"
	"github.com/pgq-dev/pgq/record"
)

// FetchStream is an exclusive fetch's answer read as it arrives (see
// Client.FetchStream). Its fields (Result) are known before the first
// transaction; Next decodes one transaction (journal record: a whole
// transaction, or one part of a multi-part one) at a time. The answer is
// complete only when Next returned io.EOF: a body cut short (pgq aborts
// an answer it cannot finish) is an error from Next, never a short
// answer. A FetchStream is used by one goroutine.
//
// A server that writes the fields after the transactions (pgq before
// streamed answers) gets its answer read whole when the stream opens.
type FetchStream struct {
	group string
	body  io.ReadCloser
	br    *bufio.Reader
	res   FetchResult // the answer's fields; Transactions stays nil
	n     int         // transactions in the answer
	left  int         // transactions not read from the body yet
	// held is an answer whose fields came after its transactions, read
	// whole (nil otherwise); Next returns from it.
	held  []*pgq.Transaction
	whole bool
	bd    *record.BodyDecoder
	val   []byte // the value being decoded, reused
	err   error  // the first failure, or io.EOF once the answer was read to its end
}

// streamBuffer is the read buffer of a FetchStream.
const streamBuffer = 64 << 10

// newFetchStream reads body's map header and the fields before the
// transactions (all of the answer when the fields follow them).
func newFetchStream(group string, body io.ReadCloser) (*FetchStream, error) {
	s := &FetchStream{group: group, body: body, br: bufio.NewReaderSize(body, streamBuffer), bd: bodyDecoders.Get().(*record.BodyDecoder)}
	if err := s.head(); err != nil {
		s.fail(err)
		return nil, s.err
	}
	return s, nil
}

// head reads up to the transactions' array header.
func (s *FetchStream) head() error {
	pairs, err := msgp.ReadMapLen(s.br, errWire)
	if err != nil {
		return noEOF(err)
	}
	for ; pairs > 0; pairs-- {
		k, err := s.readKey()
		if err != nil {
			return err
		}
		if string(k) != "transactions" {
			if err := s.readField(k); err != nil {
				return err
			}
			continue
		}
		if s.n, err = msgp.ReadArrayLen(s.br, errWire); err != nil {
			return fmt.Errorf("transactions: %w", noEOF(err))
		}
		s.left = s.n
		if pairs == 1 {
			// The last key: the fields are known, the transactions are
			// read as they come.
			if s.left == 0 {
				return s.end()
			}
			return nil
		}
		return s.readWhole(pairs - 1)
	}
	return s.end()
}

// readWhole reads an answer whose transactions come before more fields
// (pairs of them): the transactions are held, then the fields read.
func (s *FetchStream) readWhole(pairs int) error {
	s.whole = true
	s.held = make([]*pgq.Transaction, 0, s.n)
	for s.left > 0 {
		tx, err := s.readTx()
		if err != nil {
			return err
		}
		s.held = append(s.held, tx)
	}
	for ; pairs > 0; pairs-- {
		k, err := s.readKey()
		if err != nil {
			return err
		}
		if err := s.readField(k); err != nil {
			return err
		}
	}
	return s.end()
}

// readKey reads a map key (in s.val).
func (s *FetchStream) readKey() ([]byte, error) {
	v, err := s.readValue()
	if err != nil {
		return nil, err
	}
	r := &msgp.Reader{B: v, Wrap: errWire}
	k := r.Bytes()
	return k, r.Err
}

// readValue reads the next value whole into s.val.
func (s *FetchStream) readValue() ([]byte, error) {
	var err error
	s.val, err = msgp.ReadValue(s.br, s.val[:0], errWire)
	return s.val, noEOF(err)
}

// readField reads the value of a field other than transactions (key may
// be in s.val: it is copied first).
func (s *FetchStream) readField(key []byte) error {
	k := string(key)
	v, err := s.readValue()
	if err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	if err := s.res.field(&msgp.Reader{B: v, Wrap: errWire}, k); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	return nil
}

// readTx reads the next transaction from the body.
func (s *FetchStream) readTx() (*pgq.Transaction, error) {
	i := s.n - s.left
	v, err := s.readValue()
	if err != nil {
		return nil, fmt.Errorf("transaction %d of %d: %w", i, s.n, err)
	}
	tx := new(pgq.Transaction)
	if err := decodeTx(&msgp.Reader{B: v, Wrap: errWire}, i, s.bd, tx); err != nil {
		return nil, err
	}
	s.left--
	return tx, nil
}

// end checks that the body ends after the map (a doubled or garbled
// answer must not pass) and that its transport ended cleanly (a chunked
// body cut before its last chunk is io.ErrUnexpectedEOF), then releases
// the body.
func (s *FetchStream) end() error {
	if _, err := s.br.ReadByte(); err == nil {
		n := 1 + s.br.Buffered()
		return fmt.Errorf("%w: %d or more trailing bytes", errWire, n)
	} else if err != io.EOF {
		return err
	}
	s.release()
	s.err = io.EOF
	return nil
}

// fail records the first failure, wrapped with what failed, and releases
// the body.
func (s *FetchStream) fail(err error) {
	if s.err != nil && s.err != io.EOF {
		return
	}
	what := "read response"
	if errors.Is(err, errWire) {
		what = "decode response"
	}
	s.err = fmt.Errorf("client: fetch %q: %s: %w", s.group, what, err)
	s.release()
}

// release closes the body and gives back the decoder.
func (s *FetchStream) release() {
	if s.body != nil {
		_ = s.body.Close()
		s.body = nil
	}
	if s.bd != nil {
		bodyDecoders.Put(s.bd)
		s.bd = nil
	}
}

// Result returns the answer's fields (NextOffset, CommittedOffset,
// LastOffset, LeaseExpires, Generation); its Transactions is nil.
func (s *FetchStream) Result() FetchResult { return s.res }

// Len is the number of transactions in the answer.
func (s *FetchStream) Len() int { return s.n }

// Remaining is the number of transactions Next has not returned yet.
func (s *FetchStream) Remaining() int {
	if s.whole {
		return len(s.held)
	}
	return s.left
}

// Next returns the answer's next transaction. After the last one it
// returns io.EOF, once the answer was read to its end; any other error
// means the answer is incomplete (cut short, malformed, or ctx ended) and
// Next returns it from then on.
func (s *FetchStream) Next() (*pgq.Transaction, error) {
	if s.whole && s.err == io.EOF && len(s.held) > 0 {
		tx := s.held[0]
		s.held[0] = nil
		s.held = s.held[1:]
		return tx, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	tx, err := s.readTx()
	if err == nil && s.left == 0 {
		// The last transaction is returned only once the answer is
		// known whole.
		err = s.end()
	}
	if err != nil {
		s.fail(err)
		return nil, s.err
	}
	return tx, nil
}

// All iterates over the transactions Next returns; a failure is yielded
// last, with a nil transaction.
func (s *FetchStream) All() iter.Seq2[*pgq.Transaction, error] {
	return func(yield func(*pgq.Transaction, error) bool) {
		for {
			tx, err := s.Next()
			if err == io.EOF {
				return
			}
			if !yield(tx, err) || err != nil {
				return
			}
		}
	}
}

// Close releases the answer; what Next has not returned is dropped (and
// delivered again by a later fetch of the member, from its cursor or
// From). It is safe to call more than once.
func (s *FetchStream) Close() error {
	s.release()
	if s.err == nil {
		s.err = errors.New("client: fetch: answer closed")
	}
	return nil
}

// collect reads the rest of the answer into a FetchResult and closes the
// stream.
func (s *FetchStream) collect() (*FetchResult, error) {
	defer s.Close()
	res := s.res
	if n := s.Remaining(); n > 0 {
		res.Transactions = make([]*pgq.Transaction, 0, n)
	}
	for tx, err := range s.All() {
		if err != nil {
			return nil, err
		}
		res.Transactions = append(res.Transactions, tx)
	}
	return &res, nil
}

// noEOF turns an end of the body where more must come into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

package opterr

import (
	"errors"
	"fmt"
	"strings"
)

// Option names a setting by its Go name: the package, the options type
// and the field, "server.Options.DataDir", "ingest.Options.AcceptGap".
// A value ("ingest.Options.SlotLifecycle temporary") stays in Text.
type Option string

// Placeholders of Text, replaced in order by the options' names.
const (
	Name    = "{}"
	NameEnv = "{+env}"
)

// Error is an error that names options: what is wrong and, often, which
// option mends it.
type Error struct {
	// Err is the sentinel the error belongs to (ingest.ErrConfig,
	// ingest.ErrSlotMissing, …); nil: none.
	Err error
	// Text is the message with one placeholder per option (and fmt
	// verbs for the values New was given).
	Text string
	// Options are the options Text names, in order.
	Options []Option
	args    []any
}

// New returns an Error of class err (nil: none) whose text names opts:
// text holds one placeholder ("{}" or "{+env}") per option, and fmt
// verbs filled by args (after the options are named, so that a value
// never reads as a placeholder).
func New(err error, text string, opts []Option, args ...any) *Error {
	return &Error{Err: err, Text: text, Options: opts, args: args}
}

// Of is shorthand for a list of options.
func Of(opts ...Option) []Option { return opts }

// Error says it in Go terms: "configuration error: a data directory is
// required (server.Options.DataDir)".
func (e *Error) Error() string {
	msg := e.Render(func(o Option, _ bool) string { return string(o) })
	if e.Err == nil {
		return msg
	}
	return e.Err.Error() + ": " + msg
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Render is the message with each placeholder replaced by name(option,
// env), where env is true for a "{+env}" placeholder. An option without
// a placeholder is left out; a placeholder without an option stays.
func (e *Error) Render(name func(o Option, env bool) string) string {
	var b strings.Builder
	rest := e.Text
	for _, o := range e.Options {
		i, env := strings.Index(rest, Name), false
		if j := strings.Index(rest, NameEnv); j >= 0 && (i < 0 || j < i) {
			i, env = j, true
		}
		if i < 0 {
			break
		}
		b.WriteString(rest[:i])
		b.WriteString(name(o, env))
		if env {
			rest = rest[i+len(NameEnv):]
		} else {
			rest = rest[i+len(Name):]
		}
	}
	b.WriteString(rest)
	if len(e.args) == 0 {
		return b.String()
	}
	return fmt.Sprintf(b.String(), e.args...)
}

// Find returns the first *Error in err's chain.
func Find(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

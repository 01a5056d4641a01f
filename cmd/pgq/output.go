package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// stdout is where commands print their output. Tests point it at a
// buffer (this package's tests do not run in parallel).
var stdout io.Writer = os.Stdout

// OutputFlag chooses how a command prints what it shows: the API's JSON
// document on one line, or a table for people.
type OutputFlag struct {
	Output string `short:"o" enum:"auto,json,table" default:"auto" env:"PGQ_OUTPUT" help:"Output format: table, or json (the HTTP API's document, one line); auto: table on a terminal, JSON otherwise."`
}

// json reports whether to print JSON: asked for, or stdout is not a
// terminal (a pipe, a file: a program reads it).
func (o OutputFlag) json() bool {
	switch o.Output {
	case "json":
		return true
	case "table":
		return false
	}
	f, ok := stdout.(*os.File)
	return !ok || !isTerminal(f)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// show prints doc as one line of JSON, or renders the table.
func (o OutputFlag) show(doc any, table func(w io.Writer) error) error {
	if o.json() {
		return printJSON(doc)
	}
	return table(stdout)
}

// showFields prints doc as JSON, or a heading line (when not empty) and
// doc's fields as a FIELD/VALUE table.
func (o OutputFlag) showFields(heading string, doc any) error {
	return o.show(doc, func(w io.Writer) error {
		if heading != "" {
			if _, err := fmt.Fprintln(w, heading); err != nil {
				return err
			}
		}
		return fields(w, doc)
	})
}

// printJSON prints v as one line of JSON.
func printJSON(v any) error {
	return json.NewEncoder(stdout).Encode(v)
}

// table prints rows under a header (none when nil), aligned.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields prints v's JSON fields as a FIELD/VALUE table in the document's
// order: nested objects flattened to dotted names (lag.records), lists of
// plain values joined by commas, null and empty values as "-". A cell
// never holds JSON.
func fields(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	doc, err := parse(dec)
	if err != nil {
		return fmt.Errorf("render %T: %w", v, err)
	}
	var rows [][]string
	flatten(doc, "", &rows)
	return table(w, []string{"FIELD", "VALUE"}, rows)
}

// object is a JSON object with its keys in the document's order.
type object struct {
	keys []string
	vals []any
}

// parse reads one JSON value from dec: an *object, a []any, or a scalar
// token.
func parse(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := &object{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parse(dec)
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			o.keys, o.vals = append(o.keys, k), append(o.vals, v)
		}
		_, err = dec.Token() // '}'
		return o, err
	case json.Delim('['):
		l := []any{}
		for dec.More() {
			v, err := parse(dec)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err = dec.Token() // ']'
		return l, err
	}
	return tok, nil
}

// flatten appends v's rows under name.
func flatten(v any, name string, rows *[][]string) {
	join := func(k string) string {
		if name == "" {
			return k
		}
		return name + "." + k
	}
	switch x := v.(type) {
	case *object:
		for i, k := range x.keys {
			flatten(x.vals[i], join(k), rows)
		}
	case []any:
		items := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case *object, []any:
				// A list of objects: a row per field of each, by index.
				for i, e := range x {
					flatten(e, join(strconv.Itoa(i)), rows)
				}
				return
			}
			items = append(items, cell(e))
		}
		*rows = append(*rows, []string{name, orDash(strings.Join(items, ","))})
	default:
		*rows = append(*rows, []string{name, cell(x)})
	}
}

// cell renders a JSON scalar token.
func cell(t json.Token) string {
	switch x := t.(type) {
	case nil:
		return "-"
	case string:
		return orDash(x)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	}
	return fmt.Sprint(t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

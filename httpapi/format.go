package httpapi

import (
	"github.com/pgq-dev/pgq/format"
)

// renderer returns a renderer of format f for one answer, json values as
// jv says. Every change an answer carries as JSON (an exclusive fetch's
// transactions, a shared group's messages and parked list) is rendered
// by package format; consumers hands out changes.
func (g *groups) renderer(f format.Format, jv format.JSONValues) (*format.Renderer, error) {
	o := g.formats
	o.JSONValues, o.Now = jv, nil
	return format.New(f, o)
}

package httpapi

import (
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/format"
)

// rendering is what a fetch body asks of package format: the format and
// Debezium's value modes (which the other formats ignore).
type rendering struct {
	f        format.Format
	decimal  format.DecimalMode
	time     format.TimePrecisionMode
	interval format.IntervalMode
	hstore   format.HstoreMode
	txMeta   bool
	schemas  bool
}

// parseRendering reads the body's format and value modes; a bad one is
// bad_request naming its key.
func parseRendering(req api.FetchBody) (rendering, error) {
	var rn rendering
	var err error
	if rn.f, err = format.Parse(req.Format); err != nil {
		return rn, api.Errorf(api.ErrBadRequest, "format %q: want %s", req.Format, format.List())
	}
	if rn.decimal, err = format.ParseDecimalMode(req.DecimalHandlingMode); err != nil {
		return rn, api.Errorf(api.ErrBadRequest, "decimal_handling_mode: %v", err)
	}
	if rn.time, err = format.ParseTimePrecisionMode(req.TimePrecisionMode); err != nil {
		return rn, api.Errorf(api.ErrBadRequest, "time_precision_mode: %v", err)
	}
	if rn.interval, err = format.ParseIntervalMode(req.IntervalHandlingMode); err != nil {
		return rn, api.Errorf(api.ErrBadRequest, "interval_handling_mode: %v", err)
	}
	if rn.hstore, err = format.ParseHstoreMode(req.HstoreHandlingMode); err != nil {
		return rn, api.Errorf(api.ErrBadRequest, "hstore_handling_mode: %v", err)
	}
	rn.txMeta = req.ProvideTransactionMetadata
	rn.schemas = req.Schemas
	return rn, nil
}

// renderer returns a renderer of rn for one answer, json values as jv
// says. Every change an answer carries as JSON (an exclusive fetch's
// transactions, a shared group's messages and parked list) is rendered
// by package format; consumers hands out changes.
func (g *groups) renderer(rn rendering, jv format.JSONValues) (*format.Renderer, error) {
	o := g.formats
	o.JSONValues, o.Now = jv, nil
	o.Decimal, o.Time, o.Interval, o.Hstore = rn.decimal, rn.time, rn.interval, rn.hstore
	o.TransactionMetadata, o.Schemas = rn.txMeta, rn.schemas
	return format.New(rn.f, o)
}

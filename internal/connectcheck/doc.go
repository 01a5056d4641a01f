// Package connectcheck holds pgq's tests' Kafka Connect checker: Check
// (and Assert, which fails a test) tells whether a message is what Kafka
// Connect's JSON converter with schemas.enable=true reads
// (JsonConverter.toConnectData and convertToConnect): an object of
// exactly "schema" and "payload", the schema well formed (asJsonSchema's
// form), and the payload of that schema. The format package's tests and
// the bridges' end-to-end tests hold every Debezium event and key of the
// schema form (format.Options.Schemas, --schemas) to it.
//
// It is stricter than the converter where the converter loses data
// silently: an integer must be a JSON integer within its type's range
// (the converter takes intValue() of anything), a float a JSON number or
// one of Jackson's "NaN", "Infinity", "-Infinity", a boolean a JSON
// boolean, a string a JSON string (the converter reads null from a
// number), a payload field the schema does not name is an error (the
// converter drops it). Logical types: Connect's Decimal must be base64
// bytes of a non-empty two's complement unscaled value (BigInteger's
// constructor refuses zero bytes) with an integer scale parameter, and
// no more digits than connect.decimal.precision when given; Date is
// int32, Time int32, Timestamp int64. Debezium's semantic types are
// checked by their Connect types. A null key or value (a tombstone, no
// schema) is "null" and passes.
//
// Concurrency: Check and Assert keep no state; call them from any
// goroutine (Assert as testing.TB allows).
package connectcheck

package connectcheck

import "testing"

// TestCheckConnectRejects: the checker catches what a converter refuses
// or loses, so that it can fail.
func TestCheckConnectRejects(t *testing.T) {
	good := `{"schema":{"type":"struct","fields":[{"type":"int16","optional":false,"field":"a"},` +
		`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"3"},"field":"d"}],` +
		`"optional":false,"name":"k"},"payload":{"a":1,"d":"AQ=="}}`
	if err := Check([]byte(good)); err != nil {
		t.Fatalf("good message refused: %v", err)
	}
	for name, msg := range map[string]string{
		"no wrapper":        `{"a":1}`,
		"extra key":         `{"schema":null,"payload":null,"x":1}`,
		"int16 range":       `{"schema":{"type":"int16","optional":false},"payload":40000}`,
		"int as string":     `{"schema":{"type":"int32","optional":false},"payload":"1"}`,
		"fraction":          `{"schema":{"type":"int64","optional":false},"payload":1.5}`,
		"required null":     `{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"s"}],"optional":false},"payload":{}}`,
		"unknown field":     `{"schema":{"type":"struct","fields":[],"optional":false},"payload":{"x":1}}`,
		"bad base64":        `{"schema":{"type":"bytes","optional":false},"payload":"NaN"}`,
		"empty decimal":     `{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"0"}},"payload":""}`,
		"decimal precision": `{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"0","connect.decimal.precision":"2"}},"payload":"A+g="}`,
		"array item":        `{"schema":{"type":"array","items":{"type":"boolean","optional":true},"optional":false},"payload":[true,1]}`,
		"float string":      `{"schema":{"type":"float64","optional":false},"payload":"1.5"}`,
		"struct not object": `{"schema":{"type":"struct","fields":[],"optional":false},"payload":[]}`,
	} {
		if Check([]byte(msg)) == nil {
			t.Errorf("%s: accepted %s", name, msg)
		}
	}
}

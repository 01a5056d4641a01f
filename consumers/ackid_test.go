package consumers

import (
	"testing"
)

// Ack ids: the forms accepted and refused.
func TestParseAckID(t *testing.T) {
	for s, ok := range map[string]bool{"1.0.1": true, "1.0.1.ab": true, "12.3.4.z9": true,
		"": false, "1": false, "1.0": false, "0.0.1": false, "1.0.0": false, "1.-1.1": false, "1.0.1.": false, "1.0.1.a.b": false, "x.0.1": false} {
		id, d, epoch, err := parseAckID(s)
		if (err == nil) != ok {
			t.Fatalf("parseAckID(%q) = %v, %d, %q, %v", s, id, d, epoch, err)
		}
		if ok && formatAckID(id, d, epoch) != s {
			t.Fatalf("parseAckID(%q) does not format back: %v %d %q", s, id, d, epoch)
		}
	}
}

package format

import (
	"fmt"
	"strings"
	"testing"
)

// TestJavaHashMapOrder: the order javaHashMapOrder gives keys is the
// order OpenJDK 17's java.util.HashMap iterates them after they were
// put in the listed order (printed by a Java program putting each key
// with a value and joining keySet() with "|"): across resizes (30 keys:
// 16 → 32 → 64 buckets), for keys whose hashes collide ("Aa", "BB") and
// for keys outside ASCII and the BMP (String.hashCode counts UTF-16
// code units). Among them the orders of Debezium's hstore tests.
func TestJavaHashMapOrder(t *testing.T) {
	var ks []string
	for i := range 30 {
		ks = append(ks, fmt.Sprintf("k%d", i))
	}
	for _, c := range []struct{ keys, want string }{
		{strings.Join(ks, "|"), "k11|k10|k13|k12|k15|k14|k17|k16|k19|k18|k0|k1|k2|k3|k20|k4|k5|k22|k6|k21|k7|k24|k8|k23|k9|k26|k25|k28|k27|k29"},
		{"key4|key5", "key5|key4"},
		{"key 2|key_#1", "key_#1|key 2"},
		{"AaAa|AaBB|BBAa|BBBB|zz|Aa|BB|ключ|😀|", "zz|Aa|BB||ключ|😀|AaAa|AaBB|BBAa|BBBB"},
	} {
		var pairs []hstorePair
		for _, k := range strings.Split(c.keys, "|") {
			pairs = append(pairs, hstorePair{key: k})
		}
		var got []string
		for _, i := range javaHashMapOrder(pairs) {
			got = append(got, pairs[i].key)
		}
		if g := strings.Join(got, "|"); g != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.keys, g, c.want)
		}
	}
	for s, want := range map[string]uint32{"key": 106079, "😀": 1772899, "ключ": 33309882, "": 0} {
		if h := javaStringHash(s); h != want {
			t.Errorf("hashCode(%q) = %d, want %d", s, h, want)
		}
	}
}

// TestParseHstore: hstore's output form parses, escapes included; what
// is not that form (hstore's looser input syntax, a cut text) does not.
func TestParseHstore(t *testing.T) {
	pairs, ok := parseHstore(`"a"=>"1", "b\"q"=>NULL, "c\\d"=>"x\"y", ""=>""`)
	if !ok || len(pairs) != 4 {
		t.Fatalf("parse: %v %v", pairs, ok)
	}
	// The order is java.util.HashMap's of these keys (printed by Java as
	// in TestJavaHashMapOrder: b"q, "", a, c\d).
	if got := string(hstoreJSON(nil, pairs, appendJacksonString)); got != `{"b\"q":null,"":"","a":"1","c\\d":"x\"y"}` {
		t.Errorf("json %s", got)
	}
	for _, bad := range []string{`a=>b`, `"a"=>"b",`, `"a"=>"b"`[:6], `"a"=>`, `"a"=>"b" "c"=>"d"`, `"a\`} {
		if p, ok := parseHstore(bad); ok {
			t.Errorf("%q parsed as %v", bad, p)
		}
	}
	if p, ok := parseHstore(""); !ok || len(p) != 0 {
		t.Errorf("empty hstore: %v %v", p, ok)
	}
}

// TestJacksonString: strings are escaped as Jackson's JsonGenerator
// escapes them by default.
func TestJacksonString(t *testing.T) {
	got := string(appendJacksonString(nil, "a\"\\\b\t\n\f\r\x01\x1f/<>&é\u2028😀\xff"))
	want := `"a\"\\\b\t\n\f\r\u0001\u001F/<>&é` + "\u2028😀\ufffd" + `"`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

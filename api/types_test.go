package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateName: "." and ".." are refused (URL dot segments: a group so
// named could never be addressed), while other names with dots pass.
func TestValidateName(t *testing.T) {
	for _, bad := range []string{".", "..", "", "a b", "a/b", strings.Repeat("a", 129)} {
		err := ValidateName(bad)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
	if err := ValidateName(".."); err == nil || !strings.Contains(err.Error(), `".."`) {
		t.Errorf("ValidateName(\"..\") = %v: the message should name the group", err)
	}
	for _, good := range []string{"...", ".a", "a.", "a..b", "_", "-", strings.Repeat("a", 128)} {
		if err := ValidateName(good); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", good, err)
		}
	}
}

// TestCheckDurations: a request duration is 0 or at least MinDuration;
// the error names the key, a list's element by its index.
func TestCheckDurations(t *testing.T) {
	ok := []any{
		CreateRequest{Name: "g"},
		&CreateRequest{AckWait: Duration(MinDuration), Backoff: []Duration{0, Duration(time.Hour)}},
		FetchBody{Wait: Duration(time.Second)},
		(*FetchBody)(nil), nil, "not a struct",
	}
	for _, v := range ok {
		if err := CheckDurations(v); err != nil {
			t.Errorf("CheckDurations(%#v) = %v", v, err)
		}
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{CreateRequest{AckWait: Duration(time.Nanosecond)}, "ack_wait 1ns"},
		{&CreateRequest{Backoff: []Duration{Duration(time.Second), Duration(-time.Second)}}, "backoff[1] -1s"},
		{FetchBody{LeaseTTL: Duration(MinDuration - 1)}, "lease_ttl 999.999µs"},
		{AckBody{Delay: Duration(time.Microsecond)}, "delay 1µs"},
		{&MemberBody{LeaseTTL: Duration(-1)}, "lease_ttl -1ns"},
	} {
		err := CheckDurations(tc.v)
		if !errors.Is(err, ErrBadRequest) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("CheckDurations(%#v) = %v, want bad_request %q…", tc.v, err, tc.want)
		}
	}
}

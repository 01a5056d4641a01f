package api

import (
	"errors"
	"strings"
	"testing"
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

package pgqbin

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPathBuildsOnceAndRemove: Path builds a pgq that runs, returns the
// same binary to a second call, and Remove deletes its directory.
func TestPathBuildsOnceAndRemove(t *testing.T) {
	bin := Path(t)
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pgq") {
		t.Fatalf("%s --help: %v\n%s", bin, err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if again := Path(t); again != bin {
		t.Fatalf("second Path %q, want the first %q", again, bin)
	}
	if st2, err := os.Stat(bin); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("second Path rebuilt the binary: %v", err)
	}
	Remove()
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Fatalf("after Remove %s: %v, want it gone", bin, err)
	}
}

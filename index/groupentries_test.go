package index

import (
	"errors"
	"fmt"
	"testing"
)

func groupEntries(t *testing.T, ix *Index, name string) map[string]string {
	t.Helper()
	got := map[string]string{}
	if err := ix.GroupEntries(name, func(k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestGroupEntries(t *testing.T) {
	dir := t.TempDir()
	ix := open(t, dir)
	// "a" and "a.b": one name is a prefix of the other.
	if err := ix.UpdateGroup("a", []byte("va"), []GroupEntry{{Key: []byte("k1"), Value: []byte("1")}, {Key: []byte("k2"), Value: []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.UpdateGroup("a.b", []byte("vab"), []GroupEntry{{Key: []byte("k1"), Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	// nil value: the group's value stays; delete one entry, set another.
	if err := ix.UpdateGroup("a", nil, []GroupEntry{{Key: []byte("k1"), Delete: true}, {Key: []byte("k3"), Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	// A range deletion: [r1, r3) of "a" only.
	if err := ix.UpdateGroup("a", nil, []GroupEntry{{Key: []byte("r1"), Value: []byte("1")}, {Key: []byte("r2"), Value: []byte("2")}, {Key: []byte("r3"), Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.UpdateGroup("a.b", nil, []GroupEntry{{Key: []byte("r2"), Value: []byte("kept")}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.UpdateGroup("a", nil, []GroupEntry{{Key: []byte("r1"), End: []byte("r3"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.UpdateGroup("a", nil, []GroupEntry{{Key: []byte("r3"), Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.UpdateGroup("a", nil, []GroupEntry{{Key: nil, Value: []byte("x")}}); err == nil {
		t.Fatal("empty entry key accepted")
	}
	if err := ix.UpdateGroup("", nil, nil); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("UpdateGroup(\"\") = %v", err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = open(t, dir)
	defer func() { _ = ix.Close() }()
	if v, err := ix.GetGroup("a"); err != nil || string(v) != "va" {
		t.Fatalf("GetGroup(a) = %q, %v", v, err)
	}
	if got, want := fmt.Sprint(groupEntries(t, ix, "a")), "map[k2:2 k3:3]"; got != want {
		t.Fatalf("entries of a = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(groupEntries(t, ix, "a.b")), "map[k1:x r2:kept]"; got != want {
		t.Fatalf("entries of a.b = %s, want %s", got, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := ix.GroupEntries("a", func(k, v []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("GroupEntries stopped: %v after %d", err, n)
	}
	// Groups lists values only; DeleteGroup drops the entries too.
	gs, err := ix.Groups()
	if err != nil || len(gs) != 2 {
		t.Fatalf("Groups = %v, %v", gs, err)
	}
	if err := ix.DeleteGroup("a"); err != nil {
		t.Fatal(err)
	}
	if got := groupEntries(t, ix, "a"); len(got) != 0 {
		t.Fatalf("entries of a deleted group: %v", got)
	}
	if got := groupEntries(t, ix, "a.b"); len(got) != 2 {
		t.Fatalf("entries of a.b after deleting a: %v", got)
	}
}

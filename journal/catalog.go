package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq/record"
)

// CatalogFile is the name of the relation catalog inside the journal
// directory (see the package documentation).
const CatalogFile = "relations"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// catalog is the journal's relation catalog: the encoded relations
// (schema, table, columns) that compact records refer to by id, 1-based in
// file order.
type catalog struct {
	// rels is the published list (ids 1..len); replaced, never modified,
	// so readers Load it without a lock.
	rels atomic.Pointer[[][]byte]
	// The fields below belong to the writer (under Journal.appendMu).
	ids     map[string]uint64 // by encoded relation
	pending [][]byte          // interned by the batch being built, not yet written
	size    int64             // bytes of good entries in the file
	file    vfs.File          // opened at Open; written at size
}

// parseCatalog returns the relations of data and the length of its good
// prefix: it stops at the first entry that is cut short or fails its
// checksum (a write a crash interrupted; no stored record refers to it,
// because the catalog is fsynced before the records that use it).
func parseCatalog(data []byte) (rels [][]byte, good int) {
	for good < len(data) {
		n, k := binary.Uvarint(data[good:])
		if k <= 0 || len(data)-good-k < 4 || n > uint64(len(data)-good-k-4) {
			break
		}
		p := good + k
		sum := binary.LittleEndian.Uint32(data[p:])
		rel := data[p+4 : p+4+int(n)]
		if crc32.Checksum(rel, castagnoli) != sum || record.CheckRelation(rel) != nil {
			break
		}
		rels = append(rels, rel)
		good = p + 4 + int(n)
	}
	return rels, good
}

// loadCatalog reads dir's catalog through fs; a missing file is an empty
// catalog.
func loadCatalog(fs vfs.FS, dir string) ([][]byte, int, error) {
	data, err := readFile(fs, fs.PathJoin(dir, CatalogFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("relation catalog: %w", err)
	}
	rels, good := parseCatalog(data)
	return rels, good, nil
}

// openCatalog loads the catalog for the writer.
func (j *Journal) openCatalog() error {
	rels, good, err := loadCatalog(j.fs, j.dir)
	if err != nil {
		return err
	}
	c := &j.cat
	c.ids = make(map[string]uint64, len(rels))
	for i, r := range rels {
		c.ids[string(r)] = uint64(i + 1)
	}
	c.size = int64(good)
	c.pending = nil
	c.rels.Store(&rels)
	// The file is created (and its directory entry made durable) at
	// Open, so that Append only ever writes and fsyncs it.
	path := j.fs.PathJoin(j.dir, CatalogFile)
	_, statErr := j.fs.Stat(path)
	f, err := j.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("relation catalog: open: %w", err)
	}
	c.file = f
	if errors.Is(statErr, os.ErrNotExist) {
		if err := j.syncDir(); err != nil {
			_ = c.close()
			return fmt.Errorf("relation catalog: %w", err)
		}
	}
	return nil
}

// intern returns the id of rel, assigning the next one (pending until
// writePending) to a relation not in the catalog. The caller holds
// appendMu.
func (c *catalog) intern(rel []byte) (uint64, error) {
	if id, ok := c.ids[string(rel)]; ok {
		return id, nil
	}
	if err := record.CheckRelation(rel); err != nil {
		return 0, err
	}
	r := append([]byte(nil), rel...)
	c.pending = append(c.pending, r)
	id := uint64(len(*c.rels.Load()) + len(c.pending))
	c.ids[string(r)] = id
	return id, nil
}

// dropPending forgets the relations interned by a batch that is not
// written.
func (c *catalog) dropPending() {
	for _, r := range c.pending {
		delete(c.ids, string(r))
	}
	c.pending = nil
}

// writePending appends the pending relations to the catalog file and
// fsyncs it (unless NoSync) before the records that use them are written,
// then publishes them. The caller holds appendMu.
func (j *Journal) writePending() error {
	c := &j.cat
	if len(c.pending) == 0 {
		return nil
	}
	if c.file == nil {
		return errors.New("relation catalog: not open")
	}
	var buf []byte
	for _, r := range c.pending {
		buf = binary.AppendUvarint(buf, uint64(len(r)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(r, castagnoli))
		buf = append(buf, r...)
	}
	if _, err := c.file.WriteAt(buf, c.size); err != nil {
		return fmt.Errorf("relation catalog: write: %w", err)
	}
	if !j.opts.NoSync {
		if err := c.file.Sync(); err != nil {
			return fmt.Errorf("relation catalog: fsync: %w", err)
		}
	}
	c.size += int64(len(buf))
	old := *c.rels.Load()
	rels := make([][]byte, len(old), len(old)+len(c.pending))
	copy(rels, old)
	rels = append(rels, c.pending...)
	c.rels.Store(&rels)
	c.pending = nil
	return nil
}

// lookup returns the relation with catalog id id.
func (c *catalog) lookup(id uint64) ([]byte, error) {
	rels := *c.rels.Load()
	if id == 0 || id > uint64(len(rels)) {
		return nil, fmt.Errorf("%w: relation %d not in the catalog (%d relations)", ErrCorrupt, id, len(rels))
	}
	return rels[id-1], nil
}

// Relation returns the relation with catalog id id, encoded as one
// element of a record.Version relation table ([schema, table, columns,
// ...]): what a stored (record.VersionCompact) record's relation ids name.
// The index reads a record's tables with it (index.EntryOfStored). It
// takes no lock: the catalog's relations are published atomically, every
// one before a record that uses it.
func (j *Journal) Relation(id uint64) ([]byte, error) { return j.cat.lookup(id) }

// closeCatalog closes the catalog file.
func (c *catalog) close() error {
	if c.file == nil {
		return nil
	}
	err := c.file.Close()
	c.file = nil
	return err
}

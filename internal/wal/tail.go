package wal

// Tail returns the tail segment's first index (its file name) and the
// bytes of entries it holds: where the next write will start. The
// journal records it in its durable-point marker after each fsync.
func (l *Log) Tail() (index uint64, size int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segments) == 0 {
		return 0, 0
	}
	s := l.segments[len(l.segments)-1]
	return s.index, int64(len(s.ebuf))
}

package benchmarks

import "context"

// consumerRows are the measurements through the consumers Go client
// library: end-to-end latency at 1,000 tx/s (item 3) and replay over HTTP
// (item 4).
func (e *env) consumerRows(ctx context.Context) []Row {
	const why = "the consumers Go client library (consumers.Dial) does not exist yet"
	return []Row{
		notMeasured("end-to-end latency at 1,000 tx/s, p99", "≤ 10 ms", why),
		notMeasured("consumer replay, Go library over HTTP", "≥ 300,000 changes/s", why),
	}
}

// Package syncbuf is a bytes.Buffer that several goroutines may share:
// the sink a test gives a child process's stderr (exec.Cmd copies it in
// a goroutine of its own) or a slog handler while it reads what was
// written so far.
//
// A Buffer's zero value is empty and ready; every method takes its
// mutex, so writes and reads may run at once. String and Bytes return
// copies, so what a caller holds does not change under later writes.
// A Buffer must not be copied after first use.
//
// It imports only the standard library and is meant for tests.
package syncbuf

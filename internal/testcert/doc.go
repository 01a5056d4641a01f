// Package testcert makes real X.509 certificates for tests of pgq's TLS:
// a certificate authority, server certificates for 127.0.0.1 and
// localhost, and client certificates, written as PEM files.
//
// A Set is the usual fixture of a mutual-TLS test: a CA, a server and a
// client certificate written into one directory as ca.pem, server.crt,
// server.key, worker.crt and worker.key (keys mode 0600). RenewServer
// writes a new server certificate over server.crt and server.key, as an
// operator's renewal does, and RenewServerCertOnly a certificate without
// its key, as a renewal caught half-written. ClientConfig and
// ServedSerial let a test ask which certificate a server serves.
//
// Keys are ECDSA P-256 (fast to generate); every certificate is valid
// from an hour ago for a day, so that small clock differences do not
// matter. Nothing here is safe for production use. A CA is safe for
// concurrent use once made; a Set is for one goroutine.
package testcert

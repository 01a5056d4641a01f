// Package testcert makes real X.509 certificates for tests of pgq's TLS:
// a certificate authority, server certificates for 127.0.0.1 and
// localhost, and client certificates, written as PEM files.
//
// Keys are ECDSA P-256 (fast to generate); every certificate is valid
// from an hour ago for a day, so that small clock differences do not
// matter. Nothing here is safe for production use. A CA is safe for
// concurrent use once made.
package testcert

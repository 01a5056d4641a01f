package main

import "github.com/pgq-dev/pgq/client"

// ClientTLSFlags are the TLS flags of the commands that talk to a running
// pgq (APIFlags embeds them). They apply to an https:// --addr; without
// --ca-cert the system's roots are trusted (on Linux also SSL_CERT_FILE
// and SSL_CERT_DIR).
type ClientTLSFlags struct {
	CACert     string `name:"ca-cert" env:"PGQ_CA_CERT" type:"existingfile" placeholder:"FILE" help:"PEM file of the CA(s) that sign pgq's certificate (an https:// --addr): only they are trusted. Default: the system's roots (SSL_CERT_FILE, SSL_CERT_DIR)."`
	ClientCert string `name:"client-cert" env:"PGQ_CLIENT_CERT" type:"existingfile" placeholder:"FILE" help:"PEM client certificate for a pgq run with --tls-client-ca (mutual TLS); with --client-key."`
	ClientKey  string `name:"client-key" env:"PGQ_CLIENT_KEY" type:"existingfile" placeholder:"FILE" help:"PEM private key of --client-cert."`
}

// tls is the client's TLS options (checked by client.New: a
// certificate without its key, or TLS flags with an http:// address, are
// usage errors).
func (f ClientTLSFlags) tls() client.TLSOptions {
	return client.TLSOptions{CAFile: f.CACert, CertFile: f.ClientCert, KeyFile: f.ClientKey}
}

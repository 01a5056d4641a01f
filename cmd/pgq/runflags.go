package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/server"
)

// Bounds of --segment-size. A segment is a file: every roll creates one and
// fsyncs the directory, and readers open it, so below a page (--segment-size
// 1 made a file per record) that cost is paid every few records without
// saving any disk. The tail segment is held in memory (up to 1.25 times its
// size), which caps it at 1 GiB. The journal's own API takes smaller
// segments: its tests roll them every few records.
const (
	minSegmentSize = 4 << 10
	maxSegmentSize = 1 << 30
)

// Validate refuses `pgq run` values pgq cannot run with, while parsing:
// before anything is opened, with the usage exit status.
func (c *RunCmd) Validate(kctx *kong.Context) error {
	if c.SegmentSize < minSegmentSize || c.SegmentSize > maxSegmentSize {
		return fmt.Errorf("--segment-size %d is out of range: want 4KiB to 1GiB", c.SegmentSize)
	}
	if c.MaxRecordBytes < ingest.MinMaxRecordBytes || c.MaxRecordBytes > ingest.MaxMaxRecordBytes {
		return fmt.Errorf("--max-record-bytes %d is out of range: want 4KiB to 1GiB", c.MaxRecordBytes)
	}
	if c.ReceiveCoalesce < 0 {
		return errors.New("--receive-coalesce is negative")
	}
	if err := checkListen("--listen", c.Listen); err != nil {
		return err
	}
	if err := checkListen("--probe-listen", c.ProbeListen); err != nil {
		return err
	}
	if err := c.validateHold(); err != nil {
		return err
	}
	if err := httpapi.CheckAllowed(splitList(c.AllowedHosts), splitList(c.AllowedOrigins)); err != nil {
		return fmt.Errorf("--allowed-hosts/--allowed-origins: %w", err)
	}
	if err := c.options().Validate(); err != nil { // TLS: the files go together
		return err
	}
	if c.CreatePublication == "" && flagSet(kctx, "create-publication") {
		// Read as "do not create", an empty value would leave a missing
		// publication missing although creating it was asked for.
		return errors.New(`--create-publication is empty: want all or schema.table,... (leave it out not to create a publication)`)
	}
	return nil
}

// checkListen refuses a listen address net.Listen could never take: not
// HOST:PORT, or a port that is neither a number up to 65535 nor a service
// name ("" is a flag left out).
func checkListen(flag, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT (e.g. 127.0.0.1:5480)", flag, addr)
	}
	if n, err := strconv.ParseUint(port, 10, 64); err == nil {
		if n > 65535 {
			return fmt.Errorf("%s %s: port %d is out of range: want 0 to 65535", flag, addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%s %s: port %q is not a number or a service name", flag, addr, port)
	}
	return nil
}

// Bounds of --hold-slot-max-lag: below 1 MiB a holder would be let go
// at every transaction; 1 PiB is "never" on any disk.
const (
	minHoldSlotMaxLag = 1 << 20
	maxHoldSlotMaxLag = 1 << 50
)

// validateHold checks --hold-slot-for (group names) and its lag bound.
func (c *RunCmd) validateHold() error {
	if c.HoldSlotMaxLag < minHoldSlotMaxLag || c.HoldSlotMaxLag > maxHoldSlotMaxLag {
		return fmt.Errorf("--hold-slot-max-lag %d is out of range: want 1MiB to 1PiB", c.HoldSlotMaxLag)
	}
	if strings.TrimSpace(c.HoldSlotFor) == "" && c.HoldSlotFor != "" {
		return errors.New("--hold-slot-for is empty: want NAME[,NAME] (leave it out to hold for no group)")
	}
	for _, name := range splitList(c.HoldSlotFor) {
		if err := api.ValidateName(name); err != nil {
			return fmt.Errorf("--hold-slot-for: %w", err)
		}
	}
	return nil
}

// flagSet reports whether a flag of the command line was given a value by
// the command line, the environment or the config file (not its default).
func flagSet(kctx *kong.Context, name string) bool {
	for _, f := range kctx.Flags() {
		if f.Name == name {
			return f.Set
		}
	}
	return false
}

// ServerTLSFlags are `pgq run`'s TLS flags (RunCmd embeds them).
type ServerTLSFlags struct {
	TLSCert     string `name:"tls-cert" env:"PGQ_TLS_CERT" type:"existingfile" placeholder:"FILE" help:"Serve the API over TLS with this PEM certificate (and intermediates); with --tls-key. SIGHUP, and a change of the files (--tls-reload-interval), reload them (bad new files: the old stay, with an ERROR). The --probe-listen address stays plain HTTP."`
	TLSKey      string `name:"tls-key" env:"PGQ_TLS_KEY" type:"existingfile" placeholder:"FILE" help:"PEM private key of --tls-cert."`
	TLSClientCA string `name:"tls-client-ca" env:"PGQ_TLS_CLIENT_CA" type:"existingfile" placeholder:"FILE" help:"Mutual TLS: require a client certificate signed by a CA of this PEM file (needs --tls-cert)."`
	// TLSReloadInterval: a Kubernetes Secret (cert-manager) is renewed
	// in place without a signal, so pgq looks at the files itself.
	TLSReloadInterval Duration `name:"tls-reload-interval" env:"PGQ_TLS_RELOAD_INTERVAL" default:"1m" help:"Read the TLS files this often and reload them when their contents changed, as SIGHUP does (0: only on SIGHUP)."`
}

// options are server.Options.TLS.
func (f ServerTLSFlags) options() server.TLSOptions {
	return server.TLSOptions{CertFile: f.TLSCert, KeyFile: f.TLSKey, ClientCAFile: f.TLSClientCA, ReloadInterval: f.TLSReloadInterval.D()}
}

// reloadOnHangup reloads the TLS files on every SIGHUP until the returned
// stop is called; without TLS it does nothing (and SIGHUP keeps its
// default: it ends pgq). A failed reload keeps the old files (the server
// logs it).
func reloadOnHangup(s *server.Server, tlsOn bool) (stop func()) {
	if !tlsOn {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				_ = s.ReloadTLSFor("signal") // logged by the server, at INFO or ERROR
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

package ingest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// connectError is a failed connection's error in words a user can act
// on: ErrAuth naming the user and where the password came from when the
// server refused the credentials, ErrUnreachable with the address and the
// reason, once, when it could not be reached. connURL is the connection
// string the connection was made from.
func connectError(err error, connURL string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "28P01": // invalid_password
			return fatalf(ErrAuth, "%s (%s)", pgErr.Message, passwordSource(connURL))
		case "28000": // invalid_authorization_specification: no pg_hba.conf entry, no such role
			return fatalf(ErrAuth, "%s", pgErr.Message)
		}
		return fatalf(ErrUnreachable, "cannot connect: %s", pgErr.Message)
	}
	return fatalf(ErrUnreachable, "cannot connect to PostgreSQL%s", dialFailure(err))
}

// dialFailure is " at ADDRESS: REASON" for a connection that could not be
// dialled (pgconn says the address twice: "127.0.0.1:1 (127.0.0.1): dial
// error: dial tcp 127.0.0.1:1: connect: connection refused"), else ": "
// and the error without pgconn's "failed to connect to `user=…`" prefix.
func dialFailure(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil && oneFailure(unwrapConnectErr(err).Error()) {
		reason := op.Err
		var sys *os.SyscallError
		if errors.As(reason, &sys) {
			reason = sys.Err
		}
		return fmt.Sprintf(" at %s: %v", op.Addr, reason)
	}
	return ": " + unwrapConnectErr(err).Error()
}

// oneFailure reports whether a connection error says one thing: pgconn
// joins the error of each attempt with a newline, and with sslmode=prefer
// (the default) it tries the same address twice, with TLS and without,
// and fails the same way both times.
func oneFailure(msg string) bool {
	lines := strings.Split(msg, "\n")
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) != strings.TrimSpace(lines[0]) {
			return false
		}
	}
	return true
}

// passwordSource says where libpq's rules took the password from: the
// connection string, else PGPASSWORD, else the password file.
func passwordSource(connURL string) string {
	switch {
	case urlHasPassword(connURL):
		return "the password is the connection URL's"
	case os.Getenv("PGPASSWORD") != "":
		return "the password is PGPASSWORD's, as the connection URL has none"
	case os.Getenv("PGPASSFILE") != "":
		return "the password is from PGPASSFILE " + os.Getenv("PGPASSFILE") + ", as neither the connection URL nor PGPASSWORD has one"
	default:
		return "the password is from ~/.pgpass, as neither the connection URL nor PGPASSWORD has one"
	}
}

// urlHasPassword reports whether a URL (postgres://user:pw@…, or
// ?password=) or a keyword/value string (password=…) carries a password.
func urlHasPassword(s string) bool {
	if u, err := url.Parse(s); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, ok := u.User.Password(); ok {
			return true
		}
		return u.Query().Has("password")
	}
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "password=") {
			return true
		}
	}
	return false
}

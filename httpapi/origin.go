package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/pgq-dev/pgq/api"
)

// Browsers let any web page send "simple" cross-site requests (a POST
// labelled text/plain needs no CORS preflight) and, through DNS
// rebinding, read the answers of a server on loopback under the page's
// own host name. A bearer token or a client certificate defeats both, as
// a page cannot add either without the user; without them (pgq's
// default) these checks do:
//
//   - Origin: a request whose Origin header does not name the host[:port]
//     its Host header names is refused 403 forbidden, unless the origin is
//     in Options.AllowedOrigins, which then gets the CORS headers a browser
//     needs (preflights included). Applied with a token too: a page on
//     another origin is refused unless allowed, so a stolen-token page
//     cannot be a silent client either.
//   - Host: without a token or client certificates, the Host header must
//     be an IP literal, localhost, or a name of Options.AllowedHosts;
//     another name is what a rebinding page sends, refused 421
//     misdirected_request.
//
// The probes (/healthz, /readyz, /metrics) are exempt from both:
// kubelets and scrapers use pod IPs and Service names.
//
// Request bodies must be labelled application/json (decodeRequest, 415).

// originGuard holds the checks of the allowed hosts and origins.
type originGuard struct {
	checkHost bool     // no token and no client certificates
	hosts     []string // lower case; "*" allows any; "*.example.com" its subdomains
	origins   []string // lower case, "scheme://host[:port]"; "*" allows any
}

// CheckAllowed checks lists of allowed hosts (names, "*.suffix" or "*",
// no scheme, port or path) and origins ("http(s)://host[:port]" or "*").
func CheckAllowed(hosts, origins []string) error {
	for _, h := range hosts {
		name := strings.TrimPrefix(h, "*.")
		if h != "*" && (name == "" || strings.ContainsAny(name, "/:*@ ") || strings.HasPrefix(name, ".")) {
			return fmt.Errorf("allowed host %q: want a host name without scheme or port (pgq.example.com, *.example.com or *)", h)
		}
	}
	for _, og := range origins {
		if og == "*" {
			continue
		}
		u, err := url.Parse(strings.TrimSuffix(og, "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("allowed origin %q: want scheme://host[:port] (https://console.example.com:8443) or *", og)
		}
	}
	return nil
}

// guardOrigin wraps next with the Host and Origin checks.
func guardOrigin(o Options, next http.Handler) http.Handler {
	g := &originGuard{checkHost: o.AuthToken == "" && !o.ClientCertificates}
	for _, h := range o.AllowedHosts {
		g.hosts = append(g.hosts, strings.ToLower(strings.TrimSuffix(h, ".")))
	}
	for _, og := range o.AllowedOrigins {
		g.origins = append(g.origins, strings.ToLower(strings.TrimSuffix(og, "/")))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isProbePath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if g.checkHost && !g.hostAllowed(r.Host) {
			WriteError(w, api.Errorf(api.ErrMisdirected, "Host %q is not pgq's: use an IP address or localhost, or list the name in --allowed-hosts", r.Host))
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" || sameHost(origin, r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		if !g.originAllowed(origin) {
			WriteError(w, api.Errorf(api.ErrForbidden, "cross-origin request from %q refused: list the origin in --allowed-origins", origin))
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isProbePath reports the probes' paths, which the checks leave alone.
func isProbePath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/metrics"
}

// hostAllowed reports a Host header that names pgq: empty (HTTP/1.0),
// an IP literal, localhost, or an allowed name.
func (g *originGuard) hostAllowed(hostport string) bool {
	host := hostOnly(hostport)
	if host == "" || host == "localhost" || net.ParseIP(host) != nil {
		return true
	}
	for _, h := range g.hosts {
		if h == "*" || h == host || (strings.HasPrefix(h, "*.") && strings.HasSuffix(host, h[1:])) {
			return true
		}
	}
	return false
}

func (g *originGuard) originAllowed(origin string) bool {
	o := strings.ToLower(origin)
	return slices.Contains(g.origins, "*") || slices.Contains(g.origins, o)
}

// hostOnly is the lower-case host of a Host header without its port or
// the brackets of an IPv6 literal, and without a trailing dot.
func hostOnly(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
	return strings.ToLower(h)
}

// sameHost reports whether an Origin header names the host[:port] of the
// Host header (a proxy or kubectl port-forward in front keeps both the
// same), default ports made explicit on both sides.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (a sandboxed frame, a file: page) among them
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return withPort(u.Host, port) == withPort(strings.ToLower(host), port)
}

// withPort is hostport with port added when it has none, lower case.
func withPort(hostport, port string) string {
	hostport = strings.ToLower(hostport)
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), port)
}

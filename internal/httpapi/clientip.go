package httpapi

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The client address that sign-in budgets are kept for (see
// internal/workspace, "Sign-in throttling").
//
// Behind a reverse proxy every request comes from the proxy, so one
// client's failures would count against everyone's. With
// Options.TrustedProxies the address is read from X-Forwarded-For, but
// only when the direct peer is a trusted proxy: anyone can send the header,
// and only what a trusted proxy appended can be believed. The header is
// read from the right, skipping trusted hops; the first address that is
// not a trusted proxy is the client. Anything to its left was written by
// the client itself and is ignored.

// ParseTrustedProxies parses a comma-separated list of addresses and CIDR
// prefixes ("127.0.0.1, 10.0.0.0/8, ::1") as --trusted-proxies takes it.
// An empty list trusts no proxy.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, err
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trusted reports whether a is one of the trusted proxies.
func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP returns the address of the client that sent r: the direct
// peer, or behind trusted proxies the rightmost untrusted address of
// X-Forwarded-For.
func (s *Server) clientIP(r *http.Request) string {
	peer := remoteIP(r)
	if len(s.opts.TrustedProxies) == 0 {
		return peer
	}
	a, err := netip.ParseAddr(peer)
	if err != nil || !s.trusted(a) {
		return peer
	}
	client := a
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			h, err := netip.ParseAddr(stripPort(strings.TrimSpace(parts[j])))
			if err != nil {
				// A hop a trusted proxy would not write: stop at the last
				// address that can be believed.
				return client.Unmap().String()
			}
			client = h
			if !s.trusted(h) {
				return h.Unmap().String()
			}
		}
	}
	// Every hop is a trusted proxy: the leftmost is the closest to the
	// client there is.
	return client.Unmap().String()
}

// stripPort removes a port from a hop written as host:port or [v6]:port,
// as some proxies do.
func stripPort(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

package httpapi

import (
	"net/http/httptest"
	"testing"
)

func TestClientIP(t *testing.T) {
	proxies, err := ParseTrustedProxies(" 127.0.0.1, 10.0.0.0/8 ,::1")
	if err != nil {
		t.Fatal(err)
	}
	behind := &Server{opts: Options{TrustedProxies: proxies}}
	direct := &Server{}
	for _, c := range []struct {
		name   string
		s      *Server
		peer   string
		xff    []string
		client string
	}{
		{"no proxies trusted: the header is ignored", direct, "127.0.0.1:5000", []string{"203.0.113.9"}, "127.0.0.1"},
		{"untrusted peer: its header is ignored", behind, "198.51.100.7:5000", []string{"203.0.113.9"}, "198.51.100.7"},
		{"trusted peer without a header", behind, "127.0.0.1:5000", nil, "127.0.0.1"},
		{"one proxy", behind, "127.0.0.1:5000", []string{"203.0.113.9"}, "203.0.113.9"},
		{"the client's own entries on the left are not believed", behind, "127.0.0.1:5000", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"a chain of trusted proxies is skipped", behind, "127.0.0.1:5000", []string{"1.2.3.4, 203.0.113.9, 10.1.2.3, 10.0.0.5"}, "203.0.113.9"},
		{"several header lines read as one list", behind, "127.0.0.1:5000", []string{"1.2.3.4, 203.0.113.9", "10.0.0.5"}, "203.0.113.9"},
		{"hops with ports", behind, "127.0.0.1:5000", []string{"[2001:db8::1]:4711, 203.0.113.9:80"}, "203.0.113.9"},
		{"IPv6 peer and client", behind, "[::1]:5000", []string{"2001:db8::1"}, "2001:db8::1"},
		{"garbage stops at the last believable hop", behind, "127.0.0.1:5000", []string{"203.0.113.9, nonsense, 10.0.0.5"}, "10.0.0.5"},
		{"every hop trusted: the leftmost", behind, "127.0.0.1:5000", []string{"10.0.0.9, 10.0.0.5"}, "10.0.0.9"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, h := range c.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		if got := c.s.clientIP(r); got != c.client {
			t.Errorf("%s: clientIP = %q, want %q", c.name, got, c.client)
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("ParseTrustedProxies(%q) accepted", bad)
		}
	}
}

package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/httpapi"
)

// TestHostPolicyFollowsAuth: with no --allowed-hosts, a server anyone may
// use (authentication off) answers only loopback names and IP addresses,
// and one that needs credentials answers any name; a list, once given,
// decides either way.
func TestHostPolicyFollowsAuth(t *testing.T) {
	for _, c := range []struct {
		allowed string
		mode    httpapi.AuthMode
		name    string
		want    bool
	}{
		{"", httpapi.AuthOff, "rebind.evil.example:5000", false},
		{"", httpapi.AuthOff, "localhost:5000", true},
		{"", httpapi.AuthOff, "192.168.1.20:5000", true},
		{"", httpapi.AuthOn, "gpu-box.corp.example:5000", true},
		{"mlflow.example.com", httpapi.AuthOn, "gpu-box.corp.example:5000", false},
		{"mlflow.example.com, *.corp.example", httpapi.AuthOff, "gpu-box.corp.example:5000", true},
		{"*", httpapi.AuthOff, "rebind.evil.example", true},
	} {
		n := DefaultNetConfig()
		n.AllowedHosts = c.allowed
		if err := n.Validate(); err != nil {
			t.Fatal(err)
		}
		p, _ := n.hostPolicy(c.mode)
		if got := p.Allows(c.name); got != c.want {
			t.Errorf("--allowed-hosts %q, auth %v, Host %q: %v, want %v", c.allowed, c.mode, c.name, got, c.want)
		}
	}
}

// TestAllowedHostsFlag: the default server refuses a rebinding Host with a
// 403 that names the flag, and --allowed-hosts admits the name.
func TestAllowedHostsFlag(t *testing.T) {
	get := func(addr, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/2.0/mlflow/experiments/get?experiment_id=0", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	if code, body := get(addr, "mlflow.internal"); code != 403 || !strings.Contains(body, "--allowed-hosts mlflow.internal") {
		t.Errorf("default server, Host mlflow.internal: %d %s", code, body)
	}
	if code, body := get(addr, addr); code != 200 {
		t.Errorf("default server, its own address: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	addr, stop = runServer(t, nil, "--port", "0", "--data-dir", t.TempDir(), "--allowed-hosts", "mlflow.internal")
	defer stop()
	if code, body := get(addr, "mlflow.internal:80"); code != 200 {
		t.Errorf("--allowed-hosts mlflow.internal: %d %s", code, body)
	}
	if code, _ := get(addr, "other.internal"); code != 403 {
		t.Errorf("--allowed-hosts mlflow.internal, Host other.internal: %d", code)
	}
}

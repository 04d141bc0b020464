package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchSlowClients attacks a server with authentication on as issue 41
// found it could be: c.slowClients connections to the public sign-in
// route, each sending its headers and then one byte of body every 10 s,
// spread over c.slowAddrs loopback source addresses (127.0.0.2 and up).
// It runs twice: bodies that declare 10,000,000 bytes (the issue's
// attack), and bodies that declare 4,000 bytes (under the sign-in's cap,
// so that the server waits for them and only the body deadline ends
// them). For each it reports the server's peak RSS, how many connections
// the server closed within the window and how (429 at accept, 413, 408),
// and whether an honest client at 127.0.0.1 signs in meanwhile.
func benchSlowClients(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-slow-")
	if err != nil {
		return nil, err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	out := map[string]any{
		"clients": c.slowClients, "source_addresses": c.slowAddrs, "window_s": c.slowWindow.Seconds(),
		"trickle": "1 byte every 10 s", "server_args": c.serverArgs,
	}
	for _, phase := range []struct {
		name     string
		declared int
	}{{"declared_10MB", 10_000_000}, {"declared_4000B", 4000}} {
		logf("slowclients: %s: %d clients from %d addresses for %s", phase.name, c.slowClients, c.slowAddrs, c.slowWindow)
		res, err := slowPhase(ctx, c, bin, filepath.Join(dir, phase.name), phase.declared)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", phase.name, err)
		}
		out[phase.name] = res
	}
	return out, nil
}

var oneTimePassword = regexp.MustCompile(`one-time password (\S+)`)

func slowPhase(ctx context.Context, c config, bin, dataDir string, declared int) (map[string]any, error) {
	s, err := startServer(ctx, bin, dataDir, append([]string{"--auth", "on", "--admin-email", "admin@example.com"}, c.serverArgs...)...)
	if err != nil {
		return nil, err
	}
	defer s.kill()
	m := oneTimePassword.FindSubmatch(s.stderr.Bytes()) // printed before the server listens
	if m == nil {
		return nil, errors.New("the server printed no one-time password")
	}
	password := string(m[1])
	addr := strings.TrimPrefix(s.url, "http://")
	time.Sleep(time.Second)
	baseRSS := s.procStatus("VmRSS")

	var peakRSS atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if v := s.procStatus("VmRSS"); v > peakRSS.Load() {
				peakRSS.Store(v)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	})

	head := fmt.Appendf(nil, "POST /api/2.0/sextant/auth/login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", addr, declared)
	type result struct {
		closed   bool
		after    time.Duration
		status   string // the status line's code, or "" when closed without one
		dialFail bool
	}
	results := make([]result, c.slowClients)
	start := time.Now()
	end := start.Add(c.slowWindow)
	var wg sync.WaitGroup
	var trickled atomic.Int64
	for i := range c.slowClients {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%c.slowAddrs))}
		wg.Go(func() {
			d := net.Dialer{LocalAddr: src, Timeout: 10 * time.Second}
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				results[i] = result{dialFail: true}
				return
			}
			defer conn.Close()
			if _, err := conn.Write(head); err != nil {
				results[i] = result{closed: true, after: time.Since(start)}
				return
			}
			br := bufio.NewReader(conn)
			for time.Now().Before(end) {
				next := time.Now().Add(10 * time.Second)
				if next.After(end) {
					next = end
				}
				_ = conn.SetReadDeadline(next)
				line, err := br.ReadString('\n')
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && line == "" {
					if _, err := conn.Write([]byte(" ")); err == nil {
						trickled.Add(1)
						continue
					}
				}
				r := result{closed: true, after: time.Since(start)}
				if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[0], "HTTP/") {
					r.status = f[1]
				}
				results[i] = r
				return
			}
		})
		if i%100 == 99 {
			time.Sleep(10 * time.Millisecond) // a ramp, not a SYN flood
		}
	}

	// An honest client at 127.0.0.1 signs in while the attack is on.
	time.Sleep(c.slowWindow / 3)
	honest := map[string]any{}
	t0 := time.Now()
	body := `{"email": "admin@example.com", "password": "` + password + `"}`
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(s.url+"/api/2.0/sextant/auth/login", "application/json", strings.NewReader(body))
	if err != nil {
		honest["error"] = err.Error()
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		honest["status"] = resp.StatusCode
		honest["ms"] = float64(time.Since(t0).Microseconds()) / 1000
	}
	honest["succeeded"] = err == nil && resp.StatusCode == 200
	attackRSS := s.procStatus("VmRSS")

	wg.Wait()
	close(stopSampling)
	sampler.Wait()

	statuses := map[string]int{}
	var closed, dialFail int
	var closeTimes []float64
	for _, r := range results {
		switch {
		case r.dialFail:
			dialFail++
		case r.closed:
			closed++
			closeTimes = append(closeTimes, r.after.Seconds())
			k := r.status
			if k == "" {
				k = "none"
			}
			statuses[k]++
		}
	}
	sort.Float64s(closeTimes)
	pct := func(p float64) float64 {
		if len(closeTimes) == 0 {
			return 0
		}
		return closeTimes[min(len(closeTimes)-1, int(p*float64(len(closeTimes))))]
	}
	health := false
	if r, err := http.Get(s.url + "/health"); err == nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		health = r.StatusCode == 200 && bytes.Equal(b, []byte("OK"))
	}
	return map[string]any{
		"declared_content_length": declared,
		"rss_base_mib":            mib(baseRSS),
		"rss_peak_mib":            mib(peakRSS.Load()),
		"rss_during_attack_mib":   mib(attackRSS),
		"rss_hwm_mib":             mib(s.procStatus("VmHWM")),
		"connections":             c.slowClients,
		"dial_failed":             dialFail,
		"closed_by_server":        closed,
		"closed_share":            float64(closed) / float64(c.slowClients),
		"answers":                 statuses, // status code of the answer before the close; none: closed without one
		"closed_after_s_p50":      pct(0.5),
		"closed_after_s_max":      pct(1),
		"bytes_trickled":          trickled.Load(),
		"honest_sign_in":          honest,
		"healthy_after":           health,
	}, nil
}

func mib(b int64) float64 { return float64(b*10/(1<<20)) / 10 }

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// benchSignin measures sign-ins by honest users (right passwords, each a
// bcrypt check at the login route) alone and while an attacker floods the
// same server with wrong passwords, in one run on one server:
//
//   - alone: the honest users only;
//   - attack_own_address: the attacker's goroutines send made-up and real
//     emails from an address of their own (the server trusts the bench as
//     its proxy, --trusted-proxies 127.0.0.1, and every client names its
//     address in X-Forwarded-For, as a proxy would);
//   - attack_shared_address: the attacker and the honest users share one
//     address (a proxy the server does not trust, or a NAT), and the
//     attacker sends made-up emails only: a wrong password for a real
//     email from a shared address locks that email for the address, by
//     design (docs/auth.md).
//
// Phases alternate so that machine noise hits each alike; the numbers are
// medians over rounds.
func benchSignin(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-signin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(ctx, bin, filepath.Join(dir, "data"), append([]string{"--auth", "on", "--admin-email", "admin@bench.local", "--trusted-proxies", "127.0.0.1"}, c.serverArgs...)...)
	if err != nil {
		return nil, err
	}
	defer srv.kill()
	admin, err := adminClient(srv)
	if err != nil {
		return nil, err
	}
	const honest = 4
	users := make([]string, honest)
	for i := range users {
		users[i] = fmt.Sprintf("user%d@bench.local", i)
		if err := admin.post(ctx, "/api/2.0/sextant/users", mustJSON(map[string]any{"email": users[i], "password": "honest-password-" + strconv.Itoa(i)}), nil); err != nil {
			return nil, err
		}
	}
	// Every attack phase costs each real email up to 10 failures (from its
	// own address); more than 4 rounds within 5 minutes would lock the
	// honest users' accounts (50 failures) and measure that instead.
	rounds, phase := min(c.signinRounds, 4), c.signinPhase
	type phaseResult struct {
		okPerSec, p50, p99, refused, attackPerSec, checks []float64
	}
	results := map[string]*phaseResult{}
	phases := []string{"alone", "attack_own_address", "attack_shared_address"}
	for _, p := range phases {
		results[p] = &phaseResult{}
	}
	for r := 0; r < rounds; r++ {
		for _, p := range phases {
			// Each phase's attacker has an address of its own, so that no
			// phase starts with an earlier one's failures.
			tag := strconv.Itoa(r*len(phases) + slicesIndex(phases, p) + 1)
			checks0, err := passwordChecks(ctx, admin)
			if err != nil {
				return nil, err
			}
			res := runSigninPhase(ctx, srv.url, users, p, tag, phase, c.signinAttackers)
			checks1, err := passwordChecks(ctx, admin)
			if err != nil {
				return nil, err
			}
			s := res.lat.summary()
			pr := results[p]
			pr.okPerSec = append(pr.okPerSec, float64(res.ok)/phase.Seconds())
			pr.p50 = append(pr.p50, s["p50_ms"])
			pr.p99 = append(pr.p99, s["p99_ms"])
			pr.refused = append(pr.refused, float64(res.refused))
			pr.attackPerSec = append(pr.attackPerSec, float64(res.attacks)/phase.Seconds())
			pr.checks = append(pr.checks, (checks1-checks0)/phase.Seconds())
			logf("signin %s round %d: %d honest sign-ins (%.1f/s, p99 %.0f ms, %d refused), %d attacks (%d checked)", p, r, res.ok, float64(res.ok)/phase.Seconds(), s["p99_ms"], res.refused, res.attacks, res.attackChecked)
			if res.other != "" {
				return nil, fmt.Errorf("signin %s: unexpected answer: %s", p, res.other)
			}
		}
	}
	out := map[string]any{
		"rounds":            rounds,
		"phase_seconds":     phase.Seconds(),
		"honest_users":      honest,
		"attacker_workers":  c.signinAttackers,
		"bcrypt_cost":       10,
		"what_honest_users": "POST /api/2.0/sextant/auth/login with the right password in a loop, one goroutine per user (each a bcrypt check)",
	}
	for _, p := range phases {
		pr := results[p]
		out[p] = map[string]any{
			"honest_signins_per_second": median(pr.okPerSec),
			"honest_p50_ms":             median(pr.p50),
			"honest_p99_ms":             median(pr.p99),
			"honest_refused_per_phase":  median(pr.refused),
			"attack_requests_per_sec":   median(pr.attackPerSec),
			"password_checks_per_sec":   median(pr.checks),
		}
	}
	alone := median(results["alone"].okPerSec)
	out["honest_throughput_under_attack_own_address"] = median(results["attack_own_address"].okPerSec) / alone
	out["honest_throughput_under_attack_shared_address"] = median(results["attack_shared_address"].okPerSec) / alone
	return out, nil
}

func slicesIndex(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

type signinPhase struct {
	ok, refused   int64
	attacks       int64
	attackChecked int64 // attacks answered 401 (a password check ran)
	lat           latencies
	other         string
}

// runSigninPhase runs the honest users (and, but for the "alone" phase,
// the attacker) for d.
func runSigninPhase(ctx context.Context, base string, users []string, phase, tag string, d time.Duration, attackers int) *signinPhase {
	res := &signinPhase{}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	var mu sync.Mutex
	var otherOnce sync.Once
	send := func(email, password, from string) (int, time.Duration, error) {
		body := mustJSON(map[string]any{"email": email, "password": password})
		req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/2.0/sextant/auth/login", bytes.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		if from != "" {
			req.Header.Set("X-Forwarded-For", from)
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 401 && resp.StatusCode != 429 {
			otherOnce.Do(func() { res.other = fmt.Sprintf("%d %s", resp.StatusCode, b) })
		}
		return resp.StatusCode, time.Since(t0), nil
	}
	var wg sync.WaitGroup
	var attacks, checked atomic.Int64
	shared := phase == "attack_shared_address"
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := "192.0.2." + strconv.Itoa(i+1) // each user at an address of their own
			if shared {
				from = "198.51.100." + tag
			}
			for ctx.Err() == nil {
				code, took, err := send(u, "honest-password-"+strconv.Itoa(i), from)
				if err != nil {
					continue // the phase ended mid-request
				}
				mu.Lock()
				if code == 200 {
					res.ok++
					res.lat = append(res.lat, took)
				} else {
					res.refused++
				}
				mu.Unlock()
			}
		}()
	}
	if phase != "alone" {
		from := "203.0.113." + tag
		if shared {
			from = "198.51.100." + tag
		}
		for w := range attackers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				for n := 0; ctx.Err() == nil; n++ {
					email := fmt.Sprintf("made-up-%d-%d@bench.local", w, n)
					if !shared && rng.IntN(4) == 0 {
						email = users[rng.IntN(len(users))]
					}
					code, _, err := send(email, "guess-"+strconv.Itoa(rng.Int()), from)
					if err != nil {
						continue
					}
					attacks.Add(1)
					if code == 401 {
						checked.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	res.attacks, res.attackChecked = attacks.Load(), checked.Load()
	return res
}

var checksRE = regexp.MustCompile(`(?m)^sextant_signin_password_checks_total (\S+)$`)

// passwordChecks reads sextant_signin_password_checks_total.
func passwordChecks(ctx context.Context, admin *client) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", admin.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", admin.basic)
	resp, err := admin.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := checksRE.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no sextant_signin_password_checks_total at /metrics (%d)", resp.StatusCode)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

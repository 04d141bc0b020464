package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/workspace"
)

// isLoopback reports whether host only accepts local connections.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authMode decides whether the server requires authentication, and
// creates the first administrator when it does and there are no users yet.
//
// auto: on loopback, authentication stays off (single-user mode) until the
// first user is created; anywhere else it is on. An explicit "off" on a
// non-loopback address was refused by Validate unless --insecure-no-auth.
func authMode(ctx context.Context, cfg Config, ws *workspace.Service, stderr io.Writer, log *slog.Logger) (httpapi.AuthMode, error) {
	n, err := ws.UserCount(ctx)
	if err != nil {
		return 0, err
	}
	on := cfg.Auth == "on" || (cfg.Auth == "auto" && (!isLoopback(cfg.Host) || n > 0))
	if !on {
		if !isLoopback(cfg.Host) {
			log.Warn("AUTHENTICATION IS OFF on a non-loopback address: anyone who can reach this server can read and change everything", "host", cfg.Host)
		} else {
			where := "--data-dir " + absPath(cfg.DataDir)
			if cfg.DB != "" {
				where = "--db URL"
			}
			log.Info("single-user mode: sign-in is off on loopback. To turn it on, create the first administrator " +
				"(echo 'a long password' | sextant users add EMAIL --admin " + where + ") and restart the server; see docs/auth.md")
		}
		return httpapi.AuthOff, nil
	}
	if n == 0 {
		pw := oneTimePassword()
		if _, err := ws.CreateUser(ctx, nil, cfg.AdminEmail, pw, true); err != nil {
			return 0, fmt.Errorf("create the first administrator: %w", err)
		}
		// Printed once, to the terminal only; it is not logged.
		fmt.Fprintf(stderr, "\n  First start with authentication on: created administrator %s\n  with the one-time password %s\n  Sign in and change it (sextant users passwd), then create users and tokens.\n\n", cfg.AdminEmail, pw)
	}
	log.Info("authentication on", "users", max(n, 1))
	return httpapi.AuthOn, nil
}

func oneTimePassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// loadSecret returns the server's signing secret: the configured one, or
// the one kept in the data directory, created on first start. Replicas that
// share a database must share the secret (set it with --secret-file or
// SEXTANT_SECRET_FILE).
func loadSecret(dataDir, file string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read secret file: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if len(s) < 32 {
			return nil, &ConfigError{"secret-file", "the secret must be at least 32 characters"}
		}
		return []byte(s), nil
	}
	path := filepath.Join(dataDir, "secret")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	s := hex.EncodeToString(raw[:])
	// Write under a temporary name and rename, so a crash never leaves a
	// truncated secret behind.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write secret: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write secret: %w", err)
	}
	return []byte(s), nil
}

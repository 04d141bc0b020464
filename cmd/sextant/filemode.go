package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// The data directory holds password and token hashes, sessions, the
// signing secret and every artifact: no other local account may read it.
// The server creates what it creates 0600 (files) and 0700 (directories),
// with the umask at 077 as a backstop for what it does not create itself
// (SQLite's journals); a directory made earlier, by hand or by an older
// server, keeps its mode, so the server warns about it at start.

// openDirs returns the directories of the data directory that other
// accounts may enter or read, the data directory itself first: the data
// directory, and with --blob-store dir the stores' roots under it. A
// directory that does not exist is left out.
func openDirs(cfg Config) []openDir {
	dirs := []string{cfg.DataDir}
	if cfg.BlobStore != "s3" {
		for _, name := range []string{"artifacts", "files", "volumes"} {
			dirs = append(dirs, filepath.Join(cfg.DataDir, name))
		}
	}
	var out []openDir
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			continue
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			out = append(out, openDir{absPath(d), perm})
		}
	}
	return out
}

type openDir struct {
	path string
	perm fs.FileMode
}

// warnOpenDataDir logs a warning, with the command that fixes it, when the
// data directory or a blob store's root under it is open to other local
// accounts.
func warnOpenDataDir(log *slog.Logger, cfg Config) {
	dirs := openDirs(cfg)
	if len(dirs) == 0 {
		return
	}
	// chmod -R on the data directory fixes it and everything under it.
	fix := absPath(cfg.DataDir)
	for _, d := range dirs {
		log.Warn(fmt.Sprintf("%s is open to other local accounts (mode %04o): it holds password and token hashes, sessions and artifacts; fix it with: chmod -R go-rwx %s", d.path, d.perm, shellQuote(fix)),
			"path", d.path, "mode", fmt.Sprintf("%04o", d.perm), "fix", "chmod -R go-rwx "+shellQuote(fix))
	}
}

// shellQuote quotes p for a POSIX shell when it needs it.
func shellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}

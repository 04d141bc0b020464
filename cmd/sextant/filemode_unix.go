//go:build unix

package main

import "syscall"

// restrictUmask makes every file and directory the process creates
// without an explicit mode private to its user (0600, 0700).
func restrictUmask() { syscall.Umask(0o077) }

//go:build !unix

package main

import "os"

// lockFile cannot lock files on this system: the data directory is not
// protected from a second server.
func lockFile(f *os.File) (locked bool, err error) { return false, errLockUnsupported }

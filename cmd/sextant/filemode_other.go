//go:build !unix

package main

// restrictUmask does nothing where there is no umask.
func restrictUmask() {}

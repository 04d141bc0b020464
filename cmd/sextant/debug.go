package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startDebugServer serves Go's profiling endpoints on their own listener,
// never on the API's, so that they are not exposed by accident. pprof's
// /debug/pprof/cmdline is left out: the command line holds secrets
// (--s3-secret-key, a --db password).
func startDebugServer(addr string) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", http.NotFound)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}

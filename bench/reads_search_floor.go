package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// floorServer answers every POST with the bytes it was given for the
// path, doing no other work: the time the benchmark's client takes to
// send a search and read a page of that many bytes over loopback from a
// Go HTTP server, which a search answered by Go's net/http does not go
// under. A full page of 1,000
// runs is about 860 KB, four times the 238 runs of metric_and_param's
// first size, and reading it is most of the search's growth.
type floorServer struct {
	srv *http.Server
	cl  *client
	mu  sync.Mutex
	// bodies maps a path to the bytes answered there.
	bodies map[string][]byte
}

// floorRounds is the floor's rounds per round of a search: a floor takes
// a fraction of a millisecond, and a median of more rounds moves less.
const floorRounds = 4

func startFloorServer() (*floorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &floorServer{bodies: map[string][]byte{}}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	f.cl = newClient("http://" + ln.Addr().String())
	return f, nil
}

func (f *floorServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	b := f.bodies[r.URL.Path]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (f *floorServer) stop() { _ = f.srv.Close() }

// time answers page from path and returns the median of n timed rounds
// of the request body req, after one untimed.
func (f *floorServer) time(ctx context.Context, path string, req, page []byte, n int) (float64, error) {
	f.mu.Lock()
	f.bodies[path] = page
	f.mu.Unlock()
	var ts []float64
	for i := range n + 1 {
		t := time.Now()
		if _, err := f.cl.postDiscard(ctx, path, req); err != nil {
			return 0, err
		}
		if i > 0 {
			ts = append(ts, ms(time.Since(t)))
		}
	}
	return median(ts), nil
}

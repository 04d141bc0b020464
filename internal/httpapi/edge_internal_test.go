package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPaceCountsOnlyTheClientsTime: a handler that is away from the body
// for longer than the window (a slow store taking a part) does not make
// an honest client's body "too slow"; a client that stops sending does.
func TestPaceCountsOnlyTheClientsTime(t *testing.T) {
	s := &Server{opts: Options{BodyTimeout: 300 * time.Millisecond, BodyMinBytes: 4}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = s.paceBody(w, r)
		buf := make([]byte, 4)
		var got []byte
		for {
			n, err := r.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusRequestTimeout)
				return
			}
			if r.Header.Get("X-Busy") != "" && len(got) == 4 {
				time.Sleep(900 * time.Millisecond) // three windows away
			}
		}
		fmt.Fprintf(w, "%s", got)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	send := func(busy bool, parts ...string) (int, string) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hdr := ""
		if busy {
			hdr = "X-Busy: 1\r\n"
		}
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n", hdr, len(strings.Join(parts, "")))
		for i, p := range parts {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := c.Write([]byte(p)); err != nil {
				break
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := send(true, "abcd", "efgh", "ijkl"); code != 200 || body != "abcdefghijkl" {
		t.Errorf("a handler away for 3 windows: %d %q", code, body)
	}
	// 1 byte a read, 100 ms apart: 4 bytes take 400 ms, over the window.
	if code, body := send(false, "a", "b", "c", "d", "e", "f", "g", "h"); code != 408 || !strings.Contains(body, "too slow") {
		t.Errorf("a body under the pace: %d %q", code, body)
	}
}

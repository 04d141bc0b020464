package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestNoOverwriteRace: uploads of one new file with overwrite=false that
// all pass the existence check before any of them lands (each body ends
// only once every body has been read): exactly one is stored, the others
// are 409 ALREADY_EXISTS, and the file is the winner's. Under /Workspace a
// check followed by a plain Put stored them all, the last one winning
// (fails on that code); under /Volumes the upload claims refuse the second
// already, and PutIfAbsent backs them. It runs with the files in a local
// directory and in S3 (MinIO), whose PutIfAbsent is a conditional PUT
// (If-None-Match: *).
func TestNoOverwriteRace(t *testing.T) {
	t.Run("Dir", func(t *testing.T) { testNoOverwriteRace(t, mustAuthServer(t)) })
	t.Run("S3", func(t *testing.T) { testNoOverwriteRace(t, mustAuthServerOn(t, s3Blobs(t))) })
}

func testNoOverwriteRace(t *testing.T, a *authServer) {
	f := a.newFixture()
	for name, target := range map[string]string{
		"Workspace": "/api/2.0/fs/files/Workspace/Shared/race.txt",
		"Volumes":   "/api/2.0/fs/files" + f.volumePath() + "/race.txt",
	} {
		t.Run(name, func(t *testing.T) {
			const n = 4
			var ready sync.WaitGroup
			ready.Add(n)
			status := make([]int, n)
			codes := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					body := &barrierBody{r: strings.NewReader(fmt.Sprintf("writer %d", i)), ready: &ready}
					req := httptest.NewRequest("PUT", target+"?overwrite=false", body)
					req.ContentLength = -1
					req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(owner+":"+password)))
					rec := httptest.NewRecorder()
					a.h.ServeHTTP(rec, req)
					body.release() // a refused request may not have read its body
					status[i] = rec.Code
					var e struct {
						Code string `json:"error_code"`
					}
					_ = json.Unmarshal(rec.Body.Bytes(), &e)
					codes[i] = e.Code
				})
			}
			wg.Wait()
			winner := -1
			for i := range n {
				switch {
				case status[i] == 204 && winner >= 0:
					t.Fatalf("writers %d and %d both stored the file (statuses %v)", winner, i, status)
				case status[i] == 204:
					winner = i
				case status[i] != 409 || codes[i] != "ALREADY_EXISTS":
					t.Fatalf("writer %d: %d %s, want 204 or 409 ALREADY_EXISTS", i, status[i], codes[i])
				}
			}
			if winner < 0 {
				t.Fatalf("no writer stored the file: %v %v", status, codes)
			}
			if res := a.as(owner, "GET", target, nil); res.raw != fmt.Sprintf("writer %d", winner) {
				t.Fatalf("the file is %q, not writer %d's", res.raw, winner)
			}
		})
	}
}

// barrierBody reads r; at its end it waits until every body sharing ready
// has reached its end (or was released), then reports EOF.
type barrierBody struct {
	r     io.Reader
	ready *sync.WaitGroup
	once  sync.Once
}

func (b *barrierBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.release()
		b.ready.Wait()
	}
	return n, err
}

func (b *barrierBody) release() { b.once.Do(b.ready.Done) }

package wire

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/progress"
)

// senderBody is a request as python/sextant/progress.py writes it
// (json.dumps: ", " and ": " separators).
const senderBody = `{"run_id": "0123456789abcdef0123456789abcdef", "node": "node-007", "reports": [` +
	`{"rank": 3, "step": 120, "time_ms": 1733500000123, "step_time_s": 0.10123456789012345, "data_wait_s": 0.0011, "samples": 32.0, "gpu": 3}, ` +
	`{"rank": 3, "step": 121, "time_ms": 1733500000223, "step_time_s": 0.1, "tokens": 65536, "samples": 32}]}`

// FuzzDecodeProgress checks that DecodeProgress, the hand-written parser
// with its fallback, and the strict decoder (encoding/json) give the same
// request or the same error for any body, and that what the fast path
// accepts the strict decoder reads the same way.
func FuzzDecodeProgress(f *testing.F) {
	f.Add([]byte(senderBody))
	f.Add([]byte(`{"run_id":"r","reports":[{"rank":0,"step":0,"step_time_s":1e-3}]}`))
	f.Add([]byte(`{"run_id":"r","reports":[{"rank":1.0,"step":1e2,"step_time_s":"1"}]}`))
	f.Add([]byte(`{"run_id":"r","reports":[{"rank":1,"rank":2,"step":1,"step_time_s":1,"gpu":null}]}`))
	f.Add([]byte(`{"run_id":"r","RANK":1,"reports":null,"extra":1}`))
	f.Add([]byte(`{"run_id":"r\u0041","reports":[{"rank":-0,"step":9223372036854775808,"step_time_s":1e400,"samples":-1}]} x`))
	f.Add([]byte(`{"reports":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // readBody refuses these before any decoder sees them
		}
		var fast, strict ProgressRequest
		if (&batchParser{b: body}).progress(&fast) {
			if err := Decode(body, &strict); err != nil {
				t.Fatalf("fast path accepted what the strict decoder refuses (%v): %q", err, body)
			}
			fast.vals = nil // the fast path's own storage
			if !reflect.DeepEqual(fast, strict) {
				t.Fatalf("decoders disagree on %q:\nfast   %+v\nstrict %+v", body, fast, strict)
			}
		}
		// got is reused, as httpapi reuses it: the sender's body first,
		// so that nothing of it may show through.
		var got, want ProgressRequest
		if err := DecodeProgress([]byte(senderBody), &got); err != nil {
			t.Fatal(err)
		}
		gerr, werr := DecodeProgress(body, &got), Decode(body, &want)
		if !sameError(gerr, werr) {
			t.Fatalf("on %q DecodeProgress says %v, encoding/json %v", body, gerr, werr)
		}
		got.vals = nil
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders disagree on %q:\n%+v\n%+v", body, got, want)
		}
	})
}

// TestDecodeProgressFastPath checks that the sender's body takes the fast
// path (the fuzz test alone would pass if it never did) and reads right.
func TestDecodeProgressFastPath(t *testing.T) {
	var req ProgressRequest
	if !(&batchParser{b: []byte(senderBody)}).progress(&req) {
		t.Fatal("the Python sender's body fell back to encoding/json")
	}
	b, err := req.Domain(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.RunID != "0123456789abcdef0123456789abcdef" || b.Node != "node-007" || len(b.Reports) != 2 {
		t.Fatalf("got %+v", b)
	}
	r0, r1 := b.Reports[0], b.Reports[1]
	if r0.Rank != 3 || r0.GPU != 3 || r0.Step != 120 || r0.TimeMs != 1733500000123 || r0.StepTimeS != 0.10123456789012345 ||
		r0.DataWaitS != 0.0011 || r0.Samples != 32 || r0.Tokens != -1 {
		t.Fatalf("report 0: %+v", r0)
	}
	if r1.GPU != -1 || r1.Step != 121 || r1.DataWaitS != -1 || r1.Tokens != 65536 {
		t.Fatalf("report 1: %+v", r1)
	}
	// Each report's values are its own.
	if req.Reports[0].Step == req.Reports[1].Step {
		t.Fatal("reports share their values")
	}
	// Bad input still gets the general decoder's messages.
	for body, want := range map[string]string{
		`{"run_id":"r","reports":[{"rank":1.5,"step":1,"step_time_s":1}]}`: "rank",
		`{"run_id":"r","reprots":[]}`:                                      "unknown field",
		`{"run_id":"r","reports":[{"rank":1,"step":1,"step_time_s":1}]`:    "unexpected end",
	} {
		err := DecodeProgress([]byte(body), &ProgressRequest{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %q", body, err, want)
		}
	}
}

// BenchmarkDecodeProgress compares the fast path with encoding/json on a
// request of 50 reports (a rank's 5 s at 10 steps/s).
func BenchmarkDecodeProgress(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"run_id": "0123456789abcdef0123456789abcdef", "node": "node-007", "reports": [`)
	for i := range 50 {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(`{"rank": 3, "step": ` + itoa(1000+i) + `, "time_ms": 1733500000123, "step_time_s": 0.10123456789012345, "data_wait_s": 0.0011234567, "samples": 32.0, "gpu": 3}`)
	}
	sb.WriteString("]}")
	body := []byte(sb.String())
	for _, mode := range []string{"fast", "encoding-json"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req ProgressRequest
				var err error
				if mode == "fast" {
					err = DecodeProgress(body, &req)
				} else {
					err = Decode(body, &req)
				}
				if err != nil || len(req.Reports) != 50 {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestDecodeProgressReuses: a request decoded again keeps its arrays, and
// Domain appends to the caller's: what the server pools, per request, is
// then two strings (the run id and the node).
func TestDecodeProgressReuses(t *testing.T) {
	var req ProgressRequest
	var dst []progress.Report
	body := []byte(senderBody)
	allocs := testing.AllocsPerRun(100, func() {
		if err := DecodeProgress(body, &req); err != nil {
			t.Fatal(err)
		}
		b, err := req.Domain(dst)
		if err != nil || len(b.Reports) != 2 {
			t.Fatal(b, err)
		}
		dst = b.Reports
	})
	if allocs > 2 {
		t.Errorf("%v allocations a request, want 2", allocs)
	}
}

package httpapi

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

func sampleBatch(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"run_id":"0123456789abcdef0123456789abcdef","metrics":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":"loss/%d","value":%v,"timestamp":%d,"step":%d}`, i%10, 1/float64(i+1), 1700000000000+i, i)
	}
	b.WriteString(`],"params":[{"key":"lr","value":"0.01"}],"tags":[{"key":"t","value":""}]}`)
	return []byte(b.String())
}

// equalBatches compares decoded requests, treating nil and empty slices
// alike and NaN as equal to NaN.
func equalBatches(a, b *logBatchRequest) bool {
	if a.RunID != b.RunID || len(a.Metrics) != len(b.Metrics) || len(a.Params) != len(b.Params) || len(a.Tags) != len(b.Tags) {
		return false
	}
	for i := range a.Metrics {
		x, y := a.Metrics[i], b.Metrics[i]
		vx, vy := x.Value, y.Value
		x.Value, y.Value = flexFloat{}, flexFloat{}
		if x != y || vx.Set != vy.Set || (vx.V != vy.V && !(math.IsNaN(vx.V) && math.IsNaN(vy.V))) {
			return false
		}
	}
	for i := range a.Params {
		if !equalKV(a.Params[i], b.Params[i]) {
			return false
		}
	}
	for i := range a.Tags {
		if !equalKV(a.Tags[i], b.Tags[i]) {
			return false
		}
	}
	return true
}

func equalKV(a, b wireKVIn) bool {
	if a.Key != b.Key || (a.Value == nil) != (b.Value == nil) {
		return false
	}
	return a.Value == nil || *a.Value == *b.Value
}

func TestDecodeLogBatch(t *testing.T) {
	tests := map[string]struct {
		body     string
		fast     bool // the hand-written parser handles it
		wantErr  string
		wantKeys int
	}{
		"OK":              {body: string(sampleBatch(25)), fast: true, wantKeys: 25},
		"OKEmpty":         {body: `{}`, fast: true},
		"OKSpaces":        {body: " { \"run_id\" : \"r\" , \"metrics\" : [ { \"key\" : \"a\" , \"value\" : -1.5e-3 , \"timestamp\" : 0 } ] } ", fast: true, wantKeys: 1},
		"OKEscapedKey":    {body: `{"run_id":"r","metrics":[{"key":"a\u0062","value":1,"timestamp":1}]}`, wantKeys: 1},
		"OKNaNString":     {body: `{"run_id":"r","metrics":[{"key":"a","value":"NaN","timestamp":1}]}`, wantKeys: 1},
		"OKQuotedInt":     {body: `{"run_id":"r","metrics":[{"key":"a","value":1,"timestamp":"17","step":"3"}]}`, wantKeys: 1},
		"OKNull":          {body: `{"run_id":"r","params":null}`},
		"ErrUnknownField": {body: `{"run_id":"r","metricz":[]}`, wantErr: `unknown field "metricz"`},
		"ErrType":         {body: `{"run_id":"r","metrics":[{"key":"a","value":true,"timestamp":1}]}`, wantErr: "metrics.value"},
		"ErrFraction":     {body: `{"run_id":"r","metrics":[{"key":"a","value":1,"timestamp":1.5}]}`, wantErr: "metrics.timestamp"},
		"ErrSyntax":       {body: `{"run_id":"r",`, wantErr: "malformed JSON"},
		"ErrTrailing":     {body: `{"run_id":"r"} {}`, wantErr: "unexpected data"},
		"ErrNumberKey":    {body: `{"run_id":"r","metrics":[{"key":5,"value":1,"timestamp":1}]}`, wantErr: "metrics.key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var fast logBatchRequest
			p := batchParser{b: []byte(tc.body)}
			if got := p.parse(&fast); got != tc.fast {
				t.Fatalf("fast path handled it: %v, want %v", got, tc.fast)
			}
			var req logBatchRequest
			err := decodeLogBatch([]byte(tc.body), &req)
			if tc.wantErr != "" {
				if !errs.Is(err, errs.Invalid) || !strings.Contains(errs.MessageOf(err), tc.wantErr) {
					t.Fatalf("err = %v, want Invalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Metrics) != tc.wantKeys {
				t.Fatalf("%d metrics, want %d", len(req.Metrics), tc.wantKeys)
			}
			var slow logBatchRequest
			if err := decodeJSON([]byte(tc.body), &slow); err != nil {
				t.Fatal(err)
			}
			if !equalBatches(&req, &slow) {
				t.Fatalf("decoders disagree:\n%+v\n%+v", req, slow)
			}
		})
	}
}

// FuzzDecodeLogBatch checks that whenever the hand-written parser accepts a
// body, encoding/json accepts it too and decodes the same request.
func FuzzDecodeLogBatch(f *testing.F) {
	f.Add(sampleBatch(3))
	f.Add([]byte(`{"run_id":"r","metrics":[{"key":"a","value":1e308,"timestamp":-0,"step":9223372036854775807}],"params":[],"tags":[{"key":"k","value":"v"}]}`))
	f.Add([]byte(`{"metrics":[{"key":"a","value":0.1,"timestamp":1,"dataset_name":"d","dataset_digest":"x","model_id":"m","run_id":"r"}]}`))
	f.Add([]byte(`{"run_id":"a","run_id":"b","params":[{"key":"x"}],"params":[{"value":"y"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // readBody refuses these before any decoder sees them
		}
		var fast logBatchRequest
		p := batchParser{b: body}
		if !p.parse(&fast) {
			return
		}
		var slow logBatchRequest
		if err := decodeJSON(body, &slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refused it: %v", body, err)
		}
		if !equalBatches(&fast, &slow) {
			t.Fatalf("decoders disagree on %q:\n%+v\n%+v", body, fast, slow)
		}
	})
}

// go test -run '^$' -bench DecodeLogBatch -benchmem ./internal/httpapi/
func BenchmarkDecodeLogBatch(b *testing.B) {
	body := sampleBatch(1000)
	b.Run("decoder=fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req logBatchRequest
			if err := decodeLogBatch(body, &req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/point")
	})
	b.Run("decoder=encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req logBatchRequest
			if err := decodeJSON(body, &req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/point")
	})
}

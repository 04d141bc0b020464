package wire

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
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
func equalBatches(a, b *LogBatchRequest) bool {
	if a.RunID != b.RunID || len(a.Metrics) != len(b.Metrics) || len(a.Params) != len(b.Params) || len(a.Tags) != len(b.Tags) {
		return false
	}
	for i := range a.Metrics {
		x, y := a.Metrics[i], b.Metrics[i]
		vx, vy := x.Value, y.Value
		x.Value, y.Value = Float{}, Float{}
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

func equalKV(a, b KVIn) bool {
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
		"OK":           {body: string(sampleBatch(25)), fast: true, wantKeys: 25},
		"OKEmpty":      {body: `{}`, fast: true},
		"OKSpaces":     {body: " { \"run_id\" : \"r\" , \"metrics\" : [ { \"key\" : \"a\" , \"value\" : -1.5e-3 , \"timestamp\" : 0 } ] } ", fast: true, wantKeys: 1},
		"OKEscapedKey": {body: `{"run_id":"r","metrics":[{"key":"a\u0062","value":1,"timestamp":1}]}`, wantKeys: 1},
		// A key the same as the one before is taken without a scan
		// (metricKey); one that starts like it, or is empty, is not.
		"OKRepeatedKeys":       {body: `{"metrics":[{"key":"ab","value":1,"timestamp":1},{"key":"ab","value":2,"timestamp":1},{"key":"abc","value":3,"timestamp":1},{"key":"a","value":4,"timestamp":1},{"key":"ab","value":5,"timestamp":1},{"key":"","value":6,"timestamp":1},{"key":"","value":7,"timestamp":1},{"timestamp":1,"key":"ab","value":8}]}`, fast: true, wantKeys: 8},
		"OKRepeatedKeyEscaped": {body: `{"metrics":[{"key":"a","value":1,"timestamp":1},{"key":"a\u0062","value":2,"timestamp":1}]}`, wantKeys: 2},
		"ErrRepeatedKeyCut":    {body: `{"metrics":[{"key":"a","value":1,"timestamp":1},{"key":"a`, wantErr: "malformed JSON"},
		"OKNaNString":          {body: `{"run_id":"r","metrics":[{"key":"a","value":"NaN","timestamp":1}]}`, wantKeys: 1},
		"OKQuotedInt":          {body: `{"run_id":"r","metrics":[{"key":"a","value":1,"timestamp":"17","step":"3"}]}`, wantKeys: 1},
		"OKNull":               {body: `{"run_id":"r","params":null}`},
		"ErrUnknownField":      {body: `{"run_id":"r","metricz":[]}`, wantErr: `unknown field "metricz"`},
		"ErrType":              {body: `{"run_id":"r","metrics":[{"key":"a","value":true,"timestamp":1}]}`, wantErr: "Invalid value true for parameter 'metrics[0].value' supplied:  Hint: Value was of type 'bool'."},
		"ErrFraction":          {body: `{"run_id":"r","metrics":[{"key":"a","value":1,"timestamp":1.5}]}`, wantErr: "Invalid value 1.5 for parameter 'metrics[0].timestamp' supplied:  Hint: Value was of type 'float'. See the API docs for more information about request parameters."},
		"ErrFloatType":         {body: `{"run_id":"r","metrics":[{"key":"a","value":{},"timestamp":1}]}`, wantErr: "Invalid value {} for parameter 'metrics[0].value' supplied:  Hint: Value was of type 'dict'."},
		"ErrSyntax":            {body: `{"run_id":"r",`, wantErr: "malformed JSON"},
		"ErrTrailing":          {body: `{"run_id":"r"} {}`, wantErr: "unexpected data"},
		"ErrNumberKey":         {body: `{"run_id":"r","metrics":[{"key":5,"value":1,"timestamp":1}]}`, wantErr: "Invalid value 5 for parameter 'metrics[0].key' supplied:  Hint: Value was of type 'int'."},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var fast LogBatchRequest
			p := batchParser{b: []byte(tc.body)}
			if got := p.parse(&fast); got != tc.fast {
				t.Fatalf("fast path handled it: %v, want %v", got, tc.fast)
			}
			var req LogBatchRequest
			err := DecodeLogBatch([]byte(tc.body), &req)
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
			var slow LogBatchRequest
			if err := Decode([]byte(tc.body), &slow); err != nil {
				t.Fatal(err)
			}
			if !equalBatches(&req, &slow) {
				t.Fatalf("decoders disagree:\n%+v\n%+v", req, slow)
			}
		})
	}
}

// FuzzDecodeLogBatch checks that DecodeLogBatch, the hand-written parser
// with its fallback, and the strict decoder (encoding/json) give the same
// request or the same error for any body.
func FuzzDecodeLogBatch(f *testing.F) {
	f.Add(sampleBatch(3))
	f.Add([]byte(`{"run_id":"r","metrics":[{"key":"a","value":1e308,"timestamp":-0,"step":9223372036854775807}],"params":[],"tags":[{"key":"k","value":"v"}]}`))
	f.Add([]byte(`{"metrics":[{"key":"a","value":0.1,"timestamp":1,"dataset_name":"d","dataset_digest":"x","model_id":"m","run_id":"r"}]}`))
	f.Add([]byte(`{"run_id":"a","run_id":"b","params":[{"key":"x"}],"params":[{"value":"y"}]}`))
	f.Add([]byte(`{"run_id":"r","metrics":[{"key":"a","value":"NaN","timestamp":"1"}],"tags":[{"key":"t","value":null}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"metrics":[{"key":"ab","value":1,"timestamp":1},{"key":"ab","value":2,"timestamp":2},{"key":"abc","value":3,"timestamp":3}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // readBody refuses these before any decoder sees them
		}
		var got, want LogBatchRequest
		gerr, werr := DecodeLogBatch(body, &got), Decode(body, &want)
		if !sameError(gerr, werr) {
			t.Fatalf("on %q DecodeLogBatch says %v, encoding/json %v", body, gerr, werr)
		}
		if gerr == nil && !equalBatches(&got, &want) {
			t.Fatalf("decoders disagree on %q:\n%+v\n%+v", body, got, want)
		}
	})
}

// sameError reports whether a and b are both nil or both errors with the
// same message.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// lossBatch is a batch of n loss-curve values with noise: the shortest
// repr of each value, 16 or 17 digits, ten keys in turn, or, grouped, each
// key's steps one after the other as the ingestion benchmark sends them.
func lossBatch(n int, grouped bool) []byte {
	var b strings.Builder
	b.WriteString(`{"run_id":"0123456789abcdef0123456789abcdef","metrics":[`)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		v := 2/(1+float64(i)/100) + rng.NormFloat64()*0.01
		key := i % 10
		if grouped {
			key = i * 10 / n
		}
		fmt.Fprintf(&b, `{"key":"loss/%d","value":%s,"timestamp":%d,"step":%d}`, key, strconv.FormatFloat(v, 'g', -1, 64), 1700000000000+7*i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// go test -run '^$' -bench DecodeLogBatch -benchmem ./internal/wire/
func BenchmarkDecodeLogBatch(b *testing.B) {
	for _, bc := range []struct {
		name   string
		body   []byte
		decode func([]byte, *LogBatchRequest) error
	}{
		{"decoder=fast", sampleBatch(1000), DecodeLogBatch},
		{"decoder=fast/values=loss", lossBatch(1000, false), DecodeLogBatch},
		{"decoder=fast/values=loss/keys=grouped", lossBatch(1000, true), DecodeLogBatch},
		{"decoder=encoding_json", sampleBatch(1000), func(body []byte, req *LogBatchRequest) error { return Decode(body, req) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				var req LogBatchRequest
				if err := bc.decode(bc.body, &req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/point")
		})
	}
}

// TestSmallIntAgreesWithParseInt checks the fast path for steps and
// timestamps against strconv at the edges of what it takes.
func TestSmallIntAgreesWithParseInt(t *testing.T) {
	for _, n := range []string{"0", "-0", "7", "-7", "1733400000000", "-1733400000000",
		"999999999999999999", "-999999999999999999", "1000000000000000000",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"", "-", "1.5", "1e3", "12a"} {
		got, ok := smallInt([]byte(n))
		want, err := strconv.ParseInt(n, 10, 64)
		digits := strings.TrimPrefix(n, "-")
		if takes := err == nil && len(digits) <= 18; ok != takes {
			t.Fatalf("smallInt(%q) ok = %v, want %v", n, ok, takes)
		}
		if ok && got != want {
			t.Fatalf("smallInt(%q) = %d, ParseInt %d", n, got, want)
		}
	}
}

func TestScanFloatAgreesWithParseFloat(t *testing.T) {
	cases := []string{"0", "-0", "0.0", "-0.0", "1", "-1", "0.1", "0.30000000000000004", "0.6931471805599453",
		"9007199254740992", "9007199254740993", "900719925474099.3", "0.000000000000000000001",
		"1e22", "1e23", "-1e-22", "1e-23", "1.5e+3", "2.5E-7", "00.5", "0.5e", "1.7976931348623157e308",
		"5e-324", "123456789012345678", "0.0000000000000000000000000000001234", "1e99999", "", "-", "1.", "1e", "1e+", ".5"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := math.Float64frombits(rng.Uint64())
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		cases = append(cases, strconv.FormatFloat(v, 'g', -1, 64))
		w := 2/(1+rng.Float64()) + rng.NormFloat64()*0.01
		cases = append(cases, strconv.FormatFloat(w, 'g', -1, 64), strconv.FormatFloat(w, 'f', rng.IntN(12), 64),
			strconv.FormatFloat(w*1e-5, 'g', -1, 64), strconv.FormatFloat(float64(float32(w)), 'g', -1, 64))
	}
	took := 0
	for _, n := range cases {
		end, got, exact, ok := scanFloat([]byte(n), 0)
		if !ok || !exact || end != len(n) {
			continue
		}
		took++
		want, err := strconv.ParseFloat(n, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("scanFloat(%q) = %v (%#x), ParseFloat %v (%#x), %v", n, got, math.Float64bits(got), want, math.Float64bits(want), err)
		}
	}
	// Most of the values a client sends take the fast path; a change
	// that sent them all to ParseFloat would pass the loop above.
	if took < len(cases)/3 {
		t.Fatalf("scanFloat took %d of %d numbers", took, len(cases))
	}
}

// FuzzScanFloat checks scanFloat against strconv.ParseFloat on any input:
// where it gives a value, it gives what ParseFloat does.
func FuzzScanFloat(f *testing.F) {
	for _, s := range []string{"0.6931471805599453", "-1.5e-7", "9007199254740993", "1e22", "0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, n string) {
		end, got, exact, ok := scanFloat([]byte(n), 0)
		if !ok || !exact || end != len(n) {
			return
		}
		want, err := strconv.ParseFloat(n, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("scanFloat(%q) = %v, ParseFloat %v, %v", n, got, want, err)
		}
	})
}

package wire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func sampleAppend(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"run_id":"0123456789abcdef0123456789abcdef","source":"n0-l0-3f9a","first_seq":1200,"node":0,"local_rank":-1,"lines":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		text, _ := json.Marshal(fmt.Sprintf("2026-01-02 10:00:00 INFO step=%d loss=%.5f \x1b[32m\"ok\"\x1b[0m\ttab é €", i, 1/float64(i+1)))
		fmt.Fprintf(&b, `{"timestamp":%d,"stream":"%s","text":%s`, 1700000000000+i, []string{"stdout", "stderr"}[i%2], text)
		if i%7 == 3 {
			b.WriteString(`,"cr":true`)
		}
		if i%11 == 5 {
			b.WriteString(`,"partial":true,"local_rank":3,"node":2`)
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestDecodeLogAppendFastPath(t *testing.T) {
	for name, body := range map[string]string{
		"Sample":    string(sampleAppend(50)),
		"Escapes":   `{"run_id":"r","source":"s","first_seq":0,"lines":[{"timestamp":1,"stream":"stdout","text":"a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac\ud83d\ude00"}]}`,
		"Spaces":    " { \"lines\" : [ ] , \"source\" : \"s\" } ",
		"Empty":     `{}`,
		"EmptyLine": `{"lines":[{}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			var fast LogAppendRequest
			p := appendParser{b: []byte(body)}
			if !p.parse(&fast) {
				t.Fatalf("fast path refused %q", body)
			}
			var slow LogAppendRequest
			if err := Decode([]byte(body), &slow); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("decoders disagree:\n%+v\n%+v", fast, slow)
			}
		})
	}
	// Shapes the fast path leaves to the strict decoder, which decides.
	for name, body := range map[string]string{
		"LoneSurrogate": `{"lines":[{"text":"\ud800"}]}`,
		"QuotedNumber":  `{"first_seq":"5"}`,
		"Float":         `{"first_seq":1.0}`,
		"Null":          `{"lines":null}`,
		"Unknown":       `{"extra":1}`,
		"Duplicate":     `{"source":"a","source":"b"}`,
		"CaseFolded":    `{"Source":"a"}`,
		"Control":       "{\"source\":\"a\x01\"}",
		"Trailing":      `{} x`,
	} {
		t.Run("Fallback"+name, func(t *testing.T) {
			p := appendParser{b: []byte(body)}
			if p.parse(&LogAppendRequest{}) {
				t.Fatalf("fast path accepted %q", body)
			}
		})
	}
}

// FuzzDecodeLogAppend checks that DecodeLogAppend, the hand-written
// parser with its fallback, and the strict decoder (encoding/json) give
// the same request or the same error for any body.
func FuzzDecodeLogAppend(f *testing.F) {
	f.Add(sampleAppend(3))
	f.Add([]byte(`{"run_id":"r","source":"s","first_seq":0,"lines":[{"timestamp":1,"stream":"stdout","text":"a\"b\\c\u00e9\ud83d\ude00","cr":false,"partial":true,"node":-0,"local_rank":9}]}`))
	f.Add([]byte(`{"lines":[{},{}],"lines":[]}`))
	f.Add([]byte(`{"first_seq":"5","lines":[{"text":"\ud800"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // readBody refuses these before any decoder sees them
		}
		var got, want LogAppendRequest
		gerr, werr := DecodeLogAppend(body, &got), Decode(body, &want)
		if !sameError(gerr, werr) {
			t.Fatalf("on %q DecodeLogAppend says %v, encoding/json %v", body, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders disagree on %q:\n%+v\n%+v", body, got, want)
		}
	})
}

// plainAppend is an append body of n typical lines (no escapes).
func plainAppend(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"run_id":"0123456789abcdef0123456789abcdef","source":"n0-3f9a","first_seq":0,"node":0,"local_rank":-1,"lines":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"timestamp":%d,"stream":"stdout","text":"2026-12-02T10:00:00.%06dZ INFO train step=%d loss=%.6f lr=3.0e-04 grad_norm=0.9812 tok/s=91234 ....."}`, 1700000000000+i, i, i, 1/float64(i+1))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// go test -run '^$' -bench DecodeLogAppend -benchmem ./internal/wire/
func BenchmarkDecodeLogAppend(b *testing.B) {
	plain := plainAppend(20_000)
	b.Run("decoder=fast/text=plain", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			var req LogAppendRequest
			if err := DecodeLogAppend(plain, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	body := sampleAppend(10_000)
	b.Run("decoder=fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req LogAppendRequest
			if err := DecodeLogAppend(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder=encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req LogAppendRequest
			if err := Decode(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

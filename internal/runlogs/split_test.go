package runlogs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/runlogs"
)

type rec struct {
	text  string
	flags runlogs.Flags
}

// split feeds input to a Splitter in writes of the given sizes (all at
// once when none) and returns the records.
func split(limit int, input string, writes ...int) []rec {
	var out []rec
	s := runlogs.NewSplitter(limit, func(b []byte, f runlogs.Flags) {
		out = append(out, rec{string(b), f})
	})
	in := []byte(input)
	for i := 0; len(in) > 0; i++ {
		n := len(in)
		if len(writes) > 0 {
			n = min(writes[i%len(writes)], len(in))
		}
		s.Write(in[:n])
		in = in[n:]
	}
	s.Flush()
	return out
}

func TestSplitter(t *testing.T) {
	const P, CR = runlogs.FlagPartial, runlogs.FlagCR
	for name, tc := range map[string]struct {
		limit int
		in    string
		want  []rec
	}{
		"LF":                   {0, "a\nbb\n", []rec{{"a", 0}, {"bb", 0}}},
		"CRLF":                 {0, "a\r\nb\r\n", []rec{{"a", 0}, {"b", 0}}},
		"EmptyLines":           {0, "\n\n", []rec{{"", 0}, {"", 0}}},
		"NoTrailingNewline":    {0, "a\nlast", []rec{{"a", 0}, {"last", 0}}},
		"ProgressBar":          {0, "\r 10%\r 50%\r100%\ndone\n", []rec{{" 10%", CR}, {" 50%", CR}, {"100%", 0}, {"done", 0}}},
		"TrailingCR":           {0, "50%\r", []rec{{"50%", CR}}},
		"CRThenText":           {0, "a\rb", []rec{{"a", CR}, {"b", 0}}},
		"LongLine":             {4, "abcdefghij\n", []rec{{"abcd", P}, {"efgh", P}, {"ij", 0}}},
		"ExactLimit":           {4, "abcd\nabcdefgh\n", []rec{{"abcd", 0}, {"abcd", P}, {"efgh", 0}}},
		"CutAtCharBoundary":    {5, "abcdé€\n", []rec{{"abcd", P}, {"é€", 0}}},
		"InvalidUTF8":          {0, "a\xffb\xfe\xfdc\n", []rec{{"a\uFFFDb\uFFFDc", 0}}},
		"ANSIKept":             {0, "\x1b[31mred\x1b[0m\n", []rec{{"\x1b[31mred\x1b[0m", 0}}},
		"Binary":               {0, "\x00\x01\x02\x80\x81\n", []rec{{"\x00\x01\x02\uFFFD", 0}}},
		"RepairGrowsPastCut":   {6, "\xff\xfe\xfd\xfcab\xff\n", []rec{{"\uFFFDab", P}, {"\uFFFD", 0}}},
		"RepairGrowsPastLimit": {4, "\xffa\xffb\n", []rec{{"\uFFFDa", P}, {"\uFFFDb", 0}}},
		"TruncatedMultibyte":   {0, "ab\xe2\x82\n", []rec{{"ab\uFFFD", 0}}},
		"OnlyCR":               {0, "\r\r\r", nil},
		"CRLFAcrossCR":         {0, "a\r\r\nb\n", []rec{{"a", CR}, {"", 0}, {"b", 0}}},
		"TabsAndSpacesKept":    {0, "\tx  \n", []rec{{"\tx  ", 0}}},
		"LineOfOnlyMultibyte":  {4, "€€€\n", []rec{{"€", P}, {"€", P}, {"€", 0}}},
	} {
		t.Run(name, func(t *testing.T) {
			// Whole, byte by byte, and in odd sizes: the same records.
			for _, writes := range [][]int{nil, {1}, {2, 3}, {7}} {
				got := split(tc.limit, tc.in, writes...)
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("writes %v: got %q, want %q", writes, got, tc.want)
				}
			}
		})
	}
}

// TestSplitterHugeLine feeds a 100 MB line without a newline: the
// splitter never holds more than one record and cuts it into 1 MiB
// records.
func TestSplitterHugeLine(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB")
	}
	const size = 100 << 20
	var records, total int
	var last runlogs.Flags
	s := runlogs.NewSplitter(0, func(b []byte, f runlogs.Flags) {
		if len(b) > runlogs.MaxLineBytes {
			t.Fatalf("record of %d bytes", len(b))
		}
		records++
		total += len(b)
		last = f
	})
	buf := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB writes
	for written := 0; written < size; written += len(buf) {
		s.Write(buf)
		if s.Pending() > runlogs.MaxLineBytes {
			t.Fatalf("%d bytes pending", s.Pending())
		}
	}
	s.Write([]byte("\n"))
	if total != size || records != size/runlogs.MaxLineBytes || last != 0 {
		t.Fatalf("%d records, %d bytes, last flags %d", records, total, last)
	}
}

func TestSplitterFlushPartial(t *testing.T) {
	var got []rec
	s := runlogs.NewSplitter(0, func(b []byte, f runlogs.Flags) { got = append(got, rec{string(b), f}) })
	s.Write([]byte("epoch 1: \xe2\x82"))
	if !s.FlushPartial() {
		t.Fatal("nothing flushed")
	}
	s.Write([]byte("\xac done\nx\r"))
	if s.FlushPartial() {
		t.Fatal("flushed a pending \\r")
	}
	s.Flush()
	want := []rec{{"epoch 1: ", runlogs.FlagPartial}, {"€ done", 0}, {"x", runlogs.FlagCR}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestSplitterReproducesOutput checks on random output that the records,
// each followed by its terminator, give back the input (valid UTF-8
// without empty "\r" segments), whatever the write sizes.
func TestSplitterReproducesOutput(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "bc", "é", "€", "\n", "\r\n", "\r", "loss=0.1", "\x1b[0m", "\t"}
	for iter := range 300 {
		var sb strings.Builder
		for range rng.IntN(200) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := sb.String()
		limit := 4 + rng.IntN(20)
		var out strings.Builder
		for _, r := range split(limit, in, 1+rng.IntN(9)) {
			if !utf8.ValidString(r.text) || len(r.text) > limit {
				t.Fatalf("iter %d: bad record %q", iter, r.text)
			}
			out.WriteString(r.text)
			switch {
			case r.flags&runlogs.FlagPartial != 0:
			case r.flags&runlogs.FlagCR != 0:
				out.WriteString("\r")
			default:
				out.WriteString("\n")
			}
		}
		want := normalise(in)
		if got := out.String(); got != want {
			t.Fatalf("iter %d (limit %d): input %q\n got %q\nwant %q", iter, limit, in, got, want)
		}
	}
}

// normalise is what the records reproduce: "\r\n" as "\n", no empty "\r"
// segments, and a final line end.
func normalise(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	seg := 0 // bytes since the last terminator
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r':
			if seg > 0 {
				b.WriteByte('\r')
			}
			seg = 0
		case '\n':
			b.WriteByte('\n')
			seg = 0
		default:
			b.WriteByte(s[i])
			seg++
		}
	}
	if seg > 0 {
		b.WriteByte('\n')
	}
	return b.String()
}

// BenchmarkSplitter measures splitting typical training output.
//
//	go test -run '^$' -bench Splitter -count 6 ./internal/runlogs/
func BenchmarkSplitter(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		fmt.Fprintf(&buf, "2026-01-02 10:00:00 INFO step=%d loss=%.5f lr=3e-4 throughput=1234.5 samples/s grad_norm=0.98\n", i, 1/float64(i+1))
	}
	data := buf.Bytes()
	s := runlogs.NewSplitter(0, func([]byte, runlogs.Flags) {})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for p := data; len(p) > 0; {
			n := min(len(p), 65536)
			s.Write(p[:n])
			p = p[n:]
		}
	}
}

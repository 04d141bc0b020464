package runlogs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/runlogs/runlogstest"
)

func TestChunkRoundTrip(t *testing.T) {
	for name, lines := range map[string][]runlogs.Line{
		"One":        {{TimestampMs: 5, Stream: runlogs.Stdout, LocalRank: runlogs.UnknownRank, Text: "hello"}},
		"EmptyText":  {{TimestampMs: 0, Stream: runlogs.Stderr, Text: ""}},
		"Varied":     runlogstest.Lines(1000, "v"),
		"FullChunk":  runlogstest.Lines(runlogs.ChunkLines, "step "),
		"LongLine":   {{TimestampMs: 1, Stream: runlogs.Stdout, Node: 7, LocalRank: 3, Flags: runlogs.FlagPartial, Text: strings.Repeat("x", runlogs.MaxLineBytes)}},
		"Random":     randomLines(rand.New(rand.NewPCG(3, 4)), 500),
		"ClockSteps": {{TimestampMs: 1000, Stream: 1}, {TimestampMs: 10, Stream: 1}, {TimestampMs: 1 << 50, Stream: 2, Node: 1 << 30, LocalRank: 1<<31 - 1}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, level := range []int{runlogs.CompressFast, runlogs.CompressSmall} {
				data := runlogs.AppendChunk([]byte("prefix"), lines, level)
				if !bytes.HasPrefix(data, []byte("prefix")) {
					t.Fatal("AppendChunk did not append")
				}
				data = data[len("prefix"):]
				got, err := runlogs.DecodeChunk(nil, data, 42)
				if err != nil {
					t.Fatal(err)
				}
				want := append([]runlogs.Line(nil), lines...)
				for i := range want {
					want[i].Number = 42 + int64(i)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round trip differs (%d lines, got %d)", len(want), len(got))
				}
				if n, err := runlogs.ChunkLen(data); err != nil || n != len(lines) {
					t.Fatalf("ChunkLen = %d, %v", n, err)
				}
			}
		})
	}
}

func randomLines(rng *rand.Rand, n int) []runlogs.Line {
	out := make([]runlogs.Line, n)
	ts := int64(1_700_000_000_000)
	for i := range out {
		ts += int64(rng.IntN(100))
		b := make([]byte, rng.IntN(300))
		for j := range b {
			b[j] = byte(32 + rng.IntN(95))
		}
		out[i] = runlogs.Line{
			TimestampMs: ts, Stream: runlogs.Stream(1 + rng.IntN(2)), Node: int32(rng.IntN(4)),
			LocalRank: int32(rng.IntN(9)) - 1, Flags: runlogs.Flags(rng.IntN(3)), Text: string(b),
		}
	}
	return out
}

// TestChunkSize reports how well typical training output compresses.
func TestChunkSize(t *testing.T) {
	lines := make([]runlogs.Line, runlogs.ChunkLines)
	raw := 0
	for i := range lines {
		lines[i] = runlogs.Line{
			TimestampMs: 1_700_000_000_000 + int64(i*7), Stream: runlogs.Stdout, LocalRank: 0,
			Text: fmt.Sprintf("2026-01-02 10:00:%02d INFO train step=%d loss=%.5f lr=0.0003 tokens/s=%d", i%60, i, 2/float64(i+1), 90000+i%977),
		}
		raw += len(lines[i].Text)
	}
	fast := len(runlogs.AppendChunk(nil, lines, runlogs.CompressFast))
	small := len(runlogs.AppendChunk(nil, lines, runlogs.CompressSmall))
	t.Logf("%d lines, %d bytes of text: fast %d bytes (%.1fx), small %d bytes (%.1fx)", len(lines), raw, fast, float64(raw)/float64(fast), small, float64(raw)/float64(small))
	if fast*3 > raw {
		t.Fatalf("chunk of %d bytes for %d bytes of text: compression is off", fast, raw)
	}
}

func TestDecodeChunkCorrupt(t *testing.T) {
	good := runlogs.AppendChunk(nil, runlogstest.Lines(10, "c"), runlogs.CompressFast)
	raw := runlogs.AppendChunk(nil, []runlogs.Line{{Stream: 1, Text: "\x00"}}, runlogs.CompressFast)
	for name, data := range map[string][]byte{
		"Empty":            nil,
		"Version":          append([]byte{9}, good[1:]...),
		"Codec":            append([]byte{1, 7}, good[2:]...),
		"Truncated":        good[:len(good)-3],
		"Trailing":         append(append([]byte(nil), good...), 0, 0, 0),
		"ZeroLines":        {1, 0, 0, 5, 0, 0, 0, 0, 0},
		"TooManyLines":     {1, 0, 200, 5, 0, 0, 0, 0, 0},
		"HugePayload":      {1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"RawLengthDiffers": append(append([]byte(nil), raw...), 'x'),
		"BadStream":        {1, 0, 1, 5, 0, 3, 0, 0, 0},
		"BadTextLength":    {1, 0, 1, 5, 0, 1, 0, 0, 4},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := runlogs.DecodeChunk(nil, data, 1); !errors.Is(err, runlogs.ErrCorruptChunk) {
				t.Fatalf("got %v, want ErrCorruptChunk", err)
			}
		})
	}
}

// FuzzDecodeChunk decodes arbitrary bytes: the decoder must not panic or
// allocate without bound, and whatever it accepts must encode and decode
// back to the same lines.
func FuzzDecodeChunk(f *testing.F) {
	f.Add(runlogs.AppendChunk(nil, runlogstest.Lines(20, "f"), runlogs.CompressFast))
	f.Add(runlogs.AppendChunk(nil, []runlogs.Line{{Stream: 2, Text: "\x00\x01"}}, runlogs.CompressSmall))
	f.Add([]byte{1, 0, 1, 5, 0, 1, 0, 0, 0})
	f.Add([]byte{1, 1, 2, 10, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := runlogs.DecodeChunk(nil, data, 1)
		if err != nil {
			if !errors.Is(err, runlogs.ErrCorruptChunk) {
				t.Fatalf("error %v does not wrap ErrCorruptChunk", err)
			}
			return
		}
		again, err := runlogs.DecodeChunk(nil, runlogs.AppendChunk(nil, lines, runlogs.CompressFast), 1)
		if err != nil {
			t.Fatalf("re-encoded chunk does not decode: %v", err)
		}
		if !reflect.DeepEqual(lines, again) {
			t.Fatalf("re-encoded chunk differs")
		}
	})
}

// FuzzChunkRoundTrip encodes lines built from fuzz input and decodes them.
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), int64(1_700_000_000_000), uint8(3))
	f.Fuzz(func(t *testing.T, text []byte, ts int64, meta uint8) {
		var lines []runlogs.Line
		for i, part := range bytes.Split(text, []byte("\n")) {
			lines = append(lines, runlogs.Line{
				TimestampMs: ts + int64(i)*int64(meta),
				Stream:      runlogs.Stream(1 + (int(meta)+i)%2),
				Node:        int32(meta) * int32(i),
				LocalRank:   int32(meta%7) - 1,
				Flags:       runlogs.Flags(meta+uint8(i)) % 4,
				Text:        strings.ToValidUTF8(string(part), "\uFFFD"),
			})
		}
		got, err := runlogs.DecodeChunk(nil, runlogs.AppendChunk(nil, lines, runlogs.CompressFast), 7)
		if err != nil {
			t.Fatal(err)
		}
		for i := range lines {
			lines[i].Number = 7 + int64(i)
		}
		if !reflect.DeepEqual(got, lines) {
			t.Fatalf("round trip differs")
		}
	})
}

// BenchmarkChunk measures encoding and decoding a full chunk of typical
// output.
//
//	go test -run '^$' -bench Chunk -count 6 ./internal/runlogs/
func BenchmarkChunk(b *testing.B) {
	lines := runlogstest.Lines(runlogs.ChunkLines, "2026-01-02 10:00:00 INFO train step=")
	var raw int64
	for _, l := range lines {
		raw += int64(len(l.Text))
	}
	b.Run("op=encode", func(b *testing.B) {
		b.SetBytes(raw)
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst = runlogs.AppendChunk(dst[:0], lines, runlogs.CompressFast)
		}
		b.ReportMetric(float64(len(dst))/float64(len(lines)), "B/line")
	})
	b.Run("op=decode", func(b *testing.B) {
		data := runlogs.AppendChunk(nil, lines, runlogs.CompressFast)
		b.SetBytes(raw)
		b.ReportAllocs()
		var dst []runlogs.Line
		for b.Loop() {
			var err error
			if dst, err = runlogs.DecodeChunk(dst[:0], data, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

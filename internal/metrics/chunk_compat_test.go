package metrics

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDecodeChunkVersion1 decodes chunks that version 1 of the encoder
// wrote (testdata/chunk-v1, made before version 2 existed; never
// regenerate them) and compares every point with the points they were
// made from, bit for bit.
func TestDecodeChunkVersion1(t *testing.T) {
	files, err := filepath.Glob("testdata/chunk-v1/*.chunk")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".chunk")
		t.Run(name, func(t *testing.T) {
			chunk, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if chunk[0] != 1 {
				t.Fatalf("fixture starts with version %d, want 1", chunk[0])
			}
			raw, err := os.ReadFile(strings.TrimSuffix(f, ".chunk") + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var want []struct {
				Step, TimestampMs int64
				ValueBits         string
			}
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeChunk(nil, chunk)
			if err != nil {
				t.Fatalf("DecodeChunk: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d points, want %d", len(got), len(want))
			}
			for i, w := range want {
				bits, _ := strconv.ParseUint(w.ValueBits, 16, 64)
				g := got[i]
				if g.Step != w.Step || g.TimestampMs != w.TimestampMs || math.Float64bits(g.Value) != bits {
					t.Fatalf("point %d = %+v (bits %#x), want %+v", i, g, math.Float64bits(g.Value), w)
				}
			}
			// The iterator, from the start and resumed at every point.
			checkIter(t, got, chunk)
		})
	}
}

func TestDecodeChunkDeltaCorrupt(t *testing.T) {
	pts := genSeries("smooth64", 50, 1)
	valid := mustAppendChunk(t, nil, pts)
	h, err := parseChunk(valid)
	if err != nil || h.codec.order == 0 {
		t.Fatalf("want a delta chunk, got order %d, %v", h.codec.order, err)
	}
	// Replace the value stream by one that starts with a "10" code,
	// which needs a window that has not been opened yet.
	bad := slices.Clone(valid)
	off := len(valid) - len(h.values)
	bad[off] = 0x80 | bad[off]&0x3f
	if _, err := DecodeChunk(nil, bad); !errors.Is(err, ErrCorruptChunk) {
		t.Fatalf("DecodeChunk of a '10' code before any window: err = %v", err)
	}
}

// checkIter checks ChunkIter on chunk, whose points are pts: read in
// blocks of several sizes, and resumed from a mark taken at every index.
func checkIter(t *testing.T, pts []Point, chunk []byte) {
	t.Helper()
	for _, block := range []int{1, 7, 256, 1000, len(pts) + 1} {
		var it ChunkIter
		if err := it.Reset(chunk); err != nil {
			t.Fatal(err)
		}
		var got []Point
		for it.Index() < it.Len() {
			var err error
			if got, err = it.Next(got, block); err != nil {
				t.Fatalf("block %d: %v", block, err)
			}
		}
		if !pointsEqual(got, pts) {
			t.Fatalf("block %d: iterated points differ", block)
		}
	}
	var it ChunkIter
	if err := it.Reset(chunk); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= len(pts); i++ {
		mark := it.AppendMark(nil)
		var r ChunkIter
		if err := r.Resume(chunk, mark); err != nil {
			t.Fatalf("resume at %d: %v", i, err)
		}
		if r.Index() != i {
			t.Fatalf("resumed at index %d, want %d", r.Index(), i)
		}
		if last, ok := r.Last(); ok != (i > 0) || (i > 0 && !Equal(last, pts[i-1])) {
			t.Fatalf("resumed at %d: Last = %+v, %v; want %+v", i, last, ok, pts[max(i-1, 0)])
		}
		var sk ChunkIter
		if err := sk.Reset(chunk); err != nil {
			t.Fatal(err)
		}
		if _, err := sk.Skip(i, nil); err != nil || sk.Index() != i {
			t.Fatalf("Skip(%d): index %d, %v", i, sk.Index(), err)
		}
		rest, err := r.Next(nil, len(pts))
		if err != nil {
			t.Fatalf("resume at %d: %v", i, err)
		}
		if !pointsEqual(rest, pts[i:]) {
			t.Fatalf("resumed at %d: points differ", i)
		}
		if i < len(pts) {
			if _, err := it.Next(nil, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestChunkIterResume(t *testing.T) {
	for _, kind := range []string{"float32", "float64", "const", "loss32", "mixed", "smooth64", "smooth32", "cosine", "linear"} {
		t.Run(kind, func(t *testing.T) {
			pts := genSeries(kind, 600, 3)
			checkIter(t, pts, mustAppendChunk(t, nil, pts))
		})
	}
	t.Run("EveryCodec", func(t *testing.T) {
		pts := genSeries("float32", 300, 4)
		for flags := range byte(flagsKnown + 1) {
			c := codecOf(flags)
			if c.order != 0 && c.rot != 0 {
				continue
			}
			head := binary.AppendUvarint([]byte{ChunkVersion}, uint64(len(pts)))
			checkIter(t, pts, appendChunk(head, pts, c))
		}
	})
}

func TestChunkIterBadMark(t *testing.T) {
	pts := genSeries("float64", 100, 5)
	chunk := mustAppendChunk(t, nil, pts)
	var it ChunkIter
	if err := it.Reset(chunk); err != nil {
		t.Fatal(err)
	}
	if _, err := it.Next(nil, 40); err != nil {
		t.Fatal(err)
	}
	mark := it.AppendMark(nil)
	for name, m := range map[string][]byte{
		"ErrEmpty":         nil,
		"ErrVersion":       append([]byte{9}, mark[1:]...),
		"ErrTruncated":     mark[:len(mark)-1],
		"ErrTrailing":      append(slices.Clone(mark), 0),
		"ErrIndexTooLarge": append([]byte{markVersion}, binary.AppendUvarint(nil, 101)...),
		"ErrBitsTooLarge":  append(append([]byte{markVersion}, binary.AppendUvarint(nil, 40)...), binary.AppendUvarint(nil, 1<<40)...),
	} {
		t.Run(name, func(t *testing.T) {
			var r ChunkIter
			if err := r.Resume(chunk, m); !errors.Is(err, ErrBadMark) {
				t.Fatalf("Resume error = %v, want ErrBadMark", err)
			}
		})
	}
}

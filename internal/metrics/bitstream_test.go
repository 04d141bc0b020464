package metrics

import (
	"math/rand/v2"
	"testing"
)

func TestBitStreamRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		type field struct {
			v uint64
			k uint
		}
		var fields []field
		var w bitWriter
		total := uint(0)
		for range r.IntN(300) {
			k := uint(r.IntN(65))
			v := r.Uint64()
			if k < 64 {
				v &= 1<<k - 1
			}
			if r.IntN(4) == 0 {
				k, v = 1, 0
				w.writeZero()
			} else {
				w.writeBits(v, k)
			}
			fields = append(fields, field{v, k})
			total += k
		}
		out := w.flush()
		if want := int(total+7) / 8; len(out) != want {
			t.Fatalf("round %d: %d bits flushed to %d bytes, want %d", round, total, len(out), want)
		}
		rd := newBitReader(out)
		for i, f := range fields {
			if got := rd.readWide(f.k); got != f.v {
				t.Fatalf("round %d field %d: read %#x in %d bits, want %#x", round, i, got, f.k, f.v)
			}
		}
		if err := rd.finish(); err != nil {
			t.Fatalf("round %d: finish: %v", round, err)
		}
	}
}

func TestBitReaderOverrun(t *testing.T) {
	for name, tc := range map[string]struct {
		src     []byte
		read    []uint // widths to read
		wantErr bool
	}{
		"Exact":           {src: []byte{0xff, 0xff}, read: []uint{16}},
		"PaddingZero":     {src: []byte{0xf0}, read: []uint{4}},
		"ErrPaddingSet":   {src: []byte{0xf1}, read: []uint{4}, wantErr: true},
		"ErrSpareByte":    {src: []byte{0xff, 0}, read: []uint{8}, wantErr: true},
		"ErrOverrun":      {src: []byte{0xff}, read: []uint{9}, wantErr: true},
		"ErrFarOverrun":   {src: []byte{1, 2, 3}, read: []uint{56, 56, 56, 64, 64}, wantErr: true},
		"ErrEmptyOverrun": {read: []uint{1}, wantErr: true},
		"Empty":           {},
		"LongExact":       {src: make([]byte, 40), read: []uint{56, 56, 56, 56, 56, 40}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newBitReader(tc.src)
			for _, k := range tc.read {
				r.readWide(k)
			}
			if err := r.finish(); (err != nil) != tc.wantErr {
				t.Fatalf("finish() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

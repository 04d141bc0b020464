package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The packed sample encoding holds one Sample's GPUs and processes (not its
// timestamp, which the store keeps beside it). The store keeps one packed
// sample per node per timestamp, and the agent's spool embeds it in each
// record. The layout is in docs/format/gpu-sample.md.
//
// Measurements are stored as float32 (7 significant digits, more than any
// GPU counter has); byte counts, error counts, bit masks and codes are
// stored exactly as integers.
//
// Version 1 had eight fields and a one-byte field mask; version 2 (written
// since) has a uvarint mask and the fields of gpu.Field. Both are read.

// sampleVersion is the first byte of every packed sample written now;
// sampleVersion1 samples (eight fields) are still read.
const (
	sampleVersion  = 2
	sampleVersion1 = 1
	// v1Fields is the number of fields a version 1 sample can hold.
	v1Fields = 8
)

// Decoding limits: a packed sample exceeding them is corrupt.
const (
	maxPackedGPUs      = 4096
	maxPackedProcesses = 1 << 16
)

// ErrCorrupt is returned (wrapped) for packed data that cannot be decoded.
var ErrCorrupt = errors.New("corrupt packed GPU sample")

// AppendSample appends the packed encoding of s's GPUs and processes to
// dst and returns the extended slice. Missing readings (NaN, ±Inf, and
// negative byte counts) are left out. The caller owns dst.
func AppendSample(dst []byte, s *Sample) []byte {
	dst = append(dst, sampleVersion)
	dst = binary.AppendUvarint(dst, uint64(len(s.GPUs)))
	for i := range s.GPUs {
		g := &s.GPUs[i]
		dst = binary.AppendUvarint(dst, uint64(max(g.Index, 0)))
		dst = appendString(dst, g.UUID)
		dst = appendString(dst, g.Name)
		dst = appendString(dst, g.Err)
		var mask uint64
		for f := range NumFields {
			if storable(Field(f), g.Values[f]) {
				mask |= 1 << f
			}
		}
		dst = binary.AppendUvarint(dst, mask)
		for f := range NumFields {
			if mask&(1<<f) == 0 {
				continue
			}
			v := g.Values[f]
			if Field(f).IsInteger() {
				dst = binary.AppendUvarint(dst, bytesValue(v))
			} else {
				dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32Value(v)))
			}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Processes)))
	for _, p := range s.Processes {
		dst = binary.AppendUvarint(dst, uint64(max(p.GPU, 0)))
		dst = binary.AppendUvarint(dst, uint64(max(p.PID, 0)))
		dst = appendString(dst, p.Name)
		mem := uint64(0)
		if p.MemUsedBytes >= 0 {
			mem = uint64(p.MemUsedBytes) + 1
		}
		dst = binary.AppendUvarint(dst, mem)
	}
	return dst
}

// storable reports whether v is a reading worth storing for field f.
func storable(f Field, v float64) bool {
	if IsMissing(v) {
		return false
	}
	return !f.IsInteger() || v >= 0
}

func bytesValue(v float64) uint64 {
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return uint64(math.Round(v))
}

func float32Value(v float64) float32 {
	switch {
	case v > math.MaxFloat32:
		return math.MaxFloat32
	case v < -math.MaxFloat32:
		return -math.MaxFloat32
	}
	return float32(v)
}

func appendString(dst []byte, s string) []byte {
	if len(s) > MaxStringLen {
		s = s[:MaxStringLen]
	}
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeSample decodes a packed sample into dst, replacing its GPUs and
// processes but not its TimestampMs. It reuses dst's slices and keeps its
// strings when they are equal to the decoded ones, so that decoding a
// node's history into one Sample allocates almost nothing. Decoded
// measurements are float32 values widened to float64.
func DecodeSample(data []byte, dst *Sample) error {
	d := decoder{b: data}
	version := d.byte()
	if version != sampleVersion && version != sampleVersion1 {
		if d.err != nil {
			return d.err
		}
		return fmt.Errorf("%w: unknown version %d", ErrCorrupt, version)
	}
	n := d.count(maxPackedGPUs)
	gpus := dst.GPUs[:0]
	for i := 0; i < n && d.err == nil; i++ {
		if len(gpus) < cap(gpus) {
			gpus = gpus[:i+1]
		} else {
			gpus = append(gpus, GPU{})
		}
		g := &gpus[i]
		g.Index = d.count(1 << 31)
		d.string(&g.UUID)
		d.string(&g.Name)
		d.string(&g.Err)
		var mask uint64
		if version == sampleVersion1 {
			mask = uint64(d.byte()) // eight fields; the later ones are missing
		} else if mask = d.uvarint(); mask >= 1<<NumFields {
			d.fail("field mask")
		}
		for f := range NumFields {
			if mask&(1<<f) == 0 {
				g.Values[f] = Missing()
				continue
			}
			if Field(f).IsInteger() {
				g.Values[f] = float64(d.uvarint())
			} else {
				g.Values[f] = float64(math.Float32frombits(d.uint32()))
			}
		}
	}
	dst.GPUs = gpus
	n = d.count(maxPackedProcesses)
	procs := dst.Processes[:0]
	for i := 0; i < n && d.err == nil; i++ {
		if len(procs) < cap(procs) {
			procs = procs[:i+1]
		} else {
			procs = append(procs, Process{})
		}
		p := &procs[i]
		p.GPU = d.count(1 << 31)
		p.PID = d.count(1 << 31)
		d.string(&p.Name)
		p.MemUsedBytes = int64(d.uvarint()) - 1
	}
	dst.Processes = procs
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the end", ErrCorrupt, len(d.b))
	}
	if d.err != nil {
		dst.GPUs, dst.Processes = dst.GPUs[:0], dst.Processes[:0]
	}
	return d.err
}

// decoder reads the packed encoding; the first error sticks and later
// reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or invalid %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uint32() uint32 {
	if len(d.b) < 4 {
		d.fail("float")
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	if v > math.MaxInt64 {
		d.fail("varint")
		return 0
	}
	return v
}

// count reads a uvarint that must be below limit.
func (d *decoder) count(limit int) int {
	v := d.uvarint()
	if v >= uint64(limit) {
		d.fail("count")
		return 0
	}
	return int(v)
}

// string decodes a string into *s, keeping *s when it is equal.
func (d *decoder) string(s *string) {
	n := d.count(MaxStringLen + 1)
	if len(d.b) < n {
		d.fail("string")
		return
	}
	b := d.b[:n]
	d.b = d.b[n:]
	if *s != string(b) { // the comparison does not allocate
		*s = string(b)
	}
}

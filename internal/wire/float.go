package wire

import (
	"math"
	"math/big"
	"math/bits"
)

// appendFixed appends the shortest decimal that reads back as v, laid out
// without an exponent, as strconv.AppendFloat(dst, v, 'f', -1, 64) does,
// for a finite normal v with 1e-6 <= |v| < 1e21; ok is false for any
// other v, which the caller leaves to strconv.
//
// Why not strconv: a history page is mostly floats, and strconv spends as
// long laying its digits out (a byte at a time, through a generic decimal
// buffer) as finding them. The digits here are found by Schubfach
// (R. Giulietti, "The Schubfach way to render doubles", 2020): three
// 128-bit products decide between the two or four decimals nearest v.
// FuzzAppendFloat holds every result to strconv's, byte for byte.
func appendFixed(dst []byte, v float64) ([]byte, bool) {
	b := math.Float64bits(v)
	be := int(b>>52) & 0x7ff // biased exponent
	if be == 0 || be == 0x7ff {
		return dst, false // zero, subnormal, Inf, NaN
	}
	if abs := math.Abs(v); abs < 1e-6 || abs >= 1e21 {
		return dst, false
	}
	if b>>63 != 0 {
		dst = append(dst, '-')
	}
	c := uint64(1)<<52 | b&(1<<52-1) // v = ±c·2^q
	q := be - 1075
	// An integer below 2^53 is its own shortest decimal.
	if q < 0 && q > -53 {
		if f := c >> uint(-q); f<<uint(-q) == c {
			return appendDecimal(dst, f, 0), true
		}
	}
	d, e := shortest(c, q)
	return appendDecimal(dst, d, e), true
}

// shortest returns the decimal d·10^e with the fewest digits that rounds
// to c·2^q (c a normal float64's significand with its hidden bit), the
// closest to it among those, the even one on a tie.
func shortest(c uint64, q int) (uint64, int) {
	odd := c & 1 // the interval's ends are excluded when c is odd
	cb := c << 2
	cbr := cb + 2
	var cbl uint64
	var k int
	if c != 1<<52 || q == -1074 {
		cbl = cb - 2
		k = floorLog10Pow2(q)
	} else {
		// At a power of two the float below is half as far as the one
		// above.
		cbl = cb - 1
		k = floorLog10ThreeQuartersPow2(q)
	}
	h := uint(q + floorLog2Pow10(-k) + 2)
	g := &pow10Table[k-pow10MinK]
	vb := roundToOdd(g, cb<<h)
	vbl := roundToOdd(g, cbl<<h)
	vbr := roundToOdd(g, cbr<<h)
	s := vb >> 2
	// One digit fewer, if exactly one such decimal lies in the interval.
	if s >= 100 {
		if d, ok := onlyOneInside(s/10*10, 10, vbl, vbr, odd); ok {
			return d, k
		}
	}
	t := s + 1
	if d, ok := onlyOneInside(s, 1, vbl, vbr, odd); ok {
		return d, k
	}
	// Both lie in the interval: the closer, the even one on a tie.
	mid := (s + t) << 1
	if vb < mid || vb == mid && s&1 == 0 {
		return s, k
	}
	return t, k
}

// onlyOneInside returns whichever of lo and lo+step lies in the interval
// (vbl, vbr), both ends scaled by 4, if exactly one does.
func onlyOneInside(lo, step, vbl, vbr, odd uint64) (uint64, bool) {
	hi := lo + step
	loIn := vbl+odd <= lo<<2
	hiIn := hi<<2+odd <= vbr
	if loIn == hiIn {
		return 0, false
	}
	if loIn {
		return lo, true
	}
	return hi, true
}

// roundToOdd returns g·cp / 2^127, rounded to odd: its low bit is set
// when the product has bits beyond it. g is 126 bits in two 63-bit halves.
func roundToOdd(g *[2]uint64, cp uint64) uint64 {
	x1, _ := bits.Mul64(g[1], cp)
	y1, y0 := bits.Mul64(g[0], cp)
	z := y0>>1 + x1
	vbp := y1 + z>>63
	return vbp | (z&(1<<63-1)+(1<<63-1))>>63
}

func floorLog10Pow2(e int) int { return (e * 661_971_961_083) >> 41 }

func floorLog10ThreeQuartersPow2(e int) int { return (e*661_971_961_083 - 274_743_187_321) >> 41 }

func floorLog2Pow10(e int) int { return (e * 913_124_641_741) >> 38 }

// The powers of ten shortest needs: 10^-k for k in [pow10MinK, pow10MaxK],
// each scaled by a power of two into [2^125, 2^126), rounded down, plus
// one; computed exactly once at start-up (under a millisecond).
const pow10MinK, pow10MaxK = -324, 292

var pow10Table = func() (t [pow10MaxK - pow10MinK + 1][2]uint64) {
	ten := big.NewInt(10)
	mask := new(big.Int).SetUint64(1<<63 - 1)
	for k := pow10MinK; k <= pow10MaxK; k++ {
		// g = floor(10^-k · 2^-r) + 1 with r = floorLog2Pow10(-k) - 125.
		r := floorLog2Pow10(-k) - 125
		num, den := big.NewInt(1), big.NewInt(1)
		if k < 0 {
			num.Exp(ten, big.NewInt(int64(-k)), nil)
		} else {
			den.Exp(ten, big.NewInt(int64(k)), nil)
		}
		if r < 0 {
			num.Lsh(num, uint(-r))
		} else {
			den.Lsh(den, uint(r))
		}
		g := num.Quo(num, den)
		g.Add(g, big.NewInt(1))
		t[k-pow10MinK] = [2]uint64{new(big.Int).Rsh(g, 63).Uint64(), new(big.Int).And(g, mask).Uint64()}
	}
	return t
}()

// appendDecimal appends d·10^e (d > 0) without an exponent: its digits
// with trailing zeros dropped, a decimal point or zeros as the exponent
// asks, as strconv's 'f' layout does.
func appendDecimal(dst []byte, d uint64, e int) []byte {
	for d%10 == 0 {
		d /= 10
		e++
	}
	// Eight digits at a time in 32-bit arithmetic: the pairs of a group
	// do not wait on each other, unlike a chain of 64-bit divisions.
	var buf [24]byte
	i := len(buf)
	for d >= 1e8 {
		lo := uint32(d % 1e8)
		d /= 1e8
		i -= 8
		put8(buf[i:i+8], lo)
	}
	for w := uint32(d); ; {
		if w < 10 {
			i--
			buf[i] = byte('0' + w)
			break
		}
		r := w % 100
		w /= 100
		i -= 2
		buf[i], buf[i+1] = digitPairs[2*r], digitPairs[2*r+1]
		if w == 0 {
			break
		}
	}
	digits := buf[i:]
	point := len(digits) + e // digits before the decimal point
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for ; point < 0; point++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case point < len(digits):
		dst = append(dst, digits[:point]...)
		dst = append(dst, '.')
		return append(dst, digits[point:]...)
	}
	dst = append(dst, digits...)
	for ; e > 0; e-- {
		dst = append(dst, '0')
	}
	return dst
}

// put8 writes w (< 10^8) as eight digits, leading zeros included.
func put8(b []byte, w uint32) {
	hi, lo := w/10000, w%10000
	p0, p1, p2, p3 := 2*(hi/100), 2*(hi%100), 2*(lo/100), 2*(lo%100)
	b[0], b[1] = digitPairs[p0], digitPairs[p0+1]
	b[2], b[3] = digitPairs[p1], digitPairs[p1+1]
	b[4], b[5] = digitPairs[p2], digitPairs[p2+1]
	b[6], b[7] = digitPairs[p3], digitPairs[p3+1]
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

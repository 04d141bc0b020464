package gpu

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Sim is a simulated source: GPUs that look like a training job's (an
// H100 each, utilisation swinging around 75% with an evaluation dip every
// five minutes, memory filling in the first minute, temperature and power
// following utilisation). Readings are a pure function of the seed, the
// GPU and the time, so tests can predict them.
type Sim struct {
	n     int
	seed  uint64
	now   func() time.Time
	uuids []string

	mu     sync.Mutex
	start  int64
	failed map[int]string
}

var _ Source = (*Sim)(nil)

// SimMemTotalBytes is the memory size of a simulated GPU (an H100 80GB).
const SimMemTotalBytes = 81559 << 20

// NewSim returns a source of n simulated GPUs. now is its clock (nil means
// time.Now); seed makes different agents simulate different GPUs.
func NewSim(n int, seed uint64, now func() time.Time) *Sim {
	if now == nil {
		now = time.Now
	}
	s := &Sim{n: n, seed: seed, now: now, start: -1, failed: map[int]string{}}
	for i := range n {
		h := mix(seed, uint64(i), 0xC0FFEE)
		h2 := mix(h, 1, 2)
		s.uuids = append(s.uuids, fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h), uint16(h2>>48), h2&0xFFFFFFFFFFFF))
	}
	return s
}

// Name implements Source.
func (s *Sim) Name() string { return fmt.Sprintf("sim:%d", s.n) }

// Fail makes GPU index fail with the error msg from now on, as a GPU that
// fell off the bus; an empty msg heals it.
func (s *Sim) Fail(index int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg == "" {
		delete(s.failed, index)
		return
	}
	s.failed[index] = msg
}

// Sample implements Source.
func (s *Sim) Sample(ctx context.Context) (*Sample, error) {
	now := s.now().UnixMilli()
	s.mu.Lock()
	if s.start < 0 {
		s.start = now
	}
	start := s.start
	failed := make(map[int]string, len(s.failed))
	for k, v := range s.failed {
		failed[k] = v
	}
	s.mu.Unlock()
	smp := &Sample{GPUs: make([]GPU, 0, s.n)}
	for i := range s.n {
		g := NewGPU(i, s.uuids[i], "NVIDIA H100 80GB HBM3")
		if msg, ok := failed[i]; ok {
			g.Err = msg
			smp.GPUs = append(smp.GPUs, g)
			continue
		}
		r := s.readings(i, now, start)
		g.Values = r
		smp.GPUs = append(smp.GPUs, g)
		smp.Processes = append(smp.Processes, Process{
			GPU: i, PID: 4000 + i, Name: "python", MemUsedBytes: int64(r[FieldMemUsed]) - 500<<20,
		})
	}
	return smp, nil
}

// readings returns what GPU i of a Sim with this seed reads at time
// nowMs, for a simulation that started at startMs.
func (s *Sim) readings(i int, nowMs, startMs int64) [NumFields]float64 {
	t := float64(nowMs) / 1000
	phase := float64(mix(s.seed, uint64(i), 7)%1000) / 1000 * 2 * math.Pi
	noise := func(k uint64) float64 { // uniform in [-1, 1)
		return float64(mix(s.seed^uint64(i)<<32, uint64(nowMs/1000), k)>>11)/(1<<52) - 1
	}
	util := 75 + 18*math.Sin(2*math.Pi*t/600+phase) + 6*noise(1)
	if math.Mod(t+phase*10, 300) < 30 { // evaluation every five minutes
		util = 8 + 4*noise(2)
	}
	util = math.Round(math.Min(100, math.Max(0, util)))
	fill := math.Min(1, float64(nowMs-startMs)/60000)
	memUsed := math.Round((1 + fill*(58+float64(i%3)*4+0.5*noise(3))) * (1 << 30))
	var v [NumFields]float64
	v[FieldUtil] = util
	v[FieldMemUtil] = math.Round(math.Max(0, util*0.45+3*noise(4)))
	v[FieldMemUsed] = memUsed
	v[FieldMemTotal] = SimMemTotalBytes
	v[FieldTemp] = math.Round(33 + util*0.38 + 1.5*noise(5))
	v[FieldPower] = math.Round((72+util*6.1+10*noise(6))*100) / 100
	v[FieldPowerLimit] = 700
	v[FieldSMClock] = 1980
	if util < 5 {
		v[FieldSMClock] = 345
	}
	return v
}

// Close implements Source.
func (s *Sim) Close() error { return nil }

// mix hashes three numbers (splitmix64 finaliser over their combination).
func mix(a, b, c uint64) uint64 {
	x := a*0x9E3779B97F4A7C15 ^ b*0xBF58476D1CE4E5B9 ^ c*0x94D049BB133111EB
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

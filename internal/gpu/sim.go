package gpu

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
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

	mu       sync.Mutex
	start    int64
	failed   map[int]string
	throttle map[int]ThrottleReason
	ecc      map[int][2]float64 // corrected, uncorrected
	xids     map[int]int        // reported at the next sample, then cleared

	// events is a file of injections read at each sample (SetEventsFile).
	events    string
	eventsOff int64
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
	s := &Sim{n: n, seed: seed, now: now, start: -1, failed: map[int]string{}, throttle: map[int]ThrottleReason{},
		ecc: map[int][2]float64{}, xids: map[int]int{}}
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

// InjectXid makes GPU index report Xid error code in its next sample, as
// a driver reports one (79: fallen off the bus, 48: double-bit ECC, ...).
func (s *Sim) InjectXid(index, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.xids[index] = code
}

// SetThrottle makes GPU index report the throttle reasons r on top of its
// own (the power cap at full load, idle clocks) from now on; 0 clears them.
func (s *Sim) SetThrottle(index int, r ThrottleReason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == 0 {
		delete(s.throttle, index)
		return
	}
	s.throttle[index] = r
}

// AddECC adds corrected and uncorrected ECC errors to GPU index's counts.
func (s *Sim) AddECC(index int, corrected, uncorrected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ecc[index]
	s.ecc[index] = [2]float64{c[0] + float64(corrected), c[1] + float64(uncorrected)}
}

// SetEventsFile makes the simulation read injections from path at each
// sample, one per line, appended while it runs (sextant agent --gpu-source
// sim:N --sim-events FILE, for demos and tests of other processes):
//
//	xid GPU CODE          an Xid error
//	throttle GPU MASK     throttle reasons (0x40 hardware thermal; 0 clears)
//	ecc GPU CORR UNCORR   ECC errors added
//	lost GPU [MESSAGE]    the GPU falls off the bus
//	heal GPU              it is back
//
// Unknown or malformed lines are skipped.
func (s *Sim) SetEventsFile(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events, s.eventsOff = path, 0
}

// readEvents applies the lines appended to the events file since the last
// read. Called with s.mu held.
func (s *Sim) readEvents() {
	if s.events == "" {
		return
	}
	data, err := os.ReadFile(s.events)
	if err != nil || int64(len(data)) <= s.eventsOff {
		return
	}
	chunk := data[s.eventsOff:]
	end := bytes.LastIndexByte(chunk, '\n')
	if end < 0 {
		return // wait for the line to end
	}
	s.eventsOff += int64(end + 1)
	for line := range strings.SplitSeq(string(chunk[:end]), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		gpu, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		num := func(i int) (uint64, bool) {
			if len(f) <= i {
				return 0, false
			}
			v, err := strconv.ParseUint(f[i], 0, 64)
			return v, err == nil
		}
		switch f[0] {
		case "xid":
			if v, ok := num(2); ok {
				s.xids[gpu] = int(v)
			}
		case "throttle":
			if v, ok := num(2); ok {
				if v == 0 {
					delete(s.throttle, gpu)
				} else {
					s.throttle[gpu] = ThrottleReason(v)
				}
			}
		case "ecc":
			c, ok1 := num(2)
			u, ok2 := num(3)
			if ok1 && ok2 {
				e := s.ecc[gpu]
				s.ecc[gpu] = [2]float64{e[0] + float64(c), e[1] + float64(u)}
			}
		case "lost":
			msg := "GPU has fallen off the bus"
			if len(f) > 2 {
				msg = strings.Join(f[2:], " ")
			}
			s.failed[gpu] = msg
		case "heal":
			delete(s.failed, gpu)
		}
	}
}

// Sample implements Source.
func (s *Sim) Sample(ctx context.Context) (*Sample, error) {
	now := s.now().UnixMilli()
	s.mu.Lock()
	if s.start < 0 {
		s.start = now
	}
	s.readEvents()
	start := s.start
	failed := make(map[int]string, len(s.failed))
	for k, v := range s.failed {
		failed[k] = v
	}
	throttle := make(map[int]ThrottleReason, len(s.throttle))
	for k, v := range s.throttle {
		throttle[k] = v
	}
	ecc := make(map[int][2]float64, len(s.ecc))
	for k, v := range s.ecc {
		ecc[k] = v
	}
	xids := s.xids
	s.xids = map[int]int{}
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
		r[FieldThrottleReasons] = float64(ThrottleReason(r[FieldThrottleReasons]) | throttle[i])
		if throttle[i]&ThrottleSlowdown != 0 {
			r[FieldSMClock] = math.Round(r[FieldSMClockMax] * 0.6) // slowed down
		}
		e := ecc[i]
		r[FieldECCCorrected], r[FieldECCUncorrected] = e[0], e[1]
		if x, ok := xids[i]; ok {
			r[FieldXid] = float64(x)
		}
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
	for f := range v {
		v[f] = Missing()
	}
	v[FieldUtil] = util
	v[FieldMemUtil] = math.Round(math.Max(0, util*0.45+3*noise(4)))
	v[FieldMemUsed] = memUsed
	v[FieldMemTotal] = SimMemTotalBytes
	v[FieldTemp] = math.Round(33 + util*0.38 + 1.5*noise(5))
	v[FieldPower] = math.Round((72+util*6.1+10*noise(6))*100) / 100
	v[FieldPowerLimit] = 700
	v[FieldSMClock] = 1980
	v[FieldSMClockMax] = 1980
	v[FieldMemClock] = 2619
	v[FieldPowerLimitDefault] = 700
	var reasons ThrottleReason
	switch {
	case util < 5:
		v[FieldSMClock] = 345
		reasons = ThrottleGPUIdle
	case v[FieldPower] > 0.95*v[FieldPowerLimit]:
		reasons = ThrottleSwPowerCap
	}
	v[FieldThrottleReasons] = float64(reasons)
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

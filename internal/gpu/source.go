package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Source reads the GPUs of the node it runs on.
//
// Contract:
//   - Sample is called by one goroutine at a time (the agent's loop).
//   - It returns every GPU the source knows, ordered by index. A GPU that
//     cannot be read is still returned, with its Err set and its readings
//     missing, so that one failing GPU never hides the others.
//   - An error means no GPU could be read at all (the driver went away,
//     nvidia-smi could not run); the agent logs it and tries again at the
//     next tick.
//   - The returned Sample is owned by the caller; TimestampMs is left for
//     the caller to set.
//   - Close releases the source; Sample must not be called after it.
type Source interface {
	// Name says which source this is ("nvml", "nvidia-smi", "sim:8"),
	// for logs and for the agent's start line.
	Name() string
	Sample(ctx context.Context) (*Sample, error)
	Close() error
}

// ErrNoSource is returned by OpenSource when spec is "none", or "auto"
// finds no usable source.
var ErrNoSource = errors.New("no GPU source")

// SourceOptions configure OpenSource.
type SourceOptions struct {
	// NVML opens the NVML source. It is injected (by cmd/sextant, from
	// package nvml) so that this package does not need cgo; nil means NVML
	// is not available.
	NVML func() (Source, error)
	// SMIPath is the nvidia-smi executable; empty means "nvidia-smi" looked
	// up on PATH.
	SMIPath string
	// SMITimeout bounds one nvidia-smi run; 0 means 5 s.
	SMITimeout time.Duration
	// Seed seeds the simulated source, so that agents posing as different
	// nodes simulate different GPUs; any value is fine.
	Seed uint64
	// Now is the clock of the simulated source; nil means time.Now.
	Now func() time.Time
	// Logger receives why each source of "auto" was passed over; nil
	// discards.
	Logger *slog.Logger
	// SimEvents is a file of injections the simulated source reads at each
	// sample (Sim.SetEventsFile); empty means none.
	SimEvents string
}

// OpenSource opens the source named by spec:
//
//	auto          NVML, else nvidia-smi, else ErrNoSource
//	nvml          NVML only
//	nvidia-smi    nvidia-smi only
//	sim:N         N simulated GPUs (1 to 64)
//	none          ErrNoSource
func OpenSource(ctx context.Context, spec string, opts SourceOptions) (Source, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	openNVML := func() (Source, error) {
		if opts.NVML == nil {
			return nil, errors.New("nvml: not built into this binary (it needs Linux and cgo)")
		}
		return opts.NVML()
	}
	openSMI := func() (Source, error) {
		return OpenSMI(ctx, SMIOptions{Path: opts.SMIPath, Timeout: opts.SMITimeout})
	}
	switch {
	case spec == "auto" || spec == "":
		src, err := openNVML()
		if err == nil {
			return src, nil
		}
		log.Info("NVML not available, trying nvidia-smi", "reason", err)
		src, serr := openSMI()
		if serr == nil {
			return src, nil
		}
		log.Info("nvidia-smi not available", "reason", serr)
		return nil, fmt.Errorf("%w: NVML: %v; nvidia-smi: %v", ErrNoSource, err, serr)
	case spec == "nvml":
		return openNVML()
	case spec == "nvidia-smi":
		return openSMI()
	case spec == "none":
		return nil, ErrNoSource
	case strings.HasPrefix(spec, "sim:"):
		n, err := strconv.Atoi(strings.TrimPrefix(spec, "sim:"))
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("gpu source %q: sim:N takes a number of GPUs from 1 to 64", spec)
		}
		sim := NewSim(n, opts.Seed, opts.Now)
		if opts.SimEvents != "" {
			sim.SetEventsFile(opts.SimEvents)
		}
		return sim, nil
	}
	return nil, fmt.Errorf("unknown gpu source %q: use auto, nvml, nvidia-smi, sim:N or none", spec)
}

// ValidSourceSpec reports whether spec names a source, for configuration
// checks before anything is opened.
func ValidSourceSpec(spec string) bool {
	switch spec {
	case "auto", "nvml", "nvidia-smi", "none":
		return true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(spec, "sim:"))
	return strings.HasPrefix(spec, "sim:") && err == nil && n >= 1 && n <= 64
}

// Selector picks the GPUs a job may see, as CUDA_VISIBLE_DEVICES does.
// The zero Selector selects every GPU.
type Selector struct {
	set     bool
	entries []string
}

// ParseVisibleDevices parses a CUDA_VISIBLE_DEVICES value: a
// comma-separated list of GPU indexes, UUIDs ("GPU-...", "MIG-...") or
// unique UUID prefixes. As in CUDA, the list ends at the first entry that is
// not valid (so "0,1,-1,2" selects 0 and 1), and an empty value selects no
// GPU. Indexes are NVML's (PCI bus order): set CUDA_DEVICE_ORDER=PCI_BUS_ID
// in jobs, or use UUIDs, for CUDA to agree.
func ParseVisibleDevices(v string) Selector {
	s := Selector{set: true}
	for e := range strings.SplitSeq(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			break
		}
		if n, err := strconv.Atoi(e); err == nil {
			if n < 0 {
				break
			}
		} else if !strings.HasPrefix(e, "GPU-") && !strings.HasPrefix(e, "MIG-") {
			break
		}
		s.entries = append(s.entries, e)
	}
	return s
}

// All reports whether the selector selects every GPU.
func (s Selector) All() bool { return !s.set }

// String returns the selector as a CUDA_VISIBLE_DEVICES value, or "all".
func (s Selector) String() string {
	if !s.set {
		return "all"
	}
	return strings.Join(s.entries, ",")
}

// Filter removes from smp the GPUs, and their processes, that the selector
// does not select. An entry that matches no GPU, or a UUID prefix that
// matches several, selects nothing.
func (s Selector) Filter(smp *Sample) {
	if !s.set {
		return
	}
	keep := make([]bool, len(smp.GPUs))
	for _, e := range s.entries {
		if n, err := strconv.Atoi(e); err == nil {
			for i := range smp.GPUs {
				if smp.GPUs[i].Index == n {
					keep[i] = true
				}
			}
			continue
		}
		match := -1
		for i := range smp.GPUs {
			if smp.GPUs[i].UUID != "" && strings.HasPrefix(smp.GPUs[i].UUID, e) {
				if match >= 0 {
					match = -2 // ambiguous prefix
					break
				}
				match = i
			}
		}
		if match >= 0 {
			keep[match] = true
		}
	}
	gpus := smp.GPUs[:0]
	kept := map[int]bool{}
	for i, g := range smp.GPUs {
		if keep[i] {
			gpus = append(gpus, g)
			kept[g.Index] = true
		}
	}
	smp.GPUs = gpus
	procs := smp.Processes[:0]
	for _, p := range smp.Processes {
		if kept[p.GPU] {
			procs = append(procs, p)
		}
	}
	smp.Processes = procs
}

// Package gpu holds GPU resource monitoring: the samples an agent takes of
// every GPU of a node, the sources it takes them from (NVML through the
// subpackage nvml, nvidia-smi, a simulation), the agent loop that sends
// them to the server and spools them on disk while it is unreachable, and
// the server-side rules: which samples are accepted, how they are stored
// (the Store interface), how history is downsampled for the pane, and how
// run-linked samples become MLflow system metrics.
//
// It imports no HTTP or SQL package: internal/httpapi carries samples over
// the wire and internal/sqlstore stores them.
package gpu

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// Field is one numeric reading of a GPU. The numbers are persisted: they
// are bit positions in the packed sample encoding (docs/format/gpu-sample.md).
type Field uint8

// The fields, with their units.
const (
	// FieldUtil is the GPU (SM) utilisation over the driver's sample
	// period, in percent.
	FieldUtil Field = 0
	// FieldMemUtil is the memory-controller utilisation, in percent.
	FieldMemUtil Field = 1
	// FieldMemUsed is the frame-buffer memory in use, in bytes.
	FieldMemUsed Field = 2
	// FieldMemTotal is the frame-buffer size, in bytes.
	FieldMemTotal Field = 3
	// FieldTemp is the GPU core temperature, in degrees Celsius.
	FieldTemp Field = 4
	// FieldPower is the power draw, in watts.
	FieldPower Field = 5
	// FieldPowerLimit is the enforced power limit, in watts.
	FieldPowerLimit Field = 6
	// FieldSMClock is the SM clock, in MHz.
	FieldSMClock Field = 7
	// FieldMemClock is the memory clock, in MHz.
	FieldMemClock Field = 8
	// FieldSMClockMax is the highest SM clock the GPU can run at, in MHz.
	FieldSMClockMax Field = 9
	// FieldPowerLimitDefault is the default power limit, in watts: an
	// enforced limit below it was lowered (by an administrator, or the
	// system).
	FieldPowerLimitDefault Field = 10
	// FieldThrottleReasons is the set of reasons the clocks are held below
	// their maximum, as NVML's clocks event reasons bit mask (ThrottleReason).
	FieldThrottleReasons Field = 11
	// FieldECCCorrected is the number of corrected (single-bit) ECC errors
	// since the driver loaded.
	FieldECCCorrected Field = 12
	// FieldECCUncorrected is the number of uncorrected (double-bit) ECC
	// errors since the driver loaded.
	FieldECCUncorrected Field = 13
	// FieldXid is the last Xid error the driver reported for the GPU since
	// the previous sample; missing when there was none.
	FieldXid Field = 14

	// NumFields is the number of fields.
	NumFields = 15
)

var fieldNames = [NumFields]string{"util", "mem_util", "mem_used", "mem_total", "temp", "power", "power_limit", "sm_clock",
	"mem_clock", "sm_clock_max", "power_limit_default", "throttle_reasons", "ecc_corrected", "ecc_uncorrected", "xid"}

// String returns the field's name on the wire and in queries.
func (f Field) String() string {
	if int(f) < NumFields {
		return fieldNames[f]
	}
	return "unknown"
}

// IsBytes reports whether the field counts bytes.
func (f Field) IsBytes() bool { return f == FieldMemUsed || f == FieldMemTotal }

// IsInteger reports whether the field is a whole number (byte counts,
// error counts, bit masks, error codes), stored exactly as an integer
// rather than as a float32 measurement.
func (f Field) IsInteger() bool {
	switch f {
	case FieldMemUsed, FieldMemTotal, FieldThrottleReasons, FieldECCCorrected, FieldECCUncorrected, FieldXid:
		return true
	}
	return false
}

// ThrottleReason is a bit of FieldThrottleReasons: NVML's clocks event
// (throttle) reasons, whose values nvidia-smi prints too.
type ThrottleReason uint64

// The reasons.
const (
	ThrottleGPUIdle       ThrottleReason = 0x1
	ThrottleAppClocks     ThrottleReason = 0x2
	ThrottleSwPowerCap    ThrottleReason = 0x4
	ThrottleHwSlowdown    ThrottleReason = 0x8
	ThrottleSyncBoost     ThrottleReason = 0x10
	ThrottleSwThermal     ThrottleReason = 0x20
	ThrottleHwThermal     ThrottleReason = 0x40
	ThrottleHwPowerBrake  ThrottleReason = 0x80
	ThrottleDisplayClocks ThrottleReason = 0x100
)

var throttleNames = []struct {
	r    ThrottleReason
	name string
}{
	{ThrottleGPUIdle, "gpu_idle"}, {ThrottleAppClocks, "applications_clocks"}, {ThrottleSwPowerCap, "sw_power_cap"},
	{ThrottleHwSlowdown, "hw_slowdown"}, {ThrottleSyncBoost, "sync_boost"}, {ThrottleSwThermal, "sw_thermal"},
	{ThrottleHwThermal, "hw_thermal"}, {ThrottleHwPowerBrake, "hw_power_brake"}, {ThrottleDisplayClocks, "display_clocks"},
}

// ThrottleSlowdown are the reasons that mean the GPU is slowed down by
// heat, power or the hardware, which the run gets events for. The power
// cap (a GPU at its power limit under full load) and idle clocks are
// normal and only shown.
const ThrottleSlowdown = ThrottleHwSlowdown | ThrottleSwThermal | ThrottleHwThermal | ThrottleHwPowerBrake

// String names the reasons set, comma-separated ("hw_thermal,sw_power_cap").
func (r ThrottleReason) String() string {
	var out []string
	for _, t := range throttleNames {
		if r&t.r != 0 {
			out = append(out, t.name)
		}
	}
	if rest := r &^ (ThrottleDisplayClocks<<1 - 1); rest != 0 {
		out = append(out, "0x"+strconv.FormatUint(uint64(rest), 16))
	}
	return strings.Join(out, ",")
}

// ParseField returns the field with the given wire name.
func ParseField(name string) (Field, bool) {
	for i, n := range fieldNames {
		if n == name {
			return Field(i), true
		}
	}
	return 0, false
}

// FieldNames returns every field's name, in field order.
func FieldNames() []string { return append([]string(nil), fieldNames[:]...) }

// Missing returns the value of a reading that is not available: not
// supported by the GPU or driver, or failed. It is a NaN; test with
// IsMissing.
func Missing() float64 { return math.NaN() }

// IsMissing reports whether v is not a usable reading: NaN or infinite.
func IsMissing(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// GPU is one GPU's readings in one sample.
type GPU struct {
	// Index is the GPU's index as NVML and nvidia-smi number it (PCI bus
	// order), which is not necessarily CUDA's numbering inside a job.
	Index int
	// UUID is the GPU's UUID ("GPU-..."); empty when unknown.
	UUID string
	// Name is the product name, e.g. "NVIDIA H100 80GB HBM3".
	Name string
	// Values holds the readings, indexed by Field. A missing reading is
	// NaN (see Missing).
	Values [NumFields]float64
	// Err, when not empty, says why the GPU could not be read in this
	// sample (for example "GPU is lost"); its readings are then missing.
	Err string
}

// NewGPU returns a GPU with every reading missing.
func NewGPU(index int, uuid, name string) GPU {
	g := GPU{Index: index, UUID: uuid, Name: name}
	for i := range g.Values {
		g.Values[i] = Missing()
	}
	return g
}

// Key identifies the GPU within its node: the UUID, or the index when the
// UUID is unknown.
func (g *GPU) Key() string {
	if g.UUID != "" {
		return g.UUID
	}
	return "index:" + strconv.Itoa(g.Index)
}

// Process is a process using a GPU.
type Process struct {
	// GPU is the index of the GPU it runs on.
	GPU int
	// PID is the process id on the node.
	PID int
	// Name is the process name or command path; may be empty.
	Name string
	// MemUsedBytes is the GPU memory it uses; -1 when unknown (MIG mode,
	// missing permissions).
	MemUsedBytes int64
}

// Sample is one reading of every monitored GPU of a node.
type Sample struct {
	// TimestampMs is when the sample was taken, in milliseconds since the
	// Unix epoch.
	TimestampMs int64
	// GPUs are ordered by Index.
	GPUs []GPU
	// Processes are the compute processes on those GPUs.
	Processes []Process
}

// Labels say where samples come from.
type Labels struct {
	// Node is the node's name; required.
	Node string
	// RunID is the MLflow run the node works for; empty when none.
	RunID string
	// NodeRank is the node's rank in a multi-node job; -1 when unknown.
	NodeRank int
	// NumNodes is the number of nodes of the job; 0 when unknown.
	NumNodes int
}

// Batch is what one ingest request carries: samples of one node with their
// labels.
type Batch struct {
	Labels
	Samples []Sample
	// RunOnly logs the samples to their run (system metrics, health
	// events) without storing them as the node's: the server sets it when
	// a node token reports for the node and the batch came from a user's
	// run (workspace.AuthorizeNodeReport).
	RunOnly bool
}

// MaxStringLen caps node names, UUIDs, GPU names, error texts and process
// names, in bytes.
const MaxStringLen = 1024

// cleanString makes s safe to store and print: valid UTF-8, at most
// MaxStringLen bytes (cut on a rune boundary), control characters replaced
// by spaces, so that what a driver prints cannot break logs or exposition
// lines.
func cleanString(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = errs.Clip(s, MaxStringLen)
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

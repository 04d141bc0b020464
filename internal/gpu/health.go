package gpu

import (
	"fmt"
	"strconv"

	"github.com/sextant/sextant/internal/runevents"
)

// GPU health: what two consecutive samples of a GPU say happened to it,
// as run events. The server derives them from the samples of a run
// (Service.Ingest) and the agent counts them for Prometheus; both use
// Health, a pure function of the two samples, so the same samples give
// the same events wherever they are looked at, and a resent sample gives
// the same keys (stored once).

// HealthKind is what a health finding is about.
type HealthKind int

// The kinds of findings.
const (
	// HealthXid is an Xid error the driver reported.
	HealthXid HealthKind = iota + 1
	// HealthThrottleStart is a GPU that started slowing down for heat,
	// power or the hardware (ThrottleSlowdown); HealthThrottleEnd is its
	// end.
	HealthThrottleStart
	HealthThrottleEnd
	// HealthECC is a rise in the GPU's ECC error counts.
	HealthECC
	// HealthLost is a GPU that could no longer be read.
	HealthLost
)

// String names the kind, as Prometheus labels and event keys do.
func (k HealthKind) String() string {
	switch k {
	case HealthXid:
		return "xid"
	case HealthThrottleStart:
		return "throttle"
	case HealthThrottleEnd:
		return "throttle_end"
	case HealthECC:
		return "ecc"
	case HealthLost:
		return "lost"
	}
	return "unknown"
}

// Finding is one health finding of a GPU at a sample.
type Finding struct {
	Kind HealthKind
	// Event is the run event it becomes; for HealthThrottleEnd only its
	// time is set (the end of the span that HealthThrottleStart opened).
	Event runevents.Event
}

// xidMeanings are the Xid errors a training job most often meets
// (NVIDIA's Xid catalogue has them all).
var xidMeanings = map[int]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup, due to a previous error",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapping failed",
	74:  "NVLink error",
	79:  "the GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
}

// XidMeaning says what an Xid error code means, or "" when not known here.
func XidMeaning(code int) string { return xidMeanings[code] }

// Health returns what GPU cur, read at tsMs on node, says happened since
// prev, the same GPU's previous sample (nil when there is none). Each
// finding's event has a key that depends only on the node, the GPU and
// tsMs.
func Health(node string, prev, cur *GPU, tsMs int64) []Finding {
	var out []Finding
	who := fmt.Sprintf("GPU %d of %s", cur.Index, node)
	ev := func(kind runevents.Kind, sev runevents.Severity, hk HealthKind, msg string, attrs map[string]string) {
		if attrs == nil {
			attrs = map[string]string{}
		}
		if cur.UUID != "" {
			attrs["uuid"] = cur.UUID
		}
		out = append(out, Finding{Kind: hk, Event: runevents.Event{
			Key:  "gpu-" + hk.String() + ":" + node + ":" + cur.Key() + ":" + strconv.FormatInt(tsMs, 10),
			Kind: kind, Severity: sev, TimeMs: tsMs, Node: node, GPU: cur.Index, Step: -1, Message: msg, Attrs: attrs,
		}})
	}
	was := slowdown(prev)
	end := func() {
		out = append(out, Finding{Kind: HealthThrottleEnd, Event: runevents.Event{Kind: runevents.KindGPUThrottle, TimeMs: tsMs, Node: node, GPU: cur.Index, Step: -1,
			Attrs: map[string]string{"uuid": cur.UUID}}})
	}
	if cur.Err != "" {
		if prev == nil || prev.Err == "" {
			ev(runevents.KindGPULost, runevents.SeverityError, HealthLost, who+" could not be read: "+cur.Err, map[string]string{"error": cur.Err})
		}
		if was != 0 { // a slowdown ends with the GPU
			end()
		}
		return out
	}
	if x := cur.Values[FieldXid]; !IsMissing(x) && x > 0 {
		code := int(x)
		msg := fmt.Sprintf("Xid %d on %s", code, who)
		if m := XidMeaning(code); m != "" {
			msg += ": " + m
		}
		ev(runevents.KindGPUXid, runevents.SeverityError, HealthXid, msg, map[string]string{"xid": strconv.Itoa(code)})
	}
	if prev != nil && prev.Err == "" {
		var ecc []string
		sev := runevents.SeverityWarning
		for _, c := range []struct {
			f    Field
			name string
		}{{FieldECCUncorrected, "uncorrected"}, {FieldECCCorrected, "corrected"}} {
			was, now := prev.Values[c.f], cur.Values[c.f]
			if IsMissing(was) || IsMissing(now) || now <= was {
				continue
			}
			ecc = append(ecc, fmt.Sprintf("%d %s", int64(now-was), c.name))
			if c.f == FieldECCUncorrected {
				sev = runevents.SeverityError
			}
		}
		if len(ecc) > 0 {
			msg := who + ": " + ecc[0]
			if len(ecc) > 1 {
				msg += " and " + ecc[1]
			}
			ev(runevents.KindGPUECC, sev, HealthECC, msg+" ECC error(s) since the previous sample", map[string]string{
				"ecc_corrected": fmtCount(cur.Values[FieldECCCorrected]), "ecc_uncorrected": fmtCount(cur.Values[FieldECCUncorrected])})
		}
	}
	now := slowdown(cur)
	switch {
	case now != 0 && was == 0:
		msg := fmt.Sprintf("%s slowed down (%s)", who, now)
		attrs := map[string]string{"reasons": now.String()}
		if c := cur.Values[FieldSMClock]; !IsMissing(c) {
			msg += fmt.Sprintf(": SM clock %.0f MHz", c)
			if m := cur.Values[FieldSMClockMax]; !IsMissing(m) {
				msg += fmt.Sprintf(" of %.0f", m)
			}
			attrs["sm_clock"] = strconv.FormatFloat(c, 'f', -1, 64)
		}
		if t := cur.Values[FieldTemp]; !IsMissing(t) {
			msg += fmt.Sprintf(", %.0f °C", t)
		}
		if p, l := cur.Values[FieldPower], cur.Values[FieldPowerLimit]; !IsMissing(p) && !IsMissing(l) {
			msg += fmt.Sprintf(", %.0f of %.0f W", p, l)
		}
		ev(runevents.KindGPUThrottle, runevents.SeverityWarning, HealthThrottleStart, msg, attrs)
		f := &out[len(out)-1]
		f.Event.Open = true
	case now == 0 && was != 0:
		end()
	}
	return out
}

// slowdown returns the slowdown reasons of a GPU's sample (0 for none, a
// failed GPU or no sample).
func slowdown(g *GPU) ThrottleReason {
	if g == nil || g.Err != "" {
		return 0
	}
	v := g.Values[FieldThrottleReasons]
	if IsMissing(v) || v < 0 {
		return 0
	}
	return ThrottleReason(uint64(v)) & ThrottleSlowdown
}

func fmtCount(v float64) string {
	if IsMissing(v) {
		return ""
	}
	return strconv.FormatInt(int64(v), 10)
}

package gpu

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

// promGauge is one DCGM-named gauge of the exposition: its name (as
// dcgm-exporter spells it), help text, and how to read it from a GPU.
type promGauge struct {
	name, help string
	value      func(g *GPU) float64
}

const mib = 1 << 20

var promGauges = []promGauge{
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", func(g *GPU) float64 { return g.Values[FieldUtil] }},
	{"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", func(g *GPU) float64 { return g.Values[FieldMemUtil] }},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", func(g *GPU) float64 { return math.Round(g.Values[FieldMemUsed] / mib) }},
	{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", func(g *GPU) float64 {
		return math.Round((g.Values[FieldMemTotal] - g.Values[FieldMemUsed]) / mib)
	}},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", func(g *GPU) float64 { return g.Values[FieldTemp] }},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", func(g *GPU) float64 { return g.Values[FieldPower] }},
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", func(g *GPU) float64 { return g.Values[FieldSMClock] }},
	{"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", func(g *GPU) float64 { return g.Values[FieldMemClock] }},
	{"DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum SM clock frequency (in MHz).", func(g *GPU) float64 { return g.Values[FieldSMClockMax] }},
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT", "Current (enforced) power limit (in W).", func(g *GPU) float64 { return g.Values[FieldPowerLimit] }},
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF", "Default power limit (in W).", func(g *GPU) float64 { return g.Values[FieldPowerLimitDefault] }},
	{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (a bit mask of NVML's reasons).", func(g *GPU) float64 { return g.Values[FieldThrottleReasons] }},
	{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", func(g *GPU) float64 { return g.Values[FieldECCCorrected] }},
	{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", func(g *GPU) float64 { return g.Values[FieldECCUncorrected] }},
}

// WriteMetrics writes the agent's latest sample and its own counters in
// the Prometheus text exposition format (version 0.0.4). GPU gauges use
// dcgm-exporter's names and units and its labels gpu, UUID, modelName and
// Hostname, so dashboards built for dcgm-exporter work unchanged; a reading
// that is missing is left out. sextant_gpu_up is 1 for a GPU that could be
// read and 0 for one that failed; it carries gpu, UUID and Hostname, which
// join it to the DCGM series, but not modelName: Sextant's own metrics
// keep to Prometheus' snake_case label names (promtool check metrics),
// which dcgm-exporter's modelName breaks.
//
// The exposition is written by hand rather than with client_golang: the
// agent keeps one sample and a few counters, and its output must match
// dcgm-exporter's names and labels exactly.
func (a *Agent) WriteMetrics(w io.Writer) error {
	bw := bufio.NewWriter(w)
	smp := a.Latest()
	host := a.opts.Labels.Node
	var gpus []GPU
	if smp != nil {
		gpus = smp.GPUs
	}
	var line []byte
	for _, m := range promGauges {
		bw.WriteString("# HELP " + m.name + " " + m.help + "\n# TYPE " + m.name + " gauge\n")
		for i := range gpus {
			v := m.value(&gpus[i])
			if IsMissing(v) {
				continue
			}
			line = appendSeries(line[:0], m.name, &gpus[i], host, true)
			line = strconv.AppendFloat(append(line, ' '), v, 'g', -1, 64)
			bw.Write(append(line, '\n'))
		}
	}
	bw.WriteString("# HELP sextant_gpu_up Whether the GPU could be read in the last sample (1) or not (0).\n# TYPE sextant_gpu_up gauge\n")
	for i := range gpus {
		up := "1"
		if gpus[i].Err != "" {
			up = "0"
		}
		line = appendSeries(line[:0], "sextant_gpu_up", &gpus[i], host, false)
		bw.Write(append(append(line, ' '), up+"\n"...))
	}
	// The last Xid of each GPU, in any sample so far (0 for none), as
	// dcgm-exporter reports it.
	bw.WriteString("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n")
	xids := a.lastXids()
	for i := range gpus {
		line = appendSeries(line[:0], "DCGM_FI_DEV_XID_ERRORS", &gpus[i], host, true)
		line = strconv.AppendFloat(append(line, ' '), xids[gpus[i].Key()], 'g', -1, 64)
		bw.Write(append(line, '\n'))
	}
	bw.WriteString("# HELP sextant_gpu_health_events_total GPU health events the agent saw: Xid errors, slowdowns (heat, power, hardware), ECC error rises, the GPU lost.\n# TYPE sextant_gpu_health_events_total counter\n")
	health := a.healthCounts()
	for i := range gpus {
		c := health[gpus[i].Key()]
		for _, k := range []HealthKind{HealthXid, HealthThrottleStart, HealthECC, HealthLost} {
			line = appendSeries(line[:0], "sextant_gpu_health_events_total", &gpus[i], host, false)
			line = append(line[:len(line)-1], `,kind="`...)
			line = append(line, k.String()...)
			line = append(line, `"} `...)
			line = strconv.AppendInt(line, c[k], 10)
			bw.Write(append(line, '\n'))
		}
	}
	st := a.Stats()
	counter := func(name, help string, v int64) {
		bw.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + strconv.FormatInt(v, 10) + "\n")
	}
	gauge := func(name, help string, v int64) {
		bw.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + strconv.FormatInt(v, 10) + "\n")
	}
	counter("sextant_agent_samples_total", "Samples taken.", st.Samples)
	counter("sextant_agent_source_errors_total", "Samples for which the GPU source failed.", st.SourceErrors)
	counter("sextant_agent_sent_samples_total", "Samples the server stored.", st.Sent)
	counter("sextant_agent_send_errors_total", "Requests to the server that failed and were retried later.", st.SendErrors)
	counter("sextant_agent_rejected_samples_total", "Samples the server refused or skipped.", st.Rejected)
	counter("sextant_agent_dropped_samples_total", "Samples dropped because the spool was full.", st.Dropped)
	gauge("sextant_agent_spooled_samples", "Samples waiting in the spool.", int64(st.Spooled))
	gauge("sextant_agent_spool_bytes", "Size of the spool on disk.", st.SpoolBytes)
	return bw.Flush()
}

// appendSeries appends a series name and its labels, in dcgm-exporter's
// order; modelName only when model is set.
func appendSeries(dst []byte, name string, g *GPU, host string, model bool) []byte {
	dst = append(dst, name...)
	dst = append(dst, `{gpu="`...)
	dst = strconv.AppendInt(dst, int64(g.Index), 10)
	dst = append(dst, `",UUID="`...)
	dst = appendLabelValue(dst, g.UUID)
	if model {
		dst = append(dst, `",modelName="`...)
		dst = appendLabelValue(dst, g.Name)
	}
	dst = append(dst, `",Hostname="`...)
	dst = appendLabelValue(dst, host)
	return append(dst, `"}`...)
}

// labelEscaper escapes a label value as the exposition format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func appendLabelValue(dst []byte, v string) []byte {
	return append(dst, labelEscaper.Replace(v)...)
}

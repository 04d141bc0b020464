package goodput

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// The data types a peak is given for, as the run param sextant.dtype and
// the --gpu-peak-tflops flag name them.
var dtypes = []string{"fp64", "fp32", "tf32", "bf16", "fp16", "fp8"}

// DefaultDType is the data type MFU is computed for when the run does not
// say (sextant.dtype): mixed-precision training's usual one.
const DefaultDType = "bf16"

// builtin is the table of peak dense TFLOPS per device by GPU model (as
// NVML's product name contains it, lower case) and data type. Numbers
// are the vendor's dense figures (the sparse ones halved); tensor-core
// figures except fp32, which is the non-tensor rate. Sources: NVIDIA H100
// Tensor Core GPU datasheet (H100 SXM, H100 NVL, H100 PCIe), NVIDIA H200
// Tensor Core GPU datasheet (H200 SXM = H100 SXM's compute; H200 NVL),
// NVIDIA A100 Tensor Core GPU datasheet (every A100 variant), NVIDIA L40S
// datasheet, NVIDIA L4 datasheet, NVIDIA A10 datasheet (the A10G, which
// NVIDIA publishes no datasheet of, is listed with the A10's figures:
// override it where yours differs), NVIDIA HGX B200 / DGX B200
// specifications (per GPU). docs/run.md shows the same table.
var builtin = map[string]map[string]float64{
	"h100":           {"fp64": 67, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, // an H100 not named further: the SXM part
	"h100 80gb hbm3": {"fp64": 67, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
	"h100 sxm":       {"fp64": 67, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
	"h100 nvl":       {"tf32": 417.6, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.9},
	"h100 pcie":      {"fp32": 51.2, "tf32": 378, "bf16": 756.5, "fp16": 756.5, "fp8": 1513},
	"h200":           {"fp64": 67, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
	"h200 nvl":       {"tf32": 417.6, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.9},
	"a100":           {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312},
	"l40s":           {"fp32": 91.6, "tf32": 183, "bf16": 362.05, "fp16": 362.05, "fp8": 733},
	"l4":             {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242},
	"a10":            {"tf32": 62.5, "bf16": 125, "fp16": 125},
	"a10g":           {"tf32": 62.5, "bf16": 125, "fp16": 125},
	"b200":           {"tf32": 1100, "bf16": 2250, "fp16": 2250, "fp8": 4500},
}

// Peaks are peak TFLOPS per device by GPU model and data type: the
// built-in table with the operator's overrides on top. A nil *Peaks is
// the built-in table alone. Safe for concurrent use (read-only).
type Peaks struct {
	// models are lower-case parts of product names, longest first.
	models []modelPeaks
	spec   string
}

type modelPeaks struct {
	part  string
	peaks map[string]float64
}

// DefaultPeaks returns the built-in table.
func DefaultPeaks() *Peaks {
	p, _ := ParsePeaks("")
	return p
}

// ParsePeaks returns the built-in table overridden by spec: entries
// separated by ";", each MODEL:DTYPE=TFLOPS[,DTYPE=TFLOPS...], where MODEL
// is a part of the GPU's product name as NVML reports it ("NVIDIA H100
// 80GB HBM3"), matched without regard to case on word boundaries, the
// longest matching part winning. An override replaces the named data
// types of a known model and keeps its others; a new model is added.
func ParsePeaks(spec string) (*Peaks, error) {
	table := map[string]map[string]float64{}
	for m, ps := range builtin {
		table[m] = map[string]float64{}
		for d, v := range ps {
			table[m][d] = v
		}
	}
	spec = strings.TrimSpace(spec)
	for item := range strings.SplitSeq(spec, ";") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		model, list, ok := strings.Cut(item, ":")
		model = strings.ToLower(strings.TrimSpace(model))
		if !ok || model == "" || strings.TrimSpace(list) == "" {
			return nil, errs.Errorf(errs.Invalid, "GPU peak %q: give MODEL:DTYPE=TFLOPS[,DTYPE=TFLOPS] entries separated by ';' (NVIDIA H100 80GB HBM3:bf16=989.4)", errs.Clip(item, 80))
		}
		if table[model] == nil {
			// A new name keeps the data types of the known model it names
			// ("nvidia h100 80gb hbm3" those of "h100 80gb hbm3").
			table[model] = map[string]float64{}
			if base := builtinMatch(model); base != nil {
				for d, v := range base {
					table[model][d] = v
				}
			}
		}
		for pair := range strings.SplitSeq(list, ",") {
			d, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			d = strings.ToLower(strings.TrimSpace(d))
			if !ok || !knownDType(d) {
				return nil, errs.Errorf(errs.Invalid, "GPU peak %q: %q is not DTYPE=TFLOPS with DTYPE one of %s", errs.Clip(item, 80), errs.Clip(pair, 40), strings.Join(dtypes, ", "))
			}
			f, err := ParseTFLOPS(v)
			if err != nil {
				return nil, err
			}
			table[model][d] = f
		}
	}
	p := &Peaks{spec: spec}
	for m, ps := range table {
		p.models = append(p.models, modelPeaks{part: m, peaks: ps})
	}
	sort.Slice(p.models, func(i, j int) bool {
		if len(p.models[i].part) != len(p.models[j].part) {
			return len(p.models[i].part) > len(p.models[j].part)
		}
		return p.models[i].part < p.models[j].part
	})
	return p, nil
}

// builtinMatch returns the built-in entry the model name matches, nil if
// none.
func builtinMatch(model string) map[string]float64 {
	best := ""
	for part := range builtin {
		if containsWord(model, part) && len(part) > len(best) {
			best = part
		}
	}
	return builtin[best]
}

// ParseTFLOPS parses a peak in TFLOPS: a finite number above 0.
func ParseTFLOPS(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errs.Errorf(errs.Invalid, "peak TFLOPS %q is not a number above 0", errs.Clip(strings.TrimSpace(s), 40))
	}
	return v, nil
}

func knownDType(d string) bool {
	for _, k := range dtypes {
		if k == d {
			return true
		}
	}
	return false
}

// NormalizeDType returns the table's name of a data type ("bfloat16" ->
// "bf16", "float32" -> "fp32"), and false for one it does not know.
func NormalizeDType(d string) (string, bool) {
	d = strings.ToLower(strings.TrimSpace(d))
	d = strings.TrimPrefix(d, "torch.")
	switch d {
	case "bfloat16":
		d = "bf16"
	case "float16", "half":
		d = "fp16"
	case "float32", "float":
		d = "fp32"
	case "float64", "double":
		d = "fp64"
	case "float8", "float8_e4m3fn", "float8_e5m2", "e4m3", "e5m2":
		d = "fp8"
	}
	return d, knownDType(d)
}

// For returns the peak TFLOPS of one device of model in dtype, the table
// entry that matched, and false when none is known.
func (p *Peaks) For(model, dtype string) (tflops float64, matched string, ok bool) {
	if p == nil {
		p = DefaultPeaks()
	}
	m := strings.ToLower(model)
	for _, mp := range p.models {
		if m == "" || !containsWord(m, mp.part) {
			continue
		}
		v, ok := mp.peaks[dtype]
		return v, mp.part, ok
	}
	return 0, "", false
}

// String returns the override spec the peaks were parsed from.
func (p *Peaks) String() string {
	if p == nil {
		return ""
	}
	return p.spec
}

// containsWord reports whether part occurs in s with no letter or digit
// right before or after it: "l4" is in "nvidia l4" but not in "nvidia
// l40s", "a100" in "nvidia a100-sxm4-80gb".
func containsWord(s, part string) bool {
	for i := 0; i+len(part) <= len(s); {
		j := strings.Index(s[i:], part)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(part)
		if (j == 0 || !alnum(s[j-1])) && (end == len(s) || !alnum(s[end])) {
			return true
		}
		i = j + 1
	}
	return false
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

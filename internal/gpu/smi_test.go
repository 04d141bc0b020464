package gpu_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/gpu"
)

// MustFakeSMI puts the fake nvidia-smi first on PATH, replaying the
// recording testdata/smi/<driver>, and returns the file its calls are
// logged to.
func MustFakeSMI(tb testing.TB, driver string) string {
	tb.Helper()
	dir := tb.TempDir()
	script, err := os.ReadFile("testdata/fake-nvidia-smi/nvidia-smi")
	if err != nil {
		tb.Fatal(err)
	}
	// Copied so that the executable bit does not depend on the checkout.
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), script, 0o755); err != nil {
		tb.Fatal(err)
	}
	rec, err := filepath.Abs(filepath.Join("testdata/smi", driver))
	if err != nil {
		tb.Fatal(err)
	}
	log := filepath.Join(dir, "calls.log")
	tb.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	tb.Setenv("FAKE_SMI_DIR", rec)
	tb.Setenv("FAKE_SMI_LOG", log)
	return log
}

type wantGPU struct {
	index int
	uuid  string
	err   string // substring; "" means no error
	vals  map[gpu.Field]float64
	// missing lists the fields that must read as missing.
	missing []gpu.Field
}

const mib = 1 << 20

func TestSMISource(t *testing.T) {
	tests := map[string]struct {
		fields []string // the query fields in use after probing, when checked
		gpus   []wantGPU
		procs  []gpu.Process
	}{
		"Driver418UnitsInValuesNoMIGField": {
			gpus: []wantGPU{
				{index: 0, uuid: "GPU-1c9b2a3e-7f4d-4c1e-9a0b-3d5e6f708192", vals: map[gpu.Field]float64{
					gpu.FieldUtil: 87, gpu.FieldMemUtil: 41, gpu.FieldMemUsed: 15012 * mib, gpu.FieldMemTotal: 16160 * mib,
					gpu.FieldTemp: 64, gpu.FieldPower: 251.33, gpu.FieldPowerLimit: 300, gpu.FieldSMClock: 1530}},
				{index: 1, vals: map[gpu.Field]float64{gpu.FieldUtil: 0, gpu.FieldSMClock: 135}},
			},
			procs: []gpu.Process{{GPU: 0, PID: 12345, Name: "python", MemUsedBytes: 15000 * mib}},
		},
		"Driver535ColumnOrderAndNA": {
			gpus: []wantGPU{
				{index: 0, vals: map[gpu.Field]float64{gpu.FieldUtil: 98, gpu.FieldMemUsed: 80123 * mib, gpu.FieldPower: 689.52, gpu.FieldTemp: 71}},
				{index: 1, vals: map[gpu.Field]float64{gpu.FieldUtil: 97, gpu.FieldPowerLimit: 700}, missing: []gpu.Field{gpu.FieldMemUtil, gpu.FieldPower}},
			},
			procs: []gpu.Process{
				{GPU: 0, PID: 2001, Name: "/usr/bin/python3", MemUsedBytes: 79800 * mib},
				{GPU: 1, PID: 2002, Name: "/opt/jobs/run, rank1", MemUsedBytes: 78600 * mib},
			},
		},
		"Driver550MIG": {
			gpus: []wantGPU{
				{index: 0, uuid: "GPU-cc33cc33-0000-1111-2222-333344445555", vals: map[gpu.Field]float64{gpu.FieldMemUsed: 21000 * mib, gpu.FieldTemp: 45}, missing: []gpu.Field{gpu.FieldUtil, gpu.FieldMemUtil}},
				{index: 1, vals: map[gpu.Field]float64{gpu.FieldUtil: 55}},
			},
			procs: []gpu.Process{
				{GPU: 0, PID: 3001, Name: "python", MemUsedBytes: -1},
				{GPU: 1, PID: 3002, Name: "python", MemUsedBytes: 29900 * mib},
			},
		},
		// Recorded on an H200 (driver 580.159.04) under a matmul load by
		// scripts/gpu-check.sh --record: the header names the clocks
		// clocks.current.*, and both throttle-reason fields by the new name.
		"Driver580H200Recorded": {
			gpus: []wantGPU{
				{index: 0, uuid: "GPU-fa393abb-4123-3dd5-5b7d-99569c70acc8", vals: map[gpu.Field]float64{
					gpu.FieldUtil: 100, gpu.FieldMemUtil: 7, gpu.FieldMemUsed: 1651 * mib, gpu.FieldMemTotal: 143771 * mib,
					gpu.FieldTemp: 57, gpu.FieldPower: 697.23, gpu.FieldPowerLimit: 700, gpu.FieldSMClock: 1980,
					gpu.FieldMemClock: 3201, gpu.FieldSMClockMax: 1980, gpu.FieldPowerLimitDefault: 700,
					gpu.FieldThrottleReasons: 0, gpu.FieldECCCorrected: 0, gpu.FieldECCUncorrected: 0}},
			},
			procs: []gpu.Process{{GPU: 0, PID: 532, Name: "python3", MemUsedBytes: 1642 * mib}},
		},
		"Driver570GPULost": {
			gpus: []wantGPU{
				{index: 0, vals: map[gpu.Field]float64{gpu.FieldUtil: 93}},
				{index: 2, vals: map[gpu.Field]float64{gpu.FieldUtil: 91}},
				{index: 3, err: "Unknown Error", vals: map[gpu.Field]float64{gpu.FieldMemTotal: 143771 * mib, gpu.FieldPowerLimit: 700}, missing: []gpu.Field{gpu.FieldUtil, gpu.FieldTemp}},
			},
		},
	}
	drivers := map[string]string{
		"Driver418UnitsInValuesNoMIGField": "418-v100", "Driver535ColumnOrderAndNA": "535-h100",
		"Driver550MIG": "550-a100-mig", "Driver570GPULost": "570-gpu-lost", "Driver580H200Recorded": "580-h200",
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			calls := MustFakeSMI(t, drivers[name])
			src, err := gpu.OpenSMI(t.Context(), gpu.SMIOptions{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			smp, err := src.Sample(t.Context())
			if err != nil {
				t.Fatalf("sample: %v", err)
			}
			if len(smp.GPUs) != len(tc.gpus) {
				t.Fatalf("got %d GPUs %+v, want %d", len(smp.GPUs), smp.GPUs, len(tc.gpus))
			}
			for i, w := range tc.gpus {
				checkGPU(t, smp.GPUs[i], w)
			}
			if len(smp.Processes) != len(tc.procs) {
				t.Fatalf("processes %+v, want %+v", smp.Processes, tc.procs)
			}
			for i, p := range tc.procs {
				if smp.Processes[i] != p {
					t.Errorf("process %d = %+v, want %+v", i, smp.Processes[i], p)
				}
			}
			if strings.Contains(drivers[name], "418") {
				// The old driver refused mig.mode.current: the source
				// probed, dropped it, and asks without it from then on.
				if f := src.Fields(); strings.Contains(strings.Join(f, ","), "mig.mode.current") {
					t.Errorf("fields still include mig.mode.current: %v", f)
				}
				b, _ := os.ReadFile(calls)
				if !strings.Contains(string(b), "mig.mode.current") {
					t.Errorf("the first query did not ask for mig.mode.current:\n%s", b)
				}
			}
		})
	}
}

func checkGPU(t *testing.T, g gpu.GPU, w wantGPU) {
	t.Helper()
	if g.Index != w.index {
		t.Errorf("index %d, want %d", g.Index, w.index)
	}
	if w.uuid != "" && g.UUID != w.uuid {
		t.Errorf("GPU %d: uuid %q, want %q", w.index, g.UUID, w.uuid)
	}
	if w.err == "" && g.Err != "" || !strings.Contains(g.Err, w.err) {
		t.Errorf("GPU %d: err %q, want %q", w.index, g.Err, w.err)
	}
	for f, v := range w.vals {
		if got := g.Values[f]; math.Abs(got-v) > 1e-6 {
			t.Errorf("GPU %d: %s = %v, want %v", w.index, f, got, v)
		}
	}
	for _, f := range w.missing {
		if !gpu.IsMissing(g.Values[f]) {
			t.Errorf("GPU %d: %s = %v, want missing", w.index, f, g.Values[f])
		}
	}
}

func TestSMIWithoutDriver(t *testing.T) {
	MustFakeSMI(t, "no-driver")
	_, err := gpu.OpenSMI(t.Context(), gpu.SMIOptions{})
	if err == nil || !strings.Contains(err.Error(), "communicate with the NVIDIA driver") {
		t.Fatalf("open without a driver: %v, want the driver error", err)
	}
}

func TestOpenSourceFallsBack(t *testing.T) {
	noNVML := func() (gpu.Source, error) { return nil, errors.New("nvml: init: ERROR_LIBRARY_NOT_FOUND") }
	t.Run("AutoUsesNvidiaSMI", func(t *testing.T) {
		MustFakeSMI(t, "535-h100")
		src, err := gpu.OpenSource(t.Context(), "auto", gpu.SourceOptions{NVML: noNVML})
		if err != nil || src.Name() != "nvidia-smi" {
			t.Fatalf("auto: %v %v, want nvidia-smi", src, err)
		}
	})
	t.Run("AutoFindsNothing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := gpu.OpenSource(t.Context(), "auto", gpu.SourceOptions{NVML: noNVML})
		if !errors.Is(err, gpu.ErrNoSource) {
			t.Fatalf("auto without GPUs: %v, want ErrNoSource", err)
		}
	})
	t.Run("ErrNVMLOnly", func(t *testing.T) {
		MustFakeSMI(t, "535-h100")
		if _, err := gpu.OpenSource(t.Context(), "nvml", gpu.SourceOptions{NVML: noNVML}); err == nil {
			t.Fatal("nvml without NVML opened")
		}
	})
	t.Run("Sim", func(t *testing.T) {
		src, err := gpu.OpenSource(t.Context(), "sim:3", gpu.SourceOptions{})
		if err != nil || src.Name() != "sim:3" {
			t.Fatalf("sim:3: %v %v", src, err)
		}
	})
	for _, bad := range []string{"sim:0", "sim:65", "sim:x", "cuda", ""} {
		if bad != "" && gpu.ValidSourceSpec(bad) {
			t.Errorf("ValidSourceSpec(%q) = true", bad)
		}
		if _, err := gpu.OpenSource(context.Background(), bad, gpu.SourceOptions{NVML: noNVML}); err == nil && bad != "" {
			t.Errorf("OpenSource(%q) succeeded", bad)
		}
	}
}

// FuzzParseQueryGPU checks that no nvidia-smi output makes the parser
// panic or return readings that are not usable: every value is missing or
// finite, byte counts are not negative, and MIG rows never become GPUs.
func FuzzParseQueryGPU(f *testing.F) {
	for _, d := range []string{"418-v100", "535-h100", "550-a100-mig", "570-gpu-lost", "580-h200", "no-driver"} {
		b, err := os.ReadFile(filepath.Join("testdata/smi", d, "query-gpu.csv"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("index, memory.used [GiB]\n0, 1.5 GiB\n1, -3\n"))
	f.Add([]byte("utilization.gpu\n1e400\nNaN\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		gpus, err := gpu.ParseQueryGPU(out)
		if err != nil && len(gpus) > 0 {
			t.Fatalf("error %v with %d GPUs", err, len(gpus))
		}
		for _, g := range gpus {
			if g.Index < 0 || strings.HasPrefix(g.UUID, "MIG-") {
				t.Fatalf("bad GPU %+v", g)
			}
			for fi, v := range g.Values {
				if !gpu.IsMissing(v) && (math.IsInf(v, 0) || math.IsNaN(v)) {
					t.Fatalf("%s = %v", gpu.Field(fi), v)
				}
				if gpu.Field(fi).IsBytes() && !gpu.IsMissing(v) && v < 0 {
					t.Fatalf("%s = %v, negative", gpu.Field(fi), v)
				}
			}
		}
		procs, _ := gpu.ParseComputeApps(out, gpus)
		for _, p := range procs {
			if p.PID < 0 || p.MemUsedBytes < -1 {
				t.Fatalf("bad process %+v", p)
			}
		}
	})
}

//go:build linux && cgo

package nvml_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/gpu/nvml"
)

// TestOpenOnThisMachine: without a driver Open fails cleanly (a crash
// here would be the process dying on an unresolved NVML symbol); with one
// it samples every GPU.
func TestOpenOnThisMachine(t *testing.T) {
	src, err := nvml.Open()
	if err != nil {
		t.Logf("no NVML here, as expected without a driver: %v", err)
		if !strings.HasPrefix(err.Error(), "nvml:") {
			t.Fatalf("error %q does not say it is NVML's", err)
		}
		return
	}
	defer src.Close()
	smp, err := src.Sample(t.Context())
	if err != nil || len(smp.GPUs) == 0 {
		t.Fatalf("sample on a GPU machine: %+v %v", smp, err)
	}
	for _, g := range smp.GPUs {
		if g.Err == "" && (g.UUID == "" || gpu.IsMissing(g.Values[gpu.FieldMemTotal])) {
			t.Errorf("GPU %+v lacks its UUID or memory size", g)
		}
	}
}

// TestOpenLoadsTheLibraryAtRunTime builds a stand-in libnvidia-ml.so.1
// (testdata/fakenvml.c) and opens NVML in a child process whose
// LD_LIBRARY_PATH finds it: the binary has no link-time dependency on
// NVML, and Open finds the library through the dynamic loader's search
// path when it runs, as on a machine with the driver installed.
func TestOpenLoadsTheLibraryAtRunTime(t *testing.T) {
	if os.Getenv("SEXTANT_NVML_CHILD") == "1" {
		_, err := nvml.Open()
		t.Logf("open: %v", err)
		return
	}
	cc, err := exec.Command("go", "env", "CC").Output()
	if err != nil {
		t.Fatalf("go env CC: %v", err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libnvidia-ml.so.1")
	if out, err := exec.Command(strings.TrimSpace(string(cc)), "-shared", "-fPIC", "-o", lib, "testdata/fakenvml.c").CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in library: %v\n%s", err, out)
	}
	child := func(libPath string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLoadsTheLibraryAtRunTime$", "-test.v")
		cmd.Env = append(os.Environ(), "SEXTANT_NVML_CHILD=1", "LD_LIBRARY_PATH="+libPath)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := child(dir); !strings.Contains(out, "open: nvml: no GPU") {
		t.Errorf("with the library on LD_LIBRARY_PATH, want Open to load it and count no GPU; got:\n%s", out)
	}
	if out := child(t.TempDir()); !strings.Contains(out, "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("without it, want ERROR_LIBRARY_NOT_FOUND; got:\n%s", out)
	}
}

// reserve is the memory the mock's driver reserves on each GPU: the v1
// reading counts it as used, the v2 reading does not.
const reserve = 512 << 20

// mockA100 returns go-nvml's DGX A100 mock with the readings our source
// asks for filled in: GPU i reads utilisation 10*i %, 60+i °C and so on.
func mockA100(t *testing.T) *dgxa100.Server {
	s, _ := mockA100Events(t)
	return s
}

// xidQueue is the mock's event set: the Xid events not yet waited for.
type xidQueue struct {
	mu     sync.Mutex
	events []nv.EventData
}

func (q *xidQueue) push(e nv.EventData) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, e)
}

// mockA100Events is mockA100 with the GPU health readings (clocks, power
// limits, throttle reasons, ECC counts; GPU 6 throttles for heat, GPU 7
// has ECC off, GPU 5 cannot register events) and an event set whose Xid
// events the test pushes.
func mockA100Events(t *testing.T) (*dgxa100.Server, *xidQueue) {
	s := dgxa100.New()
	q := &xidQueue{}
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nv.EventData, nv.Return) {
			q.mu.Lock()
			defer q.mu.Unlock()
			if len(q.events) == 0 {
				return nv.EventData{}, nv.ERROR_TIMEOUT
			}
			e := q.events[0]
			q.events = q.events[1:]
			return e, nv.SUCCESS
		},
		FreeFunc: func() nv.Return { return nv.SUCCESS },
	}
	s.EventSetCreateFunc = func() (nv.EventSet, nv.Return) { return set, nv.SUCCESS }
	withSymbols(s, "nvmlDeviceGetMemoryInfo_v2")
	s.SystemGetProcessNameFunc = func(pid int) (string, nv.Return) { return "python", nv.SUCCESS }
	for i, d := range s.Devices {
		dev := d.(*dgxa100.Device)
		dev.MemoryInfo.Used = uint64(i+1) << 30
		dev.GetMemoryInfo_v2Func = func() (nv.Memory_v2, nv.Return) {
			// The v1 reading's used memory counts the driver's reserve.
			m := dev.MemoryInfo
			return nv.Memory_v2{Total: m.Total, Reserved: reserve, Free: m.Free, Used: m.Used - reserve}, nv.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nv.Utilization, nv.Return) {
			return nv.Utilization{Gpu: uint32(10 * i), Memory: uint32(i)}, nv.SUCCESS
		}
		dev.GetTemperatureFunc = func(nv.TemperatureSensors) (uint32, nv.Return) { return uint32(60 + i), nv.SUCCESS }
		dev.GetPowerUsageFunc = func() (uint32, nv.Return) { return uint32(300_000 + i*1000), nv.SUCCESS }
		dev.GetEnforcedPowerLimitFunc = func() (uint32, nv.Return) { return 400_000, nv.SUCCESS }
		dev.GetClockInfoFunc = func(c nv.ClockType) (uint32, nv.Return) {
			if c == nv.CLOCK_MEM {
				return 1593, nv.SUCCESS
			}
			return 1980, nv.SUCCESS
		}
		dev.GetMaxClockInfoFunc = func(nv.ClockType) (uint32, nv.Return) { return 1980, nv.SUCCESS }
		dev.GetPowerManagementDefaultLimitFunc = func() (uint32, nv.Return) { return 400_000, nv.SUCCESS }
		dev.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nv.Return) {
			if i == 6 {
				return nv.ClocksThrottleReasonHwThermalSlowdown | nv.ClocksThrottleReasonSwPowerCap, nv.SUCCESS
			}
			return 0, nv.SUCCESS
		}
		dev.GetTotalEccErrorsFunc = func(kind nv.MemoryErrorType, _ nv.EccCounterType) (uint64, nv.Return) {
			if i == 7 {
				return 0, nv.ERROR_NOT_SUPPORTED // ECC off
			}
			return uint64(i) + uint64(kind)*100, nv.SUCCESS
		}
		dev.RegisterEventsFunc = func(types uint64, _ nv.EventSet) nv.Return {
			if i == 5 {
				return nv.ERROR_NOT_SUPPORTED
			}
			return nv.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) {
			return []nv.ProcessInfo{{Pid: uint32(1000 + i), UsedGpuMemory: 1 << 30}}, nv.SUCCESS
		}
	}
	return s, q
}

// withSymbols makes the mock's library have exactly the named symbols
// among those the source looks up.
func withSymbols(s *dgxa100.Server, names ...string) {
	s.ExtensionsFunc = func() nv.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
			for _, n := range names {
				if n == name {
					return nil
				}
			}
			return nv.ERROR_FUNCTION_NOT_FOUND
		}}
	}
}

// TestMemoryUsedAsNvidiaSMIShowsIt: memory used is the v2 reading, which
// leaves out the driver's reserve, as nvidia-smi shows it (the v1 reading
// was 615 MiB higher on an H200); a driver without the v2 call (before
// R510) is never asked for it, and a device that refuses it is read with
// the v1 call.
func TestMemoryUsedAsNvidiaSMIShowsIt(t *testing.T) {
	used := func(t *testing.T, s *dgxa100.Server) []float64 {
		t.Helper()
		src, err := nvml.OpenWith(s)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		smp, err := src.Sample(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for _, g := range smp.GPUs {
			out = append(out, g.Values[gpu.FieldMemUsed])
		}
		return out
	}
	t.Run("V2", func(t *testing.T) {
		s := mockA100(t)
		s.Devices[3].(*dgxa100.Device).GetMemoryInfo_v2Func = func() (nv.Memory_v2, nv.Return) { return nv.Memory_v2{}, nv.ERROR_NOT_SUPPORTED }
		for i, u := range used(t, s) {
			want := float64(uint64(i+1)<<30 - reserve)
			if i == 3 {
				want = float64(uint64(i+1) << 30) // refused v2: v1
			}
			if u != want {
				t.Errorf("GPU %d memory used %v, want %v", i, u, want)
			}
		}
	})
	t.Run("DriverWithoutV2", func(t *testing.T) {
		s := mockA100(t)
		withSymbols(s)
		for _, d := range s.Devices {
			d.(*dgxa100.Device).GetMemoryInfo_v2Func = nil // the mock panics if it is called
		}
		for i, u := range used(t, s) {
			if want := float64(uint64(i+1) << 30); u != want {
				t.Errorf("GPU %d memory used %v, want the v1 reading %v", i, u, want)
			}
		}
	})
}

// TestHealthReadings: clocks, power limits, throttle reasons and ECC counts
// are read for every GPU (missing where unsupported), and an Xid event is
// reported in the next sample of its GPU only.
func TestHealthReadings(t *testing.T) {
	s, q := mockA100Events(t)
	src, err := nvml.OpenWith(s)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	q.push(nv.EventData{Device: s.Devices[2], EventType: nv.EventTypeXidCriticalError, EventData: 79})
	q.push(nv.EventData{Device: s.Devices[2], EventType: nv.EventTypeXidCriticalError, EventData: 48})
	q.push(nv.EventData{Device: s.Devices[4], EventType: nv.EventTypeSingleBitEccError, EventData: 1})
	smp, err := src.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range smp.GPUs {
		v := g.Values
		if v[gpu.FieldMemClock] != 1593 || v[gpu.FieldSMClockMax] != 1980 || v[gpu.FieldPowerLimitDefault] != 400 {
			t.Errorf("GPU %d clocks and limits %v", i, v)
		}
		want := 0.0
		if i == 6 {
			want = float64(gpu.ThrottleHwThermal | gpu.ThrottleSwPowerCap)
		}
		if v[gpu.FieldThrottleReasons] != want {
			t.Errorf("GPU %d throttle reasons %v, want %v", i, v[gpu.FieldThrottleReasons], want)
		}
		switch {
		case i == 7 && (!gpu.IsMissing(v[gpu.FieldECCCorrected]) || !gpu.IsMissing(v[gpu.FieldECCUncorrected])):
			t.Errorf("ECC off read as %v/%v", v[gpu.FieldECCCorrected], v[gpu.FieldECCUncorrected])
		case i != 7 && (v[gpu.FieldECCCorrected] != float64(i) || v[gpu.FieldECCUncorrected] != float64(100+i)):
			t.Errorf("GPU %d ECC %v/%v", i, v[gpu.FieldECCCorrected], v[gpu.FieldECCUncorrected])
		}
		if xid := v[gpu.FieldXid]; (i == 2) != !gpu.IsMissing(xid) || i == 2 && xid != 48 {
			t.Errorf("GPU %d xid %v (want the last of GPU 2's, 48, and none elsewhere)", i, xid)
		}
	}
	smp, _ = src.Sample(t.Context())
	if !gpu.IsMissing(smp.GPUs[2].Values[gpu.FieldXid]) {
		t.Errorf("an Xid reported twice: %v", smp.GPUs[2].Values[gpu.FieldXid])
	}
}

// TestGPUFallsOffTheBus: one device answers ERROR_GPU_IS_LOST and another
// does not support power readings; the other GPUs read as usual.
func TestGPUFallsOffTheBus(t *testing.T) {
	s := mockA100(t)
	s.Devices[3].(*dgxa100.Device).GetUtilizationRatesFunc = func() (nv.Utilization, nv.Return) {
		return nv.Utilization{}, nv.ERROR_GPU_IS_LOST
	}
	s.Devices[5].(*dgxa100.Device).GetPowerUsageFunc = func() (uint32, nv.Return) { return 0, nv.ERROR_NOT_SUPPORTED }
	src, err := nvml.OpenWith(s)
	if err != nil {
		t.Fatal(err)
	}
	smp, err := src.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(smp.GPUs) != 8 {
		t.Fatalf("%d GPUs, want 8", len(smp.GPUs))
	}
	for i, g := range smp.GPUs {
		switch {
		case i == 3:
			if !strings.Contains(g.Err, "GPU_IS_LOST") || !gpu.IsMissing(g.Values[gpu.FieldUtil]) || g.UUID == "" {
				t.Errorf("lost GPU: %+v", g)
			}
		case g.Err != "":
			t.Errorf("GPU %d has error %q", i, g.Err)
		case g.Values[gpu.FieldUtil] != float64(10*i) || g.Values[gpu.FieldTemp] != float64(60+i) || g.Values[gpu.FieldMemUsed] != float64(uint64(i+1)<<30-reserve):
			t.Errorf("GPU %d readings %v", i, g.Values)
		case i == 5 && !gpu.IsMissing(g.Values[gpu.FieldPower]):
			t.Errorf("unsupported power read as %v", g.Values[gpu.FieldPower])
		case i != 5 && g.Values[gpu.FieldPower] != 300+float64(i):
			t.Errorf("GPU %d power %v W", i, g.Values[gpu.FieldPower])
		}
	}
	if len(smp.Processes) != 7 || smp.Processes[0].Name != "python" || smp.Processes[0].MemUsedBytes != 1<<30 {
		t.Errorf("processes %+v", smp.Processes)
	}
}

// TestFailedInitMakesNoOtherCall: after a failed Init, the real library
// would kill the process on any other call.
func TestFailedInitMakesNoOtherCall(t *testing.T) {
	s := mockA100(t)
	s.InitFunc = func() nv.Return { return nv.ERROR_DRIVER_NOT_LOADED }
	s.DeviceGetCountFunc = func() (int, nv.Return) {
		t.Fatal("DeviceGetCount called after a failed Init")
		return 0, nv.SUCCESS
	}
	s.ShutdownFunc = func() nv.Return {
		t.Fatal("Shutdown called after a failed Init")
		return nv.SUCCESS
	}
	if _, err := nvml.OpenWith(s); err == nil || !strings.Contains(err.Error(), "DRIVER_NOT_LOADED") {
		t.Fatalf("open: %v", err)
	}
}

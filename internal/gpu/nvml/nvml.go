//go:build linux && cgo

// Package nvml is the NVML source of GPU samples, on top of NVIDIA's
// go-nvml bindings. It is the only importer of go-nvml.
//
// The bindings are linked without libnvidia-ml: Open loads the library at
// run time, so the binary builds and starts on machines without a GPU or
// driver. There, Init fails (ERROR_LIBRARY_NOT_FOUND) and Open returns an
// error without making any other NVML call: any other call after a failed
// Init kills the process with an unresolved symbol.
package nvml

import (
	"context"
	"fmt"
	"math"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/sextant/sextant/internal/gpu"
)

// Source samples every GPU NVML sees.
type Source struct {
	lib   nv.Interface
	devs  []device
	names map[int]string // process names by pid
	// events receives the devices' Xid errors (nil when NVML cannot make
	// an event set); Sample drains it.
	events nv.EventSet
	// memV2 says the driver has nvmlDeviceGetMemoryInfo_v2 (R510 and
	// newer): calling a function the library lacks would kill the process.
	memV2 bool
}

var _ gpu.Source = (*Source)(nil)

type device struct {
	index      int
	uuid, name string
	h          nv.Device
	err        string // why h is nil
}

// Open loads libnvidia-ml.so.1, initialises NVML and returns a source of
// every GPU it lists. Without a driver it returns an error and leaves NVML
// alone.
func Open() (gpu.Source, error) {
	s, err := OpenWith(nv.New())
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenWith is Open over an NVML implementation of the caller's choice;
// tests pass go-nvml's mock.
func OpenWith(lib nv.Interface) (*Source, error) {
	if ret := lib.Init(); ret != nv.SUCCESS {
		// Return.Error is pure Go when the library did not load; no other
		// NVML call may be made.
		return nil, fmt.Errorf("nvml: init: %s", ret.Error())
	}
	n, ret := lib.DeviceGetCount()
	if ret != nv.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("nvml: count devices: %s", ret.Error())
	}
	if n == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("nvml: no GPU")
	}
	s := &Source{lib: lib, names: map[int]string{}}
	s.memV2 = lib.Extensions().LookupSymbol("nvmlDeviceGetMemoryInfo_v2") == nil
	for i := range n {
		d := device{index: i}
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nv.SUCCESS {
			d.err = "nvml: " + ret.Error()
			s.devs = append(s.devs, d)
			continue
		}
		d.h = h
		if idx, ret := h.GetIndex(); ret == nv.SUCCESS {
			d.index = idx
		}
		if u, ret := h.GetUUID(); ret == nv.SUCCESS {
			d.uuid = u
		}
		if nm, ret := h.GetName(); ret == nv.SUCCESS {
			d.name = nm
		}
		s.devs = append(s.devs, d)
	}
	// Xid errors arrive as events, not readings: one set for every device
	// that supports them (not all do, nor every driver without root).
	if set, ret := lib.EventSetCreate(); ret == nv.SUCCESS {
		registered := false
		for _, d := range s.devs {
			if d.h != nil && d.h.RegisterEvents(nv.EventTypeXidCriticalError, set) == nv.SUCCESS {
				registered = true
			}
		}
		if registered {
			s.events = set
		} else {
			set.Free()
		}
	}
	return s, nil
}

// memory reads a device's memory with the v2 call where the driver has
// it, else (or when the device refuses it) with the v1 call.
func (s *Source) memory(h nv.Device) (nv.Memory, nv.Return) {
	if s.memV2 {
		if m, ret := h.GetMemoryInfo_v2(); ret == nv.SUCCESS {
			return nv.Memory{Total: m.Total, Free: m.Free, Used: m.Used}, ret
		}
	}
	return h.GetMemoryInfo()
}

// xids drains the Xid events that arrived since the last sample and
// returns the last code of each device, by UUID.
func (s *Source) xids() map[string]int {
	if s.events == nil {
		return nil
	}
	var out map[string]int
	for range 1024 { // bounded: a flood of errors must not hold a sample up
		e, ret := s.events.Wait(0)
		if ret != nv.SUCCESS {
			break
		}
		if e.EventType&nv.EventTypeXidCriticalError == 0 || e.Device == nil {
			continue
		}
		uuid, r := e.Device.GetUUID()
		if r != nv.SUCCESS {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[uuid] = int(e.EventData)
	}
	return out
}

// Name implements gpu.Source.
func (s *Source) Name() string { return "nvml" }

// Sample implements gpu.Source. A device whose calls fail (other than
// "not supported" or "no permission", which only make that reading
// missing) is reported with the error and whatever it could read; the
// other devices are unaffected.
func (s *Source) Sample(ctx context.Context) (*gpu.Sample, error) {
	smp := &gpu.Sample{GPUs: make([]gpu.GPU, 0, len(s.devs))}
	xids := s.xids()
	for _, d := range s.devs {
		g := gpu.NewGPU(d.index, d.uuid, d.name)
		if x, ok := xids[d.uuid]; ok && d.uuid != "" {
			g.Values[gpu.FieldXid] = float64(x)
		}
		if d.h == nil {
			g.Err = d.err
			smp.GPUs = append(smp.GPUs, g)
			continue
		}
		failed := nv.SUCCESS
		ok := func(ret nv.Return) bool {
			switch ret {
			case nv.SUCCESS:
				return true
			case nv.ERROR_NOT_SUPPORTED, nv.ERROR_NO_PERMISSION, nv.ERROR_NOT_FOUND:
				return false
			}
			if failed == nv.SUCCESS {
				failed = ret
			}
			return false
		}
		if u, ret := d.h.GetUtilizationRates(); ok(ret) {
			g.Values[gpu.FieldUtil] = float64(u.Gpu)
			g.Values[gpu.FieldMemUtil] = float64(u.Memory)
		}
		if failed == nv.ERROR_GPU_IS_LOST {
			g.Err = "nvml: " + failed.Error()
			smp.GPUs = append(smp.GPUs, g)
			continue
		}
		// Memory used as nvidia-smi and dcgm-exporter show it: the v2
		// reading leaves out what the driver reserves, which the v1
		// reading counts as used (615 MiB of an H200's 143,771 with driver
		// 580, scripts/gpu-check.sh on 2026-12-04).
		if m, ret := s.memory(d.h); ok(ret) {
			g.Values[gpu.FieldMemUsed] = float64(m.Used)
			g.Values[gpu.FieldMemTotal] = float64(m.Total)
		}
		if t, ret := d.h.GetTemperature(nv.TEMPERATURE_GPU); ok(ret) {
			g.Values[gpu.FieldTemp] = float64(t)
		}
		if p, ret := d.h.GetPowerUsage(); ok(ret) {
			g.Values[gpu.FieldPower] = float64(p) / 1000
		}
		if p, ret := d.h.GetEnforcedPowerLimit(); ok(ret) {
			g.Values[gpu.FieldPowerLimit] = float64(p) / 1000
		}
		if c, ret := d.h.GetClockInfo(nv.CLOCK_SM); ok(ret) {
			g.Values[gpu.FieldSMClock] = float64(c)
		}
		if c, ret := d.h.GetClockInfo(nv.CLOCK_MEM); ok(ret) {
			g.Values[gpu.FieldMemClock] = float64(c)
		}
		if c, ret := d.h.GetMaxClockInfo(nv.CLOCK_SM); ok(ret) {
			g.Values[gpu.FieldSMClockMax] = float64(c)
		}
		if p, ret := d.h.GetPowerManagementDefaultLimit(); ok(ret) {
			g.Values[gpu.FieldPowerLimitDefault] = float64(p) / 1000
		}
		// The throttle reasons under their older name, which every driver
		// since NVML 5 exports (the newer GetCurrentClocksEventReasons is
		// the same mask).
		if r, ret := d.h.GetCurrentClocksThrottleReasons(); ok(ret) {
			g.Values[gpu.FieldThrottleReasons] = float64(r)
		}
		// ECC counts, where ECC is on (NOT_SUPPORTED otherwise).
		if n, ret := d.h.GetTotalEccErrors(nv.MEMORY_ERROR_TYPE_CORRECTED, nv.VOLATILE_ECC); ok(ret) {
			g.Values[gpu.FieldECCCorrected] = float64(n)
		}
		if n, ret := d.h.GetTotalEccErrors(nv.MEMORY_ERROR_TYPE_UNCORRECTED, nv.VOLATILE_ECC); ok(ret) {
			g.Values[gpu.FieldECCUncorrected] = float64(n)
		}
		if ps, ret := d.h.GetComputeRunningProcesses(); ok(ret) {
			for _, p := range ps {
				mem := int64(-1)
				// NVML_VALUE_NOT_AVAILABLE (all ones) in MIG mode or
				// without permission.
				if p.UsedGpuMemory != math.MaxUint64 && p.UsedGpuMemory < math.MaxInt64 {
					mem = int64(p.UsedGpuMemory)
				}
				smp.Processes = append(smp.Processes, gpu.Process{GPU: d.index, PID: int(p.Pid), Name: s.processName(int(p.Pid)), MemUsedBytes: mem})
			}
		}
		if failed != nv.SUCCESS {
			g.Err = "nvml: " + failed.Error()
		}
		smp.GPUs = append(smp.GPUs, g)
	}
	return smp, nil
}

// processName returns a process's name, cached by pid.
func (s *Source) processName(pid int) string {
	if n, ok := s.names[pid]; ok {
		return n
	}
	n, ret := s.lib.SystemGetProcessName(pid)
	if ret != nv.SUCCESS {
		n = ""
	}
	if len(s.names) >= 4096 {
		clear(s.names)
	}
	s.names[pid] = n
	return n
}

// Close shuts NVML down.
func (s *Source) Close() error {
	if s.events != nil {
		s.events.Free()
	}
	if ret := s.lib.Shutdown(); ret != nv.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %s", ret.Error())
	}
	return nil
}

package gpu_test

import (
	"bytes"
	"errors"
	"math"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/gpu"
)

// testSample returns a sample with every kind of reading: present,
// missing, non-finite, a failed GPU and a process with unknown memory.
func testSample() gpu.Sample {
	g0 := gpu.NewGPU(0, "GPU-aa", "NVIDIA H100 80GB HBM3")
	g0.Values = [gpu.NumFields]float64{97, 41, 80123 << 20, 81559 << 20, 71, 689.52, 700, 1980}
	g1 := gpu.NewGPU(1, "GPU-bb", "NVIDIA H100 80GB HBM3")
	g1.Values[gpu.FieldUtil] = math.NaN()
	g1.Values[gpu.FieldTemp] = math.Inf(1)
	g1.Values[gpu.FieldMemUsed] = -5
	g1.Values[gpu.FieldPower] = 12.5
	g2 := gpu.NewGPU(7, "", "")
	g2.Err = "nvml: ERROR_GPU_IS_LOST"
	return gpu.Sample{TimestampMs: 1_800_000_000_000, GPUs: []gpu.GPU{g0, g1, g2}, Processes: []gpu.Process{
		{GPU: 0, PID: 4242, Name: "python", MemUsedBytes: 1 << 30},
		{GPU: 1, PID: 4243, Name: "", MemUsedBytes: -1},
	}}
}

func TestPackedSampleRoundTrip(t *testing.T) {
	in := testSample()
	data := gpu.AppendSample(nil, &in)
	var out gpu.Sample
	if err := gpu.DecodeSample(data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.GPUs) != 3 || len(out.Processes) != 2 {
		t.Fatalf("decoded %+v", out)
	}
	for i := range in.GPUs {
		a, b := in.GPUs[i], out.GPUs[i]
		if a.Index != b.Index || a.UUID != b.UUID || a.Name != b.Name || a.Err != b.Err {
			t.Errorf("GPU %d identity: %+v, want %+v", i, b, a)
		}
		for f := range gpu.NumFields {
			want := a.Values[f]
			if !gpu.IsMissing(want) && gpu.Field(f).IsBytes() && want < 0 {
				want = gpu.Missing() // negative byte counts are not stored
			}
			got := b.Values[f]
			switch {
			case gpu.IsMissing(want) != gpu.IsMissing(got):
				t.Errorf("GPU %d %s: %v, want %v", i, gpu.Field(f), got, want)
			case gpu.IsMissing(want):
			case gpu.Field(f).IsBytes() && got != want:
				t.Errorf("GPU %d %s: %v, want exactly %v", i, gpu.Field(f), got, want)
			case float32(got) != float32(want):
				t.Errorf("GPU %d %s: %v, want %v as float32", i, gpu.Field(f), got, want)
			}
		}
	}
	if !reflect.DeepEqual(in.Processes, out.Processes) {
		t.Errorf("processes %+v, want %+v", out.Processes, in.Processes)
	}
}

func TestDecodeSampleReusesStrings(t *testing.T) {
	in := testSample()
	data := gpu.AppendSample(nil, &in)
	var out gpu.Sample
	if err := gpu.DecodeSample(data, &out); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := gpu.DecodeSample(data, &out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decoding into a used Sample allocates %v times, want 0", allocs)
	}
}

func TestDecodeSampleCorrupt(t *testing.T) {
	in := testSample()
	data := gpu.AppendSample(nil, &in)
	tests := map[string][]byte{
		"ErrEmpty":     nil,
		"ErrVersion":   append([]byte{9}, data[1:]...),
		"ErrTruncated": data[:len(data)-3],
		"ErrTrailing":  append(append([]byte(nil), data...), 0),
		"ErrHugeCount": {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			var out gpu.Sample
			if err := gpu.DecodeSample(b, &out); !errors.Is(err, gpu.ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

// FuzzDecodeSample checks that no input makes the decoder panic, and that
// whatever it accepts encodes back to the same bytes.
func FuzzDecodeSample(f *testing.F) {
	in := testSample()
	f.Add(gpu.AppendSample(nil, &in))
	f.Add(gpu.AppendSample(nil, &gpu.Sample{}))
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0xff})
	if v1, err := os.ReadFile("testdata/sample-v1.bin"); err == nil {
		f.Add(v1)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s gpu.Sample
		if err := gpu.DecodeSample(data, &s); err != nil {
			return
		}
		again := gpu.AppendSample(nil, &s)
		var s2 gpu.Sample
		if err := gpu.DecodeSample(again, &s2); err != nil {
			t.Fatalf("re-encoded sample does not decode: %v", err)
		}
		if !reflect.DeepEqual(gpu.AppendSample(nil, &s2), again) {
			t.Fatal("encoding is not stable")
		}
	})
}

func TestVisibleDevices(t *testing.T) {
	smp := func() *gpu.Sample {
		s := &gpu.Sample{}
		for i, u := range []string{"GPU-aaaa-1", "GPU-bbbb-2", "GPU-bbbc-3", "GPU-cccc-4"} {
			s.GPUs = append(s.GPUs, gpu.NewGPU(i, u, "x"))
			s.Processes = append(s.Processes, gpu.Process{GPU: i, PID: 100 + i})
		}
		return s
	}
	tests := map[string]struct {
		env  string
		want []int
	}{
		"Indexes":             {"2,0", []int{0, 2}},
		"UUIDs":               {"GPU-cccc-4,GPU-aaaa-1", []int{0, 3}},
		"UniquePrefix":        {"GPU-bbbc", []int{2}},
		"AmbiguousPrefix":     {"GPU-bbb", nil},
		"InvalidEndsTheList":  {"1,-1,3", []int{1}},
		"GarbageEndsTheList":  {"0,cuda1,2", []int{0}},
		"EmptySelectsNothing": {"", nil},
		"UnknownIndex":        {"9", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := smp()
			gpu.ParseVisibleDevices(tc.env).Filter(s)
			var got []int
			for _, g := range s.GPUs {
				got = append(got, g.Index)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("CUDA_VISIBLE_DEVICES=%q selects %v, want %v", tc.env, got, tc.want)
			}
			for _, p := range s.Processes {
				if p.PID-100 != p.GPU || !contains(tc.want, p.GPU) {
					t.Fatalf("process of GPU %d kept", p.GPU)
				}
			}
		})
	}
	s := smp()
	gpu.Selector{}.Filter(s)
	if len(s.GPUs) != 4 {
		t.Fatalf("the zero Selector kept %d GPUs", len(s.GPUs))
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestSimIsPlausibleAndDeterministic(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a, b := gpu.NewSim(4, 7, clock), gpu.NewSim(4, 7, clock)
	other := gpu.NewSim(4, 8, clock)
	for step := range 200 {
		now = now.Add(10 * time.Second)
		sa, _ := a.Sample(t.Context())
		sb, _ := b.Sample(t.Context())
		so, _ := other.Sample(t.Context())
		// Compared packed: missing readings are NaN, which DeepEqual never
		// finds equal.
		if !bytes.Equal(gpu.AppendSample(nil, sa), gpu.AppendSample(nil, sb)) || sa.TimestampMs != sb.TimestampMs {
			t.Fatalf("step %d: same seed, different samples", step)
		}
		if sa.GPUs[0].UUID == so.GPUs[0].UUID {
			t.Fatal("different seeds share a UUID")
		}
		for _, g := range sa.GPUs {
			v := g.Values
			if v[gpu.FieldUtil] < 0 || v[gpu.FieldUtil] > 100 || v[gpu.FieldTemp] < 20 || v[gpu.FieldTemp] > 95 ||
				v[gpu.FieldMemUsed] > v[gpu.FieldMemTotal] || v[gpu.FieldPower] > v[gpu.FieldPowerLimit] {
				t.Fatalf("implausible reading %+v", v)
			}
		}
	}
	a.Fail(2, "GPU is lost")
	s, _ := a.Sample(t.Context())
	if s.GPUs[2].Err == "" || !gpu.IsMissing(s.GPUs[2].Values[gpu.FieldUtil]) || s.GPUs[1].Err != "" {
		t.Fatalf("Fail(2): %+v", s.GPUs)
	}
}

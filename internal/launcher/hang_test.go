package launcher

import (
	"testing"
	"time"
)

// A dump as Python 3.11's faulthandler writes it for
// faulthandler.register(SIGUSR2, all_threads=True): the thread that took
// the signal (the main thread) is "Current thread", most recent call first.
const sampleDump = `Thread 0x00007f1c2a1fe6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/work/python/sextant/progress.py", line 197 in _run
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f1c3b2a1740 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2501 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "/tmp/job/train.py", line 42 in step
  File "/tmp/job/train.py", line 60 in <module>
`

func TestInnermostFrameOfMainThread(t *testing.T) {
	for _, main := range []string{"0x00007f1c3b2a1740", "0x00007F1C3B2A1740", ""} {
		f, ok := innermostFrame(sampleDump, main)
		if !ok {
			t.Fatalf("main %q: no frame", main)
		}
		if got, want := f.String(), "all_reduce (distributed_c10d.py:2501)"; got != want {
			t.Errorf("main %q: frame %q, want %q", main, got, want)
		}
	}
}

func TestInnermostFrameOtherThreadByID(t *testing.T) {
	f, ok := innermostFrame(sampleDump, "0x00007f1c2a1fe6c0")
	if !ok || f.String() != "wait (threading.py:324)" {
		t.Fatalf("frame %v %v", f, ok)
	}
}

// Without a known main thread id, the last section is taken: CPython lists
// the main thread last.
func TestInnermostFrameUnknownIDFallsBackToLastThread(t *testing.T) {
	f, ok := innermostFrame(sampleDump, "0x0000000000000001")
	if !ok || f.Func != "all_reduce" {
		t.Fatalf("frame %v %v", f, ok)
	}
}

func TestInnermostFrameMissing(t *testing.T) {
	for name, c := range map[string]struct{ dump, main string }{
		"empty":         {"", ""},
		"no frames":     {"Current thread 0x00007f1c3b2a1740 (most recent call first):\n", ""},
		"garbled frame": {"Current thread 0x1 (most recent call first):\n  File \"a.py\" line x\n", ""},
	} {
		if f, ok := innermostFrame(c.dump, c.main); ok {
			t.Errorf("%s: got %v", name, f)
		}
	}
}

// The detector with a fake clock: ranks with heartbeats are judged on
// them alone; a job without heartbeats on its output and, once that is
// silent, on the run's newest metric (asked only then).
func TestHangDetector(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	d := hangDetector{after: 10 * time.Second, outAt: t0}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	noMetric := func() time.Time { t.Fatal("metrics asked while the job prints"); return time.Time{} }

	beats := []beat{{rank: 0, at: at(5)}, {rank: 1, at: at(1)}}
	if v := d.look(at(10), beats, 0, noMetric); v.hung {
		t.Fatalf("hung at 10 s with beats 5 s and 9 s old: %+v", v)
	}
	v := d.look(at(11), beats, 0, noMetric)
	if !v.hung || len(v.ranks) != 1 || v.ranks[0] != 1 || !v.since.Equal(at(1)) {
		t.Fatalf("rank 1's beat is 10 s old: %+v", v)
	}
	if v := d.look(at(16), beats, 0, noMetric); !v.hung || len(v.ranks) != 2 {
		t.Fatalf("both beats 10 s old: %+v", v)
	}
	beats[1].at = at(15) // rank 1 moves again
	if v := d.look(at(16), beats, 0, noMetric); !v.hung || len(v.ranks) != 1 || v.ranks[0] != 0 {
		t.Fatalf("rank 0 alone: %+v", v)
	}

	// No heartbeats: output keeps the job alive without asking the server.
	d = hangDetector{after: 10 * time.Second, outAt: t0}
	for s := 5; s <= 30; s += 5 {
		if v := d.look(at(s), nil, int64(s), noMetric); v.hung {
			t.Fatalf("hung at %d s while printing", s)
		}
	}
	asked := 0
	metric := at(35)
	lastMetric := func() time.Time { asked++; return metric }
	if v := d.look(at(39), nil, 30, lastMetric); v.hung || asked != 0 {
		t.Fatalf("silent for 9 s: %+v, asked %d", v, asked)
	}
	if v := d.look(at(41), nil, 30, lastMetric); v.hung || asked != 1 {
		t.Fatalf("silent 11 s but a metric 6 s ago: %+v, asked %d", v, asked)
	}
	v = d.look(at(45), nil, 30, lastMetric)
	if !v.hung || len(v.ranks) != 0 || !v.since.Equal(metric) {
		t.Fatalf("no output for 15 s, no metric for 10 s: %+v", v)
	}
	if v := d.look(at(46), nil, 31, lastMetric); v.hung {
		t.Fatalf("a new line of output: %+v", v)
	}
}

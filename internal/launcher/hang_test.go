package launcher

import "testing"

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

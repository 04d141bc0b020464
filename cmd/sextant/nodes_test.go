package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestNodesCLI: nodes ls flags the node whose GPUs failed and says why;
// nodes show lists its faults, newest first.
func TestNodesCLI(t *testing.T) {
	addr, stop := runServer(t, nil, "--port", "0", "--data-dir", t.TempDir())
	defer stop()
	now := time.Now().UnixMilli()
	post := func(body string) {
		t.Helper()
		res, err := http.Post("http://"+addr+"/api/2.0/sextant/gpu/samples", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("post samples: %s", res.Status)
		}
	}
	gpu0 := `{"index":0,"uuid":"GPU-0","name":"H100","util":50}`
	post(fmt.Sprintf(`{"node":"gpu-07","samples":[{"ts_ms":%d,"gpus":[%s,{"index":1,"uuid":"GPU-1","name":"H100","util":50}]},
		{"ts_ms":%d,"gpus":[%s,{"index":1,"uuid":"GPU-1","name":"H100","util":50,"xid":79}]},
		{"ts_ms":%d,"gpus":[%s,{"index":1,"uuid":"GPU-1","name":"H100","error":"GPU is lost"}]}]}`, now-20_000, gpu0, now-10_000, gpu0, now, gpu0))
	post(fmt.Sprintf(`{"node":"gpu-08","samples":[{"ts_ms":%d,"gpus":[%s]}]}`, now, gpu0))

	out := cli(t, addr, "nodes", "ls")
	for _, want := range []string{"gpu-07", "gpu-08", "yes: lost a GPU in the last 24 hours; 2 faults in 7 days (1 Xid, 1 lost GPU)", "1/0/1/0"} {
		if !strings.Contains(out, want) {
			t.Errorf("nodes ls lacks %q:\n%s", want, out)
		}
	}
	if out := cli(t, addr, "nodes", "ls", "--flagged"); strings.Contains(out, "gpu-08") || !strings.Contains(out, "gpu-07") {
		t.Errorf("nodes ls --flagged:\n%s", out)
	}
	out = cli(t, addr, "nodes", "show", "gpu-07")
	lost, xid := strings.Index(out, "lost "), strings.Index(out, "xid ")
	if !strings.Contains(out, "FLAGGED") || lost < 0 || xid < 0 || lost > xid || !strings.Contains(out, "GPU has fallen off the bus") {
		t.Errorf("nodes show gpu-07 (the lost GPU, then the Xid):\n%s", out)
	}
	if out := cli(t, addr, "nodes", "show", "gpu-08"); !strings.Contains(out, "no GPU faults recorded") {
		t.Errorf("nodes show gpu-08:\n%s", out)
	}
	if _, err := tryCLI(t, addr, "nodes", "show"); err == nil || !strings.Contains(err.Error(), "give one node name") {
		t.Errorf("nodes show without a node: %v", err)
	}
}

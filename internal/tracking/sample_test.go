package tracking

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The web UI splits a chart's runs into requests that the server samples
// exactly (web/src/lib/fetchq.ts, plan); it must know the server's limit.
func TestUIKnowsTheExactSampleLimit(t *testing.T) {
	src, err := os.ReadFile("../../web/src/lib/fetchq.ts")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const EXACT_LIMIT = (\d+) \* 1024;`).FindSubmatch(src)
	if m == nil {
		t.Fatal("web/src/lib/fetchq.ts: no `const EXACT_LIMIT = N * 1024;`")
	}
	ki, _ := strconv.Atoi(string(m[1]))
	if ki*1024 != exactSampleLimit {
		t.Fatalf("the UI's EXACT_LIMIT is %d, the server's exactSampleLimit %d", ki*1024, exactSampleLimit)
	}
}

package httpapi

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

// TestWriteRuns checks that a page encoded in parts on several goroutines
// is byte for byte the page encoded in one piece, at the part boundaries
// and with or without a page token.
func TestWriteRuns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 3, 8} {
		runtime.GOMAXPROCS(procs)
		for _, n := range []int{0, 1, 5, runsPerPart - 1, runsPerPart, runsPerPart + 1, 3*runsPerPart + 5, 1000} {
			for _, token := range []string{"", "tok\"en"} {
				t.Run(fmt.Sprintf("procs=%d/runs=%d/token=%t", procs, n, token != ""), func(t *testing.T) {
					page := tracking.RunPage{NextPageToken: token}
					for i := range n {
						page.Runs = append(page.Runs, &tracking.Run{
							Info: tracking.RunInfo{RunID: "run" + strconv.Itoa(i), RunName: "name <" + strconv.Itoa(i) + ">", ExperimentID: "1", StartTimeMs: int64(i)},
							Data: tracking.RunData{Params: []tracking.Param{{Key: "lr", Value: strconv.Itoa(i % 7)}}},
						})
						if n == 5 {
							// Runs with many metrics: parts of a run or two.
							for k := range 40 * keysPerRun {
								page.Runs[i].Data.Metrics = append(page.Runs[i].Data.Metrics, tracking.Metric{Key: "m" + strconv.Itoa(k)})
							}
						}
					}
					if n == 5 && runsPerPartOf(page) >= n {
						t.Fatalf("5 runs of %d keys each: a part is %d runs, want fewer", 40*keysPerRun, runsPerPartOf(page))
					}
					rec := httptest.NewRecorder()
					if err := writeRuns(rec, page); err != nil {
						t.Fatal(err)
					}
					want := wire.AppendRuns(nil, page)
					if got := rec.Body.Bytes(); !bytes.Equal(got, want) {
						t.Fatalf("got  %.300s\nwant %.300s", got, want)
					}
					if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
						t.Fatalf("Content-Length %s, body %d bytes", cl, len(want))
					}
				})
			}
		}
	}
}

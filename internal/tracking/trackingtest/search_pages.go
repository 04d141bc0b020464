package trackingtest

import (
	"fmt"
	"testing"

	"github.com/sextant/sextant/internal/tracking"
)

// testSearchPageData checks that a page of many runs comes back with each
// run's own params, tags, latest metrics, inputs and outputs: a store may
// load them in several queries at once, and skip the inputs of runs that
// have none.
func testSearchPageData(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/search-page-data")
	const n = 150
	ids := map[string]int{}
	for i := range n {
		id := e.mustRun(exp, fmt.Sprintf("r%03d", i)).Info.RunID
		ids[id] = i
		e.mustLog(id, tracking.Batch{
			// Two keys each: a large page reads the latest metrics in
			// several queries at once, each run's in one of them.
			Metrics: []tracking.Metric{metric("m", 1, 1, float64(i)), metric("n", 2, 1, -float64(i))},
			Params:  []tracking.Param{{Key: "i", Value: fmt.Sprint(i)}},
			Tags:    []tracking.Tag{{Key: "t", Value: fmt.Sprint(i)}},
		})
		if i%7 == 3 {
			ds := tracking.DatasetInput{Dataset: tracking.Dataset{Name: fmt.Sprint("d", i), Digest: "x", SourceType: "local", Source: "/d"}}
			if err := e.svc.LogInputs(e.ctx, id, []tracking.DatasetInput{ds}, []tracking.ModelInput{{ModelID: fmt.Sprint("in", i)}}); err != nil {
				t.Fatal(err)
			}
			if err := e.svc.LogOutputs(e.ctx, id, []tracking.ModelOutput{{ModelID: fmt.Sprint("out", i), Step: int64(i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, filter := range []string{"", "metrics.m >= 0", "params.i != 'x'"} {
		page, err := e.svc.SearchRuns(e.ctx, tracking.RunSearch{ExperimentIDs: []string{exp}, Filter: filter, OrderBy: []string{"metrics.m DESC"}, MaxResults: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != n {
			t.Fatalf("filter %q: %d runs, want %d", filter, len(page.Runs), n)
		}
		for k, r := range page.Runs {
			i := ids[r.Info.RunID]
			if i != n-1-k {
				t.Fatalf("filter %q: run %d is r%03d, want r%03d", filter, k, i, n-1-k)
			}
			d := r.Data
			if len(d.Metrics) != 2 || d.Metrics[0].Key != "m" || d.Metrics[0].Value != float64(i) || d.Metrics[1].Key != "n" || d.Metrics[1].Value != -float64(i) || len(d.Params) != 1 || d.Params[0].Value != fmt.Sprint(i) ||
				!hasTagValue(d.Tags, "t", fmt.Sprint(i)) {
				t.Fatalf("filter %q: run r%03d has data %+v", filter, i, d)
			}
			withIO := i%7 == 3
			if withIO != (len(r.Inputs.Datasets) == 1 && len(r.Inputs.Models) == 1 && len(r.Outputs.Models) == 1) ||
				(!withIO && (len(r.Inputs.Datasets)+len(r.Inputs.Models)+len(r.Outputs.Models)) != 0) ||
				(withIO && (r.Inputs.Datasets[0].Dataset.Name != fmt.Sprint("d", i) || r.Inputs.Models[0].ModelID != fmt.Sprint("in", i) || r.Outputs.Models[0].Step != int64(i))) {
				t.Fatalf("filter %q: run r%03d has inputs %+v outputs %+v", filter, i, r.Inputs, r.Outputs)
			}
		}
	}
}

func hasTagValue(tags []tracking.Tag, key, value string) bool {
	for _, t := range tags {
		if t.Key == key && t.Value == value {
			return true
		}
	}
	return false
}

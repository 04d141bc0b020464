package trackingtest

import (
	"slices"
	"testing"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// testLoggedModelDatasets checks logged-models/search's datasets: alone
// they select the models with a metric on one of them (a name alone
// matches any digest); with a metric filter they restrict its metrics.
func testLoggedModelDatasets(t *testing.T, e *env) {
	exp := e.mustExperiment("/Shared/model-datasets")
	run := e.mustRun(exp, "r")
	model := func(name string) string {
		m, err := e.svc.CreateLoggedModel(e.ctx, tracking.CreateLoggedModelRequest{ExperimentID: exp, Name: name, SourceRunID: run.Info.RunID})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	a, b, c := model("a"), model("b"), model("c")
	on := func(id, ds, digest string, v float64) tracking.Metric {
		m := metric("acc", 1, 1, v)
		m.ModelID, m.DatasetName, m.DatasetDigest = id, ds, digest
		return m
	}
	e.mustLog(run.Info.RunID, tracking.Batch{Metrics: []tracking.Metric{
		on(a, "eval", "d1", 0.9), on(b, "eval", "d2", 0.5), on(b, "train", "d3", 0.99), on(c, "", "", 0.7),
	}})
	search := func(filter string, ds ...tracking.DatasetRef) []string {
		t.Helper()
		page, err := e.svc.SearchLoggedModels(e.ctx, tracking.LoggedModelSearch{ExperimentIDs: []string{exp}, Filter: filter, Datasets: ds})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Models {
			ids = append(ids, m.ID)
		}
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	for _, tc := range []struct {
		filter string
		ds     []tracking.DatasetRef
		want   []string
	}{
		{"", nil, sorted(a, b, c)},
		{"", []tracking.DatasetRef{{Name: "eval"}}, sorted(a, b)},
		{"", []tracking.DatasetRef{{Name: "eval", Digest: "d2"}}, sorted(b)},
		{"", []tracking.DatasetRef{{Name: "train"}, {Name: "eval", Digest: "d1"}}, sorted(a, b)},
		{"", []tracking.DatasetRef{{Name: "test"}}, nil},
		{"metrics.acc > 0.8", nil, sorted(a, b)},
		{"metrics.acc > 0.8", []tracking.DatasetRef{{Name: "eval"}}, sorted(a)},
		{"metrics.acc > 0.8", []tracking.DatasetRef{{Name: "train"}}, sorted(b)},
	} {
		if got := search(tc.filter, tc.ds...); !slices.Equal(got, tc.want) {
			t.Errorf("filter %q datasets %+v: %v, want %v", tc.filter, tc.ds, got, tc.want)
		}
	}
	_, err := e.svc.SearchLoggedModels(e.ctx, tracking.LoggedModelSearch{ExperimentIDs: []string{exp}, Datasets: []tracking.DatasetRef{{Digest: "d1"}}})
	wantCode(t, err, errs.Invalid, "`dataset_name` in the `datasets` clause must be specified.")
}

package tracking_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

func TestCheckRun(t *testing.T) {
	l := tracking.Limits{ParamsPerRun: 3, TagsPerRun: 5, MetricKeysPerRun: 2, MetricStepsPerRun: 100}
	cases := []struct {
		name         string
		have, adding tracking.RunUsage
		want         string // "" for no error
	}{
		{"within every limit", tracking.RunUsage{Params: 1, Tags: 4, MetricKeys: 1, MetricSteps: 50}, tracking.RunUsage{Params: 2, Tags: 1, MetricKeys: 1, MetricSteps: 50}, ""},
		{"params", tracking.RunUsage{Params: 2}, tracking.RunUsage{Params: 2}, "params per run: the run has 2, this request adds 2, the maximum is 3"},
		{"tags", tracking.RunUsage{Tags: 5}, tracking.RunUsage{Tags: 1}, "tags per run: the run has 5, this request adds 1, the maximum is 5"},
		{"metric keys", tracking.RunUsage{MetricKeys: 2}, tracking.RunUsage{MetricKeys: 1}, "metric keys per run"},
		{"metric steps, with the hint", tracking.RunUsage{MetricSteps: 99}, tracking.RunUsage{MetricSteps: 2}, "the maximum is 100. Log metrics less often"},
		{"the first limit breached is named", tracking.RunUsage{Params: 3, MetricSteps: 100}, tracking.RunUsage{Params: 1, MetricSteps: 1}, "params per run"},
		{"over a limit, adding nothing to it", tracking.RunUsage{Params: 9}, tracking.RunUsage{Tags: 1}, ""},
	}
	for _, c := range cases {
		err := l.CheckRun(c.have, c.adding)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (errs.CodeOf(err) != errs.LimitExceeded || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v (%s), want LIMIT_EXCEEDED naming %q", c.name, err, errs.CodeOf(err), c.want)
		}
	}
	// Zero limits (a store opened without any) check nothing.
	if err := (tracking.Limits{}).CheckRun(tracking.RunUsage{Tags: 1e6}, tracking.RunUsage{Tags: 1}); err != nil {
		t.Errorf("zero limits: %v", err)
	}
}

func TestCheckParam(t *testing.T) {
	if err := tracking.CheckParam("r1", "lr", "0.1", "0.1"); err != nil {
		t.Errorf("the same value again (a retry): %v", err)
	}
	long := strings.Repeat("é", 300)
	err := tracking.CheckParam("r1", "lr", long, "0.2")
	if errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "Changing param values is not allowed. Param with key='lr'") || !strings.Contains(err.Error(), "for run ID='r1'. Attempted logging new value '0.2'.") {
		t.Fatalf("changed value: %v", err)
	}
	if strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "é...") || !utf8.ValidString(err.Error()) {
		t.Errorf("the stored value is not cut short, whole characters kept: %v", err)
	}
	if err := tracking.CheckModelParam("m-1", "k", "a", "b"); errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "for logged model 'm-1'") {
		t.Errorf("logged model param: %v", err)
	}
}

func TestExperimentRules(t *testing.T) {
	if err := tracking.CheckExperimentActive("7", tracking.Active); err != nil {
		t.Error(err)
	}
	if err := tracking.CheckExperimentActive("7", tracking.Deleted); errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "Current state is deleted") {
		t.Errorf("deleted experiment: %v", err)
	}
	if err := tracking.CheckExperimentLifecycle("7", tracking.Active, tracking.Active); err == nil {
		t.Error("restored an active experiment")
	}
	if err := tracking.CheckExperimentLifecycle("7", tracking.Deleted, tracking.Deleted); err == nil {
		t.Error("deleted a deleted experiment")
	}
	if err := tracking.CheckExperimentLifecycle("7", tracking.Deleted, tracking.Active); err != nil {
		t.Errorf("restore: %v", err)
	}
	if err := tracking.CheckExperimentRename("7", tracking.Deleted); errs.CodeOf(err) != errs.Invalid {
		t.Errorf("renamed a deleted experiment: %v", err)
	}
	if err := tracking.BadPageToken(strings.Repeat("x", 100), "runs/search"); errs.CodeOf(err) != errs.Invalid || !strings.Contains(err.Error(), "for runs/search: pass back") {
		t.Errorf("page token: %v", err)
	}
	if err, want := tracking.PageTokenOfOtherSearch("filter or order_by"), "page_token belongs to a different search (filter or order_by changed)"; errs.CodeOf(err) != errs.Invalid || errs.MessageOf(err) != want {
		t.Errorf("page token of another search: %v, want %q", err, want)
	}
}

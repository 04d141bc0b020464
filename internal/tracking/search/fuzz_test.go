package search

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// Run a target with, for example:
//
//	go test -run '^$' -fuzz FuzzParseRunFilter -fuzztime 20s ./internal/tracking/search/

// filterSeeds are valid and invalid filters for both dialects.
var filterSeeds = []string{
	"",
	"   ",
	"metrics.loss < 0.5",
	"metrics.loss <",
	"metrics.`my metric` >= -1.5e-3",
	`metrics."a b" != .5`,
	"metrics.system/gpu_0_utilization_percentage > 50",
	"metric.val-loss:top1 <= 1E+3",
	"params.lr = '0.01' AND tags.mlflow.runName LIKE 'r%'",
	"params.a = 'it''s' and params.b = \"say \"\"hi\"\"\"",
	"params.seed IS NULL AND tags.note is not null",
	"attributes.run_id IN ('a', 'b', \"c\")",
	"run_id NOT IN ('a')",
	"run_id IN ()",
	"run_id IN ('a',)",
	"run_id IN ('a' 'b')",
	"attributes.`Run name` ILIKE '%x%'",
	"`Run Name` = 'x'",
	"created > 1700000000000 AND end_time < 5",
	"datasets.name IN ('mnist') AND datasets.context = 'train'",
	"dataset.digest NOT IN ('x', 'y')",
	"status = 'FINISHED' AND lifecycle_stage = 'active'",
	"name LIKE 'bert-%'",
	"experiment_id IN ('1', '2')",
	"creation_time > 5 AND last_update_time <= 10",
	"tags.team = 'nlp'",
	"metrics.a < 1 OR metrics.b > 2",
	"(metrics.a < 1)",
	"metrics.a == 1",
	"metrics.loss = 'x'",
	"params.a = 5x",
	"metrics.a = 1.2.3",
	"metrics.a > 1e999",
	"params.a = 'abc",
	"metrics.`abc < 1",
	"metrics.`` < 1",
	"foo.bar = 'x'",
	".loss < 1",
	"metrics. < 1",
	"params.a NOT LIKE 'x'",
	"params.a IS 'x'",
	"metrics.a < 1 AND",
	"metrics.a < 1 ANDmetrics.b < 2",
	"params.`é` = 'ü'",
	"params.a = '\x00\xff'",
}

// orderSeeds are order_by lists, items separated by newlines.
var orderSeeds = []string{
	"",
	"metrics.loss DESC",
	"metrics.loss desc\nparams.lr\ntags.t ASC",
	"metrics.`a b` DESC",
	`params."a b"`,
	"created DESC\nrun_id",
	"attributes.`Run name`",
	"metrics.a DESCC",
	"metrics.a b DESC",
	"metrics.a\nmetrics.a",
	"created\nstart_time",
	"datasets.name",
	"lifecycle_stage",
	"name DESC\nexperiment_id\ncreation_time ASC\nlast_update_time",
	"tags.team",
	"metrics.a DESC x",
}

// checkFilter is the property every filter target checks: errors are
// errs.Invalid, and a parsed filter survives its canonical text.
func checkFilter(t *testing.T, s string, parse func(string) (Filter, error)) {
	got, err := parse(s)
	if err != nil {
		if !errs.Is(err, errs.Invalid) {
			t.Fatalf("parse(%q): error %v has code %q, want invalid", s, err, errs.CodeOf(err))
		}
		if !reflect.DeepEqual(got, Filter{}) {
			t.Fatalf("parse(%q) returned %#v with its error", s, got)
		}
		return
	}
	assertRoundTrip(t, got, parse)
}

func checkOrderBy(t *testing.T, s string, parse func([]string) ([]OrderKey, error)) {
	var items []string
	if s != "" {
		items = strings.Split(s, "\n")
	}
	got, err := parse(items)
	if err != nil {
		if !errs.Is(err, errs.Invalid) {
			t.Fatalf("parse(%q): error %v has code %q, want invalid", items, err, errs.CodeOf(err))
		}
		return
	}
	assertOrderRoundTrip(t, got, parse)
}

func FuzzParseRunFilter(f *testing.F) {
	for _, s := range filterSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFilter(t, s, ParseRunFilter) })
}

func FuzzParseExperimentFilter(f *testing.F) {
	for _, s := range filterSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFilter(t, s, ParseExperimentFilter) })
}

func FuzzParseRunOrderBy(f *testing.F) {
	for _, s := range orderSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkOrderBy(t, s, ParseRunOrderBy) })
}

func FuzzParseExperimentOrderBy(f *testing.F) {
	for _, s := range orderSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkOrderBy(t, s, ParseExperimentOrderBy) })
}

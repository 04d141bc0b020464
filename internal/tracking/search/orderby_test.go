package search

import (
	"reflect"
	"testing"
)

// assertOrderRoundTrip checks that keys render to items that parse turns
// back into keys.
func assertOrderRoundTrip(t *testing.T, keys []OrderKey, parse func([]string) ([]OrderKey, error)) {
	t.Helper()
	items := make([]string, len(keys))
	for i, k := range keys {
		items[i] = k.String()
	}
	again, err := parse(items)
	if err != nil {
		t.Fatalf("canonical items %q do not parse: %v", items, err)
	}
	if len(keys) == 0 && len(again) == 0 {
		return
	}
	if !reflect.DeepEqual(again, keys) {
		t.Fatalf("canonical items %q parse to %#v, want %#v", items, again, keys)
	}
}

func TestParseRunOrderBy(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want []OrderKey
	}{
		"OKNil":          {in: nil, want: nil},
		"OKEmptySlice":   {in: []string{}, want: nil},
		"OKMetricDesc":   {in: []string{"metrics.loss DESC"}, want: []OrderKey{{Metric, "loss", true}}},
		"OKMetricAsc":    {in: []string{"metric.loss ASC"}, want: []OrderKey{{Metric, "loss", false}}},
		"OKDefaultAsc":   {in: []string{"metrics.loss"}, want: []OrderKey{{Metric, "loss", false}}},
		"OKLowerDesc":    {in: []string{"metrics.loss desc"}, want: []OrderKey{{Metric, "loss", true}}},
		"OKMixedCase":    {in: []string{"metrics.loss DeSc"}, want: []OrderKey{{Metric, "loss", true}}},
		"OKWhitespace":   {in: []string{"  \tmetrics.loss \n DESC  "}, want: []OrderKey{{Metric, "loss", true}}},
		"OKBacktickKey":  {in: []string{"metrics.`a b` DESC"}, want: []OrderKey{{Metric, "a b", true}}},
		"OKDoubleQuote":  {in: []string{`params."a b"`}, want: []OrderKey{{Param, "a b", false}}},
		"OKTagDotted":    {in: []string{"tags.mlflow.runName ASC"}, want: []OrderKey{{Tag, "mlflow.runName", false}}},
		"OKSlashKey":     {in: []string{"metrics.system/cpu DESC"}, want: []OrderKey{{Metric, "system/cpu", true}}},
		"OKKeyNamedDesc": {in: []string{"metrics.DESC DESC"}, want: []OrderKey{{Metric, "DESC", true}}},
		"OKQuotedGlued":  {in: []string{"metrics.`a`DESC"}, want: []OrderKey{{Metric, "a", true}}},
		"OKAttributes": {
			in: []string{"run_id", "attributes.run_name DESC", "attr.user_id", "run.status", "attribute.artifact_uri", "start_time DESC", "end_time"},
			want: []OrderKey{
				{Attribute, AttrRunID, false}, {Attribute, AttrRunName, true}, {Attribute, AttrUserID, false},
				{Attribute, AttrStatus, false}, {Attribute, AttrArtifactURI, false}, {Attribute, AttrStartTime, true},
				{Attribute, AttrEndTime, false},
			},
		},
		"OKCreatedAlias":    {in: []string{"created DESC"}, want: []OrderKey{{Attribute, AttrStartTime, true}}},
		"OKCreatedCapAlias": {in: []string{"attributes.Created"}, want: []OrderKey{{Attribute, AttrStartTime, false}}},
		"OKRunNameAlias":    {in: []string{"attributes.`Run name` DESC"}, want: []OrderKey{{Attribute, AttrRunName, true}}},
		"OKRunNameBare":     {in: []string{"`Run Name`"}, want: []OrderKey{{Attribute, AttrRunName, false}}},
		"OKSeveral": {
			in:   []string{"metrics.loss DESC", "params.lr", "tags.t DESC", "start_time"},
			want: []OrderKey{{Metric, "loss", true}, {Param, "lr", false}, {Tag, "t", true}, {Attribute, AttrStartTime, false}},
		},
		"OKSameKeyDifferentEntities": {
			in:   []string{"metrics.a", "params.a", "tags.a"},
			want: []OrderKey{{Metric, "a", false}, {Param, "a", false}, {Tag, "a", false}},
		},
		"OKPrefixAliasesSameEntityDifferentKey": {
			in:   []string{"metrics.a", "metric.b"},
			want: []OrderKey{{Metric, "a", false}, {Metric, "b", false}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRunOrderBy(tc.in)
			if err != nil {
				t.Fatalf("ParseRunOrderBy(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseRunOrderBy(%q)\n got %#v\nwant %#v", tc.in, got, tc.want)
			}
			assertOrderRoundTrip(t, got, ParseRunOrderBy)
		})
	}
}

func TestParseRunOrderByErrors(t *testing.T) {
	tests := map[string]struct {
		in       []string
		mentions []string
	}{
		"ErrBadDirection":     {in: []string{"metrics.a DESCC"}, mentions: []string{`invalid order_by "metrics.a DESCC"`, `"DESCC"`, "position 11"}},
		"ErrUnquotedSpace":    {in: []string{"metrics.a b DESC"}, mentions: []string{`expected ASC or DESC after "metrics.a"`, `got "b"`, "backticks"}},
		"ErrExtraToken":       {in: []string{"metrics.a DESC x"}, mentions: []string{`unexpected "x" after "DESC"`, "position 16"}},
		"ErrTwoDirections":    {in: []string{"metrics.a ASC DESC"}, mentions: []string{`unexpected "DESC"`}},
		"ErrEmptyItem":        {in: []string{"metrics.a", ""}, mentions: []string{"item 2 is empty"}},
		"ErrBlankItem":        {in: []string{"  "}, mentions: []string{"item 1 is empty"}},
		"ErrDuplicate":        {in: []string{"metrics.a DESC", "metrics.a ASC"}, mentions: []string{`invalid order_by "metrics.a ASC"`, "item 2", "item 1", "metrics.`a`"}},
		"ErrDuplicateAlias":   {in: []string{"metric.a", "metrics.`a`"}, mentions: []string{"item 2", "item 1"}},
		"ErrDuplicateCreated": {in: []string{"created", "params.x", "start_time DESC"}, mentions: []string{"item 3", "item 1", "attributes.start_time"}},
		"ErrDuplicateRunName": {in: []string{"run_name", "`Run name`"}, mentions: []string{"attributes.run_name"}},
		"ErrDataset":          {in: []string{"datasets.name"}, mentions: []string{"runs cannot be ordered by datasets", `"datasets.name"`}},
		"ErrLifecycleStage":   {in: []string{"lifecycle_stage"}, mentions: []string{`attribute "lifecycle_stage" cannot be used in order_by`}},
		"ErrUnknownAttr":      {in: []string{"loss DESC"}, mentions: []string{`unknown attribute "loss"`, "metrics.loss"}},
		"ErrUnknownPrefix":    {in: []string{"foo.bar"}, mentions: []string{`unknown prefix "foo"`}},
		"ErrParens":           {in: []string{"(metrics.a)"}, mentions: []string{"expected an identifier", `"("`}},
		"ErrComma":            {in: []string{"metrics.a, metrics.b"}, mentions: []string{`got ","`}},
		"ErrOperator":         {in: []string{"metrics.a < 1"}, mentions: []string{`got "<"`}},
		"ErrDirectionOnly":    {in: []string{"DESC"}, mentions: []string{`unknown attribute "DESC"`}},
		"ErrUnterminatedKey":  {in: []string{"metrics.`a DESC"}, mentions: []string{"unterminated quoted key"}},
		"ErrEmptyKey":         {in: []string{"metrics.`` DESC"}, mentions: []string{"empty key"}},
		"ErrMissingKey":       {in: []string{"metrics. DESC"}, mentions: []string{`after "metrics."`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRunOrderBy(tc.in)
			if err == nil {
				t.Fatalf("ParseRunOrderBy(%q) = %v, want an error", tc.in, got)
			}
			assertInvalid(t, err, append([]string{`invalid order_by "`}, tc.mentions...)...)
			if got != nil {
				t.Errorf("ParseRunOrderBy(%q) returned %v with its error, want nil", tc.in, got)
			}
		})
	}
}

func TestParseExperimentOrderBy(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want []OrderKey
	}{
		"OKNil":  {in: nil, want: nil},
		"OKName": {in: []string{"name"}, want: []OrderKey{{Attribute, AttrName, false}}},
		"OKAll": {
			in: []string{"name DESC", "attributes.experiment_id", "attr.creation_time desc", "`last_update_time` ASC"},
			want: []OrderKey{
				{Attribute, AttrName, true}, {Attribute, AttrExperimentID, false},
				{Attribute, AttrCreationTime, true}, {Attribute, AttrLastUpdateTime, false},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExperimentOrderBy(tc.in)
			if err != nil {
				t.Fatalf("ParseExperimentOrderBy(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseExperimentOrderBy(%q)\n got %#v\nwant %#v", tc.in, got, tc.want)
			}
			assertOrderRoundTrip(t, got, ParseExperimentOrderBy)
		})
	}
}

func TestParseExperimentOrderByErrors(t *testing.T) {
	tests := map[string]struct {
		in       []string
		mentions []string
	}{
		"ErrTag":        {in: []string{"tags.team"}, mentions: []string{"experiments cannot be ordered by tags", `"tags.team"`, "creation_time"}},
		"ErrMetric":     {in: []string{"metrics.a"}, mentions: []string{"experiments cannot be searched by metrics"}},
		"ErrRunAttr":    {in: []string{"start_time"}, mentions: []string{`unknown attribute "start_time"`, "last_update_time"}},
		"ErrCreated":    {in: []string{"created"}, mentions: []string{`unknown attribute "created"`}},
		"ErrDuplicate":  {in: []string{"name", "attributes.name DESC"}, mentions: []string{"item 2", "item 1", "attributes.name"}},
		"ErrDirection":  {in: []string{"name DOWN"}, mentions: []string{`"DOWN"`}},
		"ErrEmptyItem":  {in: []string{""}, mentions: []string{"item 1 is empty"}},
		"ErrRunPrefix":  {in: []string{"run.name"}, mentions: []string{`unknown prefix "run"`}},
		"ErrExtraWords": {in: []string{"name ASC please"}, mentions: []string{`"please"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExperimentOrderBy(tc.in)
			if err == nil {
				t.Fatalf("ParseExperimentOrderBy(%q) = %v, want an error", tc.in, got)
			}
			assertInvalid(t, err, append([]string{`invalid order_by "`}, tc.mentions...)...)
		})
	}
}

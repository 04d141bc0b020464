package search

import (
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// checkErr checks that err is nil when want is "", and otherwise an
// errs.Invalid error whose message is want, word for word: stores return
// these messages as they are, and every backend must give the same.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("got %v, want no error", err)
		}
		return
	}
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("got %v (code %q), want an invalid error %q", err, errs.CodeOf(err), want)
	}
	if got := errs.MessageOf(err); got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestCheckString(t *testing.T) {
	tests := map[string]struct {
		in   Comparison
		want string
	}{
		"OKEq":             {in: cmp(Param, "lr", OpEq, str("0.1"))},
		"OKNe":             {in: cmp(Tag, "t", OpNe, str(""))},
		"OKLike":           {in: cmp(Attribute, AttrRunName, OpLike, str("a%"))},
		"OKILike":          {in: cmp(Attribute, AttrRunName, OpILike, str("A%"))},
		"OKIn":             {in: cmp(Attribute, AttrRunID, OpIn, list("a"))},
		"OKNotIn":          {in: cmp(Attribute, AttrRunID, OpNotIn, list("a", "b"))},
		"ErrEqNumber":      {in: cmp(Param, "lr", OpEq, num(1)), want: "params.lr = needs a quoted string value"},
		"ErrNeList":        {in: cmp(Tag, "t", OpNe, list("x")), want: "tags.t != needs a quoted string value"},
		"ErrInEmpty":       {in: cmp(Attribute, AttrRunID, OpIn, list()), want: "attributes.run_id IN needs a non-empty list of strings"},
		"ErrNotInString":   {in: cmp(Attribute, AttrRunID, OpNotIn, str("a")), want: "attributes.run_id NOT IN needs a non-empty list of strings"},
		"ErrLt":            {in: cmp(Param, "lr", OpLt, str("1")), want: "operator < is not supported for params.lr"},
		"ErrIsNull":        {in: cmp(Tag, "t", OpIsNull, Value{}), want: "operator IS NULL is not supported for tags.t"},
		"ErrUnknownEntity": {in: cmp(0, "k", "~", str("x")), want: "operator ~ is not supported for unknown.k"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { checkErr(t, tt.in.CheckString(), tt.want) })
	}
}

func TestCheckNumber(t *testing.T) {
	tests := map[string]struct {
		in   Comparison
		want string
	}{
		"OKEq":         {in: cmp(Metric, "loss", OpEq, num(0))},
		"OKNe":         {in: cmp(Metric, "loss", OpNe, num(1))},
		"OKLt":         {in: cmp(Metric, "loss", OpLt, num(0.5))},
		"OKLe":         {in: cmp(Attribute, AttrStartTime, OpLe, num(1))},
		"OKGt":         {in: cmp(Attribute, AttrEndTime, OpGt, num(-1))},
		"OKGe":         {in: cmp(Metric, "acc", OpGe, num(0.9))},
		"ErrGtString":  {in: cmp(Metric, "loss", OpGt, str("1")), want: "metrics.loss > needs a numeric value"},
		"ErrEqNoValue": {in: cmp(Attribute, AttrStartTime, OpEq, Value{}), want: "attributes.start_time = needs a numeric value"},
		"ErrLike":      {in: cmp(Metric, "loss", OpLike, str("1%")), want: "operator LIKE is not supported for metrics.loss"},
		"ErrIn":        {in: cmp(Metric, "loss", OpIn, list("1")), want: "operator IN is not supported for metrics.loss"},
		"ErrIsNull":    {in: cmp(Metric, "loss", OpIsNull, Value{}), want: "operator IS NULL is not supported for metrics.loss"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { checkErr(t, tt.in.CheckNumber(), tt.want) })
	}
}

func TestCheckClause(t *testing.T) {
	tests := map[string]struct {
		check func(Comparison) error
		in    Comparison
		want  string
	}{
		"RunsOKMetric":         {check: CheckRunClause, in: cmp(Metric, "any key", OpLt, num(1))},
		"RunsOKParam":          {check: CheckRunClause, in: cmp(Param, "p", OpEq, str("x"))},
		"RunsOKTag":            {check: CheckRunClause, in: cmp(Tag, "t", OpIsNull, Value{})},
		"RunsOKLifecycle":      {check: CheckRunClause, in: cmp(Attribute, AttrLifecycleStage, OpEq, str("active"))},
		"RunsOKEveryAttribute": {check: CheckRunClause, in: cmp(Attribute, AttrEndTime, OpGt, num(0))},
		"RunsOKDatasetContext": {check: CheckRunClause, in: cmp(Dataset, DatasetContext, OpEq, str("train"))},
		"RunsErrAlias":         {check: CheckRunClause, in: cmp(Attribute, "created", OpGt, num(0)), want: "Invalid search key 'attributes.created' for runs"},
		"RunsErrAttribute":     {check: CheckRunClause, in: cmp(Attribute, "name", OpEq, str("x")), want: "Invalid search key 'attributes.name' for runs"},
		"RunsErrDatasetField":  {check: CheckRunClause, in: cmp(Dataset, "schema", OpEq, str("x")), want: "Invalid search key 'datasets.schema' for runs"},
		"RunsErrEntity":        {check: CheckRunClause, in: cmp(0, "x", OpEq, str("x")), want: "Invalid search key 'unknown.x' for runs"},

		"ExperimentsOKTag":       {check: CheckExperimentClause, in: cmp(Tag, "team", OpEq, str("a"))},
		"ExperimentsOKID":        {check: CheckExperimentClause, in: cmp(Attribute, AttrExperimentID, OpIn, list("1"))},
		"ExperimentsOKUpdated":   {check: CheckExperimentClause, in: cmp(Attribute, AttrLastUpdateTime, OpGt, num(0))},
		"ExperimentsErrMetric":   {check: CheckExperimentClause, in: cmp(Metric, "loss", OpLt, num(1)), want: "Invalid attribute 'metrics.loss' for experiments"},
		"ExperimentsErrRunAttr":  {check: CheckExperimentClause, in: cmp(Attribute, AttrRunName, OpEq, str("x")), want: "Invalid attribute 'attributes.run_name' for experiments"},
		"ExperimentsErrDatasets": {check: CheckExperimentClause, in: cmp(Dataset, DatasetName, OpEq, str("x")), want: "Invalid attribute 'datasets.name' for experiments"},

		"LoggedModelsOKMetric":    {check: CheckLoggedModelClause, in: cmp(Metric, "acc", OpGt, num(0))},
		"LoggedModelsOKStatus":    {check: CheckLoggedModelClause, in: cmp(Attribute, AttrStatus, OpEq, str("LOGGED_MODEL_READY"))},
		"LoggedModelsOKUpdated":   {check: CheckLoggedModelClause, in: cmp(Attribute, AttrLastUpdatedTimestamp, OpGt, num(0))},
		"LoggedModelsOKSourceRun": {check: CheckLoggedModelClause, in: cmp(Attribute, AttrSourceRunID, OpIn, list("r"))},
		"LoggedModelsErrAlias":    {check: CheckLoggedModelClause, in: cmp(Attribute, "creation_time", OpGt, num(0)), want: "Invalid attribute 'creation_time' for logged models"},
		"LoggedModelsErrDataset":  {check: CheckLoggedModelClause, in: cmp(Dataset, DatasetName, OpEq, str("x")), want: "Invalid search key 'datasets.name' for logged models"},

		"RegisteredModelsOKName":      {check: CheckRegisteredModelClause, in: cmp(Attribute, AttrName, OpLike, str("m%"))},
		"RegisteredModelsOKTag":       {check: CheckRegisteredModelClause, in: cmp(Tag, "stage", OpNe, str("x"))},
		"RegisteredModelsErrVersion":  {check: CheckRegisteredModelClause, in: cmp(Attribute, AttrVersionNumber, OpEq, num(1)), want: "Invalid search key 'attributes.version_number'"},
		"RegisteredModelsErrParam":    {check: CheckRegisteredModelClause, in: cmp(Param, "p", OpEq, str("x")), want: "Invalid search key 'params.p'"},
		"ModelVersionsOKVersion":      {check: CheckModelVersionClause, in: cmp(Attribute, AttrVersionNumber, OpGe, num(2))},
		"ModelVersionsOKSource":       {check: CheckModelVersionClause, in: cmp(Attribute, AttrSourcePath, OpEq, str("s3://x"))},
		"ModelVersionsErrStatus":      {check: CheckModelVersionClause, in: cmp(Attribute, AttrStatus, OpEq, str("READY")), want: "Invalid search key 'attributes.status'"},
		"ModelVersionsErrMetricEntry": {check: CheckModelVersionClause, in: cmp(Metric, "m", OpEq, num(1)), want: "Invalid search key 'metrics.m'"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { checkErr(t, tt.check(tt.in), tt.want) })
	}
}

func TestCheckOrderKey(t *testing.T) {
	tests := map[string]struct {
		check func(OrderKey) error
		in    OrderKey
		want  string
	}{
		"RunsOKMetric":    {check: CheckRunOrderKey, in: OrderKey{Entity: Metric, Key: "loss", Desc: true}},
		"RunsOKParam":     {check: CheckRunOrderKey, in: OrderKey{Entity: Param, Key: "lr"}},
		"RunsOKTag":       {check: CheckRunOrderKey, in: OrderKey{Entity: Tag, Key: "t"}},
		"RunsOKStartTime": {check: CheckRunOrderKey, in: OrderKey{Entity: Attribute, Key: AttrStartTime}},
		// The parser refuses it, but a store orders by it.
		"RunsOKLifecycle":      {check: CheckRunOrderKey, in: OrderKey{Entity: Attribute, Key: AttrLifecycleStage}},
		"RunsErrAttribute":     {check: CheckRunOrderKey, in: OrderKey{Entity: Attribute, Key: "created"}, want: "Invalid order_by key 'attributes.created' for runs"},
		"RunsErrDataset":       {check: CheckRunOrderKey, in: OrderKey{Entity: Dataset, Key: DatasetName}, want: "Invalid order_by key 'datasets.name' for runs"},
		"ExperimentsOKName":    {check: CheckExperimentOrderKey, in: OrderKey{Entity: Attribute, Key: AttrName}},
		"ExperimentsOKUpdated": {check: CheckExperimentOrderKey, in: OrderKey{Entity: Attribute, Key: AttrLastUpdateTime, Desc: true}},
		"ExperimentsErrRun":    {check: CheckExperimentOrderKey, in: OrderKey{Entity: Attribute, Key: AttrStartTime}, want: "Invalid order_by key 'start_time' for experiments"},
		"ExperimentsErrTag":    {check: CheckExperimentOrderKey, in: OrderKey{Entity: Tag, Key: "team"}, want: "Invalid order_by key 'team' for experiments"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) { checkErr(t, tt.check(tt.in), tt.want) })
	}
}

// TestCheckAcceptsParsed checks that what the parsers make, the checks
// accept: a store asks them of every clause, so a clause the parser lets
// through and a check refused would fail a valid search.
func TestCheckAcceptsParsed(t *testing.T) {
	filters := map[string]struct {
		parse func(string) (Filter, error)
		check func(Comparison) error
		in    string
	}{
		"Runs":             {ParseRunFilter, CheckRunClause, "metrics.loss < 1 AND params.lr = '0.1' AND tags.t IS NULL AND created > 0 AND `Run Name` LIKE 'a%' AND run_id IN ('a') AND user_id = 'u' AND status = 'RUNNING' AND artifact_uri LIKE 's3%' AND lifecycle_stage = 'active' AND end_time > 0 AND datasets.name = 'd' AND datasets.digest = 'x' AND datasets.context = 'train'"},
		"Experiments":      {ParseExperimentFilter, CheckExperimentClause, "name LIKE 'a%' AND experiment_id IN ('1') AND creation_time > 0 AND last_update_time > 0 AND tags.team = 'a'"},
		"LoggedModels":     {ParseLoggedModelFilter, CheckLoggedModelClause, "metrics.acc > 0 AND params.p = 'x' AND tags.t = 'y' AND name = 'm' AND model_id IN ('m') AND model_type = 't' AND status = 'READY' AND source_run_id = 'r' AND creation_time > 0 AND last_updated_time > 0"},
		"RegisteredModels": {ParseRegisteredModelFilter, CheckRegisteredModelClause, "name LIKE 'm%' AND creation_timestamp > 0 AND last_updated_timestamp > 0 AND tags.stage != 'x'"},
		"ModelVersions":    {ParseModelVersionFilter, CheckModelVersionClause, "name IN ('m') AND run_id = 'r' AND source_path = 's' AND version_number > 1 AND model_id = 'm' AND creation_timestamp > 0 AND last_updated_timestamp > 0 AND tags.v = 'y'"},
	}
	for name, tt := range filters {
		t.Run(name, func(t *testing.T) {
			f, err := tt.parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range f.Clauses {
				if err := tt.check(c); err != nil {
					t.Errorf("%s: %v", c, err)
				}
			}
		})
	}
	orders := map[string]struct {
		parse func([]string) ([]OrderKey, error)
		check func(OrderKey) error
		in    []string
	}{
		"Runs":        {ParseRunOrderBy, CheckRunOrderKey, []string{"metrics.loss DESC", "params.lr", "tags.t", "created", "`Run Name`", "run_id", "user_id", "status", "artifact_uri", "end_time"}},
		"Experiments": {ParseExperimentOrderBy, CheckExperimentOrderKey, []string{"name", "experiment_id DESC", "creation_time", "last_update_time"}},
	}
	for name, tt := range orders {
		t.Run("OrderBy"+name, func(t *testing.T) {
			keys, err := tt.parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if err := tt.check(k); err != nil {
					t.Errorf("%s: %v", k, err)
				}
			}
		})
	}
}

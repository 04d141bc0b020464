// Package search parses the MLflow search grammar for runs, experiments,
// logged models, registered models and model versions (filter strings and
// order_by clauses) into a small AST. It knows nothing of SQL: storage
// adapters translate the AST into their own queries, and describe each
// operator of the grammar (Ops) once for that (internal/sqlstore/runsearch/ops.go);
// RunFilterTargets lists what runs are filtered by and with which
// operators, for the tests that generate clauses from the grammar itself.
//
// A filter is a conjunction of comparisons: `metrics.loss < 0.5 AND
// params.lr = '0.01'`. There is no OR and there are no parentheses, as in
// MLflow.
package search

// Entity says what a comparison or order key refers to.
type Entity int

// The entities. The numbers are not persisted.
const (
	// Attribute is a column of the run or experiment itself (run_id,
	// start_time, name, ...). Key holds the canonical attribute name.
	Attribute Entity = iota + 1
	// Metric compares the latest value of a run's metric.
	Metric
	// Param compares a run's parameter value.
	Param
	// Tag compares a run's or experiment's tag value.
	Tag
	// Dataset compares a field of a run's input datasets: Key is "name",
	// "digest" or "context".
	Dataset
)

// String returns the entity's canonical prefix, as used in messages.
func (e Entity) String() string {
	switch e {
	case Attribute:
		return "attributes"
	case Metric:
		return "metrics"
	case Param:
		return "params"
	case Tag:
		return "tags"
	case Dataset:
		return "datasets"
	}
	return "unknown"
}

// Op is a comparison operator, upper case, with single spaces.
type Op string

// The operators.
const (
	OpEq        Op = "="
	OpNe        Op = "!="
	OpLt        Op = "<"
	OpLe        Op = "<="
	OpGt        Op = ">"
	OpGe        Op = ">="
	OpLike      Op = "LIKE"
	OpILike     Op = "ILIKE"
	OpIn        Op = "IN"
	OpNotIn     Op = "NOT IN"
	OpIsNull    Op = "IS NULL"
	OpIsNotNull Op = "IS NOT NULL"
)

// ValueKind says which field of a Value is set.
type ValueKind int

// The value kinds.
const (
	// NoValue is used with IS NULL and IS NOT NULL.
	NoValue ValueKind = iota
	// String values come from quoted literals.
	String
	// Number values come from numeric literals.
	Number
	// List values come from a parenthesised list of quoted strings (IN, NOT IN).
	List
)

// Value is the right-hand side of a comparison.
type Value struct {
	Kind ValueKind
	Str  string
	Num  float64
	List []string
}

// Comparison is one `<entity>.<key> <op> <value>` term.
type Comparison struct {
	Entity Entity
	// Key is the metric, param or tag key (unquoted), the canonical
	// attribute name, or the dataset field name.
	Key   string
	Op    Op
	Value Value
}

// Filter is a conjunction of comparisons. The zero Filter matches everything.
type Filter struct {
	Clauses []Comparison
}

// OrderKey is one order_by item.
type OrderKey struct {
	Entity Entity
	// Key is as in Comparison.
	Key string
	// Desc is true for DESC; ASC is the default.
	Desc bool
}

// Canonical run attribute names. Aliases accepted by the parser
// (created, Created, "run name", ...) are mapped to these.
const (
	AttrRunID          = "run_id"
	AttrRunName        = "run_name"
	AttrUserID         = "user_id"
	AttrStatus         = "status"
	AttrArtifactURI    = "artifact_uri"
	AttrStartTime      = "start_time"
	AttrEndTime        = "end_time"
	AttrLifecycleStage = "lifecycle_stage"
)

// Canonical experiment attribute names.
const (
	AttrName           = "name"
	AttrExperimentID   = "experiment_id"
	AttrCreationTime   = "creation_time"
	AttrLastUpdateTime = "last_update_time"
)

// Dataset field names.
const (
	DatasetName    = "name"
	DatasetDigest  = "digest"
	DatasetContext = "context"
)

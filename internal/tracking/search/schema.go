package search

import (
	"slices"
	"strings"
)

// This file holds what each search dialect (runs, experiments) accepts:
// prefixes, attributes and the operators and value kinds of every target.
// The syntax lives in parse.go; keeping the tables apart lets one parser
// serve both endpoints.

// The operator sets, in the order they are listed in error messages.
var (
	numericOps = []Op{OpEq, OpNe, OpGt, OpGe, OpLt, OpLe}
	stringOps  = []Op{OpEq, OpNe, OpLike, OpILike}
	nullOps    = []Op{OpIsNull, OpIsNotNull}
	listOps    = []Op{OpIn, OpNotIn}
)

// rule says which operators a target takes and which scalar kind (String or
// Number) its scalar operators compare with. IN and NOT IN always take a
// List, IS NULL and IS NOT NULL never take a value.
type rule struct {
	scalar ValueKind
	ops    []Op
}

func (r rule) allows(op Op) bool {
	for _, o := range r.ops {
		if o == op {
			return true
		}
	}
	return false
}

func (r rule) opList() string {
	names := make([]string, len(r.ops))
	for i, o := range r.ops {
		names[i] = string(o)
	}
	return strings.Join(names, ", ")
}

// valueKind returns the kind of value a comparison with op takes: none
// for IS NULL and IS NOT NULL, a List for IN and NOT IN, else the rule's
// scalar kind.
func (r rule) valueKind(op Op) ValueKind {
	switch {
	case slices.Contains(nullOps, op):
		return NoValue
	case slices.Contains(listOps, op):
		return List
	}
	return r.scalar
}

// Ops returns every operator of the grammar, each once, in the order they
// are listed in error messages.
func Ops() []Op {
	var out []Op
	for _, o := range concatOps(numericOps, stringOps, listOps, nullOps) {
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// FilterTarget is one thing a search dialect filters on, with the
// operators it takes: what a store's tests generate clauses from, so that
// an operator added to the grammar is tested where it is accepted.
type FilterTarget struct {
	Entity Entity
	// Key is the canonical attribute name or the dataset field; "" for
	// metrics, params and tags, whose keys are the user's.
	Key string
	// Ops are the operators the target takes, in the order of messages.
	Ops []Op
	// Scalar is the kind of value (String or Number) of its scalar
	// operators; see ValueKind.
	Scalar ValueKind
}

// ValueKind returns the kind of value a comparison of the target with op
// takes: NoValue, List, or the target's Scalar.
func (t FilterTarget) ValueKind(op Op) ValueKind {
	return rule{scalar: t.Scalar, ops: t.Ops}.valueKind(op)
}

// RunFilterTargets returns what runs filters compare, in a fixed order:
// metrics, params and tags, the run attributes by canonical name, and the
// dataset fields.
func RunFilterTargets() []FilterTarget {
	d := &runDialect
	target := func(e Entity, key string, r rule) FilterTarget {
		return FilterTarget{Entity: e, Key: key, Ops: slices.Clone(r.ops), Scalar: r.scalar}
	}
	out := []FilterTarget{target(Metric, "", d.rules[Metric]), target(Param, "", d.rules[Param]), target(Tag, "", d.rules[Tag])}
	var attrs []string
	for name, a := range d.attrs {
		if name == a.canonical {
			attrs = append(attrs, name)
		}
	}
	slices.Sort(attrs)
	for _, name := range attrs {
		out = append(out, target(Attribute, name, d.attrs[name].rule))
	}
	var fields []string
	for f := range datasetFields {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	for _, f := range fields {
		out = append(out, target(Dataset, f, d.rules[Dataset]))
	}
	return out
}

func concatOps(sets ...[]Op) []Op {
	var out []Op
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

var (
	numericRule  = rule{scalar: Number, ops: numericOps}
	stringRule   = rule{scalar: String, ops: stringOps}
	nullableRule = rule{scalar: String, ops: concatOps(stringOps, nullOps)}
	inRule       = rule{scalar: String, ops: concatOps(stringOps, listOps)}
	// idRule is experiment_id: exact matches only, as LIKE on an id has no use.
	idRule = rule{scalar: String, ops: concatOps([]Op{OpEq, OpNe}, listOps)}
)

// attribute is one attribute name (canonical or alias) of a dialect.
type attribute struct {
	canonical string
	rule      rule
	orderable bool
}

// dialect is the vocabulary of one search endpoint.
type dialect struct {
	// noun names the searched things in messages ("runs", "experiments").
	noun string
	// prefixes maps each accepted prefix to its entity.
	prefixes map[string]Entity
	// prefixHelp lists the accepted prefixes for messages.
	prefixHelp string
	// rules holds the rule of each non-attribute entity the dialect filters on.
	rules map[Entity]rule
	// orderable says which non-attribute entities order_by accepts.
	orderable map[Entity]bool
	// attrs maps attribute names and aliases; all are case-sensitive.
	attrs map[string]attribute
	// attrHelp and orderHelp list the valid attribute names for messages.
	attrHelp, orderHelp string
	// bareHint tells a user who wrote a bare key what prefix they may want.
	bareHint string
}

// allPrefixes is MLflow's full prefix list. A dialect that does not accept
// one of these says so instead of calling the prefix unknown.
var allPrefixes = map[string]Entity{
	"metric": Metric, "metrics": Metric,
	"param": Param, "params": Param, "parameter": Param, "parameters": Param,
	"tag": Tag, "tags": Tag,
	"attribute": Attribute, "attributes": Attribute, "attr": Attribute, "run": Attribute,
	"dataset": Dataset, "datasets": Dataset,
}

var runDialect = dialect{
	noun:       "runs",
	prefixes:   allPrefixes,
	prefixHelp: "metrics., params., tags., attributes. or datasets. (or their aliases metric, param, parameter, parameters, tag, attribute, attr, run, dataset)",
	rules: map[Entity]rule{
		Metric:  numericRule,
		Param:   nullableRule,
		Tag:     nullableRule,
		Dataset: inRule,
	},
	orderable: map[Entity]bool{Metric: true, Param: true, Tag: true},
	attrs: map[string]attribute{
		AttrRunID:          {AttrRunID, inRule, true},
		AttrRunName:        {AttrRunName, stringRule, true},
		"run name":         {AttrRunName, stringRule, true},
		"Run name":         {AttrRunName, stringRule, true},
		"Run Name":         {AttrRunName, stringRule, true},
		AttrUserID:         {AttrUserID, stringRule, true},
		AttrStatus:         {AttrStatus, stringRule, true},
		AttrArtifactURI:    {AttrArtifactURI, stringRule, true},
		AttrLifecycleStage: {AttrLifecycleStage, stringRule, false},
		AttrStartTime:      {AttrStartTime, numericRule, true},
		"created":          {AttrStartTime, numericRule, true},
		"Created":          {AttrStartTime, numericRule, true},
		AttrEndTime:        {AttrEndTime, numericRule, true},
	},
	attrHelp:  "run_id, run_name, user_id, status, artifact_uri, lifecycle_stage, start_time, end_time (aliases: created and Created for start_time; `run name`, `Run name` and `Run Name` for run_name)",
	orderHelp: "run_id, run_name, user_id, status, artifact_uri, start_time, end_time (aliases: created and Created for start_time; `run name`, `Run name` and `Run Name` for run_name)",
	bareHint:  "metrics, params and tags need a prefix, as in metrics.loss",
}

// datasetFields are the keys datasets.<key> accepts.
var datasetFields = map[string]bool{DatasetName: true, DatasetDigest: true, DatasetContext: true}

var experimentDialect = dialect{
	noun: "experiments",
	prefixes: map[string]Entity{
		"attribute": Attribute, "attributes": Attribute, "attr": Attribute,
		"tag": Tag, "tags": Tag,
	},
	prefixHelp: "attributes. or tags. (or their aliases attribute, attr, tag)",
	rules:      map[Entity]rule{Tag: nullableRule},
	orderable:  map[Entity]bool{},
	attrs: map[string]attribute{
		AttrName:           {AttrName, stringRule, true},
		AttrExperimentID:   {AttrExperimentID, idRule, true},
		AttrCreationTime:   {AttrCreationTime, numericRule, true},
		AttrLastUpdateTime: {AttrLastUpdateTime, numericRule, true},
	},
	attrHelp:  "name, experiment_id, creation_time, last_update_time",
	orderHelp: "name, experiment_id, creation_time, last_update_time",
	bareHint:  "tags need a prefix, as in tags.team",
}

// Canonical logged-model attribute names.
const (
	AttrModelID              = "model_id"
	AttrModelType            = "model_type"
	AttrSourceRunID          = "source_run_id"
	AttrCreationTimestamp    = "creation_timestamp"
	AttrLastUpdatedTimestamp = "last_updated_timestamp"
)

// Canonical model-version attribute names.
const (
	AttrVersionNumber = "version_number"
	AttrSourcePath    = "source_path"
)

var loggedModelDialect = dialect{
	noun: "logged models",
	prefixes: map[string]Entity{
		"metric": Metric, "metrics": Metric,
		"param": Param, "params": Param, "parameter": Param, "parameters": Param,
		"tag": Tag, "tags": Tag,
		"attribute": Attribute, "attributes": Attribute, "attr": Attribute,
	},
	prefixHelp: "metrics., params., tags. or attributes.",
	rules:      map[Entity]rule{Metric: numericRule, Param: nullableRule, Tag: nullableRule},
	orderable:  map[Entity]bool{Metric: true},
	attrs: map[string]attribute{
		AttrName:                 {AttrName, stringRule, true},
		AttrModelID:              {AttrModelID, inRule, true},
		AttrModelType:            {AttrModelType, stringRule, true},
		AttrStatus:               {AttrStatus, stringRule, true},
		AttrSourceRunID:          {AttrSourceRunID, inRule, true},
		AttrCreationTimestamp:    {AttrCreationTimestamp, numericRule, true},
		"creation_time":          {AttrCreationTimestamp, numericRule, true},
		AttrLastUpdatedTimestamp: {AttrLastUpdatedTimestamp, numericRule, true},
		"last_updated_time":      {AttrLastUpdatedTimestamp, numericRule, true},
	},
	attrHelp:  "name, model_id, model_type, status, source_run_id, creation_timestamp (creation_time), last_updated_timestamp (last_updated_time)",
	orderHelp: "name, model_id, model_type, status, source_run_id, creation_timestamp, last_updated_timestamp",
	bareHint:  "metrics, params and tags need a prefix, as in metrics.accuracy",
}

var registeredModelDialect = dialect{
	noun:       "registered models",
	prefixes:   map[string]Entity{"tag": Tag, "tags": Tag, "attribute": Attribute, "attributes": Attribute, "attr": Attribute},
	prefixHelp: "tags. or attributes.",
	rules:      map[Entity]rule{Tag: nullableRule},
	orderable:  map[Entity]bool{},
	attrs: map[string]attribute{
		AttrName:                 {AttrName, stringRule, true},
		AttrCreationTimestamp:    {AttrCreationTimestamp, numericRule, true},
		AttrLastUpdatedTimestamp: {AttrLastUpdatedTimestamp, numericRule, true},
	},
	attrHelp:  "name, creation_timestamp, last_updated_timestamp",
	orderHelp: "name, creation_timestamp, last_updated_timestamp",
	bareHint:  "tags need a prefix, as in tags.stage",
}

var modelVersionDialect = dialect{
	noun:       "model versions",
	prefixes:   map[string]Entity{"tag": Tag, "tags": Tag, "attribute": Attribute, "attributes": Attribute, "attr": Attribute},
	prefixHelp: "tags. or attributes.",
	rules:      map[Entity]rule{Tag: nullableRule},
	orderable:  map[Entity]bool{},
	attrs: map[string]attribute{
		AttrName:                 {AttrName, inRule, true},
		AttrRunID:                {AttrRunID, inRule, true},
		AttrSourcePath:           {AttrSourcePath, stringRule, true},
		AttrVersionNumber:        {AttrVersionNumber, numericRule, true},
		AttrModelID:              {AttrModelID, inRule, true},
		AttrCreationTimestamp:    {AttrCreationTimestamp, numericRule, true},
		AttrLastUpdatedTimestamp: {AttrLastUpdatedTimestamp, numericRule, true},
	},
	attrHelp:  "name, run_id, source_path, version_number, model_id, creation_timestamp, last_updated_timestamp",
	orderHelp: "name, version_number, creation_timestamp, last_updated_timestamp",
	bareHint:  "tags need a prefix, as in tags.validated",
}

// target is what an identifier resolved to.
type target struct {
	entity Entity
	key    string
	rule   rule
}

// label names the target in messages, e.g. `metric "loss"`.
func (t target) label() string {
	switch t.entity {
	case Metric:
		return `metric "` + t.key + `"`
	case Param:
		return `param "` + t.key + `"`
	case Tag:
		return `tag "` + t.key + `"`
	case Dataset:
		return `dataset field "` + t.key + `"`
	}
	return `attribute "` + t.key + `"`
}

// resolve maps a parsed identifier to its target, checking it against the
// dialect. forOrder applies the order_by vocabulary instead of the filter one.
func (d *dialect) resolve(p *parser, id ident, forOrder bool) (target, error) {
	e := Attribute
	if id.hasPrefix {
		var ok bool
		e, ok = d.prefixes[id.prefix]
		if !ok {
			if known, isKnown := allPrefixes[id.prefix]; isKnown && !d.has(known) {
				return target{}, p.hinted(id.start, "use "+d.prefixHelp, "%s cannot be searched by %s (%q)", d.noun, known, id.text)
			}
			return target{}, p.hinted(id.start, "use "+d.prefixHelp, "unknown prefix %q for %s", id.prefix, d.noun)
		}
	}
	if forOrder && e != Attribute && !d.orderable[e] {
		if len(d.orderable) == 0 {
			return target{}, p.hinted(id.start, "order by one of the attributes "+d.orderHelp, "%s cannot be ordered by %s (%q)", d.noun, e, id.text)
		}
		return target{}, p.hinted(id.start, "order by metrics, params, tags or the attributes "+d.orderHelp, "%s cannot be ordered by %s (%q)", d.noun, e, id.text)
	}
	switch e {
	case Attribute:
		a, ok := d.attrs[id.key]
		if !ok {
			hint := "valid attributes are " + d.attrHelp
			if forOrder {
				hint = "orderable attributes are " + d.orderHelp
			}
			if !id.hasPrefix {
				hint += "; " + d.bareHint
			}
			return target{}, p.hinted(id.keyStart, hint, "unknown attribute %q", id.key)
		}
		if forOrder && !a.orderable {
			return target{}, p.hinted(id.keyStart, "orderable attributes are "+d.orderHelp, "attribute %q cannot be used in order_by", id.key)
		}
		return target{entity: Attribute, key: a.canonical, rule: a.rule}, nil
	case Dataset:
		if !datasetFields[id.key] {
			return target{}, p.hinted(id.keyStart, "use name, digest or context", "unknown dataset field %q", id.key)
		}
	}
	return target{entity: e, key: id.key, rule: d.rules[e]}, nil
}

// has reports whether the dialect accepts entity e under some prefix.
func (d *dialect) has(e Entity) bool {
	for _, got := range d.prefixes {
		if got == e {
			return true
		}
	}
	return false
}

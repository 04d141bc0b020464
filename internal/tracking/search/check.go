package search

import (
	"slices"

	"github.com/sextant/sextant/internal/errs"
)

// The checks a store makes while it turns a Filter or order keys into its
// own query. The parsers make only clauses these accept, so a store meets
// their errors for an AST built by hand (a caller inside the server, a
// test); they live here, beside the vocabularies, so that every backend
// refuses the same clauses with the same words instead of writing its own.
// A store asks first and then renders: a clause these accept that the
// store cannot render is the store's bug, not the caller's.

// CheckString returns nil when c is a comparison of a string-valued
// target that a store can render: = and != with a quoted string, LIKE and
// ILIKE, IN and NOT IN with a non-empty list. IS NULL and IS NOT NULL are
// not for a string but for a key/value side table, which a store handles
// before asking.
func (c Comparison) CheckString() error {
	switch c.Op {
	case OpEq, OpNe:
		if c.Value.Kind != String {
			return errs.Errorf(errs.Invalid, "%s.%s %s needs a quoted string value", c.Entity, c.Key, c.Op)
		}
	case OpLike, OpILike:
	case OpIn, OpNotIn:
		if c.Value.Kind != List || len(c.Value.List) == 0 {
			return errs.Errorf(errs.Invalid, "%s.%s %s needs a non-empty list of strings", c.Entity, c.Key, c.Op)
		}
	default:
		return c.unsupported()
	}
	return nil
}

// CheckNumber returns nil when c is a comparison of a numeric target that
// a store can render: one of =, !=, <, <=, >, >= with a number.
func (c Comparison) CheckNumber() error {
	if !slices.Contains(numericOps, c.Op) {
		return c.unsupported()
	}
	if c.Value.Kind != Number {
		return errs.Errorf(errs.Invalid, "%s.%s %s needs a numeric value", c.Entity, c.Key, c.Op)
	}
	return nil
}

func (c Comparison) unsupported() error {
	return errs.Errorf(errs.Invalid, "operator %s is not supported for %s.%s", c.Op, c.Entity, c.Key)
}

// CheckRunClause returns nil when c names something runs are searched by:
// any metric, param or tag, a canonical run attribute, or a dataset's
// name, digest or context.
func CheckRunClause(c Comparison) error {
	if runDialect.filters(c.Entity, c.Key) {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Invalid search key '%s.%s' for runs", c.Entity, c.Key)
}

// CheckRunOrderKey returns nil when k names something runs are ordered
// by: any metric, param or tag, or a canonical run attribute.
// (lifecycle_stage is one: the parser refuses to order by it, a store
// need not.)
func CheckRunOrderKey(k OrderKey) error {
	if runDialect.orderable[k.Entity] || k.Entity == Attribute && runDialect.isAttribute(k.Key) {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Invalid order_by key '%s.%s' for runs", k.Entity, k.Key)
}

// CheckExperimentClause returns nil when c names something experiments
// are searched by: any tag, or a canonical experiment attribute.
func CheckExperimentClause(c Comparison) error {
	if experimentDialect.filters(c.Entity, c.Key) {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Invalid attribute '%s.%s' for experiments", c.Entity, c.Key)
}

// CheckExperimentOrderKey returns nil when k names a canonical experiment
// attribute. Experiments are ordered by attributes only, so the key alone
// decides.
func CheckExperimentOrderKey(k OrderKey) error {
	if experimentDialect.isAttribute(k.Key) {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Invalid order_by key '%s' for experiments", k.Key)
}

// CheckLoggedModelClause returns nil when c names something logged models
// are searched by: any metric, param or tag, or a canonical logged-model
// attribute.
func CheckLoggedModelClause(c Comparison) error {
	switch {
	case loggedModelDialect.filters(c.Entity, c.Key):
		return nil
	case c.Entity == Attribute:
		return errs.Errorf(errs.Invalid, "Invalid attribute '%s' for logged models", c.Key)
	}
	return errs.Errorf(errs.Invalid, "Invalid search key '%s.%s' for logged models", c.Entity, c.Key)
}

// CheckRegisteredModelClause returns nil when c names something
// registered models are searched by: any tag, or a canonical
// registered-model attribute.
func CheckRegisteredModelClause(c Comparison) error {
	return registryClause(&registeredModelDialect, c)
}

// CheckModelVersionClause returns nil when c names something model
// versions are searched by: any tag, or a canonical model-version
// attribute.
func CheckModelVersionClause(c Comparison) error {
	return registryClause(&modelVersionDialect, c)
}

func registryClause(d *dialect, c Comparison) error {
	if d.filters(c.Entity, c.Key) {
		return nil
	}
	return errs.Errorf(errs.Invalid, "Invalid search key '%s.%s'", c.Entity, c.Key)
}

// filters reports whether the dialect filters on key of entity e, given
// canonically (as the parser leaves it: an attribute by its canonical
// name, never an alias).
func (d *dialect) filters(e Entity, key string) bool {
	switch e {
	case Attribute:
		return d.isAttribute(key)
	case Dataset:
		if !datasetFields[key] {
			return false
		}
	}
	_, ok := d.rules[e]
	return ok
}

// isAttribute reports whether key is the canonical name of one of the
// dialect's attributes.
func (d *dialect) isAttribute(key string) bool {
	for _, a := range d.attrs {
		if a.canonical == key {
			return true
		}
	}
	return false
}

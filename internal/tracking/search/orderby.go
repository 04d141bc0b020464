package search

import (
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// ParseRunOrderBy parses runs/search order_by items, each
// "<identifier> [ASC|DESC]" as in `metrics.loss DESC` or
// "attributes.`Run name`". ASC is the default. Runs can be ordered by
// metrics, params, tags and the attributes run_id, run_name, user_id,
// status, artifact_uri, start_time and end_time (and their aliases).
// The same key twice (after resolving aliases) is an error, as is an empty
// item. No items give a nil slice. Errors are *errs.Error with Code
// errs.Invalid.
func ParseRunOrderBy(items []string) ([]OrderKey, error) {
	return parseOrderBy(items, &runDialect)
}

// ParseExperimentOrderBy parses experiments/search order_by items, as
// ParseRunOrderBy does. Experiments can only be ordered by the attributes
// name, experiment_id, creation_time and last_update_time.
func ParseExperimentOrderBy(items []string) ([]OrderKey, error) {
	return parseOrderBy(items, &experimentDialect)
}

// ParseRegisteredModelOrderBy parses registered-models/search order_by items.
func ParseRegisteredModelOrderBy(items []string) ([]OrderKey, error) {
	return parseOrderBy(items, &registeredModelDialect)
}

// ParseModelVersionOrderBy parses model-versions/search order_by items.
func ParseModelVersionOrderBy(items []string) ([]OrderKey, error) {
	return parseOrderBy(items, &modelVersionDialect)
}

func parseOrderBy(items []string, d *dialect) ([]OrderKey, error) {
	if len(items) == 0 {
		return nil, nil
	}
	type entityKey struct {
		e   Entity
		key string
	}
	keys := make([]OrderKey, 0, len(items))
	seen := make(map[entityKey]int, len(items))
	for i, item := range items {
		k, err := parseOrderItem(item, i, d)
		if err != nil {
			return nil, err
		}
		ek := entityKey{k.Entity, k.Key}
		if j, dup := seen[ek]; dup {
			// MLflow rejects this too: the second key could never matter.
			return nil, errs.Errorf(errs.Invalid, "invalid order_by %s: item %d orders by %s, which item %d already orders by; give each key once",
				shorten(item, maxShown), i+1, identString(k.Entity, k.Key), j+1)
		}
		seen[ek] = i
		keys = append(keys, k)
	}
	return keys, nil
}

// parseOrderItem parses the item at index i.
func parseOrderItem(item string, i int, d *dialect) (OrderKey, error) {
	p := &parser{src: item, what: "order_by"}
	p.skipSpace()
	if p.eof() {
		return OrderKey{}, errs.Errorf(errs.Invalid, "invalid order_by %s: item %d is empty; each item is \"<identifier> [ASC|DESC]\", as in \"metrics.loss DESC\"",
			shorten(item, maxShown), i+1)
	}
	id, err := p.ident()
	if err != nil {
		return OrderKey{}, err
	}
	t, err := d.resolve(p, id, true)
	if err != nil {
		return OrderKey{}, err
	}
	k := OrderKey{Entity: t.entity, Key: t.key}
	p.skipSpace()
	if p.eof() {
		return k, nil
	}
	at := p.pos
	w := p.word()
	switch strings.ToUpper(w) {
	case "ASC":
	case "DESC":
		k.Desc = true
	default:
		return OrderKey{}, p.hinted(at, "quote keys that hold spaces with backticks, as in metrics.`val loss` DESC", "expected ASC or DESC after %q, got %s", id.text, p.describe(at))
	}
	p.skipSpace()
	if !p.eof() {
		return OrderKey{}, p.hinted(p.pos, "each item is \"<identifier> [ASC|DESC]\"; quote keys that hold spaces with backticks", "unexpected %s after %q", p.describe(p.pos), w)
	}
	return k, nil
}

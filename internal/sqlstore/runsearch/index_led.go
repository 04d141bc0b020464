package runsearch

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sextant/sextant/internal/tracking/search"
)

// A search with an equality on a param or a tag (params.lr = '0.001'),
// when too many runs pass it to sort them, walks the runs in its order
// and tests each: with the reads benchmark's metric + param search, 8,000
// runs of 100,000 for a page of 1,000, of which three in four fail the
// equality. A led order sorts the runs by the clause's key first and by
// the search's order after, so the runs with the value are one range of
// it, already in the search's order: the walk reads 2,000 runs of that
// range instead. It is the order of "params.lr, <the search's order>",
// kept and updated like any other, and sorted without evaluating the
// search's terms: the runs of the search's order are taken in turn into
// one bucket per value of the key.

// ledTerms returns the terms of the led order of the equality c and the
// search's terms, and the number of c's terms (its missing flag, its
// value) at their head; nil if c's key cannot order runs.
func ledTerms(c search.Comparison, terms []sortTerm) ([]sortTerm, int) {
	_, _, lead, err := runOrder([]search.OrderKey{{Entity: c.Entity, Key: c.Key}})
	if err != nil || len(lead) < 2 || lead[1].src.part != partValue {
		return nil, 0
	}
	lead = lead[:2] // the order by the key ends with start time and run ID
	return append(slices.Clip(lead), terms...), len(lead)
}

// newLedOrder sorts the runs by terms, whose first lead terms are a
// param's or a tag's (ledTerms): the order of the other terms (kept, or
// sorted now and kept) split by the key's value, each value's runs in
// that order. The caller holds expIndex.mu for reading, or owns ri.
func (ri *runIndex) newLedOrder(terms []sortTerm, lead int) *sortedRuns {
	o := newOrder(terms)
	if o.g0 != lead || terms[lead-1].kind != termString {
		return newSortedRuns(terms, ri.runs) // not a param's or a tag's
	}
	o.lead = lead
	rest := ri.order(terms[lead:])
	type bucket struct {
		rank uint8
		v    string
	}
	counts := map[bucket]int{}
	es := make([]orderEntry, len(rest.entries))
	for i, en := range rest.entries {
		es[i] = o.entry(en.r)
		counts[bucket{es[i].rank, es[i].v.s}]++
	}
	keys := make([]bucket, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	desc := terms[lead-1].desc
	slices.SortFunc(keys, func(a, b bucket) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		if desc {
			return strings.Compare(b.v, a.v)
		}
		return strings.Compare(a.v, b.v)
	})
	next := make(map[bucket]int, len(keys))
	at := 0
	for _, k := range keys {
		next[k] = at
		at += counts[k]
	}
	o.entries = make([]orderEntry, len(es))
	for _, en := range es {
		k := bucket{en.rank, en.v.s}
		o.entries[next[k]] = en
		next[k]++
	}
	return o
}

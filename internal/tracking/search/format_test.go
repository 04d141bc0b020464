package search

import (
	"math"
	"testing"
)

func TestFilterString(t *testing.T) {
	tests := map[string]struct {
		in   Filter
		want string
	}{
		"OKZero":         {in: Filter{}, want: ""},
		"OKMetric":       {in: filter(cmp(Metric, "loss", OpLt, num(0.5))), want: "metrics.`loss` < 0.5"},
		"OKSpacedKey":    {in: filter(cmp(Metric, "a b", OpGe, num(-1))), want: "metrics.`a b` >= -1"},
		"OKBacktickKey":  {in: filter(cmp(Param, "a`b", OpEq, str("x"))), want: "params.\"a`b\" = 'x'"},
		"OKQuoteInValue": {in: filter(cmp(Tag, "t", OpLike, str("it's"))), want: "tags.`t` LIKE 'it''s'"},
		"OKIsNull":       {in: filter(cmp(Tag, "t", OpIsNull, Value{})), want: "tags.`t` IS NULL"},
		"OKIsNotNull":    {in: filter(cmp(Param, "p", OpIsNotNull, Value{})), want: "params.`p` IS NOT NULL"},
		"OKList":         {in: filter(cmp(Attribute, AttrRunID, OpNotIn, list("a", "b'c"))), want: "attributes.run_id NOT IN ('a', 'b''c')"},
		"OKDataset":      {in: filter(cmp(Dataset, DatasetName, OpILike, str("%x"))), want: "datasets.name ILIKE '%x'"},
		"OKTimestamp":    {in: filter(cmp(Attribute, AttrStartTime, OpGt, num(1700000000000))), want: "attributes.start_time > 1700000000000"},
		"OKSmallFloat":   {in: filter(cmp(Metric, "m", OpEq, num(1e-7))), want: "metrics.`m` = 1e-07"},
		"OKHugeFloat":    {in: filter(cmp(Metric, "m", OpEq, num(1e300))), want: "metrics.`m` = 1e+300"},
		"OKNegZero":      {in: filter(cmp(Metric, "m", OpEq, num(math.Copysign(0, -1)))), want: "metrics.`m` = -0"},
		"OKAnd": {
			in:   filter(cmp(Metric, "a", OpLt, num(1)), cmp(Param, "b", OpEq, str("x"))),
			want: "metrics.`a` < 1 AND params.`b` = 'x'",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			assertRoundTrip(t, tc.in, ParseRunFilter)
		})
	}
}

func TestOrderKeyString(t *testing.T) {
	tests := map[string]struct {
		in   OrderKey
		want string
	}{
		"OKAsc":       {in: OrderKey{Metric, "loss", false}, want: "metrics.`loss` ASC"},
		"OKDesc":      {in: OrderKey{Attribute, AttrStartTime, true}, want: "attributes.start_time DESC"},
		"OKQuotedKey": {in: OrderKey{Tag, "a b", true}, want: "tags.`a b` DESC"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			assertOrderRoundTrip(t, []OrderKey{tc.in}, ParseRunOrderBy)
		})
	}
}

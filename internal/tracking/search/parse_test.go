package search

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseRunFilter(t *testing.T) {
	tests := map[string]struct {
		in   string
		want Filter
	}{
		"OKEmpty":      {in: "", want: Filter{}},
		"OKWhitespace": {in: " \t\r\n ", want: Filter{}},

		// Metrics and numbers.
		"OKMetricLtFloat":      {in: "metrics.loss < 0.5", want: filter(cmp(Metric, "loss", OpLt, num(0.5)))},
		"OKMetricSingular":     {in: "metric.loss <= 1", want: filter(cmp(Metric, "loss", OpLe, num(1)))},
		"OKMetricGt":           {in: "metrics.acc > 0.9", want: filter(cmp(Metric, "acc", OpGt, num(0.9)))},
		"OKMetricGe":           {in: "metrics.acc >= 1", want: filter(cmp(Metric, "acc", OpGe, num(1)))},
		"OKMetricEq":           {in: "metrics.step = 10", want: filter(cmp(Metric, "step", OpEq, num(10)))},
		"OKMetricNe":           {in: "metrics.step != 10", want: filter(cmp(Metric, "step", OpNe, num(10)))},
		"OKMetricNoSpaces":     {in: "metrics.loss<-1", want: filter(cmp(Metric, "loss", OpLt, num(-1)))},
		"OKMetricExponent":     {in: "metrics.lr > -1.5e-3", want: filter(cmp(Metric, "lr", OpGt, num(-1.5e-3)))},
		"OKMetricExponentCaps": {in: "metrics.lr > 2E+10", want: filter(cmp(Metric, "lr", OpGt, num(2e10)))},
		"OKMetricPlusSign":     {in: "metrics.lr > +3", want: filter(cmp(Metric, "lr", OpGt, num(3)))},
		"OKMetricLeadingDot":   {in: "metrics.lr > .5", want: filter(cmp(Metric, "lr", OpGt, num(0.5)))},
		"OKMetricTrailingDot":  {in: "metrics.lr > 5.", want: filter(cmp(Metric, "lr", OpGt, num(5)))},
		"OKMetricSlashKey": {
			in:   "metrics.system/gpu_0_utilization_percentage > 50",
			want: filter(cmp(Metric, "system/gpu_0_utilization_percentage", OpGt, num(50))),
		},
		"OKMetricDashColonKey": {in: "metrics.val-loss:top1 < 1", want: filter(cmp(Metric, "val-loss:top1", OpLt, num(1)))},
		"OKMetricBacktickKey":  {in: "metrics.`my metric` >= 0", want: filter(cmp(Metric, "my metric", OpGe, num(0)))},
		"OKMetricDoubleQuoteKey": {
			in:   `metrics."a b" < 2`,
			want: filter(cmp(Metric, "a b", OpLt, num(2))),
		},
		"OKMetricQuotedKeyOddChars": {
			in:   "metrics.`a'\"=<AND (x)` < 2",
			want: filter(cmp(Metric, `a'"=<AND (x)`, OpLt, num(2))),
		},
		"OKMetricDigitKey": {in: "metrics.0 = 0", want: filter(cmp(Metric, "0", OpEq, num(0)))},

		// Params and tags.
		"OKParamEq":          {in: "params.lr = '0.01'", want: filter(cmp(Param, "lr", OpEq, str("0.01")))},
		"OKParamAliases":     {in: "param.a = 'x' AND parameter.b = 'y' AND parameters.c = 'z'", want: filter(cmp(Param, "a", OpEq, str("x")), cmp(Param, "b", OpEq, str("y")), cmp(Param, "c", OpEq, str("z")))},
		"OKParamNe":          {in: `params.opt != "adam"`, want: filter(cmp(Param, "opt", OpNe, str("adam")))},
		"OKParamLike":        {in: "params.model LIKE 'bert-%'", want: filter(cmp(Param, "model", OpLike, str("bert-%")))},
		"OKParamILikeLower":  {in: "params.model ilike '%BERT%'", want: filter(cmp(Param, "model", OpILike, str("%BERT%")))},
		"OKParamIsNull":      {in: "params.seed IS NULL", want: filter(cmp(Param, "seed", OpIsNull, Value{}))},
		"OKParamIsNotNull":   {in: "params.seed is  not\tnull", want: filter(cmp(Param, "seed", OpIsNotNull, Value{}))},
		"OKParamEmptyString": {in: "params.a = ''", want: filter(cmp(Param, "a", OpEq, str("")))},
		"OKParamDoubledQuote": {
			in:   "params.a = 'it''s' AND params.b = \"say \"\"hi\"\"\"",
			want: filter(cmp(Param, "a", OpEq, str("it's")), cmp(Param, "b", OpEq, str(`say "hi"`))),
		},
		"OKParamBackslashIsLiteral": {in: `params.path = 'C:\dir\'`, want: filter(cmp(Param, "path", OpEq, str(`C:\dir\`)))},
		"OKParamValueWithKeywords":  {in: "params.a = 'x AND y OR z'", want: filter(cmp(Param, "a", OpEq, str("x AND y OR z")))},
		"OKParamUnicodeValue":       {in: "params.a = 'héllo 世界'", want: filter(cmp(Param, "a", OpEq, str("héllo 世界")))},
		"OKTagDottedKey":            {in: "tags.mlflow.runName = 'r1'", want: filter(cmp(Tag, "mlflow.runName", OpEq, str("r1")))},
		"OKTagSingular":             {in: "tag.team LIKE 'nlp%'", want: filter(cmp(Tag, "team", OpLike, str("nlp%")))},
		"OKTagQuotedKey":            {in: "tags.`my-tag` != 'x'", want: filter(cmp(Tag, "my-tag", OpNe, str("x")))},
		"OKTagIsNull":               {in: "tags.note IS NULL", want: filter(cmp(Tag, "note", OpIsNull, Value{}))},
		"OKTagIsNotNull":            {in: "tags.`a b` IS NOT NULL", want: filter(cmp(Tag, "a b", OpIsNotNull, Value{}))},

		// Attributes.
		"OKAttrRunIDEq":      {in: "attributes.run_id = 'abc'", want: filter(cmp(Attribute, AttrRunID, OpEq, str("abc")))},
		"OKAttrRunIDIn":      {in: "attributes.run_id IN ('a', 'b', \"c\")", want: filter(cmp(Attribute, AttrRunID, OpIn, list("a", "b", "c")))},
		"OKAttrRunIDInOne":   {in: "run_id in ('a')", want: filter(cmp(Attribute, AttrRunID, OpIn, list("a")))},
		"OKAttrRunIDNotIn":   {in: "run_id NOT IN ( 'a' ,'b' )", want: filter(cmp(Attribute, AttrRunID, OpNotIn, list("a", "b")))},
		"OKAttrRunIDInUpper": {in: "run_id IN ('ABC')", want: filter(cmp(Attribute, AttrRunID, OpIn, list("ABC")))},
		"OKAttrNotInGlued":   {in: "run_id not in('a')AND status='RUNNING'", want: filter(cmp(Attribute, AttrRunID, OpNotIn, list("a")), cmp(Attribute, AttrStatus, OpEq, str("RUNNING")))},
		"OKAttrBare":         {in: "status = 'FINISHED'", want: filter(cmp(Attribute, AttrStatus, OpEq, str("FINISHED")))},
		"OKAttrAttrPrefix":   {in: "attr.user_id LIKE 'al%'", want: filter(cmp(Attribute, AttrUserID, OpLike, str("al%")))},
		"OKAttrAttributePrefix": {
			in:   "attribute.artifact_uri ILIKE 's3://%'",
			want: filter(cmp(Attribute, AttrArtifactURI, OpILike, str("s3://%"))),
		},
		"OKAttrRunPrefix":        {in: "run.run_name = 'x'", want: filter(cmp(Attribute, AttrRunName, OpEq, str("x")))},
		"OKAttrLifecycleStage":   {in: "lifecycle_stage = 'active'", want: filter(cmp(Attribute, AttrLifecycleStage, OpEq, str("active")))},
		"OKAttrStartTime":        {in: "attributes.start_time >= 1700000000000", want: filter(cmp(Attribute, AttrStartTime, OpGe, num(1700000000000)))},
		"OKAttrEndTime":          {in: "end_time < 5", want: filter(cmp(Attribute, AttrEndTime, OpLt, num(5)))},
		"OKAttrCreatedAlias":     {in: "created > 0", want: filter(cmp(Attribute, AttrStartTime, OpGt, num(0)))},
		"OKAttrCreatedCapAlias":  {in: "attributes.Created != 1", want: filter(cmp(Attribute, AttrStartTime, OpNe, num(1)))},
		"OKAttrRunNameBacktick":  {in: "attributes.`Run name` = 'x'", want: filter(cmp(Attribute, AttrRunName, OpEq, str("x")))},
		"OKAttrRunNameBare":      {in: "`Run Name` LIKE 'x%'", want: filter(cmp(Attribute, AttrRunName, OpLike, str("x%")))},
		"OKAttrRunNameLowerBare": {in: `"run name" = 'x'`, want: filter(cmp(Attribute, AttrRunName, OpEq, str("x")))},
		"OKAttrQuotedCanonical":  {in: "attributes.\"run_id\" = 'x'", want: filter(cmp(Attribute, AttrRunID, OpEq, str("x")))},

		// Datasets.
		"OKDatasetName":     {in: "datasets.name = 'mnist'", want: filter(cmp(Dataset, DatasetName, OpEq, str("mnist")))},
		"OKDatasetSingular": {in: "dataset.digest != 'abc'", want: filter(cmp(Dataset, DatasetDigest, OpNe, str("abc")))},
		"OKDatasetContext":  {in: "datasets.context LIKE 'train%'", want: filter(cmp(Dataset, DatasetContext, OpLike, str("train%")))},
		"OKDatasetIn":       {in: "datasets.name IN ('a','b')", want: filter(cmp(Dataset, DatasetName, OpIn, list("a", "b")))},
		"OKDatasetNotIn":    {in: "datasets.digest NOT IN ('a')", want: filter(cmp(Dataset, DatasetDigest, OpNotIn, list("a")))},
		"OKDatasetILike":    {in: "datasets.`name` ILIKE '%X'", want: filter(cmp(Dataset, DatasetName, OpILike, str("%X")))},

		// Conjunctions.
		"OKAndChain": {
			in: "metrics.loss < 0.5 AND params.lr = '0.01' and tags.t IS NULL And run_id IN ('a')",
			want: filter(
				cmp(Metric, "loss", OpLt, num(0.5)),
				cmp(Param, "lr", OpEq, str("0.01")),
				cmp(Tag, "t", OpIsNull, Value{}),
				cmp(Attribute, AttrRunID, OpIn, list("a")),
			),
		},
		"OKAndAfterString": {in: "params.a='x'AND params.b='y'", want: filter(cmp(Param, "a", OpEq, str("x")), cmp(Param, "b", OpEq, str("y")))},
		"OKNewlines":       {in: "\n metrics.a\n<\n1\nAND\nmetrics.b > 2\n", want: filter(cmp(Metric, "a", OpLt, num(1)), cmp(Metric, "b", OpGt, num(2)))},
		"OKSameKeyTwice":   {in: "metrics.a > 1 AND metrics.a < 2", want: filter(cmp(Metric, "a", OpGt, num(1)), cmp(Metric, "a", OpLt, num(2)))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRunFilter(tc.in)
			if err != nil {
				t.Fatalf("ParseRunFilter(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseRunFilter(%q)\n got %#v\nwant %#v", tc.in, got, tc.want)
			}
			assertRoundTrip(t, got, ParseRunFilter)
		})
	}
}

func TestParseRunFilterErrors(t *testing.T) {
	tests := map[string]struct {
		in string
		// mentions are substrings the message must hold: the offending
		// token and, where it matters, the position.
		mentions []string
	}{
		"ErrMissingValue":        {in: "metrics.loss <", mentions: []string{`invalid filter "metrics.loss <"`, `after "<"`, "position 15"}},
		"ErrMissingOperator":     {in: "metrics.loss", mentions: []string{`after "metrics.loss"`, "end of input"}},
		"ErrOr":                  {in: "metrics.a < 1 OR metrics.b > 2", mentions: []string{`"OR" is not supported`, "AND", "position 15"}},
		"ErrOrLower":             {in: "params.a = 'x' or params.b = 'y'", mentions: []string{`"or"`, "not supported"}},
		"ErrParens":              {in: "(metrics.a < 1)", mentions: []string{"parentheses", "position 1"}},
		"ErrParensAfterAnd":      {in: "metrics.a < 1 AND (metrics.b < 2)", mentions: []string{"parentheses", "position 19"}},
		"ErrTrailingAnd":         {in: "metrics.a < 1 AND ", mentions: []string{`after "AND"`, "end of input"}},
		"ErrLeadingAnd":          {in: "AND metrics.a < 1", mentions: []string{`unknown attribute "AND"`}},
		"ErrDoubleAnd":           {in: "metrics.a < 1 AND AND metrics.b < 2", mentions: []string{`unknown attribute "AND"`}},
		"ErrGluedAnd":            {in: "metrics.a < 1 ANDmetrics.b < 2", mentions: []string{`got "ANDmetrics.b"`}},
		"ErrJunkAfter":           {in: "metrics.a < 1 metrics.b", mentions: []string{"expected AND", `"metrics.b"`}},
		"ErrJunkSymbolAfter":     {in: "params.a = 'x' )", mentions: []string{"expected AND", `")"`}},
		"ErrSemicolon":           {in: "params.a = 'x'; params.b = 'y'", mentions: []string{`";"`}},
		"ErrUnknownPrefix":       {in: "foo.bar = 'x'", mentions: []string{`unknown prefix "foo"`, "metrics."}},
		"ErrPrefixCase":          {in: "METRICS.loss < 1", mentions: []string{`unknown prefix "METRICS"`}},
		"ErrMissingPrefix":       {in: ".loss < 1", mentions: []string{`".loss"`, "prefix"}},
		"ErrMissingKey":          {in: "metrics. < 1", mentions: []string{`after "metrics."`}},
		"ErrMissingKeyEnd":       {in: "metrics.", mentions: []string{`after "metrics."`, "end of input"}},
		"ErrEmptyQuotedKey":      {in: "metrics.`` < 1", mentions: []string{"empty key", "``"}},
		"ErrUnterminatedKey":     {in: "metrics.`loss < 1", mentions: []string{"unterminated quoted key", "`", "position 9"}},
		"ErrUnterminatedBareKey": {in: `"Run name = 'x'`, mentions: []string{"unterminated quoted key", "position 1"}},
		"ErrUnknownAttr":         {in: "loss < 1", mentions: []string{`unknown attribute "loss"`, "run_id", "metrics.loss"}},
		"ErrUnknownAttrPrefixed": {in: "attributes.name = 'x'", mentions: []string{`unknown attribute "name"`, "run_name", "position 12"}},
		"ErrAttrCase":            {in: "attributes.RUN_ID = 'x'", mentions: []string{`unknown attribute "RUN_ID"`}},
		"ErrRunNameUnquoted":     {in: "run name = 'x'", mentions: []string{`unknown attribute "run"`}},
		"ErrUnknownDatasetField": {in: "datasets.size = 'x'", mentions: []string{`unknown dataset field "size"`, "digest"}},
		"ErrExperimentAttr":      {in: "attributes.experiment_id = '1'", mentions: []string{`"experiment_id"`}},
		"ErrNoIdentifier":        {in: "= 'x'", mentions: []string{"expected an identifier", `"="`}},
		"ErrStringIdentifier":    {in: "'x' = 'x'", mentions: []string{"expected an identifier", `"'x'"`}},
		"ErrNumberAsIdentifier":  {in: "1 = 1", mentions: []string{`unknown attribute "1"`}},

		// Operators.
		"ErrDoubleEquals":       {in: "metrics.a == 1", mentions: []string{`unknown operator "=="`}},
		"ErrDiamond":            {in: "metrics.a <> 1", mentions: []string{`unknown operator "<>"`}},
		"ErrBang":               {in: "metrics.a ! 1", mentions: []string{`unknown operator "!"`}},
		"ErrEqLt":               {in: "metrics.a =< 1", mentions: []string{`unknown operator "=<"`}},
		"ErrWordOperator":       {in: "params.a CONTAINS 'x'", mentions: []string{`unknown operator "CONTAINS"`}},
		"ErrNotLike":            {in: "params.a NOT LIKE 'x'", mentions: []string{`expected IN after "NOT"`, `"LIKE"`}},
		"ErrNotAlone":           {in: "params.a NOT", mentions: []string{`expected IN after "NOT"`, "end of input"}},
		"ErrIsAlone":            {in: "params.a IS", mentions: []string{"expected NULL or NOT NULL", "end of input"}},
		"ErrIsValue":            {in: "params.a IS 'x'", mentions: []string{"expected NULL or NOT NULL", `"'x'"`}},
		"ErrIsNotAlone":         {in: "params.a IS NOT", mentions: []string{`expected NULL after "IS NOT"`}},
		"ErrIsNotValue":         {in: "params.a IS NOT 'x'", mentions: []string{`expected NULL after "IS NOT"`, `"'x'"`}},
		"ErrIsNullValue":        {in: "params.a IS NULL 'x'", mentions: []string{"expected AND", `"'x'"`}},
		"ErrValueForOperator":   {in: "params.a 'x'", mentions: []string{`expected an operator after "params.a"`, `"'x'"`}},
		"ErrMetricLike":         {in: "metrics.a LIKE '1'", mentions: []string{`operator "LIKE" is not supported for metric "a"`, ">="}},
		"ErrMetricIsNull":       {in: "metrics.a IS NULL", mentions: []string{`"IS NULL" is not supported for metric`}},
		"ErrMetricIn":           {in: "metrics.a IN ('1')", mentions: []string{`"IN" is not supported for metric`}},
		"ErrParamLt":            {in: "params.a < '1'", mentions: []string{`operator "<" is not supported for param "a"`, "LIKE"}},
		"ErrParamIn":            {in: "params.a IN ('1')", mentions: []string{`"IN" is not supported for param`}},
		"ErrTagNotIn":           {in: "tags.a NOT IN ('1')", mentions: []string{`"NOT IN" is not supported for tag`}},
		"ErrRunNameIn":          {in: "run_name IN ('a')", mentions: []string{`"IN" is not supported for attribute "run_name"`}},
		"ErrStatusIsNull":       {in: "status IS NULL", mentions: []string{`"IS NULL" is not supported for attribute "status"`}},
		"ErrStartTimeLike":      {in: "start_time LIKE '1'", mentions: []string{`"LIKE" is not supported for attribute "start_time"`}},
		"ErrCreatedAliasIn":     {in: "created IN ('1')", mentions: []string{`"IN" is not supported for attribute "start_time"`}},
		"ErrDatasetIsNull":      {in: "datasets.name IS NOT NULL", mentions: []string{`"IS NOT NULL" is not supported for dataset field "name"`}},
		"ErrDatasetLt":          {in: "datasets.name < 'a'", mentions: []string{`"<" is not supported for dataset field`}},
		"ErrRunIDGt":            {in: "run_id > 'a'", mentions: []string{`">" is not supported for attribute "run_id"`}},
		"ErrOperatorPosition":   {in: "metrics.abc LIKE 'x'", mentions: []string{"position 13"}},
		"ErrOperatorCaseInWord": {in: "params.aLIKE 'x'", mentions: []string{`after "params.aLIKE"`, `"'x'"`}},

		// Values.
		"ErrMetricString":        {in: "metrics.loss = 'x'", mentions: []string{"expected a number", `metric "loss"`, `"'x'"`, "position 16"}},
		"ErrMetricDoubleQuoted":  {in: `metrics.loss = "1"`, mentions: []string{"expected a number", `"\"1\""`}},
		"ErrMetricBareWord":      {in: "metrics.loss = abc", mentions: []string{"expected a number", `"abc"`}},
		"ErrMetricNaN":           {in: "metrics.loss = NaN", mentions: []string{"expected a number", `"NaN"`}},
		"ErrMetricInf":           {in: "metrics.loss = inf", mentions: []string{"expected a number", `"inf"`}},
		"ErrMetricList":          {in: "metrics.loss = (1)", mentions: []string{"only allowed after IN", `"("`}},
		"ErrParamNumber":         {in: "params.lr = 0.01", mentions: []string{"expected a quoted string", `param "lr"`, `"0.01"`}},
		"ErrParamBareWord":       {in: "params.opt = adam", mentions: []string{"expected a quoted string", `"adam"`}},
		"ErrParamBacktickValue":  {in: "params.opt = `adam`", mentions: []string{"expected a quoted string", "`adam`"}},
		"ErrParamBadNumber":      {in: "params.opt = 5x", mentions: []string{"expected a quoted string", `"5x"`}},
		"ErrStatusNumber":        {in: "status = 1", mentions: []string{"expected a quoted string", `attribute "status"`}},
		"ErrStartTimeString":     {in: "start_time > '1'", mentions: []string{"expected a number", `attribute "start_time"`}},
		"ErrDatasetNumber":       {in: "datasets.name = 1", mentions: []string{"expected a quoted string", `dataset field "name"`}},
		"ErrUnterminatedString":  {in: "params.a = 'abc", mentions: []string{"unterminated string", "'", "position 12"}},
		"ErrUnterminatedDoubled": {in: "params.a = 'it''s", mentions: []string{"unterminated string"}},
		"ErrBadNumberDots":       {in: "metrics.a = 1.2.3", mentions: []string{`invalid number "1.2.3"`}},
		"ErrBadNumberSuffix":     {in: "metrics.a = 5x", mentions: []string{`invalid number "5x"`}},
		"ErrBadNumberMinus":      {in: "metrics.a = 1-2", mentions: []string{`invalid number "1-2"`}},
		"ErrBadNumberSignOnly":   {in: "metrics.a = -", mentions: []string{`invalid number "-"`}},
		"ErrBadNumberDotOnly":    {in: "metrics.a = .", mentions: []string{`invalid number "."`}},
		"ErrBadNumberExponent":   {in: "metrics.a = 1e", mentions: []string{`invalid number "1e"`}},
		"ErrBadNumberExpSign":    {in: "metrics.a = 1e+", mentions: []string{`invalid number "1e+"`}},
		"ErrBadNumberSpacedSign": {in: "metrics.a = - 1", mentions: []string{`invalid number "-"`}},
		"ErrBadNumberHex":        {in: "metrics.a = 0x10", mentions: []string{`invalid number "0x10"`}},
		"ErrNumberOutOfRange":    {in: "metrics.a > 1e999", mentions: []string{`"1e999" is out of range`}},
		"ErrNumberPlusAfter":     {in: "metrics.a > 1+2", mentions: []string{"expected AND", `"+2"`}},

		// Lists.
		"ErrInNoList":          {in: "run_id IN 'a'", mentions: []string{"parenthesised list", `after "IN"`, `"'a'"`}},
		"ErrInMissing":         {in: "run_id IN", mentions: []string{"parenthesised list", "end of input"}},
		"ErrInEmpty":           {in: "run_id IN ()", mentions: []string{`empty list after "IN"`, "position 12"}},
		"ErrInEmptySpaced":     {in: "run_id NOT IN (  )", mentions: []string{`empty list after "NOT IN"`}},
		"ErrInTrailingComma":   {in: "run_id IN ('a',)", mentions: []string{"trailing comma", "position 16"}},
		"ErrInLeadingComma":    {in: "run_id IN (,'a')", mentions: []string{"quoted strings", `","`}},
		"ErrInDoubleComma":     {in: "run_id IN ('a',,'b')", mentions: []string{"quoted strings", `","`}},
		"ErrInNumber":          {in: "run_id IN (1, 2)", mentions: []string{"quoted strings", `"1"`}},
		"ErrInBareWord":        {in: "run_id IN (a)", mentions: []string{"quoted strings", `"a"`}},
		"ErrInMissingComma":    {in: "run_id IN ('a' 'b')", mentions: []string{`expected "," or ")"`, `"'b'"`}},
		"ErrInUnterminated":    {in: "run_id IN ('a', 'b'", mentions: []string{"unterminated list", "position 11"}},
		"ErrInUnterminatedStr": {in: "run_id IN ('a", mentions: []string{"unterminated string"}},
		"ErrInNested":          {in: "run_id IN (('a'))", mentions: []string{"quoted strings", `"("`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRunFilter(tc.in)
			if err == nil {
				t.Fatalf("ParseRunFilter(%q) = %v, want an error", tc.in, got)
			}
			assertInvalid(t, err, append([]string{`invalid filter "`}, tc.mentions...)...)
			if !reflect.DeepEqual(got, Filter{}) {
				t.Errorf("ParseRunFilter(%q) returned %#v with its error, want the zero Filter", tc.in, got)
			}
		})
	}
}

// operand is one right-hand side of the operator matrix.
type operand struct {
	text string
	kind ValueKind
	// first is how an error message shows the operand's first token.
	first string
}

var operands = []operand{
	{text: "'v'", kind: String, first: `"'v'"`},
	{text: "1.5", kind: Number, first: `"1.5"`},
	{text: "('a', 'b')", kind: List, first: `"("`},
	{text: "", kind: NoValue, first: "end of input"},
}

var allOps = []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe, OpLike, OpILike, OpIn, OpNotIn, OpIsNull, OpIsNotNull}

// wantKind is the value kind that op takes on a target whose scalar
// operators compare with scalar.
func wantKind(op Op, scalar ValueKind) ValueKind {
	switch op {
	case OpIn, OpNotIn:
		return List
	case OpIsNull, OpIsNotNull:
		return NoValue
	}
	return scalar
}

// matrixTarget is one left-hand side of the operator matrix, with the
// operators MLflow allows on it, written out independently of schema.go.
type matrixTarget struct {
	ident  string
	entity Entity
	key    string
	scalar ValueKind
	ops    []Op
}

// runMatrixTargets lists every run filter target.
var runMatrixTargets = []matrixTarget{
	{"metrics.m", Metric, "m", Number, []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}},
	{"params.p", Param, "p", String, []Op{OpEq, OpNe, OpLike, OpILike, OpIsNull, OpIsNotNull}},
	{"tags.t", Tag, "t", String, []Op{OpEq, OpNe, OpLike, OpILike, OpIsNull, OpIsNotNull}},
	{"attributes.run_id", Attribute, AttrRunID, String, []Op{OpEq, OpNe, OpLike, OpILike, OpIn, OpNotIn}},
	{"run_name", Attribute, AttrRunName, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"attributes.`Run name`", Attribute, AttrRunName, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"user_id", Attribute, AttrUserID, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"status", Attribute, AttrStatus, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"artifact_uri", Attribute, AttrArtifactURI, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"lifecycle_stage", Attribute, AttrLifecycleStage, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"start_time", Attribute, AttrStartTime, Number, []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}},
	{"end_time", Attribute, AttrEndTime, Number, []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}},
	{"created", Attribute, AttrStartTime, Number, []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}},
	{"datasets.name", Dataset, DatasetName, String, []Op{OpEq, OpNe, OpLike, OpILike, OpIn, OpNotIn}},
	{"datasets.digest", Dataset, DatasetDigest, String, []Op{OpEq, OpNe, OpLike, OpILike, OpIn, OpNotIn}},
	{"datasets.context", Dataset, DatasetContext, String, []Op{OpEq, OpNe, OpLike, OpILike, OpIn, OpNotIn}},
}

// experimentMatrixTargets lists every experiment filter target.
var experimentMatrixTargets = []matrixTarget{
	{"name", Attribute, AttrName, String, []Op{OpEq, OpNe, OpLike, OpILike}},
	{"attributes.experiment_id", Attribute, AttrExperimentID, String, []Op{OpEq, OpNe, OpIn, OpNotIn}},
	{"creation_time", Attribute, AttrCreationTime, Number, []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}},
	{"attr.last_update_time", Attribute, AttrLastUpdateTime, Number, []Op{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}},
	{"tags.t", Tag, "t", String, []Op{OpEq, OpNe, OpLike, OpILike, OpIsNull, OpIsNotNull}},
}

// runMatrix parses every target × operator × operand combination and checks
// that exactly the MLflow ones parse, and that each rejection names the
// operator or the operand at fault.
func runMatrix(t *testing.T, targets []matrixTarget, parse func(string) (Filter, error)) {
	for _, tg := range targets {
		for _, op := range allOps {
			for _, v := range operands {
				// Lower-case operators check keyword case-insensitivity.
				in := strings.TrimSpace(tg.ident + " " + strings.ToLower(string(op)) + " " + v.text)
				allowed := false
				for _, o := range tg.ops {
					allowed = allowed || o == op
				}
				ok := allowed && wantKind(op, tg.scalar) == v.kind
				name := fmt.Sprintf("Err/%s %s %s", tg.ident, op, v.text)
				if ok {
					name = fmt.Sprintf("OK/%s %s %s", tg.ident, op, v.text)
				}
				t.Run(name, func(t *testing.T) {
					got, err := parse(in)
					if !ok {
						if !allowed {
							assertInvalid(t, err, fmt.Sprintf("operator %q is not supported", string(op)))
						} else {
							assertInvalid(t, err, v.first)
						}
						return
					}
					if err != nil {
						t.Fatalf("parse(%q): %v", in, err)
					}
					want := cmp(tg.entity, tg.key, op, Value{})
					switch v.kind {
					case String:
						want.Value = str("v")
					case Number:
						want.Value = num(1.5)
					case List:
						want.Value = list("a", "b")
					}
					if !reflect.DeepEqual(got, filter(want)) {
						t.Fatalf("parse(%q)\n got %#v\nwant %#v", in, got, filter(want))
					}
					assertRoundTrip(t, got, parse)
				})
			}
		}
	}
}

func TestRunFilterMatrix(t *testing.T) {
	runMatrix(t, runMatrixTargets, ParseRunFilter)
}

func TestExperimentFilterMatrix(t *testing.T) {
	runMatrix(t, experimentMatrixTargets, ParseExperimentFilter)
}

func TestParseExperimentFilter(t *testing.T) {
	tests := map[string]struct {
		in   string
		want Filter
	}{
		"OKEmpty":           {in: "  ", want: Filter{}},
		"OKNameLike":        {in: "name LIKE 'bert-%'", want: filter(cmp(Attribute, AttrName, OpLike, str("bert-%")))},
		"OKNamePrefixed":    {in: "attribute.name = \"exp\"", want: filter(cmp(Attribute, AttrName, OpEq, str("exp")))},
		"OKNameQuoted":      {in: "attributes.`name` ilike 'x'", want: filter(cmp(Attribute, AttrName, OpILike, str("x")))},
		"OKCreationTime":    {in: "creation_time > 1700000000000", want: filter(cmp(Attribute, AttrCreationTime, OpGt, num(1700000000000)))},
		"OKLastUpdateTime":  {in: "last_update_time <= 5", want: filter(cmp(Attribute, AttrLastUpdateTime, OpLe, num(5)))},
		"OKExperimentIDIn":  {in: "experiment_id IN ('1', '2')", want: filter(cmp(Attribute, AttrExperimentID, OpIn, list("1", "2")))},
		"OKExperimentIDEq":  {in: "experiment_id = '0'", want: filter(cmp(Attribute, AttrExperimentID, OpEq, str("0")))},
		"OKTag":             {in: "tags.team = 'nlp'", want: filter(cmp(Tag, "team", OpEq, str("nlp")))},
		"OKTagSingular":     {in: "tag.`a b` IS NOT NULL", want: filter(cmp(Tag, "a b", OpIsNotNull, Value{}))},
		"OKTagDotted":       {in: "tags.mlflow.note.content LIKE '%x%'", want: filter(cmp(Tag, "mlflow.note.content", OpLike, str("%x%")))},
		"OKAndChain":        {in: "name != 'a' AND tags.x IS NULL and creation_time >= 0", want: filter(cmp(Attribute, AttrName, OpNe, str("a")), cmp(Tag, "x", OpIsNull, Value{}), cmp(Attribute, AttrCreationTime, OpGe, num(0)))},
		"OKNameWithKeyword": {in: "name = 'a OR b'", want: filter(cmp(Attribute, AttrName, OpEq, str("a OR b")))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExperimentFilter(tc.in)
			if err != nil {
				t.Fatalf("ParseExperimentFilter(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseExperimentFilter(%q)\n got %#v\nwant %#v", tc.in, got, tc.want)
			}
			assertRoundTrip(t, got, ParseExperimentFilter)
		})
	}
}

func TestParseExperimentFilterErrors(t *testing.T) {
	tests := map[string]struct {
		in       string
		mentions []string
	}{
		"ErrMetric":        {in: "metrics.loss < 1", mentions: []string{"experiments cannot be searched by metrics", `"metrics.loss"`}},
		"ErrParam":         {in: "params.lr = '1'", mentions: []string{"cannot be searched by params", `"params.lr"`}},
		"ErrParamAlias":    {in: "parameter.lr = '1'", mentions: []string{"cannot be searched by params", `"parameter.lr"`}},
		"ErrDataset":       {in: "datasets.name = 'x'", mentions: []string{"cannot be searched by datasets"}},
		"ErrRunPrefix":     {in: "run.name = 'x'", mentions: []string{`unknown prefix "run" for experiments`, "attributes."}},
		"ErrUnknownPrefix": {in: "foo.name = 'x'", mentions: []string{`unknown prefix "foo"`}},
		"ErrUnknownAttr":   {in: "run_id = 'x'", mentions: []string{`unknown attribute "run_id"`, "creation_time", "tags.team"}},
		"ErrNameCase":      {in: "Name = 'x'", mentions: []string{`unknown attribute "Name"`}},
		"ErrNameIn":        {in: "name IN ('x')", mentions: []string{`"IN" is not supported for attribute "name"`}},
		"ErrIDLike":        {in: "experiment_id LIKE '1%'", mentions: []string{`"LIKE" is not supported for attribute "experiment_id"`}},
		"ErrIDNumber":      {in: "experiment_id = 1", mentions: []string{"expected a quoted string", `"1"`}},
		"ErrTimeString":    {in: "creation_time > 'x'", mentions: []string{"expected a number", `"'x'"`}},
		"ErrTagLt":         {in: "tags.a < 'x'", mentions: []string{`"<" is not supported for tag "a"`}},
		"ErrOr":            {in: "name = 'a' OR name = 'b'", mentions: []string{`"OR" is not supported`}},
		"ErrParens":        {in: "(name = 'a')", mentions: []string{"parentheses"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExperimentFilter(tc.in)
			if err == nil {
				t.Fatalf("ParseExperimentFilter(%q) = %v, want an error", tc.in, got)
			}
			assertInvalid(t, err, append([]string{`invalid filter "`}, tc.mentions...)...)
		})
	}
}

func TestParseFilterErrorMessages(t *testing.T) {
	tests := map[string]struct {
		in   string
		want string
	}{
		"ErrExactMissingValue": {
			in:   "metrics.loss <",
			want: `invalid filter "metrics.loss <": expected a value after "<", got end of input at position 15`,
		},
		"ErrExactHintAfterPosition": {
			in:   "metrics.a LIKE 'x'",
			want: `invalid filter "metrics.a LIKE 'x'": operator "LIKE" is not supported for metric "a" at position 11; use one of =, !=, >, >=, <, <=`,
		},
		"ErrExactRunePosition": {
			in:   "params.`é` = 1",
			want: "invalid filter \"params.`é` = 1\": expected a quoted string such as 'value' for param \"é\", got \"1\" at position 14",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRunFilter(tc.in)
			assertInvalid(t, err)
			if err.Error() != tc.want {
				t.Fatalf("message\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestParseFilterLongInputIsShortened(t *testing.T) {
	in := "params.a = '" + strings.Repeat("x", 10_000)
	_, err := ParseRunFilter(in)
	assertInvalid(t, err, "unterminated string", "...")
	if n := len(err.Error()); n > 500 {
		t.Fatalf("message is %d bytes long, want it shortened: %s", n, err)
	}
}

func TestParseFilterNumbers(t *testing.T) {
	tests := map[string]struct {
		in   string
		want float64
	}{
		"OKInt":          {in: "42", want: 42},
		"OKNegative":     {in: "-42", want: -42},
		"OKNegativeZero": {in: "-0", want: math.Copysign(0, -1)},
		"OKFloat":        {in: "3.25", want: 3.25},
		"OKExp":          {in: "1e3", want: 1000},
		"OKNegExp":       {in: "-1.5e-3", want: -1.5e-3},
		"OKBig":          {in: "1e300", want: 1e300},
		"OKUnderflow":    {in: "1e-400", want: 0},
		"OKTimestamp":    {in: "1700000000123", want: 1700000000123},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRunFilter("metrics.m = " + tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if v := got.Clauses[0].Value; v.Kind != Number || v.Num != tc.want || math.Signbit(v.Num) != math.Signbit(tc.want) {
				t.Fatalf("value %#v, want number %v", v, tc.want)
			}
			assertRoundTrip(t, got, ParseRunFilter)
		})
	}
}

package wire

import (
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// TestDecodeTypeErrorsAsMLflow checks MLflow's wording of a field of the
// wrong type, the value written as Python's json.dumps writes it.
func TestDecodeTypeErrorsAsMLflow(t *testing.T) {
	type nested struct {
		Key   string `json:"key"`
		Value Float  `json:"value"`
	}
	type Embedded struct {
		Value Float `json:"value"`
	}
	var dst struct {
		Embedded
		Name    string   `json:"name"`
		Step    Int      `json:"step"`
		OrderBy []string `json:"order_by"`
		Metrics []nested `json:"metrics"`
		Flag    bool     `json:"flag"`
	}
	const tail = " See the API docs for more information about request parameters."
	for body, want := range map[string]string{
		`{"name": 123}`:                        "Invalid value 123 for parameter 'name' supplied:  Hint: Value was of type 'int'." + tail,
		`{"name": 1.5e3}`:                      "Invalid value 1.5e3 for parameter 'name' supplied:  Hint: Value was of type 'float'." + tail,
		`{"name": {"b": [1, "é"], "a": null}}`: `Invalid value {"a":null,"b":[1,"\u00e9"]} for parameter 'name' supplied:  Hint: Value was of type 'dict'.` + tail,
		`{"name": true}`:                       "Invalid value true for parameter 'name' supplied:  Hint: Value was of type 'bool'." + tail,
		`{"step": "abc"}`:                      `Invalid value "abc" for parameter 'step' supplied:  Hint: Value was of type 'str'.` + tail,
		`{"order_by": [1]}`:                    "Invalid value [1] for parameter 'order_by' supplied:  Hint: Value was of type 'list'." + tail,
		`{"value": "abc"}`:                     `Invalid value "abc" for parameter 'value' supplied:  Hint: Value was of type 'str'.` + tail,
		`{"flag": "yes"}`:                      `Invalid value "yes" for parameter 'flag' supplied:  Hint: Value was of type 'str'.` + tail,
		`{"metrics": [{"key": "a", "value": 1}, {"key": "b", "value": "x"}]}`: `Invalid value "x" for parameter 'metrics[1].value' supplied:  Hint: Value was of type 'str'.` + tail,
	} {
		err := Decode([]byte(body), &dst)
		if !errs.Is(err, errs.Invalid) || errs.MessageOf(err) != want {
			t.Errorf("%s: %v\nwant %s", body, err, want)
		}
	}
}

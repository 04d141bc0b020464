package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/pyjson"
)

// MLflow words a request field of the wrong type as
//
//	Invalid value <value> for parameter '<name>' supplied:  Hint: Value was
//	of type '<Python type>'. See the API docs for more information about
//	request parameters.
//
// with <value> as Python's json.dumps writes it (sorted keys, no spaces,
// ASCII only) and the Python type of the value as the JSON decoder reads it
// (str, int, float, bool, list, dict, NoneType). Sextant says the same, for
// a field at any depth ("metrics[1].value").

// apiDocs ends MLflow's messages about request parameters.
const apiDocs = " See the API docs for more information about request parameters."

// InvalidValueMessage is MLflow's message for the value v (a JSON value
// decoded with UseNumber, or a Go string, int64, float64 or bool) of the
// parameter param.
func InvalidValueMessage(param string, v any) string {
	return fmt.Sprintf("Invalid value %s for parameter '%s' supplied:  Hint: Value was of type '%s'.%s", PythonJSON(v), param, pythonType(v), apiDocs)
}

// InvalidValue is InvalidValueMessage as an errs.Invalid error.
func InvalidValue(param string, v any) error {
	return invalid("%s", InvalidValueMessage(param, v))
}

// pythonType is the name of the Python type json.loads gives v.
func pythonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "NoneType"
	case string:
		return "str"
	case bool:
		return "bool"
	case int, int64:
		return "int"
	case float64:
		return "float"
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return "float"
		}
		return "int"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return "object"
}

// PythonJSON writes v as Python's json.dumps(v, sort_keys=True,
// separators=(",", ":")) does.
func PythonJSON(v any) string {
	var b strings.Builder
	appendPythonJSON(&b, v)
	return b.String()
}

func appendPythonJSON(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		pyjson.WriteQuote(b, v)
	case json.Number:
		b.WriteString(string(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case int:
		b.WriteString(strconv.Itoa(v))
	case float64:
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			appendPythonJSON(b, x)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			pyjson.WriteQuote(b, k)
			b.WriteByte(':')
			appendPythonJSON(b, v[k])
		}
		b.WriteByte('}')
	default:
		fmt.Fprint(b, v)
	}
}

// typeError finds, in body, the value that a json.UnmarshalTypeError is
// about and words the error as MLflow does. Go names the field by its path
// without array indices ("metrics.value"); the first element of each array
// on the path whose value does not decode into the field's type is the one.
func typeError(body []byte, te *json.UnmarshalTypeError) (error, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil || te.Type == nil {
		return nil, false
	}
	var find func(v any, fields []string, at string) (any, string, bool)
	find = func(v any, fields []string, at string) (any, string, bool) {
		if len(fields) == 0 {
			raw, err := json.Marshal(v)
			if err != nil || json.Unmarshal(raw, reflect.New(te.Type).Interface()) == nil {
				return nil, "", false
			}
			return v, at, true
		}
		switch v := v.(type) {
		case map[string]any:
			x, ok := v[fields[0]]
			if !ok {
				// An embedded struct's name (MetricIn.value) is not
				// in the document.
				return find(v, fields[1:], at)
			}
			name := fields[0]
			if at != "" {
				name = at + "." + name
			}
			return find(x, fields[1:], name)
		case []any:
			for i, x := range v {
				if got, p, ok := find(x, fields, at+"["+strconv.Itoa(i)+"]"); ok {
					return got, p, true
				}
			}
		}
		return nil, "", false
	}
	v, p, ok := find(doc, strings.Split(te.Field, "."), "")
	if !ok {
		return nil, false
	}
	// A []string field given [1] stops here, at the list, which MLflow
	// names too ("Invalid value [1] for parameter 'order_by' ...").
	return InvalidValue(p, v), true
}

// decodeError is DecodeError with the request body, so that a value of the
// wrong type is worded as MLflow words it.
func decodeError(body []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		if e, ok := typeError(body, te); ok {
			return e
		}
	}
	return DecodeError(err)
}

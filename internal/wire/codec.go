package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// The codec: requests decode strictly (unknown fields, wrong types and
// malformed JSON are errs.Invalid errors that say what was wrong, because a
// silently ignored field is a silently lost setting), numbers accept what
// protobuf's JSON mapping allows (numeric strings for integers, "NaN" and
// "Infinity" for floats, names or numbers for enums), and the hand-written
// encoders share one string escaper and one float format.

func invalid(format string, args ...any) error {
	return errs.Errorf(errs.Invalid, format, args...)
}

// Decode decodes body strictly into dst: an unknown field, a value of the
// wrong type, malformed JSON or data after the value is errs.Invalid with a
// message for the client.
func Decode(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(body, err)
	}
	if dec.More() {
		return invalid("malformed JSON: unexpected data after the top-level value")
	}
	return nil
}

// DecodeError turns an error of encoding/json into an errs.Invalid error
// with a message for the client; an *errs.Error passes through.
func DecodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return invalid("malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return invalid("malformed request: expected a JSON object, got %s", te.Value)
		}
		return invalid("Invalid value for parameter '%s': expected %s, got %s", field, typeName(te.Type.String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid("malformed JSON: unexpected end of input")
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return invalid("unknown field %s in request: check the field name against the MLflow REST API", f)
	}
	return invalid("malformed request: %s", strings.TrimPrefix(msg, "json: "))
}

func typeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "wire.Int", "int64", "int32", "int":
		return "an integer"
	case "wire.Float", "float64":
		return "a number"
	case "wire.Enum":
		return "an enum name"
	case "bool":
		return "a boolean"
	}
	if strings.HasPrefix(goType, "[]") {
		return "an array"
	}
	return "an object"
}

// Int is an int64 that accepts a JSON number or a numeric string, as
// protobuf JSON does. It remembers whether it was set.
type Int struct {
	V   int64
	Set bool
}

// NewInt returns an Int set to v.
func NewInt(v int64) Int { return Int{V: v, Set: true} }

// MarshalJSON implements json.Marshaler: the number, or null when not set
// (with the omitzero option, not set is left out).
func (f Int) MarshalJSON() ([]byte, error) {
	if !f.Set {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, f.V, 10), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Int) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Accept integral floats such as 1.0 or 1e3, which some JSON
		// encoders produce; refuse fractions.
		fv, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || fv != math.Trunc(fv) || math.Abs(fv) > 1<<63 {
			return typeErr(b, reflect.TypeFor[Int]())
		}
		v = int64(fv)
	}
	f.V, f.Set = v, true
	return nil
}

// Float is a float64 that accepts a JSON number, a numeric string, and
// the strings "NaN", "Infinity" and "-Infinity" that MLflow uses for
// values JSON cannot hold.
type Float struct {
	V   float64
	Set bool
	// Huge is set for a number beyond float64's range (1e400), read as
	// ±Inf; metrics store it so (MLflow clamps it), GPU readings refuse
	// it.
	Huge bool
}

// MarshalJSON implements json.Marshaler: the number as AppendFloat writes
// it, or null when not set.
func (f Float) MarshalJSON() ([]byte, error) {
	if !f.Set {
		return []byte("null"), nil
	}
	return AppendFloat(nil, f.V), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN", "nan":
			f.V, f.Set = math.NaN(), true
			return nil
		case "Infinity", "inf", "+Infinity":
			f.V, f.Set = math.Inf(1), true
			return nil
		case "-Infinity", "-inf":
			f.V, f.Set = math.Inf(-1), true
			return nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return typeErr(b, reflect.TypeFor[Float]())
		}
		f.V, f.Set = v, true
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// Out of float64 range: MLflow clamps to ±max float; we store ±Inf.
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			f.V, f.Set, f.Huge = v, true, math.IsInf(v, 0)
			return nil
		}
		return typeErr(b, reflect.TypeFor[Float]())
	}
	f.V, f.Set = v, true
	return nil
}

// typeErr reports a value of the wrong type the way encoding/json does, so
// that the decoder adds the field's path to it.
func typeErr(b []byte, t reflect.Type) error {
	v := "string " + errs.Truncate(string(b), 60)
	switch {
	case len(b) == 0:
		v = "nothing"
	case b[0] == 't' || b[0] == 'f':
		v = "bool"
	case b[0] == '[':
		v = "array"
	case b[0] == '{':
		v = "object"
	case b[0] != '"':
		v = "number " + errs.Truncate(string(b), 60)
	}
	return &json.UnmarshalTypeError{Value: v, Type: t}
}

// Enum is an enum that accepts its name or its number.
type Enum struct {
	Name string
	Num  int64
	Set  bool
}

// MarshalJSON implements json.Marshaler: the name when there is one, else
// the number; null when not set.
func (f Enum) MarshalJSON() ([]byte, error) {
	switch {
	case !f.Set:
		return []byte("null"), nil
	case f.Name != "":
		return AppendString(nil, f.Name), nil
	}
	return strconv.AppendInt(nil, f.Num, 10), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Enum) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &f.Name); err != nil {
			return err
		}
		f.Set = true
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return typeErr(b, reflect.TypeFor[Enum]())
	}
	f.Num, f.Set = v, true
	return nil
}

// Resolve maps the enum to its number using names (name -> number); not
// set is 0, an unknown name or number errs.Invalid naming field.
func (f Enum) Resolve(field string, names map[string]int64) (int64, error) {
	if !f.Set {
		return 0, nil
	}
	if f.Name != "" {
		if v, ok := names[f.Name]; ok {
			return v, nil
		}
		if n, err := strconv.ParseInt(f.Name, 10, 32); err == nil {
			f.Num = n
		} else {
			return 0, invalid("Invalid value '%s' for parameter '%s': expected one of %s", errs.Truncate(f.Name, 60), field, enumList(names))
		}
	}
	for _, v := range names {
		if v == f.Num {
			return v, nil
		}
	}
	return 0, invalid("Invalid value %d for parameter '%s': expected one of %s", f.Num, field, enumList(names))
}

func enumList(names map[string]int64) string {
	var parts []string
	for n := range names {
		parts = append(parts, n)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

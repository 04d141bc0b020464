package tracking

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// invalidf returns an errs.Invalid error with a formatted message.
func invalidf(format string, args ...any) error {
	return errs.Errorf(errs.Invalid, format, args...)
}

// ValidateKey checks a metric, param or tag key the way MLflow does:
// letters, digits, '_', '-', '.', ' ', '/' and ':' only, at most maxLen
// characters, and a clean relative path (no "a//b", "./a", "../a", "/a",
// or trailing '/').
func ValidateKey(kind, key string, maxLen int) error {
	if key == "" {
		return invalidf("Missing value for required parameter 'key'. See the API docs for more information about request parameters.")
	}
	if n := utf8.RuneCountInString(key); n > maxLen {
		return invalidf("%s key '%s' has length %d, which exceeds the limit of %d", kind, errs.Truncate(key, 80), n, maxLen)
	}
	for _, r := range key {
		if !keyRune(r) {
			return invalidf("Invalid %s name: '%s'. Names may only contain alphanumerics, underscores (_), dashes (-), periods (.), spaces ( ), colons (:) and slashes (/)", kind, errs.Truncate(key, 80))
		}
	}
	if path.Clean(key) != key || key == "." || strings.HasPrefix(key, "..") || strings.HasPrefix(key, "/") {
		return invalidf("Invalid %s name: '%s'. Names cannot resolve to a different path when normalized (no '//', '/./', '../', leading or trailing '/')", kind, errs.Truncate(key, 80))
	}
	return nil
}

func keyRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	case r == '_' || r == '-' || r == '.' || r == ' ' || r == '/' || r == ':':
		return true
	}
	// MLflow's \w matches Unicode letters and digits too.
	return r > 127 && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// ValidateValueLength checks a param or tag value against its limit.
func ValidateValueLength(kind, key, value string, maxLen int) error {
	if !utf8.ValidString(value) {
		return invalidf("%s '%s' has a value that is not valid UTF-8", kind, errs.Truncate(key, 80))
	}
	if n := utf8.RuneCountInString(value); n > maxLen {
		return invalidf("limit exceeded: %s '%s' has a value of length %d, which exceeds the limit of %d characters", kind, errs.Truncate(key, 80), n, maxLen)
	}
	return nil
}

// ValidateRunID checks the shape of a run id.
func ValidateRunID(id string) error {
	if id == "" {
		return invalidf("Missing value for required parameter 'run_id'. See the API docs for more information about request parameters.")
	}
	if !idShape(id, 256) {
		return invalidf("Invalid run ID: '%s'", errs.Truncate(id, 80))
	}
	return nil
}

// ValidateExperimentID checks the shape of an experiment id.
func ValidateExperimentID(id string) error {
	if id == "" {
		return invalidf("Missing value for required parameter 'experiment_id'. See the API docs for more information about request parameters.")
	}
	if !idShape(id, 64) {
		return invalidf("Invalid experiment ID: '%s'", errs.Truncate(id, 80))
	}
	return nil
}

// idShape matches MLflow's ^[a-zA-Z0-9][\w\-]{0,n-1}$.
func idShape(id string, n int) bool {
	if len(id) == 0 || len(id) > n {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return false
		}
		if !alnum && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// validateMetric checks one metric point; i is its index in a batch, or -1.
// keyChecked says m.Key already passed ValidateKey (a batch repeats a few
// keys a thousand times). The message's prefix is made only for an error:
// this runs for every point of every log-batch.
func (l Limits) validateMetric(m *Metric, i int, keyChecked bool) error {
	if !keyChecked {
		if err := ValidateKey("metric", m.Key, l.KeyLength); err != nil {
			return err
		}
	}
	where := func() string {
		if i < 0 {
			return "metric"
		}
		return fmt.Sprintf("metrics[%d]", i)
	}
	// Negative steps are valid, as in MLflow (a warm-up logged before step
	// 0, for one); the bound is symmetric.
	if m.Step > l.MaxStep || m.Step < -l.MaxStep {
		return invalidf("%s '%s': step %d is outside the accepted range -%d to %d", where(), m.Key, m.Step, l.MaxStep, l.MaxStep)
	}
	if m.TimestampMs < 0 {
		return invalidf("%s '%s': timestamp %d is negative; timestamps are milliseconds since the Unix epoch", where(), m.Key, m.TimestampMs)
	}
	if len(m.DatasetName) > 500 || len(m.DatasetDigest) > 36 || len(m.ModelID) > 256 {
		return invalidf("%s '%s': dataset_name (at most 500), dataset_digest (at most 36) or model_id (at most 256) is too long", where(), m.Key)
	}
	// NaN and ±Inf are valid values: MLflow stores them.
	return nil
}

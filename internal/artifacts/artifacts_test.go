package artifacts

import (
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// TestInvalidPathWholeCharacters checks that the error quoting a long
// path cuts it between characters: a cut at byte 200 split the three-byte
// 日 there, and %q showed its first byte as \xe6.
func TestInvalidPathWholeCharacters(t *testing.T) {
	p := "/" + strings.Repeat("a", 198) + "日本語"
	_, err := CleanPath(p)
	msg := errs.MessageOf(err)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(msg, `aaaa..."`) || strings.Contains(msg, `\x`) {
		t.Errorf("CleanPath: %q, want an invalid error quoting the path cut before 日", msg)
	}
}

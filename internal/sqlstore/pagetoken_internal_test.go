package sqlstore

import (
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// TestOffsetPageTokens pins each offset-paged search's tokens as they are
// spelled on the wire, so that tokens handed out before an upgrade read
// after it, and the errors clients see for tokens that do not.
func TestOffsetPageTokens(t *testing.T) {
	const fp = "0123456789ab"
	for name, c := range map[string]struct {
		paging offsetPaging
		token  string // the token of offset 3 of the query fp
		noFP   string // a token of offset 7 without a fingerprint
		noFPOK bool
		other  string // the error of a token of another query
	}{
		"Experiments": {experimentPaging, "eyJvZmZzZXQiOjMsInEiOiIwMTIzNDU2Nzg5YWIifQ==", "eyJvZmZzZXQiOjd9", true,
			"page_token belongs to a different search (filter, order_by or view_type changed)"},
		"LoggedModels": {loggedModelPaging, "eyJvZmZzZXQiOjMsInEiOiIwMTIzNDU2Nzg5YWIifQ", "eyJvZmZzZXQiOjd9", false,
			"page_token belongs to a different search (experiment_ids, filter, datasets or order_by changed)"},
		"Registry": {registryPaging, "eyJvZmZzZXQiOjMsInEiOiIwMTIzNDU2Nzg5YWIifQ", "eyJvZmZzZXQiOjd9", false,
			"page_token belongs to a different search (filter or order_by changed)"},
	} {
		t.Run(name, func(t *testing.T) {
			first, err := c.paging.page("", fp, 3)
			if err != nil {
				t.Fatal(err)
			}
			if n, next := first.cut(3); n != 3 || next != "" {
				t.Errorf("a last page of 3: kept %d, next %q", n, next)
			}
			n, next := first.cut(4)
			if n != 3 || next != c.token {
				t.Errorf("a page of 3 of more: kept %d, next %q, want 3, %q", n, next, c.token)
			}
			second, err := c.paging.page(next, fp, 3)
			if err != nil {
				t.Fatal(err)
			}
			if got := second.limitArgs(); got[0] != 4 || got[1] != 3 {
				t.Errorf("the second page reads LIMIT %v OFFSET %v, want 4, 3", got[0], got[1])
			}
			if _, err := c.paging.page(next, "ba9876543210", 3); errs.CodeOf(err) != errs.Invalid || errs.MessageOf(err) != c.other {
				t.Errorf("a token of another query: %v, want %q", err, c.other)
			}
			pg, err := c.paging.page(c.noFP, fp, 3)
			if c.noFPOK && (err != nil || pg.offset != 7) {
				t.Errorf("a token without a fingerprint: offset %d, %v", pg.offset, err)
			}
			if !c.noFPOK && errs.MessageOf(err) != c.other {
				t.Errorf("a token without a fingerprint: %v, want %q", err, c.other)
			}
			for _, bad := range []string{"garbage!!", "eyJvZmZzZXQiOiAtNX0=", "AAAA"} {
				_, err := c.paging.page(bad, fp, 3)
				if want := `invalid page_token "` + bad + `": pass back the next_page_token of the previous page unchanged`; errs.CodeOf(err) != errs.Invalid || errs.MessageOf(err) != want {
					t.Errorf("token %q: %v, want %q", bad, err, want)
				}
			}
		})
	}
}

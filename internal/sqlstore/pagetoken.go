package sqlstore

import (
	"encoding/base64"
	"encoding/json"

	"github.com/sextant/sextant/internal/tracking"
)

// offsetToken is the page token of the searches paged by offset
// (experiments, logged models, registered models and model versions):
// the offset of the next page plus a fingerprint of the query it belongs
// to, as JSON in base64. Runs are paged by keyset instead (runsearch/runs.go).
type offsetToken struct {
	Offset int    `json:"offset"`
	Query  string `json:"q,omitempty"`
}

// offsetPaging is how one search spells and checks its offset page
// tokens. Its fields keep each search's tokens as they have always been,
// so that a token handed out before an upgrade still reads after it.
type offsetPaging struct {
	// enc encodes the token's JSON.
	enc *base64.Encoding
	// changed names the request fields whose change makes another
	// search, for the error about a token of another search.
	changed string
	// unfingerprinted accepts a token without a fingerprint as one of
	// this search.
	unfingerprinted bool
}

var (
	experimentPaging  = offsetPaging{enc: base64.StdEncoding, changed: "filter, order_by or view_type", unfingerprinted: true}
	loggedModelPaging = offsetPaging{enc: base64.RawURLEncoding, changed: "experiment_ids, filter, datasets or order_by"}
	registryPaging    = offsetPaging{enc: base64.RawURLEncoding, changed: "filter or order_by"}
)

// offsetPage is one page of a search paged by offset: it reads
// max+1 rows from offset (pageArgs) and keeps max of them (cut).
type offsetPage struct {
	paging      offsetPaging
	fingerprint string
	offset, max int
}

// page reads token ("" for the first page) as a page of max rows of the
// query with fingerprint. A token that does not decode, or that another
// query made, is a tracking error for the client.
func (p offsetPaging) page(token, fingerprint string, max int) (offsetPage, error) {
	pg := offsetPage{paging: p, fingerprint: fingerprint, max: max}
	if token == "" {
		return pg, nil
	}
	var t offsetToken
	b, err := p.enc.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Offset < 0 {
		return offsetPage{}, tracking.BadPageToken(token, "")
	}
	if t.Query != fingerprint && (t.Query != "" || !p.unfingerprinted) {
		return offsetPage{}, tracking.PageTokenOfOtherSearch(p.changed)
	}
	pg.offset = t.Offset
	return pg, nil
}

// limitArgs are the arguments of the query's trailing "LIMIT ? OFFSET ?":
// one row more than the page, to tell whether another page follows.
func (pg offsetPage) limitArgs() []any {
	return []any{pg.max + 1, pg.offset}
}

// cut takes the n rows the query returned and says how many of them make
// the page, and the token of the next page ("" when this page is the
// last).
func (pg offsetPage) cut(n int) (int, string) {
	if n <= pg.max {
		return n, ""
	}
	b, _ := json.Marshal(offsetToken{Offset: pg.offset + pg.max, Query: pg.fingerprint})
	return pg.max, pg.paging.enc.EncodeToString(b)
}

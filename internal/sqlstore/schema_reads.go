package sqlstore

// readsMigrations are the indexes (and the tables they need) that keep
// reads and searches from scanning: chunk listings that read an index
// alone, and run searches that start from the most selective filter. They
// are a component of their own (see migrate.go), after tracking, whose
// tables they index.
var readsMigrations = []string{
	// 1: chunk listings in (min_step, max_step) order from the index
	// alone; it serves every lookup the index on (series_id, min_step) did.
	`
CREATE INDEX metric_chunks_span ON metric_chunks (series_id, min_step, max_step);
DROP INDEX metric_chunks_series;
`,
}

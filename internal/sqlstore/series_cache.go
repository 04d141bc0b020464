package sqlstore

// seriesCache keeps the metric_series rows the writer read or wrote, by
// run and key, so that a request of a run that goes on logging does not
// read its series back: that read was a tenth of the writer's work under
// the ingestion benchmark. Only the writer's loop goroutine uses it.
//
// It holds what the database holds once the transaction in flight
// commits. Rows an op read or wrote wait in op until the op's savepoint is
// released, then in group until the transaction commits; a rolled-back op
// or transaction drops them. Compaction's swaps change a series'
// small_chunks and forget it. A commit by any other connection (another
// process on the file, a vacuum step) changes the file's data_version,
// which every transaction reads first, and the cache is dropped. On
// PostgreSQL, where replicas write the same rows, there is no cache.
type seriesCache struct {
	rows      map[seriesKey]seriesRow
	byID      map[int64]seriesKey // the keys of rows, by series id
	group, op map[seriesKey]seriesRow
	version   int64 // the data_version the rows were valid at
}

type seriesKey struct {
	runPK int64
	key   string
}

// maxCachedSeries bounds the rows kept (a few hundred bytes each); past
// it the cache starts over.
const maxCachedSeries = 1 << 16

func newSeriesCache() *seriesCache {
	return &seriesCache{
		rows:  map[seriesKey]seriesRow{},
		byID:  map[int64]seriesKey{},
		group: map[seriesKey]seriesRow{},
		op:    map[seriesKey]seriesRow{},
	}
}

// get returns the row of k as the transaction in flight sees it.
func (c *seriesCache) get(k seriesKey) (seriesRow, bool) {
	if r, ok := c.op[k]; ok {
		return r, true
	}
	if r, ok := c.group[k]; ok {
		return r, true
	}
	r, ok := c.rows[k]
	return r, ok
}

// put records the row of k as the op in flight left it.
func (c *seriesCache) put(k seriesKey, r seriesRow) {
	r.isNew, r.dirty, r.lastSmall = false, false, 0
	c.op[k] = r
}

// forget drops series id wherever it is held.
func (c *seriesCache) forget(id int64) {
	for _, m := range []map[seriesKey]seriesRow{c.op, c.group} {
		for k, r := range m {
			if r.id == id {
				delete(m, k)
			}
		}
	}
	if k, ok := c.byID[id]; ok {
		delete(c.rows, k)
		delete(c.byID, id)
	}
}

// opDone ends the op in flight: what it recorded counts from now on in
// its transaction if it succeeded (ok), and is dropped if it rolled back.
// Unless clean (its rollback or release failed, and the transaction may
// hold some of its writes), everything is dropped.
func (c *seriesCache) opDone(ok, clean bool) {
	switch {
	case !clean:
		c.drop()
	case ok:
		for k, r := range c.op {
			c.group[k] = r
		}
	}
	clear(c.op)
}

// groupDone ends the transaction: what its ops recorded is the database's
// if it committed. A failed commit (rare: a full disk, another replica)
// drops everything.
func (c *seriesCache) groupDone(committed bool) {
	if !committed {
		c.drop()
		return
	}
	if len(c.rows)+len(c.group) > maxCachedSeries {
		clear(c.rows)
		clear(c.byID)
	}
	for k, r := range c.group {
		c.rows[k] = r
		c.byID[r.id] = k
	}
	clear(c.group)
}

// begin starts a transaction that reads the file at data_version v (-1:
// unknown).
func (c *seriesCache) begin(v int64) {
	if v != c.version || v < 0 {
		c.drop()
		c.version = v
	}
}

// drop forgets everything.
func (c *seriesCache) drop() {
	clear(c.rows)
	clear(c.byID)
	clear(c.group)
	clear(c.op)
}

package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The store's SQL is written once, with SQLite's ? placeholders and
// booleans as integers. On
// PostgreSQL the connections rewrite them to $1, $2, ... as a statement is
// prepared or run, so that the call sites need not know the dialect.

// openPostgres opens a connection pool whose statements use ? placeholders.
func openPostgres(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	// PostgreSQL compiles a query with LLVM when its estimated cost passes
	// jit_above_cost. A search's estimate counts every run its correlated
	// clauses could test (millions at 100,000 runs) while LIMIT stops it
	// after a page: compiling took 290 ms of a 370 ms search. Every query
	// here is short; a database URL that sets jit keeps its own choice.
	if _, ok := cfg.RuntimeParams["jit"]; !ok {
		cfg.RuntimeParams["jit"] = "off"
	}
	return sql.OpenDB(qmarkConnector{stdlib.GetConnector(*cfg)}), nil
}

type qmarkConnector struct{ driver.Connector }

func (c qmarkConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &qmarkConn{conn.(pgxConn)}, nil
}

// pgxConn is what pgx's database/sql connection implements.
type pgxConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.NamedValueChecker
}

type qmarkConn struct{ c pgxConn }

func (q *qmarkConn) Prepare(query string) (driver.Stmt, error) { return q.c.Prepare(rebind(query)) }
func (q *qmarkConn) Close() error                              { return q.c.Close() }
func (q *qmarkConn) Begin() (driver.Tx, error)                 { return q.c.Begin() } //nolint:staticcheck // required by driver.Conn
func (q *qmarkConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return q.c.PrepareContext(ctx, rebind(query))
}
func (q *qmarkConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return q.c.BeginTx(ctx, opts)
}
func (q *qmarkConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return q.c.ExecContext(ctx, rebind(query), args)
}
func (q *qmarkConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return q.c.QueryContext(ctx, rebind(query), args)
}
func (q *qmarkConn) Ping(ctx context.Context) error         { return q.c.Ping(ctx) }
func (q *qmarkConn) ResetSession(ctx context.Context) error { return q.c.ResetSession(ctx) }

// CheckNamedValue stores Go booleans as 0 and 1: the schema keeps
// booleans in integer columns, as SQLite does.
func (q *qmarkConn) CheckNamedValue(v *driver.NamedValue) error {
	if b, ok := v.Value.(bool); ok {
		v.Value = int64(0)
		if b {
			v.Value = int64(1)
		}
		return nil
	}
	return q.c.CheckNamedValue(v)
}

// rebind rewrites ? placeholders to $n, leaving string literals, quoted
// identifiers and comments alone.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) {
				if query[j] == c {
					if j+1 < len(query) && query[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(query) {
				j = len(query) - 1
			}
			b.WriteString(query[i : j+1])
			i = j
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i - 1
			}
			b.WriteString(query[i : i+j+1])
			i += j
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

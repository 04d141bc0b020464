package sqlstore

import (
	"context"
	"fmt"
)

// ExecSQL runs statements on the writer connection, for tests that fill a
// database faster than the API can.
func (s *Store) ExecSQL(ctx context.Context, stmts ...string) error {
	return s.w.exclusive(ctx, func() error {
		for _, q := range stmts {
			if _, err := s.wdb.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
}

package sqlstore

import "context"

// ExecForTest runs a statement in the writer, for tests that set up what an
// older version of Sextant left in the database.
func (s *Store) ExecForTest(ctx context.Context, q string, args ...any) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}

package sqlstore

import "context"

// Sextant has no purge yet: runs and experiments are deleted softly. These
// delete rows for good, as a future garbage collector of deleted runs and
// experiments will, so that tests can check what goes with them: a run's
// log and events (trigger or cascade) and the comments on it (trigger).

// PurgeRun deletes a run's row for good.
func (s *Store) PurgeRun(ctx context.Context, runID string) error {
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE run_id = ?`, runID)
		return sqlError(err, "purge run")
	})
}

// PurgeExperiment deletes an experiment's row and its runs' rows for
// good, in one transaction.
func (s *Store) PurgeExperiment(ctx context.Context, id string) error {
	n, err := parseExperimentID(id)
	if err != nil {
		return err
	}
	return s.w.do(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE experiment_id = ?`, n); err != nil {
			return sqlError(err, "purge the experiment's runs")
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM experiments WHERE experiment_id = ?`, n)
		return sqlError(err, "purge experiment")
	})
}

package tracking

import "context"

type patientKey struct{}

// Patient marks the writes made with ctx as able to wait a little (tens
// of milliseconds) to be committed together with other writes: the store
// may hold such a write briefly for others to join its transaction, which
// shares the commit's cost among them. A write still returns only once it
// is committed. Per-rank progress reports are patient: a thousand ranks
// post them, and nobody waits on them.
func Patient(ctx context.Context) context.Context {
	return context.WithValue(ctx, patientKey{}, true)
}

// IsPatient reports whether ctx was made by Patient.
func IsPatient(ctx context.Context) bool {
	v, _ := ctx.Value(patientKey{}).(bool)
	return v
}

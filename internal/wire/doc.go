// Package wire is Sextant's HTTP contract: the JSON shapes of the routes,
// the codec that reads and writes them, and the one table of error codes.
// The server (internal/httpapi) and the client (internal/client) both use
// it, so a shape is written once and the two sides cannot drift apart.
//
// It holds every shape of the routes Sextant owns (run logs, GPU samples,
// the workspace and its admin routes, comments, volumes and the Files API)
// and the MLflow shapes that both sides or the fast decoders share
// (experiments, runs, metrics, log-batch). MLflow shapes that only the
// server writes (registry, logged models, artifact listings) stay beside
// their handlers in httpapi; golden files recorded from the real mlflow
// client pin them (httpapi/testdata/mlflow).
//
// Hot requests are decoded by hand (log-batch, run-log appends, GPU
// samples) into the same types encoding/json fills; anything unusual
// falls back to the strict decoder, and fuzz tests check that the two give
// the same result or the same error for any input. Large answers are
// encoded by hand with AppendString, which writes what encoding/json
// writes.
//
// The package imports the domain packages, for the conversions, and the
// standard library; never net/http.
package wire

package tracking

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/pyjson"
)

// Model-version sources are checked as MLflow 3.17.2's server checks them
// (its past path-traversal advisories came through this field), with its
// messages, and each accepted form reads only what it names:
//
//   - models:/<model_id> with the same model_id: the logged model's files;
//   - models:/<name>/<version|stage|latest> and models:/<name>@<alias>: the
//     files of the registered version it resolves to (run_id and model_id,
//     when given, must be that version's);
//   - runs:/<run_id>/<path> with the same run_id: the run's artifacts at
//     path; a run that is not on this server is accepted, as MLflow accepts
//     it (a registry shared by teams whose runs live elsewhere), and the
//     source is handed back as it is;
//   - mlflow-artifacts:/<path> (no host): only inside the artifact root of
//     the run given as run_id or the logged model given as model_id;
//   - a local path or file: URI: only inside a local artifact root of that
//     run or model (Sextant's roots are mlflow-artifacts: ones unless the
//     operator set a local --artifact-root, so this refuses them);
//   - a URI that makes a server connect to the host it names (http, https,
//     mlflow-artifacts://host, ftp, sftp, hdfs, viewfs, r2, b2, abfss):
//     refused unless it is the host of the server's own artifact root;
//   - any other URI (s3://, gs://, ...) without relative path references:
//     stored as given. The server never reads it; the download URI hands it
//     to the client, which reads it with its own credentials.
//
// Everything that names a place is refused when it holds '..' (also
// percent-encoded), a NUL, '.' or empty segments, or a relative path.

// versionSource is what a model version's source resolved to.
type versionSource struct {
	source, runID, modelID string
	// storage is where the version's files are: what a download gets.
	storage string
}

// invalidSource is MLflow's refusal of a source that the run_id or
// model_id parameter (idName) does not vouch for.
func invalidSource(source, idName string) error {
	return invalidf("Invalid model version source: '%s'. The %s request parameter must identify the resource that contains the source.", source, idName)
}

// hostAddressedSchemes are the schemes whose URIs make a server connect to
// the host they name (MLflow 3.17.2's list).
var hostAddressedSchemes = map[string]bool{
	"ftp": true, "sftp": true, "hdfs": true, "viewfs": true, "http": true, "https": true,
	"mlflow-artifacts": true, "r2": true, "b2": true, "abfss": true,
}

// schemeFamilies are schemes that reach the same service as another.
var schemeFamilies = map[string]string{"viewfs": "hdfs", "https": "http", "mlflow-artifacts": "http"}

// defaultPorts are the ports a URI without one connects to.
var defaultPorts = map[string][]int{
	"ftp": {21}, "sftp": {22}, "http": {80}, "https": {443}, "mlflow-artifacts": {80, 443},
	"r2": {443}, "b2": {443}, "abfss": {443},
}

// uriParts is a URI split as Python's urllib.parse.urlsplit splits it,
// which is what MLflow's checks see.
type uriParts struct {
	scheme, netloc, path string
}

func splitURI(u string) uriParts {
	var p uriParts
	if i := strings.IndexByte(u, ':'); i > 0 && isSchemeName(u[:i]) {
		p.scheme, u = strings.ToLower(u[:i]), u[i+1:]
	}
	if rest, ok := strings.CutPrefix(u, "//"); ok {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		p.netloc, u = rest[:end], rest[end:]
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	p.path = u
	return p
}

func isSchemeName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !alpha {
			return false
		}
		if !alpha && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// hostTargets returns the (scheme family, host, port) places uri makes a
// server connect to, or nil when it names none.
func hostTargets(uri string) []string {
	p := splitURI(uri)
	if !hostAddressedSchemes[p.scheme] || (p.scheme == "mlflow-artifacts" && p.netloc == "") {
		return nil
	}
	if strings.ContainsAny(p.netloc, "\\ \t\r\n\f\v") {
		return []string{"malformed|" + p.netloc}
	}
	host := p.netloc
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	port := ""
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i >= 0 {
			host, port = host[1:i], strings.TrimPrefix(host[i+1:], ":")
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host, port = host[:i], host[i+1:]
	}
	family := p.scheme
	if f, ok := schemeFamilies[family]; ok {
		family = f
	}
	host = strings.ToLower(host)
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return []string{"malformed|" + p.netloc}
		}
		return []string{family + "|" + host + "|" + port}
	}
	ports := defaultPorts[p.scheme]
	if len(ports) == 0 {
		return []string{family + "|" + host + "|"}
	}
	var out []string
	for _, n := range ports {
		out = append(out, family+"|"+host+"|"+strconv.Itoa(n))
	}
	return out
}

// checkSourceHost refuses a source that would make a server connect to a
// host other than that of the server's own artifact root.
func (s *Service) checkSourceHost(source string) error {
	targets := hostTargets(source)
	if targets == nil {
		return nil
	}
	for _, t := range hostTargets(s.root) {
		if slices.Contains(targets, t) {
			return nil
		}
	}
	// MLflow's message, less its hint of an environment variable that
	// Sextant does not read.
	scheme := splitURI(source).scheme
	return invalidf("'source' cannot use the '%s' scheme: the '%s' scheme addresses a host other than the tracking server's configured artifact storage, so the server would connect to the host named in the URI.", scheme, scheme)
}

// unquotePlus decodes '+' and %XX escapes as Python's unquote_plus does,
// leaving malformed escapes as they are.
func unquotePlus(s string) string {
	if !strings.ContainsAny(s, "+%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			b.WriteByte(byte(v))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// checkNoRelativePath refuses a source whose path, once every layer of
// percent-encoding is decoded, is not a clean absolute path: a '..', '.'
// or empty segment, a NUL, or a relative path (MLflow's
// _validate_non_local_source_contains_relative_paths, without following
// symbolic links on the server's disk, which no source names).
func checkNoRelativePath(source string) error {
	decoded := source
	for {
		next := unquotePlus(decoded)
		if next == decoded {
			break
		}
		decoded = next
	}
	p := strings.TrimRight(splitURI(decoded).path, "/")
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	bad := strings.ContainsRune(p, 0) || slices.Contains(strings.Split(decoded, "/"), "..") ||
		!strings.HasPrefix(p, "/") || path.Clean(p) != p
	if bad {
		return invalidf("Invalid model version source: '%s'. If supplying a source as an http, https, local file path, ftp, objectstore, or mlflow-artifacts uri, an absolute path must be provided without relative path references present. Please provide an absolute path.", source)
	}
	return nil
}

// localPath returns the path of a local source (a path, or a file: URI)
// and whether source is one.
func localPath(source string) (string, bool, error) {
	p := splitURI(source)
	switch p.scheme {
	case "":
		return source, true, nil
	case "file":
		host := strings.ToLower(p.netloc)
		if host != "" && host != "." && !strings.HasPrefix(host, "localhost") && !strings.HasPrefix(host, "127.0.0.1") {
			return "", false, invalidf("%s is not a valid remote uri. For remote access on windows, please consider using a different scheme such as SMB (e.g. smb://<hostname>/<path>).", source)
		}
		return unquotePlus(strings.ReplaceAll(p.path, "+", "%2B")), true, nil
	}
	return "", false, nil
}

// within reports whether the local path p is root or inside it, both
// made absolute and clean.
func within(p, root string) bool {
	p, root = path.Clean("/"+p), path.Clean("/"+root)
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

// uriSegments returns a URI's scheme, authority (both lower case) and its
// path's non-empty segments, each fully percent-decoded.
func uriSegments(u string) (string, string, []string) {
	p := splitURI(u)
	var segs []string
	for _, s := range strings.Split(p.path, "/") {
		for {
			next := unquotePlus(strings.ReplaceAll(s, "+", "%2B"))
			if next == s {
				break
			}
			s = next
		}
		if s != "" {
			segs = append(segs, s)
		}
	}
	return p.scheme, strings.ToLower(p.netloc), segs
}

// withinRoot reports whether source lies inside the artifact root root:
// same scheme and authority, and root's segments a prefix of source's.
func withinRoot(source, root string) bool {
	ss, sa, sp := uriSegments(source)
	rs, ra, rp := uriSegments(root)
	return ss == rs && sa == ra && len(rp) > 0 && len(sp) >= len(rp) && slices.Equal(sp[:len(rp)], rp)
}

// isArtifactProxySource reports whether source is served by an MLflow
// artifact proxy: an mlflow-artifacts: URI, or http(s) through its route.
func isArtifactProxySource(source string) bool {
	scheme, _, segs := uriSegments(source)
	if scheme == "mlflow-artifacts" {
		return true
	}
	if scheme != "http" && scheme != "https" {
		return false
	}
	route := []string{"api", "2.0", "mlflow-artifacts", "artifacts"}
	for i := 0; i+len(route) <= len(segs); i++ {
		if slices.Equal(segs[i:i+len(route)], route) {
			return true
		}
	}
	return false
}

// modelURI is a parsed models:/ URI: a logged model's id, or a registered
// model's name with a version, a stage, an alias or none (the latest).
type modelURI struct {
	modelID, name, version, stage, alias string
}

// parseModelURI parses a models:/ URI as MLflow does; ok is false for a
// malformed one.
func parseModelURI(u string) (modelURI, bool) {
	p := u
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	parts := splitURI(p)
	if parts.scheme != "models" || !strings.HasPrefix(parts.path, "/") || len(parts.path) <= 1 {
		return modelURI{}, false
	}
	segs := strings.Split(strings.TrimLeft(parts.path, "/"), "/")
	if len(segs) > 2 || strings.TrimSpace(segs[0]) == "" {
		return modelURI{}, false
	}
	if len(segs) == 2 {
		name, suffix := segs[0], segs[1]
		switch {
		case strings.TrimSpace(suffix) == "":
			return modelURI{}, false
		case isDigits(suffix):
			return modelURI{name: name, version: suffix}, true
		case strings.EqualFold(suffix, "latest"):
			return modelURI{name: name}, true
		default:
			return modelURI{name: name, stage: suffix}, true
		}
	}
	if strings.Contains(parts.path, "@") {
		i := strings.LastIndexByte(segs[0], '@')
		if i < 0 || strings.TrimSpace(segs[0][i+1:]) == "" {
			return modelURI{}, false
		}
		return modelURI{name: segs[0][:i], alias: segs[0][i+1:]}, true
	}
	return modelURI{modelID: segs[0]}, true
}

// resolveRegisteredSource resolves a models:/<name>/... source to the
// version it names. Other sources come back as they are.
func (s *Service) resolveRegisteredSource(ctx context.Context, src versionSource) (versionSource, *ModelVersion, error) {
	p := splitURI(src.source)
	if p.scheme != "models" {
		return src, nil, nil
	}
	if p.netloc != "" {
		return src, nil, invalidf("Invalid model version source: '%s'. Registered model sources must use the active model registry.", src.source)
	}
	m, ok := parseModelURI(src.source)
	if !ok {
		return src, nil, invalidSource(src.source, "model_id")
	}
	if m.modelID != "" {
		return src, nil, nil
	}
	if _, err := s.GetRegisteredModel(ctx, m.name); err != nil {
		return src, nil, err
	}
	version := m.version
	switch {
	case m.alias != "":
		v, err := s.GetModelVersionByAlias(ctx, m.name, m.alias)
		if err != nil {
			return src, nil, err
		}
		version = v.Version
	case version == "":
		var stages []string
		if m.stage != "" {
			stages = []string{m.stage}
		}
		latest, err := s.LatestVersions(ctx, m.name, stages)
		if err != nil {
			return src, nil, err
		}
		best := int64(-1)
		for _, v := range latest {
			if n, err := strconv.ParseInt(v.Version, 10, 64); err == nil && n > best {
				best, version = n, v.Version
			}
		}
		if best < 0 {
			stage := ""
			if m.stage != "" {
				stage = fmt.Sprintf(" and stage '%s'", m.stage)
			}
			return src, nil, errs.Errorf(errs.NotFound, "No versions of model with name '%s'%s found", m.name, stage)
		}
	}
	v, err := s.GetModelVersion(ctx, m.name, version)
	if err != nil {
		return src, nil, err
	}
	if (src.runID != "" && src.runID != v.RunID) || (src.modelID != "" && src.modelID != v.ModelID) {
		return src, nil, invalidf("Invalid model version source: '%s'. The run_id and model_id request parameters must match the referenced model version.", src.source)
	}
	src.source = "models:/" + m.name + "/" + v.Version
	if src.runID == "" {
		src.runID = v.RunID
	}
	if src.modelID == "" {
		src.modelID = v.ModelID
	}
	src.storage = v.StorageLocation
	return src, v, nil
}

// checkVersionSource checks a create-model-version request's source,
// run_id and model_id as MLflow 3.17.2 does and returns what they resolve
// to (see the comment at the top of this file).
func (s *Service) checkVersionSource(ctx context.Context, source, runID, modelID string) (versionSource, error) {
	src := versionSource{source: source, runID: runID, modelID: modelID, storage: source}
	if err := s.checkSourceHost(source); err != nil {
		return src, err
	}
	src, registered, err := s.resolveRegisteredSource(ctx, src)
	if err != nil {
		return src, err
	}
	if src.modelID != "" {
		err = s.checkSourceModel(ctx, &src, registered != nil)
	} else {
		err = s.checkSourceRun(ctx, &src)
	}
	return src, err
}

// checkSourceRun is MLflow's check of a source vouched for by run_id.
func (s *Service) checkSourceRun(ctx context.Context, src *versionSource) error {
	getRun := func() (*Run, error) {
		if ValidateRunID(src.runID) != nil {
			return nil, invalidSource(src.source, "run_id")
		}
		r, err := s.GetRun(ctx, src.runID)
		if errs.Is(err, errs.NotFound) {
			return nil, invalidSource(src.source, "run_id")
		}
		return r, err
	}
	local, isLocal, err := localPath(src.source)
	if err != nil {
		return err
	}
	if isLocal {
		shown := src.source
		if src.runID != "" {
			r, err := getRun()
			if err != nil {
				return err
			}
			shown = path.Clean(local)
			if root, ok, _ := localPath(r.Info.ArtifactURI); ok && within(local, root) {
				return nil
			}
		}
		return invalidf("Invalid model version source: '%s'. To use a local path as a model version source, the run_id request parameter has to be specified and the local path has to be contained within the artifact directory of the run specified by the run_id.", shown)
	}
	if err := checkNoRelativePath(src.source); err != nil {
		return err
	}
	p := splitURI(src.source)
	switch p.scheme {
	case "runs":
		if p.netloc != "" {
			return invalidSource(src.source, "run_id")
		}
		if !strings.HasPrefix(p.path, "/") || len(p.path) <= 1 {
			return invalidf("Not a proper runs:/ URI: %s. Runs URIs must be of the form 'runs:/<run_id>/run-relative/path/to/artifact'", src.source)
		}
		id, rel, _ := strings.Cut(p.path[1:], "/")
		if src.runID == "" || id != src.runID {
			return invalidSource(src.source, "run_id")
		}
		// The run may live on another server: then the source is all
		// there is to hand back.
		if r, err := s.GetRun(ctx, id); err == nil {
			src.storage = strings.TrimRight(r.Info.ArtifactURI, "/")
			if rel = strings.Trim(rel, "/"); rel != "" {
				src.storage += "/" + rel
			}
		} else if !errs.Is(err, errs.NotFound) {
			return err
		}
		return nil
	case "models":
		if p.netloc != "" {
			return invalidSource(src.source, "model_id")
		}
		m, ok := parseModelURI(src.source)
		if !ok || m.modelID != "" {
			return invalidSource(src.source, "model_id")
		}
	}
	if isArtifactProxySource(src.source) {
		if src.runID == "" {
			return invalidSource(src.source, "run_id")
		}
		r, err := getRun()
		if err != nil {
			return err
		}
		if !withinRoot(src.source, r.Info.ArtifactURI) {
			return invalidSource(src.source, "run_id")
		}
	}
	return nil
}

// checkSourceModel is MLflow's check of a source vouched for by model_id.
// A logged model that is not on this server is NotFound (MLflow creates
// the version and then fails to tag the model: a 404 too).
func (s *Service) checkSourceModel(ctx context.Context, src *versionSource, registered bool) error {
	getModel := func() (*LoggedModel, error) {
		if validateModelID(src.modelID) != nil {
			return nil, invalidSource(src.source, "model_id")
		}
		m, err := s.GetLoggedModel(ctx, src.modelID, false)
		if errs.Is(err, errs.NotFound) {
			return nil, invalidSource(src.source, "model_id")
		}
		return m, err
	}
	local, isLocal, err := localPath(src.source)
	if err != nil {
		return err
	}
	if isLocal {
		m, err := getModel()
		if err != nil {
			return err
		}
		if root, ok, _ := localPath(m.ArtifactURI); ok && within(local, root) {
			return nil
		}
		return invalidf("Invalid model version source: '%s'. To use a local path as a model version source, the model_id request parameter has to be specified and the local path has to be contained within the artifact directory of the run specified by the model_id.", path.Clean(local))
	}
	if err := checkNoRelativePath(src.source); err != nil {
		return err
	}
	p := splitURI(src.source)
	switch p.scheme {
	case "models":
		if p.netloc != "" {
			return invalidSource(src.source, "model_id")
		}
		m, ok := parseModelURI(src.source)
		if !ok {
			return invalidSource(src.source, "model_id")
		}
		if m.modelID != "" {
			if m.modelID != src.modelID {
				return invalidSource(src.source, "model_id")
			}
			lm, err := s.GetLoggedModel(ctx, src.modelID, false)
			if err != nil {
				return err
			}
			src.storage = lm.ArtifactURI
			return nil
		}
		if registered {
			return nil
		}
	case "runs":
		return invalidSource(src.source, "model_id")
	}
	if isArtifactProxySource(src.source) {
		m, err := getModel()
		if err != nil {
			return err
		}
		if !withinRoot(src.source, m.ArtifactURI) {
			return invalidSource(src.source, "model_id")
		}
	}
	return nil
}

// modelVersionsTag is the logged-model tag that lists the registered
// versions made from it; its value is JSON as Python's json.dumps writes
// it: [{"name": "<name>", "version": <n>}, ...].
const modelVersionsTag = "mlflow.modelVersions"

// appendModelVersion returns the tag value old with {name, version} added
// (unless it is there already). A value that does not read as such a list
// is replaced.
func appendModelVersion(old, name, version string) string {
	type entry struct {
		Name    string          `json:"name"`
		Version json.RawMessage `json:"version"`
	}
	var list []entry
	if old != "" && json.Unmarshal([]byte(old), &list) != nil {
		list = nil
	}
	v := json.RawMessage(version)
	if !isDigits(version) {
		v = json.RawMessage(pyjson.Quote(version))
	}
	for _, e := range list {
		if e.Name == name && string(e.Version) == string(v) {
			return old
		}
	}
	list = append(list, entry{Name: name, Version: v})
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"name": `)
		b.WriteString(pyjson.Quote(e.Name))
		b.WriteString(`, "version": `)
		b.Write(e.Version)
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

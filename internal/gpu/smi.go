package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/errs"
)

// smiQueryFields are the --query-gpu fields the nvidia-smi source asks
// for. Drivers that do not know one (older ones lack mig.mode.current)
// refuse the whole query; OpenSMI then drops that field and asks again.
var smiQueryFields = []string{
	"index", "uuid", "name",
	"utilization.gpu", "utilization.memory",
	"memory.used", "memory.total",
	"temperature.gpu",
	"power.draw", "enforced.power.limit",
	"clocks.sm",
	"clocks.mem", "clocks.max.sm",
	"power.default_limit",
	// The same mask under its newer and its older name (drivers before 535
	// know only the second).
	"clocks_event_reasons.active", "clocks_throttle_reasons.active",
	"ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
	"mig.mode.current",
}

// smiAppFields are the --query-compute-apps fields.
var smiAppFields = []string{"gpu_uuid", "pid", "process_name", "used_memory"}

// SMIOptions configure the nvidia-smi source.
type SMIOptions struct {
	// Path is the nvidia-smi executable; empty means "nvidia-smi" on PATH.
	Path string
	// Timeout bounds one run of nvidia-smi (it can hang on a GPU in a bad
	// state); 0 means 5 s.
	Timeout time.Duration
}

// SMI is the nvidia-smi source: it runs `nvidia-smi --query-gpu=...
// --format=csv,nounits` and `--query-compute-apps=...` at each sample and
// parses the output by header name, so column order, units and
// unsupported fields do not matter.
type SMI struct {
	path    string
	timeout time.Duration
	fields  []string
}

var _ Source = (*SMI)(nil)

var errInvalidField = regexp.MustCompile(`Field "([^"]+)" is not a valid field to query`)

// OpenSMI finds nvidia-smi, learns which query fields its driver knows and
// checks that it lists at least one GPU.
func OpenSMI(ctx context.Context, opts SMIOptions) (*SMI, error) {
	if opts.Path == "" {
		opts.Path = "nvidia-smi"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	path, err := exec.LookPath(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	s := &SMI{path: path, timeout: opts.Timeout, fields: slices.Clone(smiQueryFields)}
	for range len(smiQueryFields) {
		out, err := s.run(ctx, "--query-gpu="+strings.Join(s.fields, ","))
		if err == nil || len(out) > 0 {
			gpus, perr := ParseQueryGPU(out)
			if perr == nil && len(gpus) > 0 {
				return s, nil
			}
		}
		m := errInvalidField.FindSubmatch(append(out, []byte(errText(err))...))
		if m == nil {
			if err == nil {
				err = errors.New("it lists no GPU")
			}
			return nil, fmt.Errorf("nvidia-smi: %w", err)
		}
		bad := string(m[1])
		i := slices.Index(s.fields, bad)
		if i < 0 || bad == "index" || bad == "uuid" {
			return nil, fmt.Errorf("nvidia-smi refuses field %q", bad)
		}
		s.fields = slices.Delete(s.fields, i, i+1)
	}
	return nil, errors.New("nvidia-smi: no query it accepts")
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Name implements Source.
func (s *SMI) Name() string { return "nvidia-smi" }

// Fields returns the --query-gpu fields in use.
func (s *SMI) Fields() []string { return slices.Clone(s.fields) }

// run runs nvidia-smi with a query argument and returns its standard
// output. A non-zero exit returns the output too: nvidia-smi still prints
// the GPUs it can read when one is lost.
func (s *SMI) run(ctx context.Context, query string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.path, query, "--format=csv,nounits")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = firstLine(stdout.String())
		}
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("nvidia-smi did not answer within %s", s.timeout)
		}
		return stdout.Bytes(), fmt.Errorf("%w: %s", err, cleanString(msg))
	}
	return stdout.Bytes(), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Sample implements Source.
func (s *SMI) Sample(ctx context.Context) (*Sample, error) {
	out, err := s.run(ctx, "--query-gpu="+strings.Join(s.fields, ","))
	gpus, perr := ParseQueryGPU(out)
	if len(gpus) == 0 {
		return nil, fmt.Errorf("nvidia-smi: %w", errors.Join(err, perr))
	}
	smp := &Sample{GPUs: gpus}
	// Processes are a bonus: their failure does not fail the sample.
	if aout, _ := s.run(ctx, "--query-compute-apps="+strings.Join(smiAppFields, ",")); len(aout) > 0 {
		smp.Processes, _ = ParseComputeApps(aout, gpus)
	}
	return smp, nil
}

// Close implements Source.
func (s *SMI) Close() error { return nil }

// smiColumns maps nvidia-smi header names (without their unit) to fields,
// in order of preference when a driver prints several.
var smiColumns = map[string]struct {
	field Field
	rank  int
}{
	"utilization.gpu":                       {FieldUtil, 0},
	"utilization.memory":                    {FieldMemUtil, 0},
	"memory.used":                           {FieldMemUsed, 0},
	"memory.total":                          {FieldMemTotal, 0},
	"temperature.gpu":                       {FieldTemp, 0},
	"power.draw":                            {FieldPower, 0},
	"power.draw.instant":                    {FieldPower, 1},
	"power.draw.average":                    {FieldPower, 2},
	"enforced.power.limit":                  {FieldPowerLimit, 0},
	"power.limit":                           {FieldPowerLimit, 1},
	"clocks.sm":                             {FieldSMClock, 0},
	"clocks.current.sm":                     {FieldSMClock, 0},
	"clocks.mem":                            {FieldMemClock, 0},
	"clocks.current.memory":                 {FieldMemClock, 0},
	"clocks.max.sm":                         {FieldSMClockMax, 0},
	"clocks.max.sm_clock":                   {FieldSMClockMax, 1},
	"power.default_limit":                   {FieldPowerLimitDefault, 0},
	"clocks_event_reasons.active":           {FieldThrottleReasons, 0},
	"clocks_throttle_reasons.active":        {FieldThrottleReasons, 1},
	"ecc.errors.corrected.volatile.total":   {FieldECCCorrected, 0},
	"ecc.errors.uncorrected.volatile.total": {FieldECCUncorrected, 0},
}

// header is one parsed CSV header cell: "memory.used [MiB]" has name
// "memory.used" and unit "MiB".
type header struct{ name, unit string }

func parseHeader(line string) []header {
	cells := splitCSV(line)
	hs := make([]header, len(cells))
	for i, c := range cells {
		name, unit := c, ""
		if j := strings.IndexByte(c, '['); j >= 0 {
			name = strings.TrimSpace(c[:j])
			unit = strings.TrimSuffix(strings.TrimSpace(c[j+1:]), "]")
		}
		hs[i] = header{strings.ToLower(name), unit}
	}
	return hs
}

func splitCSV(line string) []string {
	cells := strings.Split(strings.TrimRight(line, "\r"), ",")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// findHeader returns the index of the header line: the first line with a
// comma that names a column in known. Error lines nvidia-smi prints before
// the table are skipped.
func findHeader(lines []string, known func(string) bool) int {
	for i, l := range lines {
		for _, h := range parseHeader(l) {
			if known(h.name) {
				return i
			}
		}
	}
	return -1
}

// rowCells splits a data row into exactly n cells. Extra cells (a comma
// inside a name) are folded into the column at merge, or the row is refused.
func rowCells(line string, n, merge int) ([]string, bool) {
	cells := splitCSV(line)
	if len(cells) == n {
		return cells, true
	}
	if len(cells) < n || merge < 0 {
		return nil, false
	}
	extra := len(cells) - n
	joined := strings.Join(cells[merge:merge+extra+1], ", ")
	return slices.Concat(cells[:merge], []string{joined}, cells[merge+extra+1:]), true
}

// ParseQueryGPU parses the CSV output of nvidia-smi --query-gpu (with a
// header line, with or without units). Columns are found by header name,
// whatever their order; "[N/A]", "[Not Supported]" and other bracketed
// values read as missing, and those that report a failure ("[GPU is lost]",
// "[Unknown Error]") also set the GPU's Err. Rows of MIG instances (UUIDs
// "MIG-...") are skipped: the parent GPU's row carries the readings.
// Lines that do not fit the table (error messages) are skipped; an error is
// returned only when there is no table at all.
func ParseQueryGPU(out []byte) ([]GPU, error) {
	lines := strings.Split(string(out), "\n")
	hi := findHeader(lines, func(n string) bool {
		_, ok := smiColumns[n]
		return ok || n == "index" || n == "uuid" || n == "name"
	})
	if hi < 0 {
		return nil, fmt.Errorf("no header line in nvidia-smi output %q", errs.Truncate(string(out), 200))
	}
	hs := parseHeader(lines[hi])
	col := map[string]int{}
	for i, h := range hs {
		if _, dup := col[h.name]; !dup {
			col[h.name] = i
		}
	}
	merge := -1
	if i, ok := col["name"]; ok {
		merge = i
	}
	var gpus []GPU
	for row, line := range lines[hi+1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		cells, ok := rowCells(line, len(hs), merge)
		if !ok {
			continue
		}
		cell := func(name string) (string, bool) {
			i, ok := col[name]
			if !ok {
				return "", false
			}
			return cells[i], true
		}
		uuid, _ := cell("uuid")
		if isBracketed(uuid) || strings.EqualFold(uuid, "N/A") {
			uuid = ""
		}
		if strings.HasPrefix(uuid, "MIG-") {
			continue
		}
		index := row
		if s, ok := cell("index"); ok {
			n, perr := parseInt(s)
			if perr != nil || n < 0 {
				continue // not a GPU row ("0:1" MIG devices, garbage)
			}
			index = n
		}
		name, _ := cell("name")
		if isBracketed(name) {
			name = ""
		}
		g := NewGPU(index, cleanString(uuid), cleanString(name))
		rank := [NumFields]int{}
		for i, h := range hs {
			c, ok := smiColumns[h.name]
			if !ok {
				continue
			}
			v, status := parseSMIValue(cells[i], h.unit, c.field)
			if status != "" && g.Err == "" && isFailure(status) {
				g.Err = cleanString(status)
			}
			if IsMissing(v) {
				continue
			}
			if !IsMissing(g.Values[c.field]) && rank[c.field] <= c.rank {
				continue
			}
			g.Values[c.field], rank[c.field] = v, c.rank
		}
		gpus = append(gpus, g)
	}
	slices.SortStableFunc(gpus, func(a, b GPU) int { return a.Index - b.Index })
	return gpus, nil
}

// ParseComputeApps parses nvidia-smi --query-compute-apps output and maps
// each process to its GPU's index through gpu_uuid. Processes on GPUs not
// in gpus (other than by a MIG instance's parent) are dropped.
func ParseComputeApps(out []byte, gpus []GPU) ([]Process, error) {
	lines := strings.Split(string(out), "\n")
	hi := findHeader(lines, func(n string) bool {
		return n == "pid" || n == "gpu_uuid" || n == "process_name" || n == "used_gpu_memory" || n == "used_memory"
	})
	if hi < 0 {
		if strings.Contains(string(out), "No running") || strings.TrimSpace(string(out)) == "" {
			return nil, nil
		}
		return nil, fmt.Errorf("no header line in nvidia-smi output %q", errs.Truncate(string(out), 200))
	}
	hs := parseHeader(lines[hi])
	col := map[string]int{}
	for i, h := range hs {
		col[h.name] = i
	}
	memCol, ok := col["used_gpu_memory"]
	if !ok {
		memCol, ok = col["used_memory"]
	}
	if !ok {
		memCol = -1
	}
	merge := -1
	if i, ok := col["process_name"]; ok {
		merge = i
	}
	byUUID := map[string]int{}
	for _, g := range gpus {
		if g.UUID != "" {
			byUUID[g.UUID] = g.Index
		}
	}
	var procs []Process
	for _, line := range lines[hi+1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		cells, ok := rowCells(line, len(hs), merge)
		if !ok {
			continue
		}
		get := func(name string) string {
			if i, ok := col[name]; ok {
				return cells[i]
			}
			return ""
		}
		idx, ok := byUUID[get("gpu_uuid")]
		if !ok {
			continue
		}
		pid, err := parseInt(get("pid"))
		if err != nil || pid < 0 {
			continue
		}
		p := Process{GPU: idx, PID: pid, Name: cleanString(get("process_name")), MemUsedBytes: -1}
		if isBracketed(p.Name) {
			p.Name = ""
		}
		if memCol >= 0 {
			if v, _ := parseSMIValue(cells[memCol], hs[memCol].unit, FieldMemUsed); !IsMissing(v) {
				p.MemUsedBytes = int64(v)
			}
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func isBracketed(s string) bool { return strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") }

// isFailure tells a bracketed status that reports a failure from one that
// only says the reading does not exist.
func isFailure(status string) bool {
	s := strings.ToLower(status)
	return strings.Contains(s, "lost") || strings.Contains(s, "error") || strings.Contains(s, "reset") || strings.Contains(s, "unknown")
}

func parseInt(s string) (int, error) {
	n := 0
	if s == "" || len(s) > 9 {
		return 0, errors.New("not a small integer")
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, errors.New("not a small integer")
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// parseSMIValue parses one cell: a number with an optional unit ("4040
// MiB", "45.12 W", "35 %", "35"), converted to the field's unit using the
// cell's unit, else the header's. Bracketed or "N/A" cells are missing and
// their text is returned as status.
func parseSMIValue(cell, headerUnit string, f Field) (float64, string) {
	cell = strings.TrimSpace(cell)
	switch {
	case cell == "":
		return Missing(), ""
	case isBracketed(cell):
		return Missing(), strings.TrimSpace(cell[1 : len(cell)-1])
	case strings.EqualFold(cell, "N/A"):
		return Missing(), "N/A"
	case f == FieldThrottleReasons:
		// A hexadecimal mask: 0x0000000000000044.
		v, err := strconv.ParseUint(cell, 0, 64)
		if err != nil {
			return Missing(), ""
		}
		return float64(v), ""
	}
	end := 0
	for end < len(cell) && strings.IndexByte("0123456789.+-eE", cell[end]) >= 0 {
		end++
	}
	num, unit := cell[:end], strings.TrimSpace(cell[end:])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || IsMissing(v) {
		return Missing(), ""
	}
	if unit == "" {
		unit = headerUnit
	}
	switch f {
	case FieldMemUsed, FieldMemTotal:
		mult := float64(1 << 20) // nvidia-smi reports MiB
		switch strings.ToLower(unit) {
		case "b":
			mult = 1
		case "kib", "kb":
			mult = 1 << 10
		case "gib", "gb":
			mult = 1 << 30
		}
		v *= mult
		if v < 0 {
			return Missing(), ""
		}
	case FieldPower, FieldPowerLimit:
		if strings.EqualFold(unit, "mW") {
			v /= 1000
		}
	case FieldSMClock:
		if strings.EqualFold(unit, "GHz") {
			v *= 1000
		}
	}
	return v, ""
}

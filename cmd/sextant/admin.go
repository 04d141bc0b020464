package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/workspace"
)

// The admin commands (users, tokens, groups, perms, mkdirs) talk to a
// running server over its HTTP API, authenticating as the mlflow client
// does: MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and
// MLFLOW_TRACKING_PASSWORD. `sextant users add --data-dir DIR` instead
// opens the database directly, to create the first administrator before
// anyone can sign in.

// apiFlags are the connection flags every admin command takes.
type apiFlags struct {
	server string
}

func (a *apiFlags) bind(fs *flag.FlagSet, getenv func(string) string) {
	def := getenv("MLFLOW_TRACKING_URI")
	if def == "" {
		def = "http://127.0.0.1:5000"
	}
	fs.StringVar(&a.server, "server", def, "server URL (default: $MLFLOW_TRACKING_URI)")
}

// apiCall sends one JSON request and decodes the JSON answer into out.
func (m *Main) apiCall(ctx context.Context, a apiFlags, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(a.server, "/")+path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := m.Getenv("MLFLOW_TRACKING_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if u, p := m.Getenv("MLFLOW_TRACKING_USERNAME"), m.Getenv("MLFLOW_TRACKING_PASSWORD"); u != "" && p != "" {
		req.SetBasicAuth(u, p) // Basic wins when both are set, as in the mlflow client
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the server at %s: %w", a.server, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Code    string `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			return fmt.Errorf("%s: %s", e.Code, e.Message)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

func newCmdFlags(name string, m *Main, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(m.Stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// readPassword reads a password from stdin (one line).
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// UsersCommand manages users.
type UsersCommand struct{ main *Main }

// Run dispatches users subcommands.
func (c *UsersCommand) Run(ctx context.Context, args []string) error {
	m := c.main
	usage := `Usage:
  sextant users add EMAIL [--admin] [--data-dir DIR | --db URL]   (password from stdin)
  sextant users list
  sextant users disable EMAIL | enable EMAIL
  sextant users passwd EMAIL                           (new password from stdin)`
	if len(args) == 0 {
		fmt.Fprintln(m.Stderr, usage)
		return flag.ErrHelp
	}
	sub, rest := args[0], args[1:]
	fs := newCmdFlags("sextant users "+sub, m, usage)
	var a apiFlags
	a.bind(fs, m.Getenv)
	isAdmin := fs.Bool("admin", false, "make the user an administrator")
	dataDir := fs.String("data-dir", "", "create the user directly in this data directory's database (bootstrap; no server needed)")
	dbURL := fs.String("db", "", "create the user directly in this PostgreSQL database (bootstrap; no server needed)")
	if err := fs.Parse(reorder(rest)); err != nil {
		return err
	}
	switch sub {
	case "add":
		if fs.NArg() != 1 {
			return fmt.Errorf("users add takes one EMAIL")
		}
		pw, err := readPassword(m.stdin())
		if err != nil {
			return err
		}
		if *dataDir != "" || *dbURL != "" {
			return c.addDirect(ctx, *dataDir, *dbURL, fs.Arg(0), pw, *isAdmin)
		}
		var out struct {
			User wireUserOut `json:"user"`
		}
		if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/users", map[string]any{"email": fs.Arg(0), "password": pw, "admin": *isAdmin}, &out); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "created user %s (admin: %v), home folder /Users/%s\n", out.User.Email, out.User.Admin, out.User.Email)
		return nil
	case "list":
		var out struct {
			Users []wireUserOut `json:"users"`
		}
		if err := m.apiCall(ctx, a, "GET", "/api/2.0/sextant/users", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tADMIN\tDISABLED\tCREATED")
		for _, u := range out.Users {
			fmt.Fprintf(tw, "%s\t%v\t%v\t%s\n", u.Email, u.Admin, u.Disabled, time.UnixMilli(u.CreatedMs).UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	case "disable", "enable":
		if fs.NArg() != 1 {
			return fmt.Errorf("users %s takes one EMAIL", sub)
		}
		disabled := sub == "disable"
		if err := m.apiCall(ctx, a, "PATCH", "/api/2.0/sextant/users", map[string]any{"email": fs.Arg(0), "disabled": disabled}, nil); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "user %s %sd\n", fs.Arg(0), sub)
		return nil
	case "passwd":
		if fs.NArg() != 1 {
			return fmt.Errorf("users passwd takes one EMAIL")
		}
		pw, err := readPassword(m.stdin())
		if err != nil {
			return err
		}
		return m.apiCall(ctx, a, "POST", "/api/2.0/sextant/users/password", map[string]any{"email": fs.Arg(0), "old_password": m.Getenv("MLFLOW_TRACKING_PASSWORD"), "new_password": pw}, nil)
	}
	fmt.Fprintln(m.Stderr, usage)
	return fmt.Errorf("unknown users command %q", sub)
}

// addDirect creates a user in a data directory's database, or in the
// PostgreSQL database dbURL.
func (c *UsersCommand) addDirect(ctx context.Context, dataDir, dbURL, email, password string, admin bool) error {
	target := dbURL
	if target == "" {
		target = filepath.Join(dataDir, "sextant.db")
	} else if !isPostgres(target) {
		return &ConfigError{"db", "must be a PostgreSQL URL (postgres://...)"}
	}
	store, err := sqlstore.Open(ctx, target, sqlstore.Options{})
	if err != nil {
		return err
	}
	defer store.Close(context.WithoutCancel(ctx))
	ws := workspace.NewService(store, workspace.Options{})
	if err := ws.Init(ctx); err != nil {
		return err
	}
	u, err := ws.CreateUser(ctx, nil, email, password, admin)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.main.Stdout, "created user %s (admin: %v) in %s; restart the server to turn authentication on if it runs in single-user mode\n", u.Email, u.Admin, redactDB(target))
	return nil
}

type wireUserOut struct {
	Email     string `json:"email"`
	Admin     bool   `json:"admin"`
	Disabled  bool   `json:"disabled"`
	CreatedMs int64  `json:"created_time"`
}

// TokensCommand manages personal access tokens.
type TokensCommand struct{ main *Main }

// Run dispatches tokens subcommands.
func (c *TokensCommand) Run(ctx context.Context, args []string) error {
	m := c.main
	usage := `Usage:
  sextant tokens create NAME [--lifetime 720h]   (prints the token once)
  sextant tokens list
  sextant tokens revoke ID`
	if len(args) == 0 {
		fmt.Fprintln(m.Stderr, usage)
		return flag.ErrHelp
	}
	sub, rest := args[0], args[1:]
	fs := newCmdFlags("sextant tokens "+sub, m, usage)
	var a apiFlags
	a.bind(fs, m.Getenv)
	lifetime := fs.Duration("lifetime", 0, "how long the token lives (0: until revoked)")
	if err := fs.Parse(reorder(rest)); err != nil {
		return err
	}
	type tok struct {
		ID         int64  `json:"id"`
		Name       string `json:"name"`
		CreatedMs  int64  `json:"created_time"`
		ExpiresMs  int64  `json:"expires_time"`
		LastUsedMs int64  `json:"last_used_time"`
		RevokedMs  int64  `json:"revoked_time"`
		Token      string `json:"token"`
	}
	switch sub {
	case "create":
		if fs.NArg() != 1 {
			return fmt.Errorf("tokens create takes one NAME")
		}
		var out struct {
			Token tok `json:"token"`
		}
		if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": fs.Arg(0), "lifetime_seconds": int64(lifetime.Seconds())}, &out); err != nil {
			return err
		}
		fmt.Fprintf(m.Stderr, "token %d %q created; it is shown only now. Use it as MLFLOW_TRACKING_TOKEN.\n", out.Token.ID, out.Token.Name)
		fmt.Fprintln(m.Stdout, out.Token.Token)
		return nil
	case "list":
		var out struct {
			Tokens []tok `json:"tokens"`
		}
		if err := m.apiCall(ctx, a, "GET", "/api/2.0/sextant/tokens", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tCREATED\tEXPIRES\tLAST USED\tSTATE")
		ts := func(ms int64) string {
			if ms == 0 {
				return "-"
			}
			return time.UnixMilli(ms).UTC().Format(time.RFC3339)
		}
		for _, t := range out.Tokens {
			state := "live"
			if t.RevokedMs != 0 {
				state = "revoked"
			} else if t.ExpiresMs != 0 && t.ExpiresMs < time.Now().UnixMilli() {
				state = "expired"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, ts(t.CreatedMs), ts(t.ExpiresMs), ts(t.LastUsedMs), state)
		}
		return tw.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return fmt.Errorf("tokens revoke takes one ID")
		}
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil {
			return fmt.Errorf("token ids are numbers (see sextant tokens list)")
		}
		if err := m.apiCall(ctx, a, "DELETE", "/api/2.0/sextant/tokens", map[string]any{"id": id}, nil); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "token %d revoked\n", id)
		return nil
	}
	fmt.Fprintln(m.Stderr, usage)
	return fmt.Errorf("unknown tokens command %q", sub)
}

// PermsCommand grants and revokes permissions.
type PermsCommand struct{ main *Main }

// Run dispatches perms subcommands.
func (c *PermsCommand) Run(ctx context.Context, args []string) error {
	m := c.main
	usage := `Usage:
  sextant perms get RESOURCE
  sextant perms set RESOURCE PRINCIPAL LEVEL
  sextant perms revoke RESOURCE PRINCIPAL
RESOURCE is experiment:<id>, folder:<path>, catalog:<name>, schema:<catalog>.<schema>
or volume:<catalog>.<schema>.<volume>; PRINCIPAL an email or group:<name>
(group:users is every user); LEVEL is CAN_READ, CAN_EDIT or CAN_MANAGE.`
	if len(args) == 0 {
		fmt.Fprintln(m.Stderr, usage)
		return flag.ErrHelp
	}
	sub, rest := args[0], args[1:]
	fs := newCmdFlags("sextant perms "+sub, m, usage)
	var a apiFlags
	a.bind(fs, m.Getenv)
	if err := fs.Parse(reorder(rest)); err != nil {
		return err
	}
	switch {
	case sub == "get" && fs.NArg() == 1:
		var out struct {
			Grants []struct {
				Principal string `json:"principal"`
				Level     string `json:"level"`
			} `json:"grants"`
		}
		if err := m.apiCall(ctx, a, "GET", "/api/2.0/sextant/permissions?resource="+urlQueryEscape(fs.Arg(0)), nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PRINCIPAL\tLEVEL")
		for _, g := range out.Grants {
			fmt.Fprintf(tw, "%s\t%s\n", g.Principal, g.Level)
		}
		return tw.Flush()
	case sub == "set" && fs.NArg() == 3:
		return m.apiCall(ctx, a, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": fs.Arg(0), "principal": fs.Arg(1), "level": fs.Arg(2)}, nil)
	case sub == "revoke" && fs.NArg() == 2:
		return m.apiCall(ctx, a, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": fs.Arg(0), "principal": fs.Arg(1), "level": "NO_PERMISSIONS"}, nil)
	}
	fmt.Fprintln(m.Stderr, usage)
	return fmt.Errorf("bad perms command")
}

// GroupsCommand manages groups.
type GroupsCommand struct{ main *Main }

// Run dispatches groups subcommands.
func (c *GroupsCommand) Run(ctx context.Context, args []string) error {
	m := c.main
	usage := `Usage:
  sextant groups create NAME
  sextant groups add NAME EMAIL | remove NAME EMAIL
  sextant groups list`
	if len(args) == 0 {
		fmt.Fprintln(m.Stderr, usage)
		return flag.ErrHelp
	}
	sub, rest := args[0], args[1:]
	fs := newCmdFlags("sextant groups "+sub, m, usage)
	var a apiFlags
	a.bind(fs, m.Getenv)
	if err := fs.Parse(reorder(rest)); err != nil {
		return err
	}
	switch {
	case sub == "create" && fs.NArg() == 1:
		return m.apiCall(ctx, a, "POST", "/api/2.0/sextant/groups", map[string]any{"name": fs.Arg(0)}, nil)
	case (sub == "add" || sub == "remove") && fs.NArg() == 2:
		return m.apiCall(ctx, a, "POST", "/api/2.0/sextant/groups/members", map[string]any{"group": fs.Arg(0), "email": fs.Arg(1), "member": sub == "add"}, nil)
	case sub == "list" && fs.NArg() == 0:
		var out struct {
			Groups []struct {
				Name    string   `json:"name"`
				Members []string `json:"members"`
			} `json:"groups"`
		}
		if err := m.apiCall(ctx, a, "GET", "/api/2.0/sextant/groups", nil, &out); err != nil {
			return err
		}
		for _, g := range out.Groups {
			fmt.Fprintf(m.Stdout, "%s: %s\n", g.Name, strings.Join(g.Members, ", "))
		}
		return nil
	}
	fmt.Fprintln(m.Stderr, usage)
	return fmt.Errorf("bad groups command")
}

// MkdirsCommand creates workspace folders.
type MkdirsCommand struct{ main *Main }

// Run creates the folder and its missing parents.
func (c *MkdirsCommand) Run(ctx context.Context, args []string) error {
	m := c.main
	fs := newCmdFlags("sextant mkdirs", m, "Usage: sextant mkdirs PATH   (creates a workspace folder and its parents)")
	var a apiFlags
	a.bind(fs, m.Getenv)
	if err := fs.Parse(reorder(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return flag.ErrHelp
	}
	return m.apiCall(ctx, a, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": fs.Arg(0)}, nil)
}

// reorder moves flags before positional arguments, so that
// "users add EMAIL --admin" parses like "users add --admin EMAIL".
func reorder(args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			// A flag with a separate value: --server URL, --lifetime 1h.
			if !strings.Contains(a, "=") && i+1 < len(args) && takesValue(a) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func takesValue(flagName string) bool {
	switch strings.TrimLeft(flagName, "-") {
	case "server", "lifetime", "data-dir":
		return true
	}
	return false
}

func urlQueryEscape(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "?", "%3F").Replace(s)
}

func (m *Main) stdin() io.Reader {
	if m.Stdin != nil {
		return m.Stdin
	}
	return os.Stdin
}

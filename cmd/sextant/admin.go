package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/tracking"
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
		def = defaultServer
	}
	fs.StringVar(&a.server, "server", def, "the server's URL (from $MLFLOW_TRACKING_URI when set)")
}

// httpClient returns the HTTP client of the admin and files commands:
// MLFLOW_TRACKING_INSECURE_TLS=true skips certificate checks, as for the
// mlflow client.
func (m *Main) httpTransport() *http.Transport {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		MaxIdleConnsPerHost:   64,
		ResponseHeaderTimeout: 5 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
	}
	if strings.EqualFold(m.Getenv("MLFLOW_TRACKING_INSECURE_TLS"), "true") {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the user asked for it
	}
	return tr
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
		return fmt.Errorf("the server's URL %q: %w", a.server, err)
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
	resp, err := (&http.Client{Timeout: 60 * time.Second, Transport: m.httpTransport()}).Do(req)
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
			return &apiError{status: resp.StatusCode, code: e.Code, message: e.Message}
		}
		return &apiError{status: resp.StatusCode, message: fmt.Sprintf("%s %s: %s", method, path, http.StatusText(resp.StatusCode))}
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// readPassword reads a password from stdin (one line).
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// adminCommand is a leaf admin command: it takes --server, and exactly
// nargs positional arguments (flags may follow them).
func adminCommand(nargs int, extra func(fs *flag.FlagSet), do func(ctx context.Context, m *Main, a apiFlags, args []string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	return func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
		var a apiFlags
		a.bind(fs, m.Getenv)
		if extra != nil {
			extra(fs)
		}
		pos, err := parseInterleaved(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != nargs {
			return usageError("%s takes %d argument(s), got %d (see 'sextant %s -h')", fs.Name(), nargs, len(pos), fs.Name())
		}
		return do(ctx, m, a, pos)
	}
}

func usersCommands() []*command {
	var admin bool
	var dataDir, dbURL string
	return []*command{
		{
			name: "add", summary: "create a user (the password is read from stdin)",
			usage: []string{"sextant users add EMAIL [--admin] [--server URL]", "sextant users add EMAIL [--admin] --data-dir DIR | --db URL"},
			about: "Creates a user with the password read from stdin (one line), and the user's home folder\n/Users/EMAIL. Through a running server this needs an administrator. With --data-dir (or --db) the\nuser is created directly in that data directory's database, which is created if it does not\nexist: the way to make the first administrator before the server starts. A single-user server\nturns authentication on when it next starts with users in its database.",
			env:   clientEnv,
			examples: []string{
				"echo 'a long password' | sextant users add admin@example.com --admin --data-dir sextant-data",
				"echo 'alices password' | sextant users add alice@example.com",
			},
			run: adminCommand(1, func(fs *flag.FlagSet) {
				fs.BoolVar(&admin, "admin", false, "make the user an administrator")
				fs.StringVar(&dataDir, "data-dir", "", "create the user directly in this data directory (created if missing); no server needed")
				fs.StringVar(&dbURL, "db", "", "create the user directly in this PostgreSQL database; no server needed")
			}, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				if dataDir != "" && dbURL != "" {
					return usageError("users add: give --data-dir or --db, not both")
				}
				pw, err := readPassword(m.stdin())
				if err != nil {
					return err
				}
				if dataDir != "" || dbURL != "" {
					return addUserDirect(ctx, m, dataDir, dbURL, args[0], pw, admin)
				}
				var out struct {
					User wireUserOut `json:"user"`
				}
				if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/users", map[string]any{"email": args[0], "password": pw, "admin": admin}, &out); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "created user %s (admin: %v), home folder /Users/%s\n", out.User.Email, out.User.Admin, out.User.Email)
				return nil
			}),
		},
		{
			name: "list", summary: "list the users",
			usage:    []string{"sextant users list"},
			env:      clientEnv,
			examples: []string{"sextant users list"},
			run: adminCommand(0, nil, func(ctx context.Context, m *Main, a apiFlags, _ []string) error {
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
			}),
		},
		userToggle("disable", "disable a user: their sessions end and their tokens stop working"),
		userToggle("enable", "enable a disabled user again"),
		{
			name: "passwd", summary: "change a password (the new one is read from stdin)",
			usage: []string{"sextant users passwd EMAIL"},
			about: "Changes a user's password to the line read from stdin. Your own needs your current password\nin MLFLOW_TRACKING_PASSWORD; an administrator can change anyone's.",
			env:   clientEnv,
			examples: []string{
				"echo 'a new long password' | MLFLOW_TRACKING_USERNAME=admin@localhost MLFLOW_TRACKING_PASSWORD=<old> sextant users passwd admin@localhost",
			},
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				pw, err := readPassword(m.stdin())
				if err != nil {
					return err
				}
				if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/users/password", map[string]any{"email": args[0], "old_password": m.Getenv("MLFLOW_TRACKING_PASSWORD"), "new_password": pw}, nil); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "changed the password of %s\n", args[0])
				return nil
			}),
		},
	}
}

func userToggle(name, summary string) *command {
	return &command{
		name: name, summary: summary,
		usage:    []string{"sextant users " + name + " EMAIL"},
		env:      clientEnv,
		examples: []string{"sextant users " + name + " bob@example.com"},
		run: adminCommand(1, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
			if err := m.apiCall(ctx, a, "PATCH", "/api/2.0/sextant/users", map[string]any{"email": args[0], "disabled": name == "disable"}, nil); err != nil {
				return err
			}
			fmt.Fprintf(m.Stdout, "user %s %sd\n", args[0], name)
			return nil
		}),
	}
}

// addUserDirect creates a user in a data directory's database (creating
// and initialising the directory when it does not exist), or in the
// PostgreSQL database dbURL, and says which one it used.
func addUserDirect(ctx context.Context, m *Main, dataDir, dbURL, email, password string, admin bool) error {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.DB = dataDir, dbURL
	if dbURL != "" && !isPostgres(dbURL) {
		return &ConfigError{"db", "must be a PostgreSQL URL (postgres://...)"}
	}
	if dbURL == "" {
		created, err := ensureDataDir(dataDir)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(m.Stderr, "created the data directory %s\n", absPath(dataDir))
		}
	}
	store, err := openStore(ctx, cfg, nil, nil)
	if err != nil {
		return fmt.Errorf("open the database %s: %w", redactDB(storeTarget(cfg)), err)
	}
	defer store.Close(context.WithoutCancel(ctx))
	// What the server would set up at its first start, so that the data
	// directory is a complete one.
	if err := tracking.NewService(store, tracking.Options{Limits: cfg.Limits}).Init(ctx); err != nil {
		return err
	}
	ws := workspace.NewService(store, workspace.Options{})
	if err := ws.Init(ctx); err != nil {
		return err
	}
	u, err := ws.CreateUser(ctx, nil, email, password, admin)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "created user %s (admin: %v) in the database %s\n", u.Email, u.Admin, redactDB(storeTarget(cfg)))
	fmt.Fprintln(m.Stdout, "a server started on it requires authentication; one already running in single-user mode needs a restart")
	return nil
}

type wireUserOut struct {
	Email     string `json:"email"`
	Admin     bool   `json:"admin"`
	Disabled  bool   `json:"disabled"`
	CreatedMs int64  `json:"created_time"`
}

type wireToken struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	CreatedMs  int64  `json:"created_time"`
	ExpiresMs  int64  `json:"expires_time"`
	LastUsedMs int64  `json:"last_used_time"`
	RevokedMs  int64  `json:"revoked_time"`
	Token      string `json:"token"`
}

func tokensCommands() []*command {
	var lifetime time.Duration
	return []*command{
		{
			name: "create", summary: "create a token for yourself (printed once)",
			usage: []string{"sextant tokens create NAME [--lifetime DURATION]"},
			about: "Creates a personal access token for the signed-in user and prints it on stdout, once: the\nserver keeps only its hash. Use it as MLFLOW_TRACKING_TOKEN.",
			env:   clientEnv,
			examples: []string{
				"export MLFLOW_TRACKING_TOKEN=$(sextant tokens create laptop --lifetime 2160h)",
			},
			run: adminCommand(1, func(fs *flag.FlagSet) {
				fs.DurationVar(&lifetime, "lifetime", 0, "how long the token lives, e.g. 720h (0: until revoked)")
			}, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				var out struct {
					Token wireToken `json:"token"`
				}
				if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": args[0], "lifetime_seconds": int64(lifetime.Seconds())}, &out); err != nil {
					return err
				}
				fmt.Fprintf(m.Stderr, "token %d %q created; it is shown only now. Use it as MLFLOW_TRACKING_TOKEN.\n", out.Token.ID, out.Token.Name)
				fmt.Fprintln(m.Stdout, out.Token.Token)
				return nil
			}),
		},
		{
			name: "list", summary: "list your tokens",
			usage:    []string{"sextant tokens list"},
			env:      clientEnv,
			examples: []string{"sextant tokens list"},
			run: adminCommand(0, nil, func(ctx context.Context, m *Main, a apiFlags, _ []string) error {
				var out struct {
					Tokens []wireToken `json:"tokens"`
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
			}),
		},
		{
			name: "revoke", summary: "revoke a token",
			usage:    []string{"sextant tokens revoke ID"},
			env:      clientEnv,
			examples: []string{"sextant tokens revoke 3"},
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil {
					return usageError("tokens revoke: token ids are numbers (see sextant tokens list), got %q", args[0])
				}
				if err := m.apiCall(ctx, a, "DELETE", "/api/2.0/sextant/tokens", map[string]any{"id": id}, nil); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "token %d revoked\n", id)
				return nil
			}),
		},
	}
}

// permsAbout is the description in `sextant perms -h`.
const permsAbout = `RESOURCE is experiment:<id>, folder:<path>, catalog:<name>, schema:<catalog>.<schema>
or volume:<catalog>.<schema>.<volume>; PRINCIPAL an email or group:<name> (group:users is
every user); LEVEL is CAN_READ, CAN_EDIT or CAN_MANAGE. See docs/auth.md.`

func permsCommands() []*command {
	return []*command{
		{
			name: "get", summary: "show the grants on a resource",
			usage:    []string{"sextant perms get RESOURCE"},
			about:    permsAbout,
			env:      clientEnv,
			examples: []string{"sextant perms get experiment:12", "sextant perms get folder:/Shared/vision"},
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				var out struct {
					Grants []struct {
						Principal string `json:"principal"`
						Level     string `json:"level"`
					} `json:"grants"`
				}
				if err := m.apiCall(ctx, a, "GET", "/api/2.0/sextant/permissions?resource="+url.QueryEscape(args[0]), nil, &out); err != nil {
					return err
				}
				tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PRINCIPAL\tLEVEL")
				for _, g := range out.Grants {
					fmt.Fprintf(tw, "%s\t%s\n", g.Principal, g.Level)
				}
				return tw.Flush()
			}),
		},
		{
			name: "set", summary: "grant a level on a resource",
			usage:    []string{"sextant perms set RESOURCE PRINCIPAL LEVEL"},
			about:    permsAbout,
			env:      clientEnv,
			examples: []string{"sextant perms set experiment:12 bob@example.com CAN_READ", "sextant perms set folder:/Shared/vision group:vision CAN_EDIT"},
			run: adminCommand(3, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				if err := m.apiCall(ctx, a, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": args[0], "principal": args[1], "level": args[2]}, nil); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "granted %s on %s to %s\n", strings.ToUpper(args[2]), args[0], args[1])
				return nil
			}),
		},
		{
			name: "revoke", summary: "remove a principal's grant on a resource",
			usage:    []string{"sextant perms revoke RESOURCE PRINCIPAL"},
			about:    permsAbout,
			env:      clientEnv,
			examples: []string{"sextant perms revoke experiment:12 bob@example.com"},
			run: adminCommand(2, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				if err := m.apiCall(ctx, a, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": args[0], "principal": args[1], "level": "NO_PERMISSIONS"}, nil); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "revoked the grant of %s on %s (what folders above it grant still applies)\n", args[1], args[0])
				return nil
			}),
		},
	}
}

func groupsCommands() []*command {
	member := func(name, summary, verb, prep string) *command {
		return &command{
			name: name, summary: summary,
			usage:    []string{"sextant groups " + name + " GROUP EMAIL"},
			env:      clientEnv,
			examples: []string{"sextant groups " + name + " vision bob@example.com"},
			run: adminCommand(2, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/groups/members", map[string]any{"group": args[0], "email": args[1], "member": name == "add"}, nil); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "%s %s %s group %s\n", verb, args[1], prep, args[0])
				return nil
			}),
		}
	}
	return []*command{
		{
			name: "create", summary: "create a group",
			usage:    []string{"sextant groups create NAME"},
			env:      clientEnv,
			examples: []string{"sextant groups create vision"},
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
				if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/groups", map[string]any{"name": args[0]}, nil); err != nil {
					return err
				}
				fmt.Fprintf(m.Stdout, "created group %s (grant it permissions with sextant perms set RESOURCE group:%s LEVEL)\n", args[0], args[0])
				return nil
			}),
		},
		member("add", "add a user to a group", "added", "to"),
		member("remove", "remove a user from a group", "removed", "from"),
		{
			name: "list", summary: "list the groups and their members",
			usage:    []string{"sextant groups list"},
			env:      clientEnv,
			examples: []string{"sextant groups list"},
			run: adminCommand(0, nil, func(ctx context.Context, m *Main, a apiFlags, _ []string) error {
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
			}),
		},
	}
}

// mkdirs is `sextant mkdirs PATH`: it says whether the folder was created
// or already existed.
func mkdirs(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	return adminCommand(1, nil, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
		existed := m.apiCall(ctx, a, "GET", "/api/2.0/sextant/workspace/list?path="+url.QueryEscape(args[0]), nil, nil) == nil
		var out struct {
			Path string `json:"path"`
		}
		if err := m.apiCall(ctx, a, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": args[0]}, &out); err != nil {
			return err
		}
		if existed {
			fmt.Fprintf(m.Stdout, "folder %s already exists\n", out.Path)
		} else {
			fmt.Fprintf(m.Stdout, "created folder %s\n", out.Path)
		}
		return nil
	})(ctx, m, fs, args)
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

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
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

// readPassword reads a password from stdin (one line).
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// adminCommand is a leaf admin command: it takes --server, and exactly
// nargs positional arguments (flags may follow them). do gets a client of
// the server with the credentials of the environment.
func adminCommand(nargs int, extra func(fs *flag.FlagSet), do func(ctx context.Context, m *Main, cl *client.Client, args []string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	return adminFlagsCommand(nargs, extra, func(ctx context.Context, m *Main, a apiFlags, args []string) error {
		cl, err := m.newClient(a.server, "sextant")
		if err != nil {
			return err
		}
		return singleUserError(ctx, cl, "EMAIL", do(ctx, m, cl, args))
	})
}

// singleUserError turns the server's refusal of a command about users,
// sessions or tokens in single-user mode (HTTP 400) into the steps that
// turn sign-in on; email names the administrator in the first step. Any
// other error is returned as it is.
func singleUserError(ctx context.Context, cl *client.Client, email string, err error) error {
	if errs.CodeOf(err) != errs.Invalid {
		return err
	}
	id, werr := cl.WhoAmI(ctx)
	if werr != nil || id.MultiUser {
		return err
	}
	return errors.New(turnSignInOn(cl.URL(), email))
}

// turnSignInOn says how to turn sign-in on for the single-user server at
// url, with email as the first administrator. The steps are those of
// docs/auth.md ("Turning sign-in on").
func turnSignInOn(url, email string) string {
	return fmt.Sprintf(`the server at %s runs in single-user mode (sign-in off), which has no users yet. To turn sign-in on:
  1. create the first administrator directly in the server's data directory (the server may keep running):
       echo 'a long password' | sextant users add %s --admin --data-dir DIR
     DIR is the server's --data-dir (./sextant-data by default; the server printed it at start as data_dir=...);
     with PostgreSQL give --db URL instead
  2. restart the server (Ctrl-C, then the same sextant server command): with a user in its database it requires sign-in
  3. sign in as that user: MLFLOW_TRACKING_USERNAME=%s and MLFLOW_TRACKING_PASSWORD, or a token (sextant tokens create NAME)
See docs/auth.md.`, url, email, email)
}

// adminFlagsCommand is adminCommand for a command that may not need the
// server: do gets the connection flags.
func adminFlagsCommand(nargs int, extra func(fs *flag.FlagSet), do func(ctx context.Context, m *Main, a apiFlags, args []string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
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
			run: adminFlagsCommand(1, func(fs *flag.FlagSet) {
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
				cl, err := m.newClient(a.server, "sextant")
				if err != nil {
					return err
				}
				u, err := cl.CreateUser(ctx, args[0], pw, admin)
				if err != nil {
					return singleUserError(ctx, cl, args[0], err)
				}
				fmt.Fprintf(m.Stdout, "created user %s (admin: %v), home folder /Users/%s\n", u.Email, u.Admin, u.Email)
				return nil
			}),
		},
		{
			name: "list", summary: "list the users",
			usage:    []string{"sextant users list"},
			env:      clientEnv,
			examples: []string{"sextant users list"},
			run: adminCommand(0, nil, func(ctx context.Context, m *Main, cl *client.Client, _ []string) error {
				users, err := cl.ListUsers(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "EMAIL\tADMIN\tDISABLED\tCREATED")
				for _, u := range users {
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
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				pw, err := readPassword(m.stdin())
				if err != nil {
					return err
				}
				if err := cl.SetPassword(ctx, args[0], m.Getenv("MLFLOW_TRACKING_PASSWORD"), pw); err != nil {
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
		run: adminCommand(1, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
			disabled := name == "disable"
			if _, err := cl.UpdateUser(ctx, wire.UpdateUserRequest{Email: args[0], Disabled: &disabled}); err != nil {
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
	if err := tracking.NewService(store.Tracking(), tracking.Options{Limits: cfg.Limits}).Init(ctx); err != nil {
		return err
	}
	ws := workspace.NewService(store.Workspace(), workspace.Options{})
	if err := ws.Init(ctx); err != nil {
		return err
	}
	u, err := ws.CreateUser(ctx, nil, email, password, admin)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "created user %s (admin: %v) in the database %s\n", u.Email, u.Admin, redactDB(storeTarget(cfg)))
	if h, running := dataDirHolder(dataDir); dbURL == "" && running {
		fmt.Fprintf(m.Stdout, "the server running on it (%s) stays in single-user mode until it restarts: stop it (Ctrl-C) and start it again to turn sign-in on\n", h)
	} else {
		fmt.Fprintln(m.Stdout, "a server started on it requires sign-in; one already running in single-user mode needs a restart")
	}
	return nil
}

func tokensCommands() []*command {
	var lifetime time.Duration
	var nodes string
	return []*command{
		{
			name: "create", summary: "create a token for yourself (printed once), or a node token for GPU agents",
			usage: []string{"sextant tokens create NAME [--lifetime DURATION] [--nodes NODE,...]"},
			about: "Creates a personal access token for the signed-in user and prints it on stdout, once: the\nserver keeps only its hash. Use it as MLFLOW_TRACKING_TOKEN.\n\nWith --nodes (administrators only) it is a node token: it may only post the GPU samples of\nthose nodes, and once it exists only it does (sextant agent uses it; docs/gpu.md).",
			env:   clientEnv,
			examples: []string{
				"export MLFLOW_TRACKING_TOKEN=$(sextant tokens create laptop --lifetime 2160h)",
				"sextant tokens create gpu-agents --nodes gpu-01,gpu-02",
			},
			run: adminCommand(1, func(fs *flag.FlagSet) {
				fs.DurationVar(&lifetime, "lifetime", 0, "how long the token lives, e.g. 720h (0: until revoked)")
				fs.StringVar(&nodes, "nodes", "", "make a node token for these GPU nodes, comma-separated (administrators only)")
			}, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				var tok wire.Token
				var err error
				if nodes != "" {
					tok, err = cl.CreateNodeToken(ctx, args[0], lifetime, []string{nodes})
				} else {
					tok, err = cl.CreateToken(ctx, args[0], lifetime)
				}
				if err != nil {
					return err
				}
				if len(tok.Nodes) > 0 {
					fmt.Fprintf(m.Stderr, "node token %d %q for %s created; it is shown only now. Give it to the nodes' agents as MLFLOW_TRACKING_TOKEN.\n", tok.ID, tok.Name, strings.Join(tok.Nodes, ", "))
					fmt.Fprintln(m.Stdout, tok.Token)
					return nil
				}
				fmt.Fprintf(m.Stderr, "token %d %q created; it is shown only now. Use it as MLFLOW_TRACKING_TOKEN.\n", tok.ID, tok.Name)
				fmt.Fprintln(m.Stdout, tok.Token)
				return nil
			}),
		},
		{
			name: "list", summary: "list your tokens",
			usage:    []string{"sextant tokens list"},
			env:      clientEnv,
			examples: []string{"sextant tokens list"},
			run: adminCommand(0, nil, func(ctx context.Context, m *Main, cl *client.Client, _ []string) error {
				tokens, err := cl.ListTokens(ctx)
				if err != nil {
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
				for _, t := range tokens {
					state := "live"
					if t.RevokedMs != 0 {
						state = "revoked"
					} else if t.ExpiresMs != 0 && t.ExpiresMs < time.Now().UnixMilli() {
						state = "expired"
					}
					name := t.Name
					if len(t.Nodes) > 0 {
						name += " (nodes " + strings.Join(t.Nodes, ",") + ")"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, name, ts(t.CreatedMs), ts(t.ExpiresMs), ts(t.LastUsedMs), state)
				}
				return tw.Flush()
			}),
		},
		{
			name: "revoke", summary: "revoke a token",
			usage:    []string{"sextant tokens revoke ID"},
			env:      clientEnv,
			examples: []string{"sextant tokens revoke 3"},
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil {
					return usageError("tokens revoke: token ids are numbers (see sextant tokens list), got %q", args[0])
				}
				if err := cl.RevokeToken(ctx, id); err != nil {
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
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				grants, err := cl.Permissions(ctx, args[0])
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PRINCIPAL\tLEVEL")
				for _, g := range grants {
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
			run: adminCommand(3, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				if err := cl.SetPermission(ctx, args[0], args[1], args[2]); err != nil {
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
			run: adminCommand(2, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				if err := cl.SetPermission(ctx, args[0], args[1], "NO_PERMISSIONS"); err != nil {
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
			run: adminCommand(2, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				if err := cl.SetGroupMember(ctx, args[0], args[1], name == "add"); err != nil {
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
			run: adminCommand(1, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
				if err := cl.CreateGroup(ctx, args[0]); err != nil {
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
			run: adminCommand(0, nil, func(ctx context.Context, m *Main, cl *client.Client, _ []string) error {
				groups, err := cl.ListGroups(ctx)
				if err != nil {
					return err
				}
				for _, g := range groups {
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
	return adminCommand(1, nil, func(ctx context.Context, m *Main, cl *client.Client, args []string) error {
		_, err := cl.ListFolder(ctx, args[0])
		existed := err == nil
		p, err := cl.Mkdirs(ctx, args[0])
		if err != nil {
			return err
		}
		if existed {
			fmt.Fprintf(m.Stdout, "folder %s already exists\n", p)
		} else {
			fmt.Fprintf(m.Stdout, "created folder %s\n", p)
		}
		return nil
	})(ctx, m, fs, args)
}

func (m *Main) stdin() io.Reader {
	if m.Stdin != nil {
		return m.Stdin
	}
	return os.Stdin
}

package main

import (
	"context"
	"fmt"
)

// MigrateCommand applies pending schema migrations and exits: run it
// before rolling a new version out to several replicas (each server also
// migrates on start, one at a time).
type MigrateCommand struct {
	main *Main
}

// Run parses flags and migrates.
func (c *MigrateCommand) Run(ctx context.Context, args []string) error {
	m := c.main
	cfg := DefaultConfig()
	fs := newFlagSet()
	fs.Init("sextant migrate", fs.ErrorHandling())
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(m.Stderr, "Usage: sextant migrate [--db URL | --data-dir DIR]\n\nApplies pending schema migrations to the database the server would use, and prints the schema versions.\n\nFlags:")
		fs.PrintDefaults()
	}
	envErr := bindFlags(fs, &cfg, m.Getenv)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, newLogger(m.Stderr, cfg), nil)
	if err != nil {
		return err
	}
	defer store.Close(context.WithoutCancel(ctx))
	vs, err := store.SchemaVersions(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "schema of %s is up to date:", redactDB(storeTarget(cfg)))
	for _, v := range vs {
		fmt.Fprintf(m.Stdout, " %s %d", v.Component, v.Version)
	}
	fmt.Fprintln(m.Stdout)
	return nil
}

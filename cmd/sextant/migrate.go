package main

import (
	"context"
	"flag"
	"fmt"
)

// MigrateCommand applies pending schema migrations and exits: run it
// before rolling a new version out to several replicas (each server also
// migrates on start, one at a time).
type MigrateCommand struct {
	main *Main
}

// Run parses flags and migrates.
func (c *MigrateCommand) Run(ctx context.Context, fs *flag.FlagSet, args []string) error {
	m := c.main
	cfg := DefaultConfig()
	envErr := bindFlags(fs, &cfg, m.Getenv, storeFlags|logFlags)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if fs.NArg() > 0 {
		return usageError("migrate: unexpected arguments: %v", fs.Args())
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

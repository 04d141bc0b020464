package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/wire"
)

// sextant nodes ls|show: the GPU nodes' health (docs/gpu.md, "Node
// health").

func nodesCommand() *command {
	return &command{
		name: "nodes", summary: "list GPU nodes with their faults; show a node's fault history",
		usage: []string{"sextant nodes <command> [flags]"},
		env:   clientEnv,
		examples: []string{
			"sextant nodes ls",
			"sextant nodes show gpu-07",
		},
		subs: []*command{
			{
				name: "ls", summary: "list GPU nodes: GPUs, faults in 24 hours and 7 days, flagged",
				usage: []string{"sextant nodes ls [--flagged]"},
				about: "Lists the nodes the server knows from their GPU samples or health history, with their GPU\ncount, their faults (Xid, ECC, lost GPU, throttling) in the last 24 hours and 7 days, and\nwhether the flag rule flags them, with the reason.",
				env:   clientEnv,
				examples: []string{
					"sextant nodes ls",
					"sextant nodes ls --flagged",
				},
				run: nodesLs,
			},
			{
				name: "show", summary: "a node's GPU faults across runs, newest first",
				usage: []string{"sextant nodes show NODE [--limit N]"},
				about: "Prints a node's health summary and its GPU faults across runs, newest first: time, kind, GPU,\nduration (throttling), runs and message.",
				env:   clientEnv,
				examples: []string{
					"sextant nodes show gpu-07",
					"sextant nodes show gpu-07 --limit 500",
				},
				run: nodesShow,
			},
		},
	}
}

func countsCell(c wire.NodeHealthCounts) string {
	return fmt.Sprintf("%d/%d/%d/%d", c.Xid, c.ECC, c.Lost, c.Throttle)
}

func nodesLs(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	server := serverFlag(fs, m.Getenv)
	flagged := fs.Bool("flagged", false, "only the flagged nodes")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("nodes ls: unexpected arguments %v", pos)
	}
	cl, err := m.newClient(*server, "sextant-nodes")
	if err != nil {
		return err
	}
	res, err := cl.Nodes(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tGPUS\tLAST SAMPLE\t24H XID/ECC/LOST/THROTTLE\t7D XID/ECC/LOST/THROTTLE\tFLAGGED")
	n := 0
	for _, nd := range res.Nodes {
		if *flagged && !nd.Flagged {
			continue
		}
		n++
		seen := "-"
		if nd.LastSeenMs > 0 {
			seen = time.UnixMilli(nd.LastSeenMs).Local().Format("2006-01-02 15:04:05")
		}
		flag := "no"
		if nd.Flagged {
			flag = "yes: " + nd.Reason
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", nd.Node, len(nd.GPUs), seen, countsCell(nd.Counts24h), countsCell(nd.Counts7d), flag)
	}
	if n == 0 {
		fmt.Fprintln(m.Stderr, "no nodes")
		return nil
	}
	return tw.Flush()
}

func nodesShow(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	server := serverFlag(fs, m.Getenv)
	limit := fs.Int("limit", 100, "at most this many faults (1 to 10000)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("nodes show: give one node name")
	}
	if *limit < 1 || *limit > 10000 {
		return usageError("nodes show: --limit must be 1 to 10000, got %d", *limit)
	}
	node := pos[0]
	cl, err := m.newClient(*server, "sextant-nodes")
	if err != nil {
		return err
	}
	all, err := cl.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, nd := range all.Nodes {
		if nd.Node != node {
			continue
		}
		state := "not flagged"
		if nd.Flagged {
			state = "FLAGGED: " + nd.Reason
		}
		fmt.Fprintf(m.Stdout, "%s: %d GPUs, %s\nfaults in 24 hours: %s; in 7 days: %s (Xid/ECC/lost/throttle)\n\n", node, len(nd.GPUs), state, countsCell(nd.Counts24h), countsCell(nd.Counts7d))
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tGPU\tDURATION\tRUNS\tMESSAGE")
	token, n := "", 0
	for n < *limit {
		page, err := cl.NodeHealth(ctx, node, min(1000, *limit-n), token)
		if err != nil {
			return err
		}
		for _, e := range page.Events {
			n++
			dur := ""
			switch {
			case e.Kind == "throttle" && e.Open:
				dur = "ongoing"
			case e.Kind == "throttle" && e.EndMs >= e.TimeMs:
				dur = (time.Duration(e.EndMs-e.TimeMs) * time.Millisecond).String()
			}
			runs := strings.Join(e.RunIDs, ",")
			if runs == "" {
				runs = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", time.UnixMilli(e.TimeMs).Local().Format("2006-01-02 15:04:05"), e.Kind, e.GPU, dur, runs, e.Message)
		}
		if page.NextPageToken == "" || len(page.Events) == 0 {
			break
		}
		token = page.NextPageToken
	}
	if n == 0 {
		fmt.Fprintf(m.Stderr, "no GPU faults recorded for node %s\n", node)
		return nil
	}
	return tw.Flush()
}

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/zerolayer/zerolayer/producer/gateway"
)

// runKeys manages the gateway's key file: add prints a new key once and
// stores its hash, list shows ids and tenants, revoke removes a key.
func runKeys(ctx context.Context, args []string) error {
	sub, args, err := parseSub(newFlags("keys"), args)
	if err != nil {
		return err
	}
	fs := newFlags("keys " + sub)
	file := keyFileFlag(fs)
	switch sub {
	case "add":
		tenant := fs.String("tenant", "", "the tenant the key acts as")
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *file == "" || *tenant == "" {
			return usageError{cmd: "keys add", msg: "give --file and --tenant"}
		}
		key, e, err := gateway.NewKey(*tenant, time.Now())
		if err != nil {
			return err
		}
		if err := gateway.AppendKeyFile(*file, e); err != nil {
			return err
		}
		fmt.Fprintln(stdout, key)
		fmt.Fprintf(stderr, "zerolayer keys add: key %s for tenant %s added to %s; the key above is shown this once, hand it to the client now\n", e.ID, e.Tenant, *file)
		return nil
	case "list":
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if *file == "" {
			return usageError{cmd: "keys list", msg: "give --file"}
		}
		entries, err := gateway.ReadKeyFile(*file)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tCREATED")
		for _, e := range entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.ID, e.Tenant, e.Created.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	ids, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if *file == "" || len(ids) != 1 {
		return usageError{cmd: "keys revoke", msg: "give --file and one key id"}
	}
	e, err := gateway.RevokeKeyFile(*file, ids[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zerolayer keys revoke: key %s of tenant %s removed from %s; a running gateway refuses it from its next request\n", e.ID, e.Tenant, *file)
	return nil
}

func keyFileFlag(fs *flag.FlagSet) *string {
	return fs.String("file", os.Getenv("ZEROLAYER_API_KEYS_FILE"), "the key file (env ZEROLAYER_API_KEYS_FILE)")
}

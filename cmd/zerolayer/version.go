package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
)

// runVersion is `zerolayer version` (and `zerolayer --version`).
func runVersion(ctx context.Context, args []string) error {
	if err := parseFlags(newFlags("version"), args); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("no build information in this binary")
	}
	fmt.Fprintln(stdout, versionLine(bi))
	return nil
}

// versionLine describes a build from what the Go toolchain stamped into it:
// the module version ("(devel)" for a build from a checkout), the VCS
// revision and whether the tree had uncommitted changes, and the Go
// version and platform.
func versionLine(bi *debug.BuildInfo) string {
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "zerolayer %s", bi.Main.Version)
	if rev := s["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, ", %s revision %s", s["vcs"], rev)
		if t := s["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if s["vcs.modified"] == "true" {
			b.WriteString(" with uncommitted changes")
		}
	} else {
		b.WriteString(", no VCS revision (built outside a checkout, or with -buildvcs=false)")
	}
	fmt.Fprintf(&b, ", %s %s/%s", bi.GoVersion, s["GOOS"], s["GOARCH"])
	return b.String()
}

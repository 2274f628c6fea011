package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/ops/devstack"
)

// natsFlag is the --nats-url flag of the commands that connect to NATS.
// Its default is resolved after parsing, so that the help shows where the
// URL comes from rather than one machine's value.
type natsFlag struct{ url string }

// addNATSFlag registers --nats-url on fs.
func addNATSFlag(fs *flag.FlagSet) *natsFlag {
	n := &natsFlag{}
	fs.StringVar(&n.url, "nats-url", "", "NATS server `URL` (default $NATS_URL, else the running zerolayer dev's, else "+nats.DefaultURL+")")
	return n
}

// resolve returns the URL to use and where it came from: the flag, the
// NATS_URL environment variable, a running `zerolayer dev` (its announce
// file), or the default.
func (n *natsFlag) resolve() (url, source string) {
	if n.url != "" {
		return n.url, "--nats-url"
	}
	if u := os.Getenv("NATS_URL"); u != "" {
		return u, "NATS_URL"
	}
	if e, source, ok := runningDev(); ok {
		return e.NATSURL, source
	}
	return nats.DefaultURL, "default; set --nats-url or NATS_URL, or start zerolayer dev"
}

// devAnnounceFile is where `zerolayer dev` announces its endpoints for the
// other commands: ZEROLAYER_DEV_FILE, else dev.json beside the model cache.
func devAnnounceFile() string {
	if p := os.Getenv("ZEROLAYER_DEV_FILE"); p != "" {
		return p
	}
	return filepath.Join(filepath.Dir(cacheDir()), "dev.json")
}

// runningDev returns the endpoints of the `zerolayer dev` running on this
// machine, if any, and a note saying where they came from.
func runningDev() (devstack.Endpoints, string, bool) {
	path := devAnnounceFile()
	e, ok, err := devstack.Discover(path)
	if err != nil {
		fmt.Fprintf(stderr, "zerolayer: ignoring %s: %v\n", path, err)
	}
	if !ok {
		return e, "", false
	}
	return e, fmt.Sprintf("the running zerolayer dev, pid %d, from %s", e.PID, path), true
}

// connect says on stderr which server command cmd uses and why, then
// connects to it, named "zerolayer cmd".
func (n *natsFlag) connect(cmd string, opts ...nats.Option) (*nats.Conn, error) {
	u, source := n.resolve()
	shown := devstack.Redact(u)
	fmt.Fprintf(stderr, "zerolayer %s: NATS %s (%s)\n", cmd, shown, source)
	nc, err := nats.Connect(u, append([]nats.Option{nats.Name("zerolayer " + cmd)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (%s): %w", shown, source, err)
	}
	return nc, nil
}

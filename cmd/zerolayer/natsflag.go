package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"

	"github.com/nats-io/nats.go"
)

// natsFlag is the --nats-url flag of the commands that connect to NATS.
// Its default is resolved after parsing, so that the help shows where the
// URL comes from rather than one machine's value.
type natsFlag struct{ url string }

// addNATSFlag registers --nats-url on fs.
func addNATSFlag(fs *flag.FlagSet) *natsFlag {
	n := &natsFlag{}
	fs.StringVar(&n.url, "nats-url", "", "NATS server `URL` (default $NATS_URL, else "+nats.DefaultURL+")")
	return n
}

// resolve returns the URL to use and where it came from: the flag, the
// NATS_URL environment variable, or the default.
func (n *natsFlag) resolve() (url, source string) {
	if n.url != "" {
		return n.url, "--nats-url"
	}
	if u := os.Getenv("NATS_URL"); u != "" {
		return u, "NATS_URL"
	}
	return nats.DefaultURL, "default; set --nats-url or NATS_URL"
}

// connect says on stderr which server command cmd uses and why, then
// connects to it, named "zerolayer cmd".
func (n *natsFlag) connect(cmd string, opts ...nats.Option) (*nats.Conn, error) {
	u, source := n.resolve()
	shown := redactURL(u)
	fmt.Fprintf(stderr, "zerolayer %s: NATS %s (%s)\n", cmd, shown, source)
	nc, err := nats.Connect(u, append([]nats.Option{nats.Name("zerolayer " + cmd)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (%s): %w", shown, source, err)
	}
	return nc, nil
}

// redactURL hides the password of a URL (NATS URLs may carry user:pass, or
// a list of servers, which is shown as it is).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

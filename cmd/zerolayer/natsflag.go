package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

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
// connects to it, named "zerolayer cmd". The connection's life is logged
// on stderr (connEvents): disconnects, reconnects, asynchronous errors.
func (n *natsFlag) connect(cmd string, opts ...nats.Option) (*nats.Conn, error) {
	u, source := n.resolve()
	shown := redactNATS(u)
	fmt.Fprintf(stderr, "zerolayer %s: NATS %s (%s)\n", cmd, shown, source)
	ev := &connEvents{log: slog.New(slog.NewTextHandler(stderr, nil)).With("nats", "zerolayer "+cmd)}
	nc, err := nats.Connect(u, append(append([]nats.Option{nats.Name("zerolayer " + cmd)}, ev.options()...), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (%s): %w", shown, source, err)
	}
	ev.connected(nc)
	return nc, nil
}

// connEvents logs a NATS connection's life: a disconnect (from which
// server, and why), the reconnect (to which), a close the connection did
// not recover from, a server entering lame-duck mode (it is about to
// shut down; the connection moves), and the asynchronous errors nats.go
// otherwise keeps to itself: a permission violation (a publish or
// subscription the account may not make fails silently but for this), a
// slow consumer dropping messages. Server URLs are logged without
// credentials (redactNATS).
type connEvents struct {
	log    *slog.Logger
	server atomic.Pointer[string] // the last server connected to, redacted
}

// options are the handlers to connect with.
func (e *connEvents) options() []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				// The command's own Close says nothing; a connection
				// lost for good is logged by the closed handler.
				return
			}
			args := []any{"server", e.last()}
			if err != nil {
				args = append(args, "err", err)
			}
			e.log.Warn("NATS disconnected; reconnecting", args...)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			e.connected(nc)
			e.log.Info("NATS reconnected", "server", e.last(), "reconnects", nc.Stats().Reconnects)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			// A close the command asked for leaves no error.
			if err := nc.LastError(); err != nil {
				e.log.Error("NATS connection closed", "server", e.last(), "err", err)
			}
		}),
		nats.LameDuckModeHandler(func(nc *nats.Conn) {
			e.log.Warn("NATS server entering lame-duck mode; the connection will move to another server", "server", e.last())
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			args := []any{"err", err}
			if sub != nil {
				args = append(args, "subject", sub.Subject)
			}
			e.log.Error("NATS asynchronous error", args...)
		}),
	}
}

// connected records the server nc is connected to.
func (e *connEvents) connected(nc *nats.Conn) {
	s := redactNATS(nc.ConnectedUrl())
	e.server.Store(&s)
}

func (e *connEvents) last() string {
	if s := e.server.Load(); s != nil {
		return *s
	}
	return ""
}

// redactNATS returns a NATS server URL, or a comma-separated list of them,
// with its credentials masked as url.URL.Redacted masks a password
// (xxxxx), and a user name standing alone (a token) masked too, which
// Redacted shows.
func redactNATS(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "@") {
			parts[i] = p
			continue
		}
		full := p
		if !strings.Contains(p, "://") {
			full = "nats://" + p // as nats.go reads it
		}
		u, err := url.Parse(full)
		if err != nil || u.User == nil {
			// Unparsable: keep only what follows the last @.
			parts[i] = "xxxxx@" + p[strings.LastIndex(p, "@")+1:]
			continue
		}
		mask := "xxxxx"
		if _, ok := u.User.Password(); ok {
			mask = u.User.Username() + ":xxxxx"
		}
		u.User = nil
		scheme, rest, _ := strings.Cut(u.String(), "://")
		parts[i] = scheme + "://" + mask + "@" + rest
	}
	return strings.Join(parts, ",")
}

package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterTimeout bounds the wait for a cluster (or a restarted node) to
// have a JetStream meta leader and every running node current with it.
const clusterTimeout = 30 * time.Second

// Cluster is a JetStream cluster of real servers in the test process,
// routed to each other on loopback, and a client connected to all of them.
// A node can be shut down and restarted (on its ports, with its store) to
// test what a node loss does.
type Cluster struct {
	// Name is the cluster's name.
	Name string
	// URL lists the nodes' client URLs, comma-separated, as nats.Connect
	// takes them: hand it to the code under test.
	URL string
	// Conn is a client connection that knows every node and reconnects
	// (to another node when its own goes), closed at cleanup.
	Conn *nats.Conn
	// JS is a JetStream context on Conn.
	JS jetstream.JetStream

	mu    sync.Mutex
	nodes []*clusterNode
}

// clusterNode is one server of a Cluster: the options it is (re)started
// with and, while it runs, the server.
type clusterNode struct {
	opts *server.Options
	srv  *server.Server // nil while shut down
}

// RunCluster starts a JetStream cluster of n servers (n ≥ 1; 3 for the
// production layout) in the test process, each with its own random
// loopback ports, its store in t.TempDir() and a server name node-<i>
// (i from 0), waits until JetStream has a meta leader that every node
// follows, and connects a client to all of them. The nodes and every
// connection made through the cluster are closed by t.Cleanup. RunCluster
// fails the test (t.Fatal) if the cluster does not form within 30 seconds.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: a cluster of %d nodes", n)
	}
	// Every node routes to every other, so each knows the cluster's size
	// from the start: the ports are picked before any node starts.
	clientPorts, clusterPorts := freePorts(t, n), freePorts(t, n)
	c := &Cluster{Name: "natstest-" + fmt.Sprint(clusterPorts[0])}
	urls := make([]string, n)
	for i := range n {
		var routes []*url.URL
		for j := range n {
			if j != i {
				routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", clusterPorts[j])})
			}
		}
		opts := &server.Options{
			ServerName:         fmt.Sprintf("node-%d", i),
			Host:               "127.0.0.1",
			Port:               clientPorts[i],
			NoLog:              true,
			NoSigs:             true,
			JetStream:          true,
			StoreDir:           t.TempDir(),
			JetStreamMaxMemory: 256 << 20,
			JetStreamMaxStore:  1 << 30,
			Cluster:            server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: clusterPorts[i]},
			Routes:             routes,
		}
		c.nodes = append(c.nodes, &clusterNode{opts: opts})
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", clientPorts[i])
	}
	c.URL = strings.Join(urls, ",")
	t.Cleanup(c.shutdownAll)
	for i := range n {
		c.start(t, i)
	}
	c.WaitReady(t)
	c.Conn, c.JS = c.Connect(t)
	return c
}

// freePorts returns n distinct loopback ports free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: pick a port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// start starts node i from its options.
func (c *Cluster) start(t testing.TB, i int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if nd.srv != nil {
		t.Fatalf("natstest: node %d is running", i)
	}
	srv, err := server.NewServer(nd.opts.Clone())
	if err != nil {
		t.Fatalf("natstest: configure node %d: %v", i, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		t.Fatalf("natstest: node %d not ready after %v", i, readyTimeout)
	}
	nd.srv = srv
}

// shutdownAll stops every running node.
func (c *Cluster) shutdownAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		if srv := nd.srv; srv != nil {
			nd.srv = nil
			wg.Go(func() {
				srv.Shutdown()
				srv.WaitForShutdown()
			})
		}
	}
	wg.Wait()
}

// Size is the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.nodes) }

// Node returns node i's server, or nil while it is shut down.
func (c *Cluster) Node(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

// NodeIndex returns the index of the node whose server name is name (as
// stream and consumer infos name their leaders: node-<i>), or -1.
func (c *Cluster) NodeIndex(name string) int {
	for i, nd := range c.nodes {
		if nd.opts.ServerName == name {
			return i
		}
	}
	return -1
}

// Shutdown stops node i, as a crashed or drained server would go: its
// clients reconnect to the others and the groups it led elect new
// leaders. Its store stays for Restart. It fails the test if the node is
// not running.
func (c *Cluster) Shutdown(t testing.TB, i int) {
	t.Helper()
	c.mu.Lock()
	srv := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if srv == nil {
		t.Fatalf("natstest: node %d is not running", i)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
}

// Restart starts node i again on its ports with its store, so that it
// rejoins the cluster and catches up, and waits until JetStream has a meta
// leader every running node follows. It fails the test if the node is
// running.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	c.start(t, i)
	c.WaitReady(t)
}

// running returns the servers of the running nodes.
func (c *Cluster) running() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*server.Server
	for _, nd := range c.nodes {
		if nd.srv != nil {
			out = append(out, nd.srv)
		}
	}
	return out
}

// MetaLeader returns the name of the node leading the JetStream meta
// group (the one that places streams and consumers), or "" while there is
// none.
func (c *Cluster) MetaLeader() string {
	for _, srv := range c.running() {
		if srv.JetStreamIsLeader() {
			return srv.Name()
		}
	}
	return ""
}

// WaitReady waits until JetStream has a meta leader that sees every
// running node online (so it can place a stream on any of them) and every
// running node is current with it (has applied what the leader did),
// failing the test after 30 seconds.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	Until(t, clusterTimeout, "the JetStream cluster has a meta leader every node follows", func() bool {
		running := c.running()
		var leader *server.Server
		for _, srv := range running {
			if srv.JetStreamIsLeader() {
				leader = srv
			}
			if !srv.JetStreamIsCurrent() {
				return false
			}
		}
		return leader != nil && len(leader.JetStreamClusterPeers()) == len(running)
	})
}

// Connect opens another client connection (with a JetStream context) that
// knows every node and reconnects without limit, closed by t.Cleanup
// before the nodes shut down.
func (c *Cluster) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(c.URL, nats.Name(t.Name()), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0))
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", c.URL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream context: %v", err)
	}
	return nc, js
}

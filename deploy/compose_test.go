package deploy_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"sigs.k8s.io/yaml"
)

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]struct {
		Image         string         `json:"image"`
		Profiles      []string       `json:"profiles"`
		Command       []string       `json:"command"`
		ContainerName string         `json:"container_name"`
		Ports         []string       `json:"ports"`
		Environment   map[string]any `json:"environment"`
		Volumes       []string       `json:"volumes"`
	} `json:"services"`
	Volumes map[string]any `json:"volumes"`
}

// TestComposeClusterProfile: docker-compose.yml parses (anchors and merge
// keys resolved); the cluster profile has three NATS servers, each with a
// name of its own and a volume of its own, running ops/nats/cluster.conf,
// which the NATS server accepts for each of them; the worker can be scaled
// (no container name, no host port).
func TestComposeClusterProfile(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(readFile(t, filepath.Join("..", "docker-compose.yml")), &c); err != nil {
		t.Fatal(err)
	}
	names, data := map[string]bool{}, map[string]bool{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("nats-%d", i)
		s, ok := c.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		if !slices.Equal(s.Profiles, []string{"cluster"}) || !slices.Equal(s.Command, []string{"-c", "/etc/nats/cluster.conf"}) {
			t.Errorf("%s: profiles %v, command %v", name, s.Profiles, s.Command)
		}
		node, _ := s.Environment["ZL_NATS_NAME"].(string)
		names[node] = true
		for _, v := range s.Volumes {
			if vol, ok := strings.CutSuffix(v, ":/data"); ok {
				if _, declared := c.Volumes[vol]; !declared {
					t.Errorf("%s: volume %s is not declared", name, vol)
				}
				data[vol] = true
			}
		}
		if !slices.Contains(s.Volumes, "./ops/nats:/etc/nats:ro") {
			t.Errorf("%s: ops/nats is not mounted (cluster.conf includes nats.conf beside it): %v", name, s.Volumes)
		}
		for k := range s.Environment {
			t.Setenv(k, "$2a$04$XmIfZ8sKqkZ9aMY4y4bN3OqkQ7.lYdTW1N9Z6b8w1k5o9sS6WzS1q")
		}
		t.Setenv("ZL_NATS_NAME", node)
		opts, err := server.ProcessConfigFile(filepath.Join("..", "ops", "nats", "cluster.conf"))
		if err != nil {
			t.Fatalf("%s: cluster.conf: %v", name, err)
		}
		if opts.ServerName != node || opts.Cluster.Name != "zerolayer" || opts.Cluster.Port != 6222 || len(opts.Routes) != 3 || !opts.JetStream {
			t.Errorf("%s: server %q, cluster %q port %d, %d routes, JetStream %v", name, opts.ServerName, opts.Cluster.Name, opts.Cluster.Port, len(opts.Routes), opts.JetStream)
		}
		if len(opts.Accounts) == 0 {
			t.Errorf("%s: cluster.conf lost nats.conf's accounts", name)
		}
	}
	if len(names) != 3 || names[""] || len(data) != 3 {
		t.Errorf("server names %v, data volumes %v: want three distinct", names, data)
	}
	w, ok := c.Services["worker"]
	if !ok || w.ContainerName != "" || len(w.Ports) != 0 {
		t.Errorf("worker: container_name %q, ports %v: --scale worker=N needs neither", w.ContainerName, w.Ports)
	}
	if _, ok := c.Services["nats"]; !ok || len(c.Services["nats"].Profiles) != 0 {
		t.Error("the single NATS server is no longer the default")
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestComposeConfigValid validates docker-compose.yml with whichever
// compose client is installed.
func TestComposeConfigValid(t *testing.T) {
	root := filepath.Join("..", "..")
	var cmd *exec.Cmd
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", "compose", "config", "-q")
	default:
		p, err := exec.LookPath("docker-compose")
		if err != nil {
			t.Skip("no docker compose client installed (apt-get install docker-compose)")
		}
		cmd = exec.Command(p, "config", "-q")
	}
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
}

// TestNATSConfigValid checks ops/nats/nats.conf with nats-server -t.
func TestNATSConfigValid(t *testing.T) {
	p, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("nats-server not installed")
	}
	cmd := exec.Command(p, "-c", filepath.Join("..", "..", "ops", "nats", "nats.conf"), "-t")
	cmd.Env = append(os.Environ(), "ZL_WORKER_PASSWORD=w", "ZL_BILLING_PASSWORD=b", "ZL_GATEWAY_PASSWORD=g", "ZL_TENANT_ACME_PASSWORD=a", "ZL_SYS_PASSWORD=s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nats-server -t: %v\n%s", err, out)
	}
}

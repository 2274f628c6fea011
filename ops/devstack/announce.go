package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Endpoints is what a running dev stack tells the other commands on the
// machine (submit, batch, report, …) through its announce file, so that
// they talk to it rather than to whatever listens on the default ports.
type Endpoints struct {
	// PID is the dev process; a file whose process is gone is stale.
	PID int `json:"pid"`
	// NATSURL is the embedded NATS server's client URL.
	NATSURL string `json:"nats_url"`
	// DatabaseURL is the PostgreSQL the stack uses.
	DatabaseURL string `json:"database_url"`
	// GatewayAddr is the HTTP gateway's address, when one runs.
	GatewayAddr string `json:"gateway_addr,omitempty"`
	// Started is when the stack was up.
	Started time.Time `json:"started"`
}

// announce writes e to path (atomically, readable by the user only: the
// database URL may carry a password).
func announce(path string, e Endpoints) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dev-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// unannounce removes the announce file at path if it is still this
// process's (a dev stack started later may have replaced it).
func unannounce(path string) {
	if e, err := readEndpoints(path); err == nil && e.PID == os.Getpid() {
		os.Remove(path)
	}
}

func readEndpoints(path string) (Endpoints, error) {
	var e Endpoints
	b, err := os.ReadFile(path)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("devstack: %s: %w", path, err)
	}
	return e, nil
}

// Discover reads the announce file at path and reports whether a dev
// stack is running: false, with no error, when there is no file or its
// process is gone (a dev stack killed without stopping leaves a stale
// file, which is ignored).
func Discover(path string) (Endpoints, bool, error) {
	e, err := readEndpoints(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Endpoints{}, false, nil
	}
	if err != nil {
		return Endpoints{}, false, err
	}
	if e.PID <= 0 || e.NATSURL == "" || !alive(e.PID) {
		return Endpoints{}, false, nil
	}
	return e, true, nil
}

// alive reports whether process pid exists (signal 0 checks without
// sending anything; EPERM means it exists under another user).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

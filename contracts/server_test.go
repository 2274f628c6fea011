package contracts_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/contracts/natstest"
)

func TestCheckServerVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		wantErr error
	}{
		{"2.10.0", nil},
		{"2.10.22", nil},
		{"v2.11.4", nil},
		{"2.12.0-dev", nil},
		{"3.0.0", nil},
		{"2.10.1+build.7", nil},
		{"2.9.10", contracts.ErrServerTooOld},
		{"2.9.99", contracts.ErrServerTooOld},
		{"1.99.99", contracts.ErrServerTooOld},
		{"2.10.0-RC.1", contracts.ErrServerTooOld},
		{"", contracts.ErrServerTooOld},
		{"2.10", contracts.ErrServerTooOld},
		{"two.ten.zero", contracts.ErrServerTooOld},
		{"2.10.0-", contracts.ErrServerTooOld},
	} {
		err := contracts.CheckServerVersion(tc.version)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("CheckServerVersion(%q) = %v, want %v", tc.version, err, tc.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), contracts.MinServerVersion) || !strings.Contains(err.Error(), tc.version)) {
			t.Errorf("CheckServerVersion(%q): message %q names not both versions", tc.version, err)
		}
	}
}

// TestCheckServer accepts the embedded server the tests run (the module's
// own nats-server dependency), and refuses a closed connection.
func TestCheckServer(t *testing.T) {
	t.Parallel()
	ns := natstest.Run(t)
	if err := contracts.CheckServer(ns.Conn); err != nil {
		t.Fatalf("embedded server %s: %v", ns.Conn.ConnectedServerVersion(), err)
	}
	nc, _ := ns.Connect(t)
	nc.Close()
	if err := contracts.CheckServer(nc); !errors.Is(err, contracts.ErrServerTooOld) {
		t.Errorf("closed connection: %v", err)
	}
}

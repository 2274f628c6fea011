package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain points the commands at an announce file of their own, so that a
// zerolayer dev running on the machine does not change what they connect
// to. Started with ZEROLAYER_TEST_AS_BINARY=1, the test binary is the
// zerolayer binary instead.
func TestMain(m *testing.M) {
	if os.Getenv(asBinary) == "1" {
		// A process a test started (startProcess): be the binary.
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "zerolayer-cmd-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("ZEROLAYER_DEV_FILE", filepath.Join(dir, "dev.json"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

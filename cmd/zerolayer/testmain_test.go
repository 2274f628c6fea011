package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain points the commands at an announce file of their own, so that a
// zerolayer dev running on the machine does not change what they connect
// to.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zerolayer-cmd-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("ZEROLAYER_DEV_FILE", filepath.Join(dir, "dev.json"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

package main

import (
	"os"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// modelDirs is the model search path: ZEROLAYER_MODEL_PATH, then the cache.
func modelDirs() []string {
	var dirs []string
	if p := os.Getenv("ZEROLAYER_MODEL_PATH"); p != "" {
		for _, d := range strings.Split(p, ":") {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return append(dirs, cacheDir())
}

// cacheDir is where pulled models go.
func cacheDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "zerolayer", "models")
	}
	return filepath.Join(home, ".cache", "zerolayer", "models")
}

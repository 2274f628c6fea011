package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker"
	"github.com/zerolayer/zerolayer/worker/engine"
	"github.com/zerolayer/zerolayer/worker/model/store"
)

// natsURL is the default NATS URL: NATS_URL, else the local server.
func natsURL() string {
	if u := os.Getenv("NATS_URL"); u != "" {
		return u
	}
	return nats.DefaultURL
}

// servedName is the name a model is served under: the name given, or the
// lower-cased file name without .gguf when a path was given.
func servedName(arg string) string {
	if strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".gguf") {
		return strings.ToLower(strings.TrimSuffix(filepath.Base(arg), ".gguf"))
	}
	return strings.ToLower(arg)
}

// served is a set of loaded models and the backend they run on.
type served struct {
	models []*worker.ServedModel
	paths  map[string]string // served name → file
	be     *cpu.Backend
}

func (s *served) Close() {
	for _, m := range s.models {
		m.Loaded.Close()
	}
	s.be.Close()
}

func (s *served) executor() *worker.InOrderExecutor {
	return worker.NewInOrderExecutor(s.be.Name(), s.models...)
}

// loadModels resolves and loads the named models on a CPU backend.
func loadModels(names []string, threads, kvBlocks int) (*served, error) {
	if len(names) == 0 {
		return nil, usagef("give at least one --model")
	}
	s := &served{be: cpu.New(cpu.Config{Threads: threads}), paths: map[string]string{}}
	for _, n := range names {
		path, err := store.Resolve(n, modelDirs())
		if err != nil {
			s.Close()
			return nil, err
		}
		l, err := engine.Load(path, s.be)
		if err != nil {
			s.Close()
			return nil, err
		}
		blocks := kvBlocks
		if blocks == 0 {
			blocks = 2 * ((l.Model.Context + 15) / 16)
		}
		e, err := engine.New(l.Model, l.Tokenizer, engine.Config{KVBlocks: blocks})
		if err != nil {
			l.Close()
			s.Close()
			return nil, err
		}
		name := servedName(n)
		if _, dup := s.paths[name]; dup {
			l.Close()
			s.Close()
			return nil, usagef("model %q given twice", name)
		}
		s.paths[name] = path
		s.models = append(s.models, &worker.ServedModel{Name: name, Loaded: l, Engine: e})
	}
	return s, nil
}

func describe(s *served) string {
	var parts []string
	for _, m := range s.models {
		parts = append(parts, fmt.Sprintf("%s (%s)", m.Name, s.paths[m.Name]))
	}
	return strings.Join(parts, ", ")
}

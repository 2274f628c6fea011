package modeltest

import (
	"testing"

	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/worker/engine"
)

// LoadStories loads stories260K on a CPU backend of threads threads, both
// closed at cleanup, skipping the test when the shared fixtures are
// absent. The backend is l.Model.Backend().
func LoadStories(t testing.TB, threads int) *engine.Loaded {
	t.Helper()
	be := cpu.New(cpu.Config{Threads: threads})
	t.Cleanup(func() { be.Close() })
	l, err := engine.Load(StoriesPath(t), be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

package cpu_test

import (
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cpu"
	"github.com/zerolayer/zerolayer/gpu/gputest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, threads := range []int{1, 3} {
		gputest.Run(t, func(t *testing.T) gpu.Backend { return cpu.New(cpu.Config{Threads: threads}) })
	}
}

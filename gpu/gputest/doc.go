// Package gputest is the conformance suite every gpu.Backend must pass. It
// checks each operation against a plain float64 reference written here, on
// random data, for every supported weight type, so a new backend (CUDA, or a
// new CPU kernel) is correct when Run passes.
//
//	func TestConformance(t *testing.T) {
//		gputest.Run(t, func(t *testing.T) gpu.Backend { return cpu.New(cpu.Config{}) })
//	}
//
// It imports gpu and gpu/quant; backends' tests import it.
package gputest

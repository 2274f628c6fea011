// Package device chooses the backend a process runs on: the one place that
// knows both gpu/cpu and gpu/cuda, so that nothing else has to import the
// two or assert a backend's concrete type. (gpu itself cannot: its children
// import it.)
//
// Open takes a kind, as a command line or a config names it: "cpu", "cuda"
// (fail without a usable GPU), or "auto" (CUDA when a device opens, else
// the CPU). What a caller needs to know about the chosen backend beyond
// gpu.Backend is asked through small interfaces (gpu.KVSizer) or IsCUDA.
//
//	be, err := device.Open(device.Auto, 0, func(why error) { log.Printf("on the CPU: %v", why) })
//	if err != nil {
//		return err
//	}
//	defer be.Close()
//
// It may import gpu, gpu/cpu and gpu/cuda, and nothing of the worker.
package device

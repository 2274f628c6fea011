package device_test

import (
	"errors"
	"testing"

	"github.com/zerolayer/zerolayer/gpu"
	"github.com/zerolayer/zerolayer/gpu/cuda"
	"github.com/zerolayer/zerolayer/gpu/device"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	// Whether this machine has a usable CUDA device decides what cuda and
	// auto give.
	cudaErr := cuda.Available()
	tests := []struct {
		kind         string
		wantErr      error
		wantCUDA     bool
		wantFallback bool
	}{
		{kind: "", wantCUDA: false},
		{kind: device.CPU, wantCUDA: false},
		{kind: device.CUDA, wantErr: cudaErr, wantCUDA: cudaErr == nil},
		{kind: device.Auto, wantCUDA: cudaErr == nil, wantFallback: cudaErr != nil},
		{kind: "tpu", wantErr: device.ErrUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			var fellBack error
			be, err := device.Open(tt.kind, 1, func(why error) { fellBack = why })
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) && !(errors.Is(tt.wantErr, gpu.ErrBackendUnavailable) && errors.Is(err, gpu.ErrBackendUnavailable)) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				if errors.Is(device.Check(tt.kind), device.ErrUnknownKind) != errors.Is(tt.wantErr, device.ErrUnknownKind) {
					t.Errorf("Check(%q) = %v", tt.kind, device.Check(tt.kind))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			if device.IsCUDA(be) != tt.wantCUDA {
				t.Errorf("IsCUDA = %v, want %v (backend %s)", !tt.wantCUDA, tt.wantCUDA, be.Name())
			}
			if (fellBack != nil) != tt.wantFallback || (fellBack != nil && !errors.Is(fellBack, gpu.ErrBackendUnavailable)) {
				t.Errorf("fallback reason %v, want one: %v", fellBack, tt.wantFallback)
			}
			_, sizes := be.(gpu.KVSizer)
			if sizes != tt.wantCUDA {
				t.Errorf("backend %s implements gpu.KVSizer: %v", be.Name(), sizes)
			}
		})
	}
}

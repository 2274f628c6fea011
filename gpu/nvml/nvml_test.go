package nvml_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zerolayer/zerolayer/gpu/nvml"
)

// TestOpen reads every device where NVML works, and otherwise checks that
// the failure says why and matches ErrUnavailable.
func TestOpen(t *testing.T) {
	m, err := nvml.Open()
	if err != nil {
		var u *nvml.UnavailableError
		if !errors.As(err, &u) || !errors.Is(err, nvml.ErrUnavailable) || u.Reason == "" {
			t.Fatalf("Open() = %v (%T); want an *UnavailableError", err, err)
		}
		if _, err := nvml.FreeMemory(0); !errors.Is(err, nvml.ErrUnavailable) {
			t.Fatalf("FreeMemory without NVML: %v", err)
		}
		t.Skipf("no NVML here: %v", err)
	}
	defer m.Close()
	stats, err := m.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stats {
		t.Logf("%+v", s)
		if s.MemoryTotal == 0 || s.MemoryFree > s.MemoryTotal {
			t.Errorf("device %d: memory %d free of %d", s.Index, s.MemoryFree, s.MemoryTotal)
		}
	}
	if m.Count() > 0 {
		if free, err := m.FreeMemory(0); err != nil || free == 0 {
			t.Errorf("FreeMemory(0) = %d, %v", free, err)
		}
	}
	if _, err := m.FreeMemory(m.Count()); err == nil {
		t.Error("FreeMemory of a device past the last succeeded")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestKVBytes(t *testing.T) {
	for _, c := range []struct {
		free    uint64
		frac    float64
		want    uint64
		wantErr bool
	}{
		{1000, 0.9, 900, false},
		{1 << 40, 1, 1 << 40, false},
		{1000, 0, 0, true},
		{1000, 1.5, 0, true},
	} {
		got, err := nvml.KVBytes(c.free, c.frac)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("KVBytes(%d, %g) = %d, %v; want %d (error %v)", c.free, c.frac, got, err, c.want, c.wantErr)
		}
	}
}

type fakeSource struct {
	stats []nvml.Stats
	err   error
}

func (f fakeSource) Stats() ([]nvml.Stats, error) { return f.stats, f.err }

// gather registers c in a pedantic registry and returns each series as
// "name{labels}" -> value.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue()
			if m.GetCounter() != nil {
				v = m.GetCounter().GetValue()
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

func TestCollector(t *testing.T) {
	src := fakeSource{stats: []nvml.Stats{{
		Index: 0, UUID: "GPU-1", Name: "NVIDIA H200",
		MemoryTotal: 150 << 30, MemoryUsed: 50 << 30, MemoryFree: 100 << 30,
		GPUUtilization: 87, MemoryUtilization: 64, TemperatureC: 51,
		PowerW: 412.5, Missing: []string{"power limit"},
	}}}
	got := gather(t, nvml.NewCollector(src))
	const l = "{gpu=0,name=NVIDIA H200,uuid=GPU-1}"
	for name, want := range map[string]float64{
		"zerolayer_gpu_memory_total_bytes" + l:       150 << 30,
		"zerolayer_gpu_memory_used_bytes" + l:        50 << 30,
		"zerolayer_gpu_memory_free_bytes" + l:        100 << 30,
		"zerolayer_gpu_utilization_ratio" + l:        0.87,
		"zerolayer_gpu_memory_utilization_ratio" + l: 0.64,
		"zerolayer_gpu_temperature_celsius" + l:      51,
		"zerolayer_gpu_power_watts" + l:              412.5,
		"zerolayer_gpu_scrape_errors_total{}":        0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %g (present %v), want %g", name, v, ok, want)
		}
	}
	// A reading the device lacks is left out rather than reported as 0.
	if _, ok := got["zerolayer_gpu_power_limit_watts"+l]; ok {
		t.Error("power limit exported for a device without one")
	}
	if len(got) != 8 {
		t.Errorf("%d series, want 8: %v", len(got), got)
	}
	// A failed read exports no device series and counts the failure.
	got = gather(t, nvml.NewCollector(fakeSource{err: errors.New("boom")}))
	if len(got) != 1 || got["zerolayer_gpu_scrape_errors_total{}"] != 1 {
		t.Errorf("after a failed read: %v", got)
	}
}

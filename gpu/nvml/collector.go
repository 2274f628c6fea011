package nvml

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Source is what the collector reads: a *Monitor, or a fake in tests.
type Source interface {
	Stats() ([]Stats, error)
}

// Collector exports device telemetry as Prometheus gauges, read from the
// source at each scrape, labelled by NVML index, UUID and name:
//
//	zerolayer_gpu_memory_total_bytes, zerolayer_gpu_memory_used_bytes,
//	zerolayer_gpu_memory_free_bytes, zerolayer_gpu_utilization_ratio,
//	zerolayer_gpu_memory_utilization_ratio, zerolayer_gpu_temperature_celsius,
//	zerolayer_gpu_power_watts, zerolayer_gpu_power_limit_watts
//
// and zerolayer_gpu_scrape_errors_total, counting failed reads. A reading
// a device does not support is left out rather than reported as zero.
type Collector struct {
	src    Source
	gauges []gauge
	errors prometheus.Counter
	labels []string
}

type gauge struct {
	desc  *prometheus.Desc
	need  string // Stats.Missing entry that voids it
	value func(*Stats) float64
}

// NewCollector returns a collector reading src.
func NewCollector(src Source) *Collector {
	labels := []string{"gpu", "uuid", "name"}
	g := func(name, help, need string, v func(*Stats) float64) gauge {
		return gauge{prometheus.NewDesc("zerolayer_gpu_"+name, help, labels, nil), need, v}
	}
	return &Collector{
		src:    src,
		labels: labels,
		gauges: []gauge{
			g("memory_total_bytes", "Device memory in total.", "memory", func(s *Stats) float64 { return float64(s.MemoryTotal) }),
			g("memory_used_bytes", "Device memory used, by every process.", "memory", func(s *Stats) float64 { return float64(s.MemoryUsed) }),
			g("memory_free_bytes", "Device memory free.", "memory", func(s *Stats) float64 { return float64(s.MemoryFree) }),
			g("utilization_ratio", "Share of the last sample period in which a kernel ran.", "utilization", func(s *Stats) float64 { return float64(s.GPUUtilization) / 100 }),
			g("memory_utilization_ratio", "Share of the last sample period in which device memory was read or written.", "utilization", func(s *Stats) float64 { return float64(s.MemoryUtilization) / 100 }),
			g("temperature_celsius", "GPU core temperature.", "temperature", func(s *Stats) float64 { return float64(s.TemperatureC) }),
			g("power_watts", "Board power draw.", "power", func(s *Stats) float64 { return s.PowerW }),
			g("power_limit_watts", "Enforced board power limit.", "power limit", func(s *Stats) float64 { return s.PowerLimitW }),
		},
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zerolayer_gpu_scrape_errors_total",
			Help: "Failed reads of GPU telemetry.",
		}),
	}
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range c.gauges {
		ch <- g.desc
	}
	c.errors.Describe(ch)
}

// Collect reads the source and sends the current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	stats, err := c.src.Stats()
	if err != nil {
		c.errors.Inc()
	}
	for i := range stats {
		s := &stats[i]
		lv := []string{strconv.Itoa(s.Index), s.UUID, s.Name}
	gauges:
		for _, g := range c.gauges {
			for _, m := range s.Missing {
				if m == g.need {
					continue gauges
				}
			}
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(s), lv...)
		}
	}
	c.errors.Collect(ch)
}

package worker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ModelInfo describes a served model: what zerolayer_model_info says of
// it.
type ModelInfo struct {
	// Name is the served name (ServedName).
	Name string
	// Arch is the model's architecture, its GGUF general.architecture
	// ("llama", "qwen2", …); usage records carry it too
	// (contracts.Usage.Architecture).
	Arch string
	// Context is the trained context length in tokens.
	Context int
	// Layers is the number of transformer blocks.
	Layers int
	// KVArenaMB is the size of the model's KV arena in MB, when the
	// executor has one of its own (the scheduler's); 0 otherwise.
	KVArenaMB int
	// EmbeddingOnly is set for an encoder (BERT): it embeds, and does not
	// generate.
	EmbeddingOnly bool
}

// ModelDescriber is implemented by executors that can describe the models
// they serve; New then sets zerolayer_model_info for each.
type ModelDescriber interface {
	ModelInfos() []ModelInfo
}

// newModelInfo is the info metric of the served models: one series of
// value 1 per model, its labels describing it. The per-job metrics carry
// only the model; join on it for the architecture:
//
//	sum by (arch) (rate(zerolayer_jobs_total[5m]) * on (model) group_left (arch) zerolayer_model_info)
func newModelInfo() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "zerolayer_model_info",
		Help: "The models this worker serves, always 1: model is the served name (the label of the per-job metrics), arch the GGUF general.architecture, context the trained context length, layers the transformer blocks."},
		[]string{"model", "arch", "context", "layers"})
}

// SetModelInfo sets zerolayer_model_info to 1 for each model.
func (m *Metrics) SetModelInfo(infos []ModelInfo) {
	if m == nil {
		return
	}
	for _, i := range infos {
		m.modelInfo.WithLabelValues(i.Name, i.Arch, strconv.Itoa(i.Context), strconv.Itoa(i.Layers)).Set(1)
	}
}

// ModelInfos describes the served models, in name order.
func (x *InOrderExecutor) ModelInfos() []ModelInfo {
	var out []ModelInfo
	for _, name := range x.Models() {
		l := x.models[name].Loaded
		mi := describe(name, l.Model.Arch, l.Model.Context, l.Model.Layers)
		mi.EmbeddingOnly = l.Model.Encoder
		out = append(out, mi)
	}
	return out
}

// ModelInfos describes the served models, in the order given.
func (x *SchedExecutor) ModelInfos() []ModelInfo {
	var out []ModelInfo
	for _, name := range x.names {
		sm := x.models[name]
		l := sm.Loaded
		mi := describe(name, l.Model.Arch, l.Model.Context, l.Model.Layers)
		mi.EmbeddingOnly = l.Model.Encoder
		if sm.Scheduler != nil {
			mi.KVArenaMB = int((sm.Scheduler.KVArena().Bytes + 1<<19) >> 20)
		}
		out = append(out, mi)
	}
	return out
}

func describe(name, arch string, context, layers int) ModelInfo {
	return ModelInfo{Name: name, Arch: arch, Context: context, Layers: layers}
}

package worker

import (
	"context"
	"sort"
	"sync"

	"github.com/zerolayer/zerolayer/contracts"
	"github.com/zerolayer/zerolayer/worker/engine"
)

// ServedModel is a model the worker serves under a name.
type ServedModel struct {
	Name   string
	Loaded *engine.Loaded
	Engine *engine.Engine
}

// InOrderExecutor runs jobs one at a time, each alone on its model's
// engine. It is the executor the scheduler replaces; it runs the real model.
type InOrderExecutor struct {
	mu     sync.Mutex
	models map[string]*ServedModel
	device string
}

// NewInOrderExecutor returns an executor serving the given models.
func NewInOrderExecutor(device string, models ...*ServedModel) *InOrderExecutor {
	m := map[string]*ServedModel{}
	for _, sm := range models {
		m[sm.Name] = sm
	}
	return &InOrderExecutor{models: m, device: device}
}

// Device names the device jobs run on.
func (x *InOrderExecutor) Device() string { return x.device }

// Models lists the served model names.
func (x *InOrderExecutor) Models() []string {
	var names []string
	for n := range x.models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Execute runs the job on its model.
func (x *InOrderExecutor) Execute(ctx context.Context, job *Job, sink Sink) (*Outcome, error) {
	r := job.Request
	sm, ok := x.models[r.Model]
	if !ok {
		return nil, contracts.NewError(contracts.CodeUnknownModel, "model %q is not served here (served: %v)", r.Model, x.Models())
	}
	if r.IsEmbedding() {
		return x.executeEmbedding(ctx, job, sm)
	}
	req, th, err := buildRequest(sm.Loaded, sm.Name, r, sink)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	res, err := sm.Engine.Generate(ctx, req)
	if err != nil {
		return nil, engineError(err)
	}
	out := outcomeFrom(res, req.Tools)
	applyToolFailure(out, r, req.Tools)
	th.apply(out)
	out.Usage.Architecture = sm.Loaded.Model.Arch
	return out, nil
}

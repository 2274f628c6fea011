package gateway

import (
	"net/http"
	"slices"
	"time"

	"github.com/zerolayer/zerolayer/contracts"
)

// modelNames returns the served models' names, sorted: those the live
// workers serve (the fleet), or without any live worker in sight
// Config.Models.
func (g *Gateway) modelNames() []string {
	if g.fleet != nil {
		if served := g.fleet.Served(); len(served) > 0 {
			return served
		}
	}
	names := make([]string, 0, len(g.cfg.Models))
	for n := range g.cfg.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// modelObject is one model in the shape of r's API. Created is when this
// gateway started serving it.
func (g *Gateway) modelObject(r *http.Request, name string) map[string]any {
	if anthropicCall(r) {
		return map[string]any{"type": "model", "id": name, "display_name": name, "created_at": g.started.UTC().Format(time.RFC3339)}
	}
	caps := []string{"chat", "embeddings"}
	if g.fleet != nil && g.fleet.Model(name).EmbeddingOnly {
		caps = []string{"embeddings"}
	}
	return map[string]any{"object": "model", "id": name, "created": g.started.Unix(), "owned_by": "zerolayer",
		"capabilities": caps}
}

// listModels: GET /v1/models, in the Anthropic shape for a client that
// sends anthropic-version (limit, after_id and before_id page it), else
// in OpenAI's (one page).
func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request) {
	fail := errorWriter(r)
	if _, e := g.authenticate(r); e != nil {
		fail(w, e)
		return
	}
	names := g.modelNames()
	if !anthropicCall(r) {
		data := make([]map[string]any, 0, len(names))
		for _, n := range names {
			data = append(data, g.modelObject(r, n))
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
		return
	}
	q := r.URL.Query()
	limit, e := listLimit(q.Get("limit"), 20, 1000)
	if e != nil {
		fail(w, e)
		return
	}
	from, to := 0, len(names)
	if id := q.Get("after_id"); id != "" {
		i, ok := slices.BinarySearch(names, id)
		if !ok {
			fail(w, contracts.NewError(contracts.CodeInvalidRequest, "after_id %q: no such model", id))
			return
		}
		from = i + 1
	}
	if id := q.Get("before_id"); id != "" {
		i, ok := slices.BinarySearch(names, id)
		if !ok {
			fail(w, contracts.NewError(contracts.CodeInvalidRequest, "before_id %q: no such model", id))
			return
		}
		to = i
		from = max(from, to-limit)
	}
	page := names[from:min(to, from+limit)]
	data := make([]map[string]any, 0, len(page))
	for _, n := range page {
		data = append(data, g.modelObject(r, n))
	}
	var first, last any
	if len(page) > 0 {
		first, last = page[0], page[len(page)-1]
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": from+len(page) < to, "first_id": first, "last_id": last})
}

// getModel: GET /v1/models/{id}.
func (g *Gateway) getModel(w http.ResponseWriter, r *http.Request) {
	fail := errorWriter(r)
	if _, e := g.authenticate(r); e != nil {
		fail(w, e)
		return
	}
	name := r.PathValue("id")
	if !slices.Contains(g.modelNames(), name) {
		fail(w, contracts.NewError(contracts.CodeUnknownModel, "model %q is not served here (served: %v)", name, g.modelNames()))
		return
	}
	writeJSON(w, http.StatusOK, g.modelObject(r, name))
}

// countTokens: POST /v1/messages/count_tokens: the prompt's tokens as the
// model's chat template renders it.
func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request) {
	c, e := g.client(r)
	if e != nil {
		anthropicError(w, e)
		return
	}
	raw, e := g.body(w, r)
	if e != nil {
		anthropicError(w, e)
		return
	}
	var mr messagesRequest
	if err := decodeJSON(raw, &mr); err != nil {
		anthropicError(w, err)
		return
	}
	if mr.MaxTokens == nil {
		one := 1 // not part of this call
		mr.MaxTokens = &one
	}
	req, e := mr.job()
	if e == nil {
		e = g.knownModel(req.Model, req.WaitForModel)
	}
	if e != nil {
		anthropicError(w, e)
		return
	}
	n, err := c.PromptTokens(req)
	if err != nil {
		anthropicError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": n})
}

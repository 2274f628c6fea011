// Package modeltest is test support for the packages that run models
// (worker/model, worker/engine, gpu/cuda): the shared fixtures
// (stories260K and its reference.json, found in ../shared beside the
// module), generated models, a greedy multi-sequence decoder and logit
// comparisons, and stories260K loaded on the CPU backend (LoadStories).
// Only tests import it.
//
//	m := load(t, modeltest.StoriesPath(t)) // skips when ../shared is absent
//	ref := modeltest.StoriesReference(t)
//	d := modeltest.NewDecoder(t, m, [][]int32{ref.Cases[0].PromptIDs}, 64)
//	logits := d.Step(t)
package modeltest

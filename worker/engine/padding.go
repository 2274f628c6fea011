package engine

import "math"

// maskPadding sets the logits of ids past the tokenizer's list to -Inf, so
// they are never sampled: a model whose embedding has more rows than the
// vocabulary has tokens (padded to a multiple of 64 or 128, as many
// converted models are) has no text for them, and they decode to nothing.
func maskPadding(logits []float32, vocab int) {
	if vocab <= 0 || vocab >= len(logits) {
		return
	}
	ninf := float32(math.Inf(-1))
	for i := vocab; i < len(logits); i++ {
		logits[i] = ninf
	}
}

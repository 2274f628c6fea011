package tools

import (
	"math/bits"
	"testing"

	"github.com/zerolayer/zerolayer/worker/tools/internal/vocab"
)

// byteTokens maps each byte to a token whose piece is that single byte.
func byteTokens(t testing.TB, v Vocab) [256]int32 {
	t.Helper()
	var out [256]int32
	for i := range out {
		out[i] = -1
	}
	for id := int32(0); int(id) < v.VocabSize(); id++ {
		p := v.Piece(id)
		if len(p) == 1 && out[p[0]] < 0 {
			out[p[0]] = id
		}
	}
	return out
}

// feed accepts ids into r, checking each against the mask when check is
// set; it reports whether every token was allowed and the end is allowed.
func feed(r *Run, vi *vocab.Index, ids []int32, check bool) (bool, error) {
	mask := make([]uint64, vi.Words)
	for _, id := range ids {
		if check {
			if _, err := r.Mask(mask); err != nil {
				return false, err
			}
			if !vocab.MaskHas(mask, id) {
				return false, nil
			}
		}
		if err := r.Accept(id); err != nil {
			return false, nil
		}
	}
	if check {
		if _, err := r.Mask(mask); err != nil {
			return false, err
		}
		if len(vi.EOG) > 0 && !vocab.MaskHas(mask, vi.EOG[0]) {
			return false, nil
		}
	}
	return r.CanEnd(), nil
}

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

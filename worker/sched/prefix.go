package sched

// hashAt returns the chain hash of q's full block i (its tokens never
// change, so the chain is computed once).
func (s *Scheduler) hashAt(q *seq, i int) uint64 {
	toks := q.g.Tokens()
	for len(q.hashes) <= i {
		j := len(q.hashes)
		var prev uint64
		if j > 0 {
			prev = q.hashes[j-1]
		}
		q.hashes = append(q.hashes, s.bm.chainHash(prev, toks[j*s.bt:(j+1)*s.bt]))
	}
	return q.hashes[i]
}

// prefixHits counts the leading full blocks of q's tokens in the prefix
// cache, leaving at least one token to compute. With take set it also takes
// them into q.blocks.
func (s *Scheduler) prefixHits(q *seq, take bool) int {
	if s.cfg.DisablePrefixCache {
		return 0
	}
	toks := q.g.Tokens()
	hits := 0
	for i := 0; (i+1)*s.bt <= len(toks)-1; i++ {
		h := s.hashAt(q, i)
		if !take {
			if _, ok := s.bm.cache[h]; !ok {
				break
			}
		} else {
			b, ok := s.bm.lookup(h)
			if !ok {
				break
			}
			q.blocks = append(q.blocks, b)
		}
		hits++
	}
	return hits
}

// registerFull puts q's newly completed blocks in the prefix cache.
func (s *Scheduler) registerFull(q *seq) {
	if s.cfg.DisablePrefixCache {
		return
	}
	full := min(q.computed/s.bt, len(q.blocks))
	for i := q.registered; i < full; i++ {
		s.bm.register(q.blocks[i], s.hashAt(q, i))
	}
	q.registered = max(q.registered, full)
}

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
	if take {
		q.shared = hits
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

// attachOwner returns a running sequence, of q's class or a higher one,
// that is still computing the full block of q's tokens that follows the
// hits blocks q finds in the prefix cache (the same chain hash: the same
// tokens, and the same before them); nil when there is none. Such a q
// attaches: it waits, unadmitted, until the owner has computed the blocks
// they share and takes them from the prefix cache, instead of computing
// them a second time beside it.
//
// A waiting attacher holds no memory and no place in line (admission
// skips it as it skips a job that does not fit), so it blocks nobody; and
// it waits only on a running owner, which progresses every step: an owner
// preempted or finished (canceled) is no longer running, and the attacher
// is admitted on its own the next step, prefilling what the cache lacks.
// An owner of a lower class is not waited on: its chunks may be cut small
// for higher-priority traffic, and it may be preempted for q's class.
func (s *Scheduler) attachOwner(q *seq, hits int) *seq {
	if s.cfg.DisablePrefixCache || q.swap != nil {
		return nil
	}
	end := (hits + 1) * s.bt // the end of the block after the hits
	if end > len(q.g.Tokens())-1 {
		return nil // not a block admission would take from the cache
	}
	h := s.hashAt(q, hits)
	for _, o := range s.running {
		if o == q || o.opts.Class > q.opts.Class || o.computed >= end || end > len(o.g.Tokens()) {
			continue
		}
		if s.hashAt(o, hits) == h {
			return o
		}
	}
	return nil
}

// awaitsPrefix reports whether waiting job q is to wait for a running
// sequence computing its next prompt blocks (attachOwner) rather than be
// admitted now, and counts a job's first wait.
func (s *Scheduler) awaitsPrefix(q *seq) bool {
	if s.attachOwner(q, s.prefixHits(q, false)) == nil {
		return false
	}
	if !q.attached {
		q.attached = true
		s.attaches.Add(1)
		if m := s.cfg.Metrics; m != nil {
			m.attaches.Inc()
		}
	}
	return true
}

// countDuplicated adds to the scheduler's count the prompt tokens plan
// computes in full blocks that another sequence computes too: blocks whose
// contents (chain hash) are in the prefix cache already, or that another
// running sequence has begun computing before this step, or that an
// earlier row of this step computes. With the prefix cache and attaching,
// none should be: a block is computed once and shared.
func (s *Scheduler) countDuplicated(plan []stepRow) {
	var dup int64
	var thisStep map[uint64]bool // made for the first prompt block: decode steps allocate nothing
	for _, r := range plan {
		q := r.q
		from, to := q.computed, q.computed+r.n
		full := len(q.g.Request().PromptIDs) / s.bt // full prompt blocks
		for i := from / s.bt; i < full && i*s.bt < to; i++ {
			h := s.hashAt(q, i)
			n := min(to, (i+1)*s.bt) - max(from, i*s.bt)
			if s.computedElsewhere(q, i, h) || thisStep[h] {
				dup += int64(n)
			}
			if thisStep == nil {
				thisStep = map[uint64]bool{}
			}
			thisStep[h] = true
		}
	}
	if dup > 0 {
		s.duplicated.Add(dup)
		if m := s.cfg.Metrics; m != nil {
			m.duplicated.Add(float64(dup))
		}
	}
}

// computedElsewhere reports whether block i of q, whose chain hash is h,
// is in the prefix cache as another block than q's, or has been begun by
// another running sequence.
func (s *Scheduler) computedElsewhere(q *seq, i int, h uint64) bool {
	if b, ok := s.bm.cache[h]; ok && (i >= len(q.blocks) || q.blocks[i] != b) {
		return true
	}
	for _, o := range s.running {
		if o != q && o.computed > i*s.bt && (i+1)*s.bt <= len(o.g.Tokens()) && s.hashAt(o, i) == h {
			return true
		}
	}
	return false
}

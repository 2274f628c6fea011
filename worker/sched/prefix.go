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
// them into q's tables, which must be empty.
//
// A logical block is a hit when every global group has it cached; with
// windowed groups, k hits also need their blocks within the window of
// position k×bt (the older ones are not read), so the count is the most k
// for which those are cached too.
func (s *Scheduler) prefixHits(q *seq, take bool) int {
	if s.cfg.DisablePrefixCache || q.emb != nil {
		// An embedding input computes every position: its pooling
		// reads each one's final hidden state, which the cache does
		// not keep. (Its blocks go to the cache for others.)
		return 0
	}
	toks := q.g.Tokens()
	cached := func(i, g int) bool {
		_, ok := s.bm.cache[cacheKey(s.hashAt(q, i), g)]
		return ok
	}
	// The global groups' run of hits; with windowed groups, the last
	// block before each where one of them misses.
	hits := 0
	miss := s.buf.hit[:0]
	last := int32(-1)
	for i := 0; (i+1)*s.bt <= len(toks)-1; i++ {
		ok := true
		for g := 0; g < s.pg.groups && ok; g++ {
			if !s.pg.local[g] {
				ok = cached(i, g)
			}
		}
		if !ok {
			break
		}
		if s.pg.nLocal > 0 {
			for g := 0; g < s.pg.groups; g++ {
				if s.pg.local[g] && !cached(i, g) {
					last = int32(i)
					break
				}
			}
			miss = append(miss, last)
		}
		hits++
	}
	if s.pg.nLocal > 0 {
		s.buf.hit = miss
		for hits > 0 && int(miss[hits-1]) >= s.keepFrom(hits*s.bt) {
			hits--
		}
	}
	if !take {
		return hits
	}
	keep := s.keepFrom(hits * s.bt)
	for g := 0; g < s.pg.groups; g++ {
		for i := 0; i < hits; i++ {
			if s.pg.local[g] && i < keep {
				q.tables[g] = append(q.tables[g], -1)
				continue
			}
			b, ok := s.bm.lookup(cacheKey(s.hashAt(q, i), g))
			if !ok {
				panic("sched: a prefix block found a moment ago is gone")
			}
			q.tables[g] = append(q.tables[g], b)
			q.held++
		}
	}
	q.lo = min(keep, hits)
	q.shared = hits
	return hits
}

// idleHitPages counts the blocks q takes with its first hits logical
// blocks from the prefix cache (hitPages) that no sequence references:
// the arena counts them available (an idle cached block is memory to
// reuse), yet q's hits take them. Admission subtracts them from what is
// available, or it would count them twice, once as memory q need not
// allocate and once as free memory for the rest: a job preempted with its
// blocks cached then came back at once to a "free" arena, took its own
// blocks back, and was evicted again at its next block (issue 37).
func (s *Scheduler) idleHitPages(q *seq, hits int) int {
	if hits == 0 {
		return 0
	}
	keep := s.keepFrom(hits * s.bt)
	n := 0
	for g := 0; g < s.pg.groups; g++ {
		for i := 0; i < hits; i++ {
			if s.pg.local[g] && i < keep {
				continue
			}
			if b, ok := s.bm.cache[cacheKey(s.hashAt(q, i), g)]; ok && s.bm.ref[b] == 0 {
				n++
			}
		}
	}
	return n
}

// registerFull puts q's newly completed blocks in the prefix cache, each
// group's under its own key.
func (s *Scheduler) registerFull(q *seq) {
	if s.cfg.DisablePrefixCache || s.m.Encoder {
		// An encoder's K and V depend on the whole input, not only on
		// the tokens before: no block of them is a prefix.
		return
	}
	full := min(q.computed/s.bt, q.logical())
	for i := q.registered; i < full; i++ {
		h := s.hashAt(q, i)
		for g, t := range q.tables {
			if i < len(t) && t[i] >= 0 {
				s.bm.register(t[i], cacheKey(h, g))
			}
		}
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
	if s.cfg.DisablePrefixCache || q.swap != nil || q.emb != nil {
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
	if b, ok := s.bm.cache[h]; ok && (i >= q.logical() || q.tables[0][i] != b) {
		return true
	}
	for _, o := range s.running {
		if o != q && o.computed > i*s.bt && (i+1)*s.bt <= len(o.g.Tokens()) && s.hashAt(o, i) == h {
			return true
		}
	}
	return false
}

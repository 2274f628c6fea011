package sample

// better reports whether token a ranks above token b: a higher value, or an
// equal value and a lower id. The values must not be NaN.
func better(x []float32, a, b int32) bool {
	if x[a] != x[b] {
		return x[a] > x[b]
	}
	return a < b
}

// selectTop moves the k best tokens of ids (by better) to ids[:k], best
// first, leaving the others in ids[k:] in no particular order. It runs in
// O(len(ids) log k) time without allocating: ids[:k] is kept as a heap whose
// root is the worst token kept so far, each later token replaces the root if
// it ranks above it, and the heap is finally sorted in place.
func selectTop(ids []int32, x []float32, k int) {
	if k <= 0 {
		return
	}
	h := ids[:k]
	heapify(h, x)
	for i := k; i < len(ids); i++ {
		if better(x, ids[i], h[0]) {
			ids[i], h[0] = h[0], ids[i]
			siftDown(h, x, 0)
		}
	}
	sortHeap(h, x)
}

// topOf fills h with the len(h) ≤ len(x) best tokens of x by better, best first:
// selectTop over every id of x in order, without writing the ids out.
// The scan meets the ids in increasing order, so a token ranks above the
// worst one kept (the heap's root, of a lower id) exactly when its value
// is greater: the scan compares values with the root's alone.
func topOf(h []int32, x []float32) {
	k := len(h)
	if k == 0 {
		return
	}
	listIDs(h)
	heapify(h, x)
	worst := x[h[0]]
	for i := k; i < len(x); i++ {
		if x[i] > worst {
			h[0] = int32(i)
			siftDown(h, x, 0)
			worst = x[h[0]]
		}
	}
	sortHeap(h, x)
}

// listIDs sets ids[i] = i.
func listIDs(ids []int32) {
	for i := range ids {
		ids[i] = int32(i)
	}
}

// heapify makes h a heap whose root is its worst token.
func heapify(h []int32, x []float32) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, x, i)
	}
}

// sortHeap sorts the heap h best first: moving the worst to the end each
// time.
func sortHeap(h []int32, x []float32) {
	for end := len(h) - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(h[:end], x, 0)
	}
}

// siftDown restores the heap property (parent ranks below both children)
// below position i.
func siftDown(h []int32, x []float32, i int) {
	for {
		worst := i
		l, r := 2*i+1, 2*i+2
		if l < len(h) && better(x, h[worst], h[l]) {
			worst = l
		}
		if r < len(h) && better(x, h[worst], h[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

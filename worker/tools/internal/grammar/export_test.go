package grammar

// Clone returns a copy of r that accepts tokens independently of it (its
// mask scratch is shared: masks are not taken from clones).
func (r *Run) Clone() *Run {
	c := *r
	c.threads = append([]thread(nil), r.threads...)
	return &c
}

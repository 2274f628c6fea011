package automaton

// ByteSet is a set of bytes.
type ByteSet [4]uint64

// Add puts b in the set.
func (s *ByteSet) Add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *ByteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Union adds every byte of o to the set.
func (s *ByteSet) Union(o *ByteSet) { s[0] |= o[0]; s[1] |= o[1]; s[2] |= o[2]; s[3] |= o[3] }

// SubsetOf reports whether every byte of the set is in o.
func (s *ByteSet) SubsetOf(o *ByteSet) bool {
	return s[0]&^o[0] == 0 && s[1]&^o[1] == 0 && s[2]&^o[2] == 0 && s[3]&^o[3] == 0
}

package tools

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)       { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool  { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) union(o *byteSet) { s[0] |= o[0]; s[1] |= o[1]; s[2] |= o[2]; s[3] |= o[3] }
func (s *byteSet) subsetOf(o *byteSet) bool {
	return s[0]&^o[0] == 0 && s[1]&^o[1] == 0 && s[2]&^o[2] == 0 && s[3]&^o[3] == 0
}

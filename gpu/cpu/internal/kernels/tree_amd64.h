// TREE8, shared by attn_amd64.s and wide_amd64.s.

// TREE8 reduces Y0..Y7 to one vector whose lane j is the sum of the lanes
// of Yj, left in Y0. Y1..Y7 are clobbered.
#define TREE8 \
	VHADDPS    Y1, Y0, Y0     \
	VHADDPS    Y3, Y2, Y2     \
	VHADDPS    Y5, Y4, Y4     \
	VHADDPS    Y7, Y6, Y6     \
	VHADDPS    Y2, Y0, Y0     \
	VHADDPS    Y6, Y4, Y4     \
	VPERM2F128 $0x20, Y4, Y0, Y1 \
	VPERM2F128 $0x31, Y4, Y0, Y2 \
	VADDPS     Y2, Y1, Y0

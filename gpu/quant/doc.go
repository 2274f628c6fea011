// Package quant is the pure Go reference for the weight storage formats:
// conversions between float32 and the 16-bit float formats, and encoders and
// decoders for the GGML block types, bit-compatible with GGUF files.
//
// All multi-byte fields are little endian. "half" below is an IEEE 754
// binary16 value (FP16ToFloat32).
//
// F32, F16, BF16: one element per "block", 4, 2 and 2 bytes. BF16 is the top
// 16 bits of a float32.
//
// Q8_0: blocks of 32 elements, 34 bytes:
//
//	half d; int8 q[32]          x[i] = q[i]·d
//
// Q4_0: blocks of 32 elements, 18 bytes:
//
//	half d; uint8 q[16]         x[i] = ((q[i] & 15) − 8)·d      for i < 16
//	                            x[i+16] = ((q[i] >> 4) − 8)·d
//
// The low nibbles hold the first half of the block and the high nibbles the
// second half, not interleaved pairs.
//
// Q4_K: super-blocks of 256 elements, 144 bytes:
//
//	half d; half dmin; uint8 scales[12]; uint8 q[128]
//
// The super-block has eight sub-blocks of 32 elements, each with a 6-bit
// scale sc[j] and a 6-bit min m[j] packed into the 12 scale bytes s:
// for j < 4, sc[j] = s[j] & 63 and m[j] = s[j+4] & 63; for j ≥ 4, the low
// four bits of sc[j] and m[j] are the low and high nibbles of s[j+4] and
// their top two bits are the top two bits of s[j−4] and s[j] respectively
// (ScaleMinK4). The 128 quant bytes are four chunks of 32 bytes; chunk c
// holds sub-block 2c in its low nibbles and sub-block 2c+1 in its high
// nibbles:
//
//	x[64c+l]    = d·sc[2c]·(q[32c+l] & 15) − dmin·m[2c]
//	x[64c+32+l] = d·sc[2c+1]·(q[32c+l] >> 4) − dmin·m[2c+1]
//
// where d·sc and dmin·m are each rounded to float32 first, as ggml does.
//
// Q6_K: super-blocks of 256 elements, 210 bytes:
//
//	uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d
//
// Each element has a 6-bit quant q (0..63, value q−32): the low four bits
// come from ql and the top two from qh, and each run of 16 elements has its
// own signed 8-bit scale, x[i] = d·scales[i/16]·(q−32). The super-block is
// two halves of 128 elements; half n uses ql[64n:64n+64] and qh[32n:32n+32].
// Within a half, for l < 32:
//
//	element l      low ql[l] & 15,     high qh[l] bits 0-1
//	element l+32   low ql[l+32] & 15,  high qh[l] bits 2-3
//	element l+64   low ql[l] >> 4,     high qh[l] bits 4-5
//	element l+96   low ql[l+32] >> 4,  high qh[l] bits 6-7
//
// Q4_1: blocks of 32, 20 bytes: half d; half m; uint8 q[16]; nibbles as
// in Q4_0, x = d·q + m (product rounded, then the add).
//
// Q5_0: blocks of 32, 22 bytes: half d; uint32 qh; uint8 q[16]. The fifth
// bit of element j is bit j of qh; x = d·((nibble | bit<<4) − 16).
//
// Q5_1: blocks of 32, 24 bytes: half d; half m; uint32 qh; uint8 q[16];
// x = d·(nibble | bit<<4) + m.
//
// Q5_K: super-blocks of 256, 176 bytes: half d; half dmin; uint8
// scales[12] (packed as in Q4_K); uint8 qh[32]; uint8 q[128]. Nibbles as in
// Q4_K; the fifth bit of element 32s+l (sub-block s) is bit s of qh[l].
//
// Q3_K: super-blocks of 256, 110 bytes: uint8 hmask[32]; uint8 q[64];
// uint8 scales[12]; half d. Sixteen runs of 16 with 6-bit scales (value
// s − 32): the low four bits of scale i are nibble i/8 of byte i%8, the top
// two bits are bits 2(i/4).. of byte 8 + i%4 (ScaleK3). Element e has the
// 2-bit quant (q[32(e/128) + e%32] >> 2((e/32)%4)) & 3, minus 4 unless bit
// e/32 of hmask[e%32] is set; x = (d·(s − 32))·q.
//
// Q2_K: super-blocks of 256, 84 bytes: uint8 scales[16]; uint8 q[64];
// half d; half dmin. Byte i of scales holds the 4-bit scale (low) and min
// (high) of run i; the 2-bit quants are laid out as in Q3_K;
// x = (d·sc)·q − dmin·m.
//
// Dequantize reproduces ggml's float arithmetic exactly. Quantize follows
// ggml's reference rules for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1; for the
// K-quants it searches a few candidate scales per sub-block and keeps the one with the least
// squared error, which gives error comparable to ggml's but not the same
// bytes.
//
// It imports gpu (the types) and nothing else of ours.
package quant

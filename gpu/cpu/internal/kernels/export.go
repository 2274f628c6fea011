package kernels

// Sum returns the sum of x with the vector kernel (used to measure memory
// bandwidth with the same loads the F32 matrix kernels issue).
func Sum(x []float32) float32 { return sumF32(x) }

// Dot returns the dot product of x and w[:len(x)].
func Dot(x, w []float32) float32 { return dotF32(x, w) }

// QuantizeQ8_0 quantizes x (len a multiple of 32) to int8 values qs and a
// float32 scale per block of 32, as the activations are (d = amax/127,
// q = round(x·127/amax)): what a Q8_0 KV cache stores, its scales then
// rounded to float16 as llama.cpp's are.
func QuantizeQ8_0(x []float32, qs []int8, d []float32) { quantizeQ8_0(x, qs, d) }

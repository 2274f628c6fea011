package kernels

// Sum returns the sum of x with the vector kernel (used to measure memory
// bandwidth with the same loads the F32 matrix kernels issue).
func Sum(x []float32) float32 { return sumF32(x) }

// Dot returns the dot product of x and w[:len(x)].
func Dot(x, w []float32) float32 { return dotF32(x, w) }

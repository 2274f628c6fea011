package gguf

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.Metadata[key].(string)
	return s, ok
}

// Uint returns an unsigned or non-negative signed integer value of any width.
func (f *File) Uint(key string) (uint64, bool) {
	switch v := f.Metadata[key].(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Int returns an integer value of any width as int64.
func (f *File) Int(key string) (int64, bool) {
	switch v := f.Metadata[key].(type) {
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), v <= 1<<63-1
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

// Float returns a float or integer value as float64.
func (f *File) Float(key string) (float64, bool) {
	switch v := f.Metadata[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if i, ok := f.Int(key); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a boolean value.
func (f *File) Bool(key string) (bool, bool) {
	b, ok := f.Metadata[key].(bool)
	return b, ok
}

// Strings returns a string array value.
func (f *File) Strings(key string) ([]string, bool) {
	s, ok := f.Metadata[key].([]string)
	return s, ok
}

// Float32s returns a float32 array value.
func (f *File) Float32s(key string) ([]float32, bool) {
	s, ok := f.Metadata[key].([]float32)
	return s, ok
}

// Int32s returns an integer array value of any 8-, 16- or 32-bit element type as []int32.
func (f *File) Int32s(key string) ([]int32, bool) {
	switch v := f.Metadata[key].(type) {
	case []int32:
		return v, true
	case []uint32:
		return conv(v), true
	case []int16:
		return conv(v), true
	case []uint16:
		return conv(v), true
	case []int8:
		return conv(v), true
	case []uint8:
		return conv(v), true
	}
	return nil, false
}

func conv[T uint32 | int16 | uint16 | int8 | uint8](v []T) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// Architecture returns general.architecture ("llama", "qwen2", ...).
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

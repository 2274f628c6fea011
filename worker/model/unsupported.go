package model

import (
	"fmt"
	"strings"

	"github.com/zerolayer/zerolayer/gpu"
)

// unsupportedType is the error for a tensor stored in a type no backend
// runs: it names the tensor, the type and the types that run.
func unsupportedType(tensor string, t gpu.DType) error {
	names := make([]string, len(gpu.DTypes))
	for i, d := range gpu.DTypes {
		names[i] = d.String()
	}
	return fmt.Errorf("%w: %s is %v, which zerolayer does not run; supported: %s", gpu.ErrUnsupportedType, tensor, t, strings.Join(names, ", "))
}

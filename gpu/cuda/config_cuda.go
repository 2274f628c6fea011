//go:build cuda || cudaemu

package cuda

import "fmt"

// validate reports a config New cannot use. It lives beside the backend it
// guards: the stub's New (no cuda tag) fails with ErrNotBuilt whatever the
// config.
func (c Config) validate() error {
	if c.Device < 0 {
		return fmt.Errorf("cuda: device ordinal %d is negative; use 0 for the first GPU", c.Device)
	}
	return nil
}

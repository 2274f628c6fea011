package contracts

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

// update rewrites the generated files (schema/*.json, errors.md) instead of
// comparing them.
var update = flag.Bool("update", false, "rewrite schema/*.json and errors.md from the Go definitions")

// TestMain fails the run if a test leaves goroutines behind, such as an
// embedded NATS server or a connection that was not shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

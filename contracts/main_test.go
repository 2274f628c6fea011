package contracts

import "flag"

// update rewrites the generated files (schema/*.json, errors.md) instead of
// comparing them.
var update = flag.Bool("update", false, "rewrite schema/*.json and errors.md from the Go definitions")

//go:build race

package gateway_test

// raceOn reports the race detector, under which the worker runs several
// times slower.
const raceOn = true

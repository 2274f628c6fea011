//go:build race

package gpu

// raceOn: the race detector's shadow memory faults pages of its own.
const raceOn = true

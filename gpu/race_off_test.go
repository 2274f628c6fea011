//go:build !race

package gpu

const raceOn = false

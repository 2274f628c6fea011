//go:build !race

package tools

// timeSlack scales time limits under the race detector.
const timeSlack = 1

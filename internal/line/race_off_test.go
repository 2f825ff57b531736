//go:build !race

package line

// raceEnabled: the race detector is off (race_on_test.go).
const raceEnabled = false

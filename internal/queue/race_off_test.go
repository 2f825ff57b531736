//go:build !race

package queue

// RaceEnabled: see race_on_test.go.
const RaceEnabled = false

//go:build race

package queue

// RaceEnabled: the race detector is on. Its sync.Pool drops a quarter of
// what is put back, so allocation budgets are checked without it (make test
// runs them so).
const RaceEnabled = true

//go:build race

package line

// raceEnabled: the race detector is on. Its sync.Pool drops a quarter of
// what is put back, so allocation budgets are checked without it (make test
// runs them so).
const raceEnabled = true

// Package loadtest is waitroom's load proof. Its benchmarks drive the real
// gateway, admitter and booking binaries (internal/testsupport/stack) on private
// Redis and PostgreSQL on this machine, and write what they measure to
// docs/PERFORMANCE.md (and the admission plot docs/sale.png), so that the
// figures in the repository are always the output of code anyone can rerun
// with `make bench`.
//
// The sale's simulated fans, their figures and the admission rate are
// package rehearsal's, the one cmd/rehearse drives a room with, and the
// plots package plot's. The package's own non-test files hold only the
// small, pure pieces the benchmarks share (latencies, the report file); a
// plain `go test` runs their fast tests and never a benchmark.
package loadtest

// Package loadtest is waitroom's load proof. Its benchmarks drive the real
// gateway, admitter and booking binaries (internal/testsupport/stack) on private
// Redis and PostgreSQL on this machine, and write what they measure to
// docs/PERFORMANCE.md (and the admission plot docs/sale.png), so that the
// figures in the repository are always the output of code anyone can rerun
// with `make bench`.
//
// The package's non-test files hold only the small, pure pieces the
// benchmarks share (percentiles, the PNG plot, the report file); a plain
// `go test` runs their fast tests and never a benchmark.
package loadtest

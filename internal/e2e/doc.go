// Package e2e holds the end-to-end tests of waitroom: the real binaries on
// private Redis and PostgreSQL (internal/testsupport/stack), driven through the
// gateway by HTTP clients, by a headless Chromium and by Node (the room's SDK,
// testdata/sdk), with the invariants checked in Redis and PostgreSQL
// afterwards.
//
// # Parallel scenarios
//
// Every scenario starts its own stack (its processes, its Redis, its
// database, free ports) and its own browser, so scenarios can run side by
// side. The long ones whose checks are about what happened, not about how
// fast (the fault suites, the network faults, the browser journeys and
// fan pages, the cluster sale and failover, the away sale) call
// t.Parallel: go test runs them after the others, two at a time
// (-parallel, GOMAXPROCS by default). The scenarios that measure a rate or
// a latency against a bound (TestAdaptiveSale, TestRehearsal) run alone,
// and so do those that have not been tried side by side since their
// timing was made to wait on conditions (TestCheating, TestPresaleSale:
// with 10 s presale windows it failed beside TestFaults; they are 30 s
// now).
package e2e

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
// fast (the fault suites, the browser journeys, the cluster sales),
// call t.Parallel: go test runs them after the others, two at a
// time (-parallel, GOMAXPROCS by default), which takes the package from
// about 15 minutes to about 10 on two cores. The scenarios that measure a
// rate or a latency against a bound (TestAdaptiveSale, TestRehearsal), or
// whose steps must fit a window of a few seconds (TestPresaleSale: ten
// buyers hold, pay and are known to the line within their 10 s window),
// run alone.
package e2e

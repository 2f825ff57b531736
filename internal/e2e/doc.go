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
// side, and all but two do (t.Parallel): go test runs them after the
// others, two at a time (TestMain: scenariosAtOnce, unless -parallel is
// given). Most of a scenario's time is waiting, for a tick, a presale
// window, a hold to lapse or a browser: with two at a time the package
// used about two-thirds of one core. Their checks are about what happened,
// not how fast. Three at a time was tried beside the race detector's
// packages: TestBrowserFanPages (the shop's page without JavaScript, read
// after its fan's turn may have come) and the journey's payment (fixed)
// still leaned on timing. The two that measure a rate or a latency against
// a bound, TestAdaptiveSale and TestRehearsal, run first and alone.
package e2e

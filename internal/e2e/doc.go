// Package e2e holds the end-to-end tests of waitroom: the real binaries on
// private Redis and PostgreSQL (internal/testsupport/stack), driven through the
// gateway by HTTP clients, by a headless Chromium and by Node (the room's SDK,
// testdata/sdk), with the invariants checked in Redis and PostgreSQL
// afterwards.
package e2e

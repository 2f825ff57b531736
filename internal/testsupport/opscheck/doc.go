// Package opscheck holds no production code. Its tests keep the operations
// artifacts honest: the Prometheus rules pass promtool's own checks and unit
// tests, every dashboard and alert queries only metrics the binaries export,
// docker-compose.yml agrees with the config and with Prometheus on who listens
// where, the Dockerfile's build command really builds the three binaries, and
// the README's import rule holds: the domain and its stores reach neither the
// config nor the service runner (imports_test.go).
//
// Dashboards and alerts fail silently when they name a metric that does not
// exist (an empty panel, an alert that never fires), so these checks exist to
// make that loud. The helpers here (PromQL metric-name extraction, reading the
// Prometheus text format) are what the tests need and nothing more.
package opscheck

package loadtest

import "github.com/waitroom/waitroom/internal/testsupport/plot"

// The plots are package plot's (shared with the end-to-end tests).
type (
	point  = plot.Point
	series = plot.Series
)

var (
	plotBlue = plot.Blue
	plotRed  = plot.Red
	plotPNG  = plot.PNG
)

const (
	marginTop    = plot.MarginTop
	marginBottom = plot.MarginBottom
)

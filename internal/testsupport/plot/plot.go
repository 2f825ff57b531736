// Package plot draws the line plots of the docs (docs/sale.png,
// docs/adaptive.png) from test measurements.
package plot

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
)

// A line plot drawn with the standard library only (image, image/png): no
// plotting dependency for one chart. Axis ticks are labelled with a tiny
// bitmap font of digits; titles and the legend live in the Markdown next to
// the image.

// Point is one (x, y) sample.
type Point struct{ X, Y float64 }

// Series is one line of a plot.
type Series struct {
	Points []Point
	Color  color.RGBA
	Dashed bool
}

var (
	black    = color.RGBA{0, 0, 0, 255}
	gridGray = color.RGBA{225, 225, 225, 255}
	Blue     = color.RGBA{31, 119, 180, 255}
	Red      = color.RGBA{214, 39, 40, 255}
)

// plot margins (pixels) around the data area: room for the tick labels.
const (
	marginLeft   = 56
	marginRight  = 16
	MarginTop    = 16
	MarginBottom = 36
	fontScale    = 2
)

// PNG draws the Series on axes that start at (0, 0) and end at a round
// number above the largest x and y, and writes the PNG to w.
func PNG(w io.Writer, width, height int, lines ...Series) error {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	var xMax, yMax float64
	for _, s := range lines {
		for _, p := range s.Points {
			xMax, yMax = math.Max(xMax, p.X), math.Max(yMax, p.Y)
		}
	}
	xStep, yStep := niceStep(xMax), niceStep(yMax)
	xMax = xStep * math.Max(1, math.Ceil(xMax/xStep))
	yMax = yStep * math.Max(1, math.Ceil(yMax/yStep))

	x0, y0 := marginLeft, height-MarginBottom // origin, in pixels
	x1, y1 := width-marginRight, MarginTop
	px := func(x float64) int { return x0 + int(math.Round(x/xMax*float64(x1-x0))) }
	py := func(y float64) int { return y0 - int(math.Round(y/yMax*float64(y0-y1))) }

	for y := yStep; y <= yMax+yStep/2; y += yStep { // horizontal grid + y labels
		line(img, x0, py(y), x1, py(y), gridGray, 1, false)
		label := strconv.FormatFloat(y, 'f', -1, 64)
		text(img, x0-6-textWidth(label), py(y)-fontScale*5/2, label, black)
	}
	text(img, x0-6-textWidth("0"), y0-fontScale*5/2, "0", black)
	for x := xStep; x <= xMax+xStep/2; x += xStep { // x ticks + labels
		line(img, px(x), y0, px(x), y0+4, black, 1, false)
		label := strconv.FormatFloat(x, 'f', -1, 64)
		text(img, px(x)-textWidth(label)/2, y0+8, label, black)
	}
	line(img, x0, y0, x1, y0, black, 1, false) // x axis
	line(img, x0, y0, x0, y1, black, 1, false) // y axis

	for _, s := range lines {
		for i := 1; i < len(s.Points); i++ {
			a, b := s.Points[i-1], s.Points[i]
			line(img, px(a.X), py(a.Y), px(b.X), py(b.Y), s.Color, 2, s.Dashed)
		}
	}
	return png.Encode(w, img)
}

// niceStep is a tick step of 1, 2 or 5 × 10^k giving about five ticks up to v.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	raw := v / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// line draws from (xa, ya) to (xb, yb) with Bresenham's algorithm, width
// pixels thick; dashed lines draw 8 pixels of every 14.
func line(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA, width int, dashed bool) {
	dx, dy := abs(xb-xa), -abs(yb-ya)
	sx, sy := sign(xb-xa), sign(yb-ya)
	e := dx + dy
	for step := 0; ; step++ {
		if !dashed || step%14 < 8 {
			for i := 0; i < width; i++ {
				for j := 0; j < width; j++ {
					img.SetRGBA(xa+i-width/2, ya+j-width/2, c)
				}
			}
		}
		if xa == xb && ya == yb {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			xa += sx
		} else {
			e += dx
			ya += sy
		}
	}
}

// digits is a 3×5 bitmap font: one row per string, '#' = ink.
var digits = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"},
	'1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"},
	'3': {"###", "..#", "###", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"},
	'5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"},
	'7': {"###", "..#", "..#", "..#", "..#"},
	'8': {"###", "#.#", "###", "#.#", "###"},
	'9': {"###", "#.#", "###", "..#", "###"},
	'.': {"...", "...", "...", "...", ".#."},
	'-': {"...", "...", "###", "...", "..."},
}

func textWidth(s string) int { return len(s) * 4 * fontScale }

// text writes s with its top-left corner at (x, y).
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		glyph, ok := digits[r]
		if ok {
			for row, bits := range glyph {
				for col, b := range bits {
					if b != '#' {
						continue
					}
					for i := 0; i < fontScale; i++ {
						for j := 0; j < fontScale; j++ {
							img.SetRGBA(x+col*fontScale+i, y+row*fontScale+j, c)
						}
					}
				}
			}
		}
		x += 4 * fontScale
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

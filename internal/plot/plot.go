// Package plot draws line plots of measurements with the standard library
// only: PNG for the figures in the docs (docs/sale.png, docs/adaptive.png,
// written by the benchmarks and the end-to-end tests), SVG for the
// rehearsal's plot (cmd/rehearse -plot). Both draw on the same frame: axes
// from (0, 0) to a round number above the largest x and y, ticks of 1, 2 or
// 5 × 10^k.
package plot

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
)

// The PNG is drawn with image and image/png: no plotting dependency for a
// few charts. Its axis ticks are labelled with a tiny bitmap font of digits;
// titles and the legend live in the Markdown next to the image. The SVG
// (svg.go) is text, so it carries its own titles, axis names and legend.

// Point is one (x, y) sample.
type Point struct{ X, Y float64 }

// Series is one line of a plot.
type Series struct {
	Points []Point
	Color  color.RGBA
	Dashed bool
	// Name is the line's entry in an SVG's legend ("" = none); the PNG has
	// no legend.
	Name string
}

var (
	black    = color.RGBA{0, 0, 0, 255}
	gridGray = color.RGBA{225, 225, 225, 255}
	Blue     = color.RGBA{31, 119, 180, 255}
	Red      = color.RGBA{214, 39, 40, 255}
	Green    = color.RGBA{44, 160, 44, 255}
)

// plot margins (pixels) around the data area: room for the tick labels.
const (
	marginLeft   = 56
	marginRight  = 16
	marginTop    = 16
	marginBottom = 36
	fontScale    = 2
)

// frame is the data area of a plot and the scale of its axes: x from 0
// to xMax, y from 0 to yMax, in pixels from (x0, y0), the origin at the
// bottom left, to (x1, y1) at the top right.
type frame struct {
	xMax, yMax, xStep, yStep float64
	x0, y0, x1, y1           int
}

// frameOf fits lines into the rectangle (left, top)–(right, bottom): axes
// that start at (0, 0) and end at a round number above the largest x and y.
func frameOf(left, top, right, bottom int, lines []Series) frame {
	var xMax, yMax float64
	for _, s := range lines {
		for _, p := range s.Points {
			xMax, yMax = math.Max(xMax, p.X), math.Max(yMax, p.Y)
		}
	}
	xStep, yStep := niceStep(xMax), niceStep(yMax)
	return frame{
		xMax: xStep * math.Max(1, math.Ceil(xMax/xStep)), yMax: yStep * math.Max(1, math.Ceil(yMax/yStep)),
		xStep: xStep, yStep: yStep,
		x0: left, y0: bottom, x1: right, y1: top,
	}
}

// px and py place a value on the frame, in pixels.
func (f frame) px(x float64) int { return f.x0 + int(math.Round(x/f.xMax*float64(f.x1-f.x0))) }
func (f frame) py(y float64) int { return f.y0 - int(math.Round(y/f.yMax*float64(f.y0-f.y1))) }

// xTicks and yTicks are the labelled values of each axis past 0.
func (f frame) xTicks() []float64 { return ticks(f.xStep, f.xMax) }
func (f frame) yTicks() []float64 { return ticks(f.yStep, f.yMax) }

func ticks(step, end float64) []float64 {
	var out []float64
	for v := step; v <= end+step/2; v += step {
		out = append(out, v)
	}
	return out
}

// label is a tick's text: the shortest decimal that reads back as v.
func label(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// PNG draws the Series on axes that start at (0, 0) and end at a round
// number above the largest x and y, and writes the PNG to w.
func PNG(w io.Writer, width, height int, lines ...Series) error {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for i := range img.Pix {
		img.Pix[i] = 255
	}
	f := frameOf(marginLeft, marginTop, width-marginRight, height-marginBottom, lines)
	x0, y0, x1, y1 := f.x0, f.y0, f.x1, f.y1
	for _, y := range f.yTicks() { // horizontal grid + y labels
		line(img, x0, f.py(y), x1, f.py(y), gridGray, 1, false)
		l := label(y)
		text(img, x0-6-textWidth(l), f.py(y)-fontScale*5/2, l, black)
	}
	text(img, x0-6-textWidth("0"), y0-fontScale*5/2, "0", black)
	for _, x := range f.xTicks() { // x ticks + labels
		line(img, f.px(x), y0, f.px(x), y0+4, black, 1, false)
		l := label(x)
		text(img, f.px(x)-textWidth(l)/2, y0+8, l, black)
	}
	line(img, x0, y0, x1, y0, black, 1, false) // x axis
	line(img, x0, y0, x0, y1, black, 1, false) // y axis

	for _, s := range lines {
		for i := 1; i < len(s.Points); i++ {
			a, b := s.Points[i-1], s.Points[i]
			line(img, f.px(a.X), f.py(a.Y), f.px(b.X), f.py(b.Y), s.Color, 2, s.Dashed)
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

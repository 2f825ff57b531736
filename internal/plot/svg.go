package plot

import (
	"bufio"
	"fmt"
	"html"
	"image/color"
	"io"
	"strings"
)

// Panel is one chart of an SVG: a title, the names of its axes, and its
// lines, drawn on a frame of its own (the panels of one SVG share nothing
// but their width, so a rate and a line's length can sit one above the
// other, each on its own scale).
type Panel struct {
	Title, XLabel, YLabel string
	Lines                 []Series
}

// SVG margins (pixels) around each panel's data area: room for the title
// above, the tick labels and the axis names around, the legend below.
const (
	svgLeft   = 64
	svgRight  = 16
	svgTop    = 40
	svgBottom = 64
)

// SVG draws the panels one above the other, each panelHeight pixels high
// and width wide, and writes the SVG document to w. Every text in it is
// escaped; a panel with no point is drawn with empty axes.
func SVG(w io.Writer, width, panelHeight int, panels ...Panel) error {
	b := bufio.NewWriter(w)
	height := panelHeight * len(panels)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	var titles []string
	for _, p := range panels {
		titles = append(titles, p.Title)
	}
	fmt.Fprintf(b, "<title>%s</title>\n", esc(strings.Join(titles, "; ")))
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	for i, p := range panels {
		top := i * panelHeight
		svgPanel(b, p, frameOf(svgLeft, top+svgTop, width-svgRight, top+panelHeight-svgBottom, p.Lines), top)
	}
	b.WriteString("</svg>\n")
	return b.Flush()
}

func svgPanel(b *bufio.Writer, p Panel, f frame, top int) {
	fmt.Fprintf(b, `<g class="panel">`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", f.x0, top+20, esc(p.Title))
	for _, y := range f.yTicks() {
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", f.x0, f.py(y), f.x1, f.py(y), hex(gridGray))
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", f.x0-6, f.py(y)+4, label(y))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", f.x0-6, f.y0+4)
	for _, x := range f.xTicks() {
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>`+"\n", f.px(x), f.y0, f.px(x), f.y0+4)
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", f.px(x), f.y0+18, label(x))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>`+"\n", f.x0, f.y0, f.x1, f.y0)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>`+"\n", f.x0, f.y0, f.x0, f.y1)
	if p.XLabel != "" {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (f.x0+f.x1)/2, f.y0+34, esc(p.XLabel))
	}
	if p.YLabel != "" {
		cy := (f.y0 + f.y1) / 2
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n", 14, cy, 14, cy, esc(p.YLabel))
	}
	legendX := f.x0
	for _, s := range p.Lines {
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="8 6"`
		}
		if len(s.Points) > 0 {
			var pts strings.Builder
			for i, pt := range s.Points {
				if i > 0 {
					pts.WriteByte(' ')
				}
				fmt.Fprintf(&pts, "%d,%d", f.px(pt.X), f.py(pt.Y))
			}
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`+"\n",
				hex(s.Color), dash, pts.String(), esc(s.Name))
		}
		if s.Name != "" {
			y := f.y0 + 52
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", legendX, y-4, legendX+24, y-4, hex(s.Color), dash)
			fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", legendX+30, y, esc(s.Name))
			legendX += 30 + 7*len([]rune(s.Name)) + 24
		}
	}
	b.WriteString("</g>\n")
}

func esc(s string) string { return html.EscapeString(s) }

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

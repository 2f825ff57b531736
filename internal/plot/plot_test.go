package plot

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"strings"
	"testing"
)

func TestPNG(t *testing.T) {
	measured := Series{Color: Blue}
	for x := 0; x <= 60; x++ {
		measured.Points = append(measured.Points, Point{X: float64(x), Y: float64(x % 20 * 5)})
	}
	configured := Series{Color: Red, Points: []Point{{X: 0, Y: 50}, {X: 60, Y: 50}}}
	var buf bytes.Buffer
	if err := PNG(&buf, 640, 320, measured, configured); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 320 {
		t.Fatalf("size = %v; want 640×320", b)
	}
	count := func(want [3]uint32) int {
		n := 0
		for y := 0; y < 320; y++ {
			for x := 0; x < 640; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if [3]uint32{r >> 8, g >> 8, b >> 8} == want {
					n++
				}
			}
		}
		return n
	}
	// y runs 0..100 (max 95 rounded up to the 20-step), so y = 50 sits
	// half-way up the data area; the configured line is drawn there.
	y50 := (320 - marginBottom) - (320-marginBottom-marginTop)/2
	r, g, b, _ := img.At(320, y50).RGBA()
	if [3]uint32{r >> 8, g >> 8, b >> 8} != [3]uint32{uint32(Red.R), uint32(Red.G), uint32(Red.B)} {
		t.Errorf("pixel (320, %d) = %d,%d,%d; want the configured line's red", y50, r>>8, g>>8, b>>8)
	}
	if n := count([3]uint32{uint32(Blue.R), uint32(Blue.G), uint32(Blue.B)}); n < 500 {
		t.Errorf("%d blue pixels; want the measured line drawn (≥ 500)", n)
	}
	if n := count([3]uint32{0, 0, 0}); n < 600 {
		t.Errorf("%d black pixels; want axes and labels (≥ 600)", n)
	}
}

// The SVG is a well-formed document with one panel per Panel, each line a
// polyline on its own panel's scale, the legend and titles escaped.
func TestSVG(t *testing.T) {
	rate := Panel{Title: "Admitted per second", XLabel: "seconds", YLabel: "fans/s", Lines: []Series{
		{Name: "configured <5>", Color: Red, Dashed: true, Points: []Point{{0, 5}, {60, 5}}},
		{Name: "admitted", Color: Blue, Points: []Point{{0, 0}, {30, 5}, {60, 4}}},
	}}
	line := Panel{Title: "Waiting & more", Lines: []Series{{Name: "waiting", Color: Green, Points: []Point{{0, 20000}, {60, 19700}}}}}
	empty := Panel{Title: "Nothing yet"}
	var buf bytes.Buffer
	if err := SVG(&buf, 800, 300, rate, line, empty); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Height  int      `xml:"height,attr"`
		Panels  []struct {
			Texts     []string `xml:"text"`
			Polylines []struct {
				Stroke string `xml:"stroke,attr"`
				Dash   string `xml:"stroke-dasharray,attr"`
				Points string `xml:"points,attr"`
			} `xml:"polyline"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, buf.String())
	}
	if doc.Height != 900 || len(doc.Panels) != 3 {
		t.Fatalf("height %d, %d panels; want 900, 3", doc.Height, len(doc.Panels))
	}
	p := doc.Panels[0]
	if len(p.Polylines) != 2 || p.Polylines[0].Stroke != "#d62728" || p.Polylines[0].Dash == "" || p.Polylines[1].Stroke != "#1f77b4" {
		t.Errorf("rate panel's lines = %+v; want the dashed red configured, then the blue admitted", p.Polylines)
	}
	texts := strings.Join(p.Texts, "|")
	for _, want := range []string{"Admitted per second", "seconds", "fans/s", "configured <5>", "admitted"} {
		if !strings.Contains(texts, want) {
			t.Errorf("rate panel's texts %q lack %q", texts, want)
		}
	}
	// The line's panel has its own scale: 20,000 fans do not flatten the rate.
	if !strings.Contains(strings.Join(doc.Panels[1].Texts, "|"), "20000") {
		t.Errorf("line panel's ticks %q; want its own scale up to 20000", doc.Panels[1].Texts)
	}
	if len(doc.Panels[2].Polylines) != 0 {
		t.Errorf("empty panel drew %d lines", len(doc.Panels[2].Polylines))
	}
	if !strings.Contains(buf.String(), "configured &lt;5&gt;") {
		t.Error("legend text not escaped")
	}
}

package web

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// ReportPage is GET /e/{event}/report: the sale's figures and charts.
const ReportPage = "report"

// Report is a sale's report as its page shows it.
type Report struct {
	Joined, Admitted, Left, Abandoned int64
	StraightThrough                   int64   // of Admitted, let in at their join, after no wait (auto, passthrough)
	Mean, Configured                  float64 // fans admitted per second while the line waited; configured
	Waited                            bool    // someone waited: Mean measures something
	Inversions                        int64   // FIFO inversions after opening
	RankInversions                    int64   // pre-queue entries let in out of the draw's order
	Wait, ETAError                    *Spread // nil while nothing was measured
	SoldOutAt                         *time.Time
	Minutes                           []Minute
	Lottery                           *Lottery // nil: the sale had no pre-queue lottery
}

// Spread is a median and a 95th percentile, in seconds.
type Spread struct{ P50, P95 float64 }

// Minute is one minute of the sale.
type Minute struct {
	At         time.Time // in the event's zone
	PerSecond  float64
	Configured float64
	Waiting    int64
}

// Lottery is the committed lottery, and the fan's own draw once drawn.
type Lottery struct {
	Commitment  string
	CommittedAt time.Time
	DrawAt      *time.Time
	Seed        string // "" until opens_at
	Entries     *int64
	Ticket      string // the fan's ticket id, "" when it has no draw
	Draw        string
	Rank        int64
}

// Seconds writes a duration in seconds for the page: "12.5 s".
func (l *Locale) Seconds(s float64) string {
	return l.T("report.seconds", "s", strconv.FormatFloat(math.Round(s*10)/10, 'f', -1, 64))
}

// Rate writes a rate per second.
func (l *Locale) Rate(r float64) string {
	return strconv.FormatFloat(math.Round(r*100)/100, 'f', -1, 64)
}

// RateChart is the admission rate minute by minute (bars) against the
// rate configured (a stepped line), as inline SVG.
func (r *Report) RateChart(l *Locale) template.HTML {
	if len(r.Minutes) == 0 {
		return ""
	}
	bars := make([]float64, len(r.Minutes))
	ref := make([]float64, len(r.Minutes))
	for i, m := range r.Minutes {
		bars[i], ref[i] = m.PerSecond, m.Configured
	}
	return chart(l, "chart-rate", l.T("report.chart.rate"), l.T("report.chart.rateDesc"), r.Minutes, bars, ref)
}

// LineChart is the length of the line minute by minute, as inline SVG.
func (r *Report) LineChart(l *Locale) template.HTML {
	if len(r.Minutes) == 0 {
		return ""
	}
	bars := make([]float64, len(r.Minutes))
	for i, m := range r.Minutes {
		bars[i] = float64(m.Waiting)
	}
	return chart(l, "chart-line", l.T("report.chart.line"), l.T("report.chart.lineDesc"), r.Minutes, bars, nil)
}

// chart draws bars (and, if given, a reference line) over the minutes:
// a viewBox that scales to the phone's width, colours from app.css
// classes, a <title> and <desc> for screen readers.
func chart(l *Locale, id, title, desc string, minutes []Minute, bars, ref []float64) template.HTML {
	const w, h, left, bottom, top = 640.0, 240.0, 48.0, 28.0, 12.0
	top2 := 0.0
	for i := range bars {
		top2 = math.Max(top2, bars[i])
		if ref != nil {
			top2 = math.Max(top2, ref[i])
		}
	}
	scale := niceCeil(top2)
	plotW, plotH := w-left-8, h-bottom-top
	y := func(v float64) float64 { return top + plotH - v/scale*plotH }
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg id="%s" class="chart" viewBox="0 0 %g %g" role="img" aria-labelledby="%s-title %s-desc">`, id, w, h, id, id)
	fmt.Fprintf(&b, `<title id="%s-title">%s</title><desc id="%s-desc">%s</desc>`, id, esc(title), id, esc(desc))
	for i := 0; i <= 4; i++ {
		v := scale * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%g" x2="%g" y1="%.1f" y2="%.1f"/>`, left, w-8, y(v), y(v))
		fmt.Fprintf(&b, `<text class="axis" x="%g" y="%.1f" text-anchor="end">%s</text>`, left-6, y(v)+4, esc(l.Rate(v)))
	}
	step := plotW / float64(len(bars))
	every := int(math.Ceil(float64(len(bars)) / 6))
	for i, v := range bars {
		x := left + float64(i)*step
		fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %s</title></rect>`,
			x+step*0.1, y(v), step*0.8, y(0)-y(v), esc(minutes[i].At.Format("15:04")), esc(l.Rate(v)))
		if i%every == 0 {
			fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%g" text-anchor="middle">%s</text>`, x+step/2, h-8, esc(minutes[i].At.Format("15:04")))
		}
	}
	if ref != nil {
		var pts []string
		for i, v := range ref {
			x := left + float64(i)*step
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x, y(v), x+step, y(v)))
		}
		fmt.Fprintf(&b, `<polyline class="ref" points="%s"/>`, strings.Join(pts, " "))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped above
}

// niceCeil is the smallest 1, 2 or 5 × 10^k at or above v (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

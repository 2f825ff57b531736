package loadtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/waitroom/waitroom/internal/gateway/web"
)

// The report, docs/PERFORMANCE.md, is regenerated whole every time a
// benchmark writes its section: a fixed header, then the sections in a fixed
// order, each between markers. A benchmark replaces only its own section and
// keeps the others' last figures, so the benchmarks can run one at a time.

// sections of the report, in order.
// "soldout" and "transparency" are written by hand (comparisons of two
// trees); no benchmark replaces them.
var sections = []string{"edge", "wrk", "forwardauth", "million", "sale", "soldout", "rate", "proof", "transparency"}

const reportHeader = `# Performance

These figures are written by the benchmarks in ` + "`internal/loadtest`" + `, run once each by
` + "`make bench`" + `; do not edit them by hand. Each benchmark starts the real stack
(gateway, admitter and booking binaries built from this tree, a private Redis and
PostgreSQL) on 127.0.0.1 and replaces its own section below.

**Machine.** The figures come from a **2-core machine with everything on it**: Redis,
PostgreSQL, the three services *and the load generator* share the same two cores (and,
when these were taken, other work on the machine too). Absolute numbers are therefore a
floor, not a capacity; the ratios against the bare handler measured in the same run are
the meaningful comparison. Even the ratios move with the machine: the two edge sections
below come from a machine where a system call costs about twice what it did on the one
before it (the bare handler's CPU per request 12–19 µs instead of 6–7 µs), which makes the
gateway's own work a smaller share of a request; docs/EDGE.md, fourth round, gives both.

The booking core's own figures (hold throughput, contention, checkout) are in
[BOOKING.md](BOOKING.md).
`

const notMeasured = "_Not measured yet: run `make bench`._\n"

var sectionRE = regexp.MustCompile(`(?s)<!-- begin (\w+) -->\n(.*?)<!-- end (\w+) -->`)

// writeSection regenerates the report at path with body as section name,
// keeping the other sections as they were in the file.
func writeSection(path, name, body string) error {
	bodies := map[string]string{}
	tail := "" // what follows the last section, written by hand: kept
	if old, err := os.ReadFile(path); err == nil {
		for _, m := range sectionRE.FindAllStringSubmatch(string(old), -1) {
			if m[1] == m[3] {
				bodies[m[1]] = m[2]
			}
		}
		if loc := sectionRE.FindAllStringIndex(string(old), -1); len(loc) > 0 {
			tail = strings.TrimLeft(string(old[loc[len(loc)-1][1]:]), "\n")
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	bodies[name] = body
	var b bytes.Buffer
	b.WriteString(reportHeader)
	for _, s := range sections {
		text, ok := bodies[s]
		if !ok {
			text = notMeasured
		}
		fmt.Fprintf(&b, "\n<!-- begin %s -->\n%s<!-- end %s -->\n", s, text, s)
	}
	if tail != "" {
		b.WriteString("\n" + tail)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// thousands is 12,345, as the fans' pages write counts.
func thousands(n int64) string { return web.Thousands(n) }

// trimFloat formats v with prec decimals.
func trimFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

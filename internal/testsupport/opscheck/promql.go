package opscheck

import (
	"fmt"
	"regexp"
	"strings"
)

// promqlKeywords are identifiers that are never metric names. Matching is case
// insensitive, as in PromQL.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true,
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "offset": true,
	"inf": true, "nan": true,
}

// labelListKeywords take a parenthesised list of label names, not an expression.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true,
}

// aggregators may put their by/without clause before the parenthesis:
// "sum by (event) (x)".
var aggregators = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true,
	"stddev": true, "stdvar": true, "count": true, "count_values": true,
	"bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// grafanaVar matches Grafana template variables: $var, ${var}, ${var:fmt}, [[var]].
var grafanaVar = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[^\]]*\]\]`)

// metricNames returns the metric names a PromQL expression selects, in order
// of first appearance. Functions and aggregations (an identifier followed by
// "("), keywords, label names of by/without/on/ignoring/group_*, label
// matchers, strings, ranges and numbers are not metric names; a
// {__name__="x"} matcher is. Grafana variables are neutralised first, so a
// dashboard expression can be passed as it is stored.
//
// It is a scanner, not a parser: a malformed expression may give a wrong
// answer, which is why the tests also have promtool parse every expression.
func metricNames(expr string) ([]string, error) {
	// Outside brackets a variable stands where a number or a regex would; a
	// number keeps the scanner simple and can never be taken for a name.
	s := grafanaVar.ReplaceAllString(expr, "0")
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '#': // comment to end of line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, name, err := scanMatchers(s, i)
			if err != nil {
				return nil, err
			}
			if name != "" {
				add(name)
			}
			i = end
		case c == '[': // range or subquery: durations only
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("promql: unclosed [ at %d in %q", i, expr)
			}
			i += end + 1
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			i = skipNumber(s, i)
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			ident := s[i:j]
			k := j
			for k < len(s) && isSpace(s[k]) {
				k++
			}
			lower := strings.ToLower(ident)
			switch {
			case labelListKeywords[lower] && k < len(s) && s[k] == '(':
				end := strings.IndexByte(s[k:], ')')
				if end < 0 {
					return nil, fmt.Errorf("promql: unclosed label list after %s in %q", ident, expr)
				}
				j = k + end + 1
			case promqlKeywords[lower]:
			case aggregators[lower] && startsWithWord(s[k:], "by", "without"):
			case k < len(s) && s[k] == '(': // a function or an aggregation
			default:
				add(ident)
			}
			i = j
		default:
			i++
		}
	}
	return names, nil
}

// variableQueryNames returns the metric names of a Grafana Prometheus
// variable query: label_values(metric{…}, label), query_result(expr), or a
// plain expression.
func variableQueryNames(q string) ([]string, error) {
	q = strings.TrimSpace(q)
	switch {
	case strings.HasPrefix(q, "label_values(") && strings.HasSuffix(q, ")"):
		inner := q[len("label_values(") : len(q)-1]
		// label_values(label) names no metric; label_values(m, label) names m.
		depth, cut := 0, -1
		for i := 0; i < len(inner); i++ {
			switch inner[i] {
			case '{', '(':
				depth++
			case '}', ')':
				depth--
			case ',':
				if depth == 0 {
					cut = i
				}
			}
		}
		if cut < 0 {
			return nil, nil
		}
		return metricNames(inner[:cut])
	case strings.HasPrefix(q, "query_result(") && strings.HasSuffix(q, ")"):
		return metricNames(q[len("query_result(") : len(q)-1])
	case strings.HasPrefix(q, "label_names(") || strings.HasPrefix(q, "metrics("):
		return nil, nil
	}
	return metricNames(q)
}

var nameMatcher = regexp.MustCompile(`(?:^|[{,\s])__name__\s*=\s*"([^"]*)"`)

// scanMatchers skips a {…} label-matcher block starting at s[i] and returns
// the index after it and the metric name of a __name__="x" matcher, if any.
func scanMatchers(s string, i int) (int, string, error) {
	j := i + 1
	for j < len(s) && s[j] != '}' {
		if s[j] == '"' || s[j] == '\'' || s[j] == '`' {
			end, err := skipString(s, j)
			if err != nil {
				return 0, "", err
			}
			j = end
			continue
		}
		j++
	}
	if j >= len(s) {
		return 0, "", fmt.Errorf("promql: unclosed { at %d in %q", i, s)
	}
	name := ""
	if m := nameMatcher.FindStringSubmatch(s[i:j]); m != nil {
		name = m[1]
	}
	return j + 1, name, nil
}

// skipString returns the index after the string literal starting at s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("promql: unclosed string at %d in %q", i, s)
}

// skipNumber skips a number or a duration: 0.5, 1e-3, 0x1f, 5m, 1h30m.
func skipNumber(s string, i int) int {
	j := i
	for j < len(s) {
		c := s[j]
		if isIdentChar(c) || c == '.' {
			j++
			continue
		}
		// the sign of an exponent: 1e-3, 2E+10 (not in hex literals)
		if (c == '-' || c == '+') && j > i && (s[j-1] == 'e' || s[j-1] == 'E') &&
			!strings.HasPrefix(strings.ToLower(s[i:j]), "0x") {
			j++
			continue
		}
		break
	}
	return j
}

// startsWithWord reports whether s starts with one of words as a whole word.
func startsWithWord(s string, words ...string) bool {
	for _, w := range words {
		if len(s) >= len(w) && strings.EqualFold(s[:len(w)], w) && (len(s) == len(w) || !isIdentChar(s[len(w)])) {
			return true
		}
	}
	return false
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isSpace(c byte) bool      { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

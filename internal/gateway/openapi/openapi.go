// Package openapi holds the OpenAPI 3.1 document of the gateway's JSON API
// (DESIGN.md, "Integrations: a described API"), written by hand in
// openapi.yaml and served as JSON at GET /api/v1/openapi.json. The tests
// keep it true: it is a valid OpenAPI 3.1 document (libopenapi, and
// libopenapi-validator's check against the specification's schema); its
// operations are the gateway's /api/v1 routes (the gateway's route table)
// and the booking core's (booking.Routes), both ways; the end-to-end tests'
// requests and answers validate against it (testsupport/apicheck); and a
// breaking change to it against baseline.json (oasdiff) fails until the
// baseline is updated with it (make openapi-baseline).
package openapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var source []byte

// Baseline is the committed document that changes are checked against
// (breaking changes fail the tests until it is updated: make
// openapi-baseline).
//
//go:embed baseline.json
var Baseline []byte

// YAML is the document as written.
func YAML() []byte { return source }

var doc = sync.OnceValues(func() ([]byte, error) { return ToJSON(source) })

// JSON is the document as served: JSON, its keys in the order written.
// The embedded document is checked by the tests, so it always converts.
func JSON() []byte {
	b, err := doc()
	if err != nil {
		panic("openapi: the embedded document: " + err.Error())
	}
	return b
}

// ETag is the served document's entity tag (quoted): its SHA-256's first
// 16 bytes.
var ETag = sync.OnceValue(func() string {
	sum := sha256.Sum256(JSON())
	return `"` + hex.EncodeToString(sum[:16]) + `"`
})

// ToJSON converts a YAML document to indented JSON, keeping the order of
// every mapping's keys (a map would sort them).
func ToJSON(y []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(y, &n); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &n); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("line %d: one document expected", n.Line)
		}
		return writeJSON(buf, n.Content[0])
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key must be a scalar", k.Line)
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			writeString(buf, n.Value)
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil {
				return fmt.Errorf("line %d: %q: %w", n.Line, n.Value, err)
			}
			b, _ := json.Marshal(f)
			buf.Write(b)
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return err
			}
			buf.WriteString(strconv.FormatBool(v))
		case "!!null":
			buf.WriteString("null")
		default:
			return fmt.Errorf("line %d: unexpected %s", n.Line, n.ShortTag())
		}
	default:
		return fmt.Errorf("line %d: aliases are not used here", n.Line)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	buf.Write(b)
}

package backoff_test

import (
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/platform/backoff"
)

func TestAfter(t *testing.T) {
	p := backoff.Policy{First: 5 * time.Second, Max: 5 * time.Minute}
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, 5 * time.Second}, {2, 10 * time.Second}, {3, 20 * time.Second}, {7, 5 * time.Minute}, {1000, 5 * time.Minute}} {
		if got := p.After(c.n); got != c.want {
			t.Errorf("After(%d) = %s; want %s", c.n, got, c.want)
		}
	}
	p.Jitter = 0.2
	for n := 1; n < 10; n++ {
		full := backoff.Policy{First: p.First, Max: p.Max}.After(n)
		if got := p.After(n); got > full || got < full-full/5 {
			t.Errorf("After(%d) with a fifth of jitter = %s; want within [%s, %s]", n, got, full-full/5, full)
		}
	}
}

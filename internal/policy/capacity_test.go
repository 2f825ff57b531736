package policy_test

import (
	"math"
	"testing"

	"github.com/waitroom/waitroom/internal/config"
	"github.com/waitroom/waitroom/internal/policy"
)

// TestComputedRateAndCap: the rate is the capacity model's exact quotient,
// never rounded where it is used, and the cap the floor of rate × session,
// computed so that float error never loses a fan (330 × 60 / (3 × 1.1) is
// 6,000, not 5,999). The first row is the concert design's sizing.
func TestComputedRateAndCap(t *testing.T) {
	cases := []struct {
		name     string
		capacity config.Capacity // backend_tps, calls_per_user, retry_factor, session_seconds
		rate     *float64        // admit_per_second, nil = computed
		cap      *int            // max_active, nil = computed
		wantRate float64
		wantCap  int
	}{
		{"the design: 1000 TPS, 3 calls, ×2, 60 s", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, nil, nil, 1000.0 / 6, 10000},
		{"the design with a 1 s session: 166, not 167", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 1}, nil, nil, 1000.0 / 6, 166},
		{"half a second: 83.3 rounds down", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 0.5}, nil, nil, 1000.0 / 6, 83},
		{"a 1.1 retry factor: exactly 6,000 (float says 5999.999…)", config.Capacity{BackendTPS: 330, CallsPerUser: 3, RetryFactor: 1.1, SessionSeconds: 60}, nil, nil, 330 / (3 * 1.1), 6000},
		{"1.1 again: exactly 1,000 (float says 999.999…)", config.Capacity{BackendTPS: 100, CallsPerUser: 3, RetryFactor: 1.1, SessionSeconds: 33}, nil, nil, 100 / (3 * 1.1), 1000},
		{"1.3: exactly 400 (float says 399.999…)", config.Capacity{BackendTPS: 120, CallsPerUser: 3, RetryFactor: 1.3, SessionSeconds: 13}, nil, nil, 120 / (3 * 1.3), 400},
		{"111.1/s for 9 s: 1,000", config.Capacity{BackendTPS: 500, CallsPerUser: 3, RetryFactor: 1.5, SessionSeconds: 9}, nil, nil, 500 / 4.5, 1000},
		{"7 TPS: 1.17/s, 70 in a minute", config.Capacity{BackendTPS: 7, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, nil, nil, 7.0 / 6, 70},
		{"below one fan a second", config.Capacity{BackendTPS: 1, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, nil, nil, 1.0 / 6, 10},
		{"a cap below one fan is one", config.Capacity{BackendTPS: 1, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 1}, nil, nil, 1.0 / 6, 1},
		{"a degenerate model is held at 0.01/s", config.Capacity{BackendTPS: 0.03, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, nil, nil, 0.01, 1},
		{"given rate, computed cap", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, new(40.0), nil, 40, 2400},
		{"given rate, cap rounds down", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 3}, new(2.5), nil, 2.5, 7},
		{"given rate, exactly 29 (float says 28.999…)", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 100}, new(0.29), nil, 0.29, 29},
		{"given both", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, new(40.0), new(90), 40, 90},
		{"given cap, computed rate", config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}, nil, new(500), 1000.0 / 6, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := config.Admission{AdmitPerSecond: c.rate, MaxActive: c.cap, Capacity: c.capacity}
			// wantRate is the exact quotient (Go constants are exact), so
			// allow float error and nothing like a rounding.
			if got := policy.Rate(a); math.Abs(got-c.wantRate) > 1e-12*c.wantRate {
				t.Errorf("Rate = %.17g; want %.17g", got, c.wantRate)
			}
			if got := policy.Cap(a); got != c.wantCap {
				t.Errorf("Cap = %d; want %d", got, c.wantCap)
			}
		})
	}
}

// TestDesignSizingPerMinute: the design's 10,000 fans a minute is the
// computed rate over 60 s, to float precision, not 10,020.
func TestDesignSizingPerMinute(t *testing.T) {
	a := config.Admission{Capacity: config.Capacity{BackendTPS: 1000, CallsPerUser: 3, RetryFactor: 2, SessionSeconds: 60}}
	if got := policy.Rate(a) * 60; math.Abs(got-10000) > 1e-9 {
		t.Errorf("Rate × 60 = %.17g; want 10000", got)
	}
}

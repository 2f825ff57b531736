package testenv

import (
	"sync"
	"time"
)

// Clock is a clock a test moves, for code that takes its time as a
// func() time.Time (pass c.Now): it stands still unless the test adds to it.
type Clock struct {
	mu sync.Mutex
	at time.Time
}

// NewClock is a Clock standing at at.
func NewClock(at time.Time) *Clock { return &Clock{at: at} }

// Now is the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at }

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.at = c.at.Add(d); c.mu.Unlock() }

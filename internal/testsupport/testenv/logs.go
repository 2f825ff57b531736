package testenv

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// LogBuffer is a log sink a test reads while the code under test writes
// to it from its own goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FreeAddr is a free loopback address (127.0.0.1:port) for a server the
// test starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

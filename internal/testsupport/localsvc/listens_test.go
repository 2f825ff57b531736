package localsvc_test

import (
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/waitroom/waitroom/internal/testsupport/localsvc"
)

// Listens tells the process that holds a listening port from any other.
func TestListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if !localsvc.Listens(os.Getpid(), port) {
		t.Errorf("this process listens on %d; Listens says no", port)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	if localsvc.Listens(other.Process.Pid, port) {
		t.Errorf("another process does not listen on %d; Listens says it does", port)
	}
	free, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if localsvc.Listens(os.Getpid(), free) {
		t.Errorf("nothing listens on %d; Listens says this process does", free)
	}
}

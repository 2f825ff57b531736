package localsvc_test

import (
	"fmt"
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
	addr := l.Addr().String()
	if !localsvc.Listens(os.Getpid(), addr) {
		t.Errorf("this process listens on %s; Listens says no", addr)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	if localsvc.Listens(other.Process.Pid, addr) {
		t.Errorf("another process does not listen on %s; Listens says it does", addr)
	}
	free, err := localsvc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if localsvc.Listens(os.Getpid(), fmt.Sprintf("127.0.0.1:%d", free)) {
		t.Errorf("nothing listens on %d; Listens says this process does", free)
	}
}

package testproc

import (
	"net"
	"strings"
	"testing"
)

// TestBroker_APortTakenBeforeItsFirstRunBindsMovesItToAnother: the port the
// harness found free is taken (here by the test itself) before the broker
// binds it; the first run moves to another free port instead of failing
// the test (CI failed once on "bind: address already in use"), and a
// restart keeps the port it got.
func TestBroker_APortTakenBeforeItsFirstRunBindsMovesItToAnother(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	picks := 0
	p := newProc("broker", "BROKER_ADDR", map[string]string{}, brokerReady)
	p.freePort = func(t testing.TB) int {
		picks++
		if picks == 1 {
			return taken
		}
		return FreePort(t)
	}
	p.Start(t)
	if picks != 2 || p.Addr == held.Addr().String() || p.Env["BROKER_ADDR"] != p.Addr {
		t.Fatalf("after a first port taken: %d picks, listening on %s (BROKER_ADDR %s), taken %s; want a second pick, another port",
			picks, p.Addr, p.Env["BROKER_ADDR"], held.Addr())
	}
	if !strings.Contains(p.Logs(), "address already in use") {
		t.Errorf("the first try's output does not say the port was taken:\n%s", p.Logs())
	}
	addr := p.Addr
	p.Stop(t)
	p.Start(t)
	if p.Addr != addr || picks != 2 {
		t.Errorf("after a restart: listening on %s after %d picks, want %s still", p.Addr, picks, addr)
	}
}

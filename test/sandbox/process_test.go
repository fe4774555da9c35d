// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

func TestFreePortsOutsideEphemeralRange(t *testing.T) {
	lo, hi := outsideEphemeralRange()
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d chosen twice in %v", p, ports)
		}
		seen[p] = true
		if hi > lo && (p < lo || p >= hi) {
			t.Errorf("port %d lies outside [%d, %d), where outgoing connections' source ports can take it", p, lo, hi)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("chosen port %d cannot be bound: %v", p, err)
			continue
		}
		l.Close()
	}
}

func TestStartOnFreePortsTriesAgainWhenAPortIsTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port

	var tries []int
	var bound net.Listener
	err = startOnFreePorts(func() error {
		port := heldPort // the first choice was taken meanwhile
		if len(tries) > 0 {
			ports, err := FreePorts(1)
			if err != nil {
				return err
			}
			port = ports[0]
		}
		tries = append(tries, port)
		bound, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		return err
	})
	if err != nil {
		t.Fatalf("tries on ports %v: %v", tries, err)
	}
	defer bound.Close()
	if len(tries) != 2 || tries[0] != heldPort || tries[1] == heldPort {
		t.Errorf("ports tried = %v, want the taken %d, then another", tries, heldPort)
	}
}

func TestStartOnFreePortsStopsAtOtherErrors(t *testing.T) {
	calls := 0
	other := errors.New("kube-apiserver not ready after 60s")
	if err := startOnFreePorts(func() error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Errorf("an error not about a taken port: %d calls, err %v; want 1 call and that error", calls, err)
	}
	calls = 0
	taken := errors.New("etcd exited during start-up: listen tcp 127.0.0.1:1: bind: address already in use")
	if err := startOnFreePorts(func() error { calls++; return taken }); !errors.Is(err, taken) || calls != 3 {
		t.Errorf("a port taken every time: %d calls, err %v; want 3 calls and the last error", calls, err)
	}
}

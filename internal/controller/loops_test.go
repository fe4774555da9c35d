// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// recordingLoop notes when it starts and stops.
type recordingLoop struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (r recordingLoop) Start(context.Context) (stop func()) {
	r.note("start " + r.name)
	return func() { r.note("stop " + r.name) }
}

func (r recordingLoop) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, s)
}

// The loops start in order and stop in the reverse order, each stop returning before the next.
func TestStartLoopsStopsInReverse(t *testing.T) {
	var (
		mu  sync.Mutex
		log []string
	)
	stop := startLoops(context.Background(), []sideLoop{recordingLoop{"a", &mu, &log}, recordingLoop{"b", &mu, &log}})
	stop()
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(log, want) {
		t.Errorf("got %v, want %v", log, want)
	}
}

// Stopping the periodic workload check waits for the check that is running: nothing it
// publishes comes after the work loop has returned.
func TestCheckReportsStopWaitsForTheRunningCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, _ := testController(t, 1, nil, nil)
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		c.client.(*fake.Clientset).PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			once.Do(func() { close(entered) })
			<-release // a slow API server
			return false, nil, nil
		})
		stop := checkReports{c: c.Controller, every: time.Minute}.Start(context.Background())
		<-entered
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a check was still running")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("stop did not return once the check ended")
		}
	})
}

// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// A notice whose handling panics fails alone, as a notice that met an error does: the
// process and the pool's workers live on (with one worker, the caller's own goroutine is the
// one that meets the panic), the message's other notices are handled, the panic is counted
// under site notice and logged with the notice and the stack.
func TestNoticePanicIsThatNotices(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{1, 3} {
		t.Run(map[int]string{1: "the caller's worker", 3: "pool workers"}[workers], func(t *testing.T) {
			notices := []notice.Notice{{ID: "a"}, {ID: "bad", InstanceID: "i-0bad"}, {ID: "c"}, {ID: "d"}}
			var mu sync.Mutex
			var handled []string
			m := metrics.New()
			var logs bytes.Buffer
			var lmu sync.Mutex
			log := slog.New(slog.NewTextHandler(lockedWriter{&lmu, &logs}, nil))
			fates := runNotices(context.Background(), notices, noticePool{workers: workers, backoff: quickBackoff, log: log, panics: m},
				func(_ context.Context, n notice.Notice) noticeFate {
					if n.ID == "bad" {
						var index []int
						_ = index[len(n.ID)] // a bug met on this notice's input
					}
					mu.Lock()
					defer mu.Unlock()
					handled = append(handled, n.ID)
					return noticeDone
				})
			if want := []noticeFate{noticeDone, noticeRetry, noticeDone, noticeDone}; !slices.Equal(fates, want) {
				t.Errorf("fates %v, want %v: the panicking notice retried, the others done", fates, want)
			}
			slices.Sort(handled)
			if !slices.Equal(handled, []string{"a", "c", "d"}) {
				t.Errorf("handled %v, want a, c and d", handled)
			}
			if got := m.Value("lifeboat_reconcile_panics_total", "site", "notice"); got < 1 {
				t.Errorf("lifeboat_reconcile_panics_total{site=notice} = %v, want at least 1", got)
			}
			lmu.Lock()
			out := logs.String()
			lmu.Unlock()
			for _, want := range []string{"level=ERROR", "site=notice", "notice=bad", "instance=i-0bad", "index out of range", "panics_test.go"} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// A queue message one of whose notices panics is not deleted: it comes back soon, as after
// a notice's error, while its other notices are handled.
func TestMessageWithPanickingNoticeComesBack(t *testing.T) {
	t.Parallel()
	ids := instances(3)
	var mu sync.Mutex
	handled := map[string]bool{}
	c, m, logs := testController(t, 2, func(n notice.Notice) noticeFate {
		if n.InstanceID == ids[1] {
			panic("a bug met on " + n.InstanceID)
		}
		mu.Lock()
		defer mu.Unlock()
		handled[n.InstanceID] = true
		return noticeDone
	}, nil)
	body := fakeaws.HealthScheduledChange("e1", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", time.Now().Add(72*time.Hour), time.Time{}, "", "", ids...)
	outcome, delay := c.handleMessage(context.Background(), nil, sqs.Message{ID: "m1", Body: body, ReceiveCount: 1})
	if outcome != sqs.Retry || delay != retryFirst {
		t.Errorf("outcome %v after %v, want retry after %v", outcome, delay, retryFirst)
	}
	if !handled[ids[0]] || !handled[ids[2]] {
		t.Errorf("handled %v, want the other two notices", handled)
	}
	if got := m.Value("lifeboat_queue_messages_total", "outcome", "retry"); got != 1 {
		t.Errorf("lifeboat_queue_messages_total{outcome=retry} = %v, want 1", got)
	}
	if got := m.Value("lifeboat_reconcile_panics_total", "site", "notice"); got < 1 {
		t.Errorf("lifeboat_reconcile_panics_total{site=notice} = %v, want at least 1", got)
	}
	if !strings.Contains(logs.String(), "a bug met on "+ids[1]) {
		t.Errorf("the panic is not logged:\n%s", logs)
	}
}

// A periodic check that panics (here on the pod list) is that check's failure: it
// is counted under site readiness_check and published as a failed run, and the next check runs
// on time and publishes its findings.
func TestPeriodicCheckPanicIsThatChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, m, logs := testController(t, 1, nil, nil)
		var lists atomic.Int32
		c.client.(*fake.Clientset).PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			if lists.Add(1) == 1 {
				var pods []corev1.Pod
				_ = pods[0].Name // a bug met on the cluster's pods
			}
			return false, nil, nil
		})
		stop := checkReports{c: c.Controller, every: time.Minute}.Start(context.Background())
		synctest.Wait() // the first check, which panics
		time.Sleep(time.Minute)
		synctest.Wait() // the next, on time
		stop()
		if got := m.Value("lifeboat_readiness_last_run_timestamp_seconds", "result", "ok"); got == 0 {
			t.Error("no check ran after the one that panicked")
		}
		if got := m.Value("lifeboat_reconcile_panics_total", "site", "readiness_check"); got != 1 {
			t.Errorf("lifeboat_reconcile_panics_total{site=readiness_check} = %v, want 1", got)
		}
		if got := m.Value("lifeboat_readiness_last_run_timestamp_seconds", "result", "error"); got == 0 {
			t.Error("the check that panicked is not published as a failed run")
		}
		if !strings.Contains(logs.String(), "site=readiness_check") {
			t.Errorf("the panic is not logged:\n%s", logs)
		}
	})
}

// An informer event whose handling panics (here: a node with a record, offered to a handler
// that is missing) drops that event only: counted under site node_event and logged, and the
// informer goes on delivering the next nodes' events.
func TestNodeEventPanicIsThatEvents(t *testing.T) {
	t.Parallel()
	withRecord := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	record.Write(withRecord, record.Record{Version: record.Version, Notices: []string{"spot-1"}})
	client := fake.NewClientset(withRecord)
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Nodes().Informer()
	m := metrics.New()
	var logs bytes.Buffer
	var mu sync.Mutex
	if _, _, err := newEpisodes(informer, nil, &config.Config{}, m, slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil)), func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)
	var seen atomic.Bool
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if obj.(*corev1.Node).Name == "n2" {
			seen.Store(true)
		}
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return seen.Load() && m.Value("lifeboat_reconcile_panics_total", "site", "node_event") > 0, nil
	})
	if err != nil {
		t.Fatalf("the informer did not go on (next node seen %v) or no panic was counted", seen.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"site=node_event", "node=n1", "reconciler.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

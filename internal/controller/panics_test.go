package controller

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// A notice whose handling panics fails alone, as a notice that met an error does: the
// process and the pool's workers live on (with one worker, the caller's own goroutine is the
// one that meets the panic), the message's other notices are handled, the panic is counted
// under site notice and logged with the notice and the stack.
func TestNoticePanicIsThatNotices(t *testing.T) {
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

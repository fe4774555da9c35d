// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// quickBackoff stands in for the intake policy's backoff: retries within milliseconds.
var quickBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 4 * time.Millisecond}

// testController is a controller whose notices are handled by handle instead of the
// ownership lookup and the node write, reading the queue of account 000000000000 (the
// account the sandbox's messages name).
func testController(t testing.TB, workers int, handle func(notice.Notice) noticeFate, settings func(*config.Config)) (handledBy, *metrics.Metrics, *bytes.Buffer) {
	t.Helper()
	cfg := &config.Config{Workers: workers, QueueURL: "https://sqs.us-east-1.amazonaws.com/" + fakeaws.Account + "/lifeboat"}
	if settings != nil {
		settings(cfg)
	}
	logs := &bytes.Buffer{}
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := metrics.New()
	c := New(Options{Config: cfg, Client: fake.NewClientset(), Logger: logger, Metrics: m})
	return handledBy{Controller: c, handle: handle}, m, logs
}

// handledBy is a controller whose messages' notices are given to handle.
type handledBy struct {
	*Controller
	handle func(notice.Notice) noticeFate
}

func (h handledBy) handleMessage(ctx context.Context, resolver *ownership.Resolver, m sqs.Message) (sqs.Outcome, time.Duration) {
	return h.Controller.messages.handleMessage(ctx, resolver, m, func(_ context.Context, n notice.Notice, _ *slog.Logger) noticeFate { return h.handle(n) })
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func instances(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-%017x", i+1)
	}
	return ids
}

// A message naming thousands of instances is handled by a bounded pool: never more notices
// at once, nor more goroutines, than the pool's workers, and no notice lost, including those
// that failed at first.
func TestBigMessageBoundedPool(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	const workers, count = 10, 5000
	var (
		mu          sync.Mutex
		tries       = map[string]int{}
		inFlight    atomic.Int32
		maxInFlight atomic.Int32
		maxRoutines atomic.Int32
	)
	raise := func(a *atomic.Int32, v int32) {
		for old := a.Load(); v > old && !a.CompareAndSwap(old, v); old = a.Load() {
		}
	}
	c, m, _ := testController(t, workers, func(n notice.Notice) noticeFate {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		raise(&maxInFlight, now)
		raise(&maxRoutines, int32(runtime.NumGoroutine()))
		time.Sleep(50 * time.Microsecond)
		mu.Lock()
		defer mu.Unlock()
		tries[n.InstanceID]++
		// Every tenth instance of the first half fails at first (an EC2 or API server error),
		// as siblings run: a failure that ends after every first try leaves its retry to the
		// message, which a loaded machine could otherwise show here.
		if tries[n.InstanceID] == 1 && failsFirst(n.InstanceID, count) {
			return noticeRetry
		}
		return noticeDone
	}, nil)
	ids := instances(count)
	body := fakeaws.HealthScheduledChange("big", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", time.Now().Add(72*time.Hour), time.Time{}, "", "", ids...)
	before := runtime.NumGoroutine()
	start := time.Now()
	outcome, _ := c.handleMessage(context.Background(), nil, sqs.Message{ID: "m-big", Body: body, ReceiveCount: 1})
	took := time.Since(start)

	if outcome != sqs.Done {
		t.Errorf("outcome %v, want done: every notice recorded in the end", outcome)
	}
	pool := c.messages.noticeWorkers()
	if got := maxInFlight.Load(); got > int32(pool) {
		t.Errorf("%d notices handled at once, want at most the pool's %d", got, pool)
	}
	// The caller is one of the workers: at most pool-1 goroutines more than before.
	if extra := int(maxRoutines.Load()) - before; extra > pool-1 {
		t.Errorf("%d goroutines more than before the message, want at most %d", extra, pool-1)
	}
	for _, id := range ids {
		want := 1
		if failsFirst(id, count) {
			want = 2
		}
		if tries[id] != want {
			t.Errorf("%s handled %d times, want %d", id, tries[id], want)
			break
		}
	}
	if got := m.Value("lifeboat_queue_messages_total", "outcome", "done"); got != 1 {
		t.Errorf("lifeboat_queue_messages_total{outcome=done} = %v", got)
	}
	t.Logf("%d notices, pool of %d: %d at once at most, %d goroutines above the start, %s", count, pool, maxInFlight.Load(), int(maxRoutines.Load())-before, took.Round(time.Millisecond))
}

// failsFirst picks every tenth of the first half of instances(count).
func failsFirst(id string, count int) bool {
	n, err := strconv.ParseInt(strings.TrimPrefix(id, "i-"), 16, 64)
	return err == nil && n%10 == 0 && n <= int64(count/2)
}

// A notice waiting for its retry holds no worker: the others go first.
func TestRetryingNoticeHoldsNoWorker(t *testing.T) {
	t.Parallel()
	notices := []notice.Notice{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	var order []string
	fates := runNotices(context.Background(), notices, noticePool{workers: 1, backoff: quickBackoff}, func(_ context.Context, n notice.Notice) noticeFate {
		order = append(order, n.ID)
		if n.ID == "a" && len(order) == 1 {
			return noticeRetry
		}
		return noticeDone
	})
	if got := strings.Join(order, ","); got != "a,b,c,a" {
		t.Errorf("handled in the order %s, want a,b,c,a", got)
	}
	if !slices.Equal(fates, []noticeFate{noticeDone, noticeDone, noticeDone}) {
		t.Errorf("fates %v", fates)
	}
}

// Notices that keep failing do not hold the message between them: once nothing else is left
// they leave their retry to the message.
func TestFailingNoticesLeaveRetryToMessage(t *testing.T) {
	t.Parallel()
	notices := []notice.Notice{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	var calls atomic.Int32
	retried := make(chan struct{}) // closed once the failing notices have been tried a few times
	var once sync.Once
	done := make(chan []noticeFate, 1)
	go func() {
		done <- runNotices(context.Background(), notices, noticePool{workers: 3, backoff: quickBackoff}, func(_ context.Context, n notice.Notice) noticeFate {
			if calls.Add(1) >= 6 {
				once.Do(func() { close(retried) })
			}
			if n.ID == "c" {
				<-retried // c runs while the others retry in place
				return noticeDone
			}
			return noticeRetry
		})
	}()
	select {
	case fates := <-done:
		if !slices.Equal(fates, []noticeFate{noticeRetry, noticeRetry, noticeDone}) {
			t.Errorf("fates %v, want retry, retry, done", fates)
		}
		if calls.Load() < 5 {
			t.Errorf("%d calls: the failing notices were not retried while c ran", calls.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("two failing notices held the message after the last other notice was done")
	}
	// One notice alone leaves its retry to the message at once.
	fates := runNotices(context.Background(), notices[:1], noticePool{workers: 3, backoff: quickBackoff}, func(context.Context, notice.Notice) noticeFate { return noticeRetry })
	if !slices.Equal(fates, []noticeFate{noticeRetry}) {
		t.Errorf("one failing notice: %v", fates)
	}
	if got := runNotices(context.Background(), nil, noticePool{workers: 3, backoff: quickBackoff}, nil); len(got) != 0 {
		t.Errorf("no notices: %v", got)
	}
}

// When the controller stops, notices not handled yet are cancelled, not done.
func TestStoppingCancelsTheRest(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	notices := make([]notice.Notice, 50)
	fates := runNotices(ctx, notices, noticePool{workers: 2, backoff: quickBackoff}, func(ctx context.Context, n notice.Notice) noticeFate {
		cancel()
		return noticeCancelled
	})
	for i, f := range fates {
		if f != noticeCancelled {
			t.Fatalf("notice %d: fate %v after the stop, want cancelled", i, f)
		}
	}
}

// A message from an account the queue does not accept is refused before any notice is
// handled, said with both accounts, counted, and kept unless DELETE_SQS_MSG_IF_NODE_NOT_FOUND.
func TestForeignAccountRefused(t *testing.T) {
	t.Parallel()
	const other = "999988887777"
	spot := fakeaws.SpotInterruptionWarning("i-0123456789abcdef0", "terminate", time.Now())
	foreignSpot := strings.Replace(spot, `"account":"`+fakeaws.Account+`"`, `"account":"`+other+`"`, 1)
	if foreignSpot == spot {
		t.Fatal("the fake's message names no account to replace")
	}
	tests := []struct {
		name        string
		body        string
		settings    func(*config.Config)
		handled     bool
		outcome     sqs.Outcome
		delay       time.Duration
		label       string
		logIncludes []string
	}{
		{"own account", spot, nil, true, sqs.Done, 0, "done", nil},
		{"another account: kept for its consumer", foreignSpot, nil, false, sqs.Retry, retryLater, "foreign_account", []string{other, fakeaws.Account, "level=WARN"}},
		{"another account, DELETE_SQS_MSG_IF_NODE_NOT_FOUND: deleted", foreignSpot, func(c *config.Config) { c.DeleteSQSMsgIfNodeNotFound = true }, false, sqs.Done, 0, "foreign_account", []string{other}},
		{"an allowed account", foreignSpot, func(c *config.Config) { c.QueueAllowedAccounts = []string{"111111111111", other} }, true, sqs.Done, 0, "done", nil},
		{"a queue URL without an account checks none", foreignSpot, func(c *config.Config) { c.QueueURL = "http://127.0.0.1:9324/queue/lifeboat" }, true, sqs.Done, 0, "done", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var handled atomic.Bool
			c, m, logs := testController(t, 2, func(notice.Notice) noticeFate { handled.Store(true); return noticeDone }, tt.settings)
			outcome, delay := c.handleMessage(context.Background(), nil, sqs.Message{ID: "m1", Body: tt.body, ReceiveCount: 1})
			if outcome != tt.outcome || delay != tt.delay || handled.Load() != tt.handled {
				t.Errorf("outcome %v after %v, notice handled %v; want %v after %v, handled %v", outcome, delay, handled.Load(), tt.outcome, tt.delay, tt.handled)
			}
			if got := m.Value("lifeboat_queue_messages_total", "outcome", tt.label); got != 1 {
				t.Errorf("lifeboat_queue_messages_total{outcome=%s} = %v", tt.label, got)
			}
			for _, s := range tt.logIncludes {
				if !strings.Contains(logs.String(), s) {
					t.Errorf("log does not name %q:\n%s", s, logs)
				}
			}
			if tt.label == "foreign_account" {
				// Its copies come back every few minutes: logged at Debug after the first.
				c.handleMessage(context.Background(), nil, sqs.Message{ID: "m1", Body: tt.body, ReceiveCount: 2})
				if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
					t.Errorf("%d warnings for two deliveries of one message, want 1:\n%s", n, logs)
				}
			}
		})
	}
}

// BenchmarkBigMessage: the intake of one AWS Health event naming 5,000 instances, with notice
// handling reduced to nothing, so what is measured is the parse and the pool.
func BenchmarkBigMessage(b *testing.B) {
	c, _, _ := testController(b, 10, func(notice.Notice) noticeFate { return noticeDone }, nil)
	body := fakeaws.HealthScheduledChange("big", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", time.Now().Add(72*time.Hour), time.Time{}, "", "", instances(5000)...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if outcome, _ := c.handleMessage(context.Background(), nil, sqs.Message{ID: "m", Body: body, ReceiveCount: 1}); outcome != sqs.Done {
			b.Fatal(outcome)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/util/wait"
)

// nodegroupSource answers from on, or with errs in turn first; it counts its calls by
// cluster and node group, and holds each call until release is closed (when set).
type nodegroupSource struct {
	mu      sync.Mutex
	calls   map[string]int
	on      map[string]bool
	errs    []error
	release chan struct{}
}

func (s *nodegroupSource) NodegroupAutoRepaired(ctx context.Context, cluster, nodegroup string) (bool, error) {
	s.mu.Lock()
	s.calls[cluster+"/"+nodegroup]++
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	on, release := s.on[nodegroup], s.release
	s.mu.Unlock()
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return on, err
}

func (s *nodegroupSource) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

// Many asks about one node group within the TTL make one call, with the cluster's name; the
// answer is asked again once the TTL has passed; another node group is its own call.
func TestNodegroupRepairsCachesAnswers(t *testing.T) {
	ctx := context.Background()
	now := t0
	src := &nodegroupSource{calls: map[string]int{}, on: map[string]bool{"ng-on": true}}
	c := newNodegroupRepairs(src, "prod", func() time.Time { return now })
	for range 5 {
		if on, err := c.AutoRepaired(ctx, "ng-on"); !on || err != nil {
			t.Fatalf("ng-on: %v, %v; want on", on, err)
		}
		if on, err := c.AutoRepaired(ctx, "ng-off"); on || err != nil {
			t.Fatalf("ng-off: %v, %v; want off", on, err)
		}
	}
	if src.count("prod/ng-on") != 1 || src.count("prod/ng-off") != 1 {
		t.Errorf("calls %v, want one per node group of cluster prod", src.calls)
	}
	now = now.Add(NodegroupRepairTTL - time.Second)
	_, _ = c.AutoRepaired(ctx, "ng-on")
	if got := src.count("prod/ng-on"); got != 1 {
		t.Errorf("%d calls within the TTL, want 1", got)
	}
	src.on["ng-on"] = false // turned off at EKS
	now = now.Add(time.Second)
	if on, _ := c.AutoRepaired(ctx, "ng-on"); on {
		t.Error("the answer was kept past its TTL")
	}
	if got := src.count("prod/ng-on"); got != 2 {
		t.Errorf("%d calls after the TTL, want 2", got)
	}
}

// A failure is an answer of its own, never "off": it is kept for NodegroupRepairFailTTL (a
// refused permission is asked about once a minute, not once a look), then asked again.
func TestNodegroupRepairsFailures(t *testing.T) {
	ctx := context.Background()
	now := t0
	denied := fmt.Errorf("DescribeNodegroup: %w", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"})
	src := &nodegroupSource{calls: map[string]int{}, on: map[string]bool{"ng": true}, errs: []error{denied}}
	c := newNodegroupRepairs(src, "prod", func() time.Time { return now })
	for range 3 {
		_, err := c.AutoRepaired(ctx, "ng")
		if _, ok := Denied(err); !ok {
			t.Fatalf("err %v, want the refusal", err)
		}
	}
	if got := src.count("prod/ng"); got != 1 {
		t.Errorf("%d calls for a refused node group within a minute, want 1", got)
	}
	now = now.Add(NodegroupRepairFailTTL)
	if on, err := c.AutoRepaired(ctx, "ng"); !on || err != nil {
		t.Errorf("once granted: %v, %v; want on", on, err)
	}
	if got := src.count("prod/ng"); got != 2 {
		t.Errorf("%d calls, want 2", got)
	}
}

// Callers that ask about one node group at once share one call; a caller whose context ends
// while it waits gives up alone, and its own cancelled call is not kept.
func TestNodegroupRepairsOneCallAtOnce(t *testing.T) {
	src := &nodegroupSource{calls: map[string]int{}, on: map[string]bool{"ng": true}, release: make(chan struct{})}
	c := NewNodegroupRepairs(src, "prod")
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			on, err := c.AutoRepaired(context.Background(), "ng")
			if err == nil && !on {
				err = errors.New("off")
			}
			results[i] = err
		}()
	}
	waitFor(t, func() bool { return src.count("prod/ng") == 1 })
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.AutoRepaired(gone, "ng"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller: %v", err)
	}
	close(src.release)
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if got := src.count("prod/ng"); got != 1 {
		t.Errorf("%d calls for callers asking at once, want 1", got)
	}

	src2 := &nodegroupSource{calls: map[string]int{}, on: map[string]bool{"ng": true}, release: make(chan struct{})}
	c2 := NewNodegroupRepairs(src2, "prod")
	short, cancel2 := context.WithCancel(context.Background())
	go func() {
		_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return src2.count("prod/ng") > 0, nil
		})
		cancel2()
	}()
	if _, err := c2.AutoRepaired(short, "ng"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the asking caller's context ended: %v", err)
	}
	close(src2.release)
	if on, err := c2.AutoRepaired(context.Background(), "ng"); !on || err != nil {
		t.Errorf("after a cancelled call: %v, %v", on, err)
	}
	if got := src2.count("prod/ng"); got != 2 {
		t.Errorf("%d calls, want 2 (the cancelled one was not kept)", got)
	}
}

// Without the cluster's name nothing can be asked: an error, never "off".
func TestNodegroupRepairsNeedTheCluster(t *testing.T) {
	src := &nodegroupSource{calls: map[string]int{}}
	if _, err := NewNodegroupRepairs(src, "").AutoRepaired(context.Background(), "ng"); err == nil {
		t.Error("no error without a cluster name")
	}
	if len(src.calls) != 0 {
		t.Errorf("calls %v without a cluster name", src.calls)
	}
}

// The cache is bounded (node group names come from node labels): past the bound a node
// group is asked each time rather than kept, and expired answers make room.
func TestNodegroupRepairsBounded(t *testing.T) {
	ctx := context.Background()
	now := t0
	src := &nodegroupSource{calls: map[string]int{}}
	c := newNodegroupRepairs(src, "prod", func() time.Time { return now })
	for i := range maxNodegroups + 1 {
		_, _ = c.AutoRepaired(ctx, fmt.Sprintf("ng-%d", i))
	}
	if len(c.known) != maxNodegroups {
		t.Errorf("%d node groups kept, want %d", len(c.known), maxNodegroups)
	}
	now = now.Add(NodegroupRepairTTL)
	_, _ = c.AutoRepaired(ctx, "late")
	if len(c.known) != 1 {
		t.Errorf("%d node groups kept after the others expired, want 1", len(c.known))
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatal("condition not met within 5s")
	}
}

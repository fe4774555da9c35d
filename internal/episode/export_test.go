// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/notice"
)

// handleLocks let one Handle at a time reconcile a node of a handler, as the modes' drivers do
// (the agent's one loop; the controller's workqueue, one worker per node at a time).
var handleLocks sync.Map // handleKey → *sync.Mutex

type handleKey struct {
	h    *Handler
	node string
}

// Handle takes the notice (Intake) and then drives the node's episode to its end in the
// caller (Reconcile, waiting for a scheduled start): tests handle one notice at a time and
// look at the node once it returns.
func (h *Handler) Handle(ctx context.Context, n notice.Notice, nodeName string) error {
	if err := h.Intake(ctx, n, nodeName, nil); err != nil || h.cfg.DryRun {
		return err
	}
	lock, _ := handleLocks.LoadOrStore(handleKey{h, nodeName}, &sync.Mutex{})
	mu := lock.(*sync.Mutex)
	for {
		node, err := h.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("notice %s: read node %s: %w", n.ID, nodeName, err)
		}
		mu.Lock()
		wait, err := h.Reconcile(ctx, node)
		mu.Unlock()
		if err != nil || wait <= 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// CompleteFunc is a NoticeCompleter made of a function.
type CompleteFunc func(ctx context.Context, nodeName string, n notice.Notice) (*lifecycle.Completed, error)

func (f CompleteFunc) Complete(ctx context.Context, nodeName string, n notice.Notice) (*lifecycle.Completed, error) {
	return f(ctx, nodeName, n)
}

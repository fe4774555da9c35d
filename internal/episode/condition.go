// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/text"
)

// The reasons of the lifeboat.dev/Interruption condition: the phase of the node's episode.
const (
	ConditionCordoned          = "Cordoned"          // cordoned; no drain, or its start still ahead
	ConditionDraining          = "Draining"          // the drain runs; the message names the pods that hold it
	ConditionWaitingForVolumes = "WaitingForVolumes" // drained; the evicted pods' volumes are still attached
	ConditionWaitingForTargets = "WaitingForTargets" // drained; load-balancer targets still draining
	ConditionHandedBack        = "HandedBack"        // drained and its instance handed back: it may go
	ConditionEpisodeEnded      = "EpisodeEnded"      // False: no episode holds the node
)

// conditionRefresh spaces the writes that only change the condition's message (the pods a
// drain waits for come and go): a phase change is written at once, a new message at most
// this often per node.
const conditionRefresh = 30 * time.Second

// conditionWorkers bound the condition writes under way at once; the request budget's
// background lane paces them further.
const conditionWorkers = 4

// maxConditionMessage bounds the condition's message: a drain held by hundreds of pods names
// the first ones and counts the rest.
const maxConditionMessage = 1024

// conditions shows each node's episode as the node's lifeboat.dev/Interruption condition,
// beside the record: what it is waiting for, where `kubectl describe node` and tools that read
// conditions look. Writes leave the phases' own work alone: each phase states what the
// condition should say, and a few workers (no goroutine while nothing is to write) write the
// latest of it, the latest state of a node only, at most one write per phase change and one
// refresh of the message per conditionRefresh. A failed write is logged, not retried: the next
// phase writes again.
type conditions struct {
	writer *nodes.Writer // nil: the condition is off (NODE_CONDITION=false, DRY_RUN)
	log    *slog.Logger
	// held, when set, lists the pods holding the node's drain now (drain.Reporter.Holding).
	held func(node string) []string
	// refresh is conditionRefresh (shorter in tests).
	refresh time.Duration
	// panics counts the panics a write recovers from.
	panics panics.Counter

	mu      sync.Mutex
	shown   map[string]*shownCondition
	queue   []string // nodes with a write due, first come first
	workers int
	swept   time.Time // when forgetIdleLocked last looked
}

// shownCondition is what the condition of one node should say and what was last written.
type shownCondition struct {
	want, written corev1.NodeCondition
	// wantHeld and writtenHeld: the message names pods that hold the drain. The first such
	// message is written at once, as a phase change is.
	wantHeld, writtenHeld bool
	base                  string       // the message before the pods that hold a drain
	hint                  *corev1.Node // a recent copy, to save a read
	lastWrite             time.Time
	queued                bool
	writing               bool // a write is under way: its end looks again
	timer                 *time.Timer
}

// newConditions writes through w (nil: off).
func newConditions(w *nodes.Writer, log *slog.Logger) *conditions {
	return &conditions{writer: w, log: log, refresh: conditionRefresh, shown: map[string]*shownCondition{}}
}

// set states the node's condition: True with the reason and message, or, with reason
// ConditionEpisodeEnded, False.
func (c *conditions) set(node *corev1.Node, reason, message string) {
	if c == nil || c.writer == nil || node == nil {
		return
	}
	status := corev1.ConditionTrue
	if reason == ConditionEpisodeEnded {
		status = corev1.ConditionFalse
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetIdleLocked(time.Now())
	s := c.shown[node.Name]
	fresh := s == nil
	if fresh {
		if status == corev1.ConditionFalse && nodes.ConditionOf(node, nodes.ConditionInterruption) == nil {
			return // never shown: nothing to clear
		}
		s = &shownCondition{}
		c.shown[node.Name] = s
	}
	s.hint, s.base = node, message
	msg, held := c.message(node.Name, reason, message)
	s.want, s.wantHeld = corev1.NodeCondition{Type: nodes.ConditionInterruption, Status: status, Reason: reason, Message: msg}, held
	if fresh {
		// New to this process (a restart, or a leader taking over the drains of the last):
		// what the node, as the phase just read or wrote it, already shows needs no write.
		if old := nodes.ConditionOf(node, nodes.ConditionInterruption); old != nil && sameCondition(*old, s.want) {
			s.written, s.writtenHeld = s.want, held
		}
	}
	c.dueLocked(node.Name, s)
}

// conditionForget is how long a node whose condition is written and unchanged is remembered:
// a node handed back is usually deleted with its instance, and never told its episode ended.
// Forgotten, its next state is written as a phase change.
const conditionForget = time.Hour

// forgetIdleLocked forgets the nodes whose condition has been written and left alone for
// conditionForget, so that the map holds the nodes of recent episodes only.
func (c *conditions) forgetIdleLocked(now time.Time) {
	if now.Sub(c.swept) < conditionForget/4 {
		return
	}
	c.swept = now
	for name, s := range c.shown {
		if !s.queued && !s.writing && s.timer == nil && now.Sub(s.lastWrite) > conditionForget && sameCondition(s.want, s.written) {
			delete(c.shown, name)
		}
	}
}

// heldChanged is told that the pods holding the node's drain changed: a draining node's
// message names them.
func (c *conditions) heldChanged(node string) {
	if c == nil || c.writer == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shown[node]
	if s == nil || s.want.Reason != ConditionDraining {
		return
	}
	s.want.Message, s.wantHeld = c.message(node, s.want.Reason, s.base)
	c.dueLocked(node, s)
}

// message is base, and for a draining node the pods that hold its drain (held: some do).
func (c *conditions) message(node, reason, base string) (msg string, held bool) {
	if reason != ConditionDraining || c.held == nil {
		return clipMessage(base), false
	}
	pods := c.held(node)
	if len(pods) == 0 {
		return clipMessage(base), false
	}
	return clipMessage(fmt.Sprintf("%s; %d pod(s) held: %s", base, len(pods), strings.Join(pods, "; "))), true
}

// dueLocked queues the node's write now, or for later when only the message changed and the
// last write is recent.
func (c *conditions) dueLocked(node string, s *shownCondition) {
	if s.queued || s.writing || sameCondition(s.want, s.written) {
		return
	}
	phaseChange := s.want.Status != s.written.Status || s.want.Reason != s.written.Reason || (s.wantHeld && !s.writtenHeld)
	if wait := c.refresh - time.Since(s.lastWrite); !phaseChange && wait > 0 {
		if s.timer == nil {
			s.timer = time.AfterFunc(wait, func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				s.timer = nil
				c.dueLocked(node, s)
			})
		}
		return
	}
	s.queued = true
	c.queue = append(c.queue, node)
	if c.workers < conditionWorkers {
		c.workers++
		go c.work()
	}
}

// work writes queued conditions until none is left.
func (c *conditions) work() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.workers--
			c.mu.Unlock()
			return
		}
		node := c.queue[0]
		c.queue = c.queue[1:]
		s := c.shown[node]
		s.queued, s.writing = false, true
		want, held, hint := s.want, s.wantHeld, s.hint
		c.mu.Unlock()
		c.write(node, s, want, held, hint)
	}
}

// conditionWriteTimeout bounds one write, its turn in the request budget included.
const conditionWriteTimeout = time.Minute

func (c *conditions) write(node string, s *shownCondition, want corev1.NodeCondition, held bool, hint *corev1.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), conditionWriteTimeout)
	defer cancel()
	var err error
	// The write starts from a copy of the Node, which is input: a panic ends this write only.
	if p := panics.Do(panics.NodeCondition, c.log, c.panics, func() { _, err = c.writer.SetCondition(ctx, node, hint, want) }, "node", node); p != nil {
		err = p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.lastWrite, s.writing = time.Now(), false
	if err != nil {
		c.log.Warn("could not set the node's interruption condition", "node", node, "reason", want.Reason, "err", err)
		s.written, s.writtenHeld = corev1.NodeCondition{}, false // unknown: the next change writes
		return
	}
	s.written, s.writtenHeld = want, held
	if s.hint == hint {
		s.hint = nil // the next phase brings a copy of its own; none is kept meanwhile
	}
	if want.Status == corev1.ConditionFalse && sameCondition(s.want, want) && s.timer == nil && !s.queued {
		delete(c.shown, node) // over: nothing more to show until the next episode
		return
	}
	c.dueLocked(node, s) // the state moved on while this one was written
}

func sameCondition(a, b corev1.NodeCondition) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}

func clipMessage(s string) string {
	if len(s) <= maxConditionMessage {
		return s
	}
	return text.Clip(s, maxConditionMessage-3, "...")
}

// phaseLabel shows the record's phase as the node's lifeboat.dev/phase label, in the write that
// moves the phase (after record.PhaseEdit); off, it changes nothing.
func phaseLabel(on bool) nodes.Edit {
	return func(n *corev1.Node) {
		if !on {
			return
		}
		if r, err := record.Read(n); err == nil && r.Known() && r.Phase > record.PhaseNone {
			nodes.SetLabel(nodes.LabelPhase, r.Phase.String())(n)
		}
	}
}

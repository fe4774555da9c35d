// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"sync"
	"time"
)

// handledNotices remembers notices this process saw finished on a fresh read of their node, so
// that further copies (a storm of duplicate messages, metadata reporting a notice for
// minutes) are answered without another read. A release only adds a notice to the record's
// released list, which also means nothing to do; only the end of the node's episode (seen on
// a cached or fresh copy of the node) makes a done notice worth another look.
type handledNotices struct {
	mu  sync.Mutex
	at  map[string]time.Time
	ttl time.Duration
	max int
}

func newHandledNotices() *handledNotices {
	return &handledNotices{at: map[string]time.Time{}, ttl: time.Hour, max: 10000}
}

func (d *handledNotices) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.at[id]
	return ok && time.Since(at) < d.ttl
}

// forget drops ids whose episode has ended: a notice of the same id opens a new one.
func (d *handledNotices) forget(ids ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		delete(d.at, id)
	}
}

func (d *handledNotices) add(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.at) >= d.max {
		for k, at := range d.at {
			if time.Since(at) >= d.ttl {
				delete(d.at, k)
			}
		}
		for k := range d.at { // still full: forget arbitrary ones; they cost a read, not a repeat
			if len(d.at) < d.max*9/10 {
				break
			}
			delete(d.at, k)
		}
	}
	d.at[id] = time.Now()
}

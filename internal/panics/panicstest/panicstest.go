// SPDX-License-Identifier: Apache-2.0

// Package panicstest counts recovered panics by site, for tests.
package panicstest

import "sync"

// Counter is a panics.Counter that remembers how many panics each site recovered.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// PanicRecovered counts one panic of site.
func (c *Counter) PanicRecovered(site string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[site]++
}

// Get is how many panics site recovered.
func (c *Counter) Get(site string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[site]
}

// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"fmt"
	"testing"
	"time"
)

func TestHandledNoticesBounded(t *testing.T) {
	d := newHandledNotices()
	d.max = 100
	for i := range 250 {
		d.add(fmt.Sprintf("n-%d", i))
	}
	if len(d.at) > d.max {
		t.Errorf("%d entries kept, want at most %d", len(d.at), d.max)
	}
	if !d.has("n-249") {
		t.Error("the newest notice is forgotten")
	}
	d.at["old"] = time.Now().Add(-2 * d.ttl)
	if d.has("old") {
		t.Error("an expired entry still counts")
	}
	if d.has("never") {
		t.Error("an unknown notice counts as done")
	}
}

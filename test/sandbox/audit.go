// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests count requests by. (The full
// type lives in k8s.io/apiserver, which is too heavy a dependency for this.)
type AuditEvent struct {
	AuditID   string `json:"auditID"`
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestURI     string    `json:"requestURI"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// AuditEvents returns one event per API request so far (since SkipAudit, if called) (a watch appears once, when it
// starts), optionally only those for which keep returns true.
func (c *Cluster) AuditEvents(keep func(AuditEvent) bool) ([]AuditEvent, error) {
	if c.AuditLogPath == "" {
		return nil, fmt.Errorf("the cluster was started without ClusterOptions.AuditLog")
	}
	f, err := os.Open(c.AuditLogPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	if c.auditFrom > 0 {
		// Start at the line that begins at or after auditFrom.
		if _, err := f.Seek(c.auditFrom-1, io.SeekStart); err != nil {
			return nil, err
		}
		if _, err := r.ReadBytes('\n'); err != nil && err != io.EOF {
			return nil, fmt.Errorf("audit log %s: %w", c.AuditLogPath, err)
		}
	}
	seen := map[string]bool{}
	var out []AuditEvent
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			// A line without its newline is still being written by the API server: it is
			// read next time.
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("audit log %s: %w", c.AuditLogPath, err)
		}
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", c.AuditLogPath, err)
		}
		if seen[e.AuditID] {
			continue
		}
		seen[e.AuditID] = true
		if keep == nil || keep(e) {
			out = append(out, e)
		}
	}
}

// ByUser keeps the requests made by one authenticated user.
func ByUser(name string) func(AuditEvent) bool {
	return func(e AuditEvent) bool { return e.User.Username == name }
}

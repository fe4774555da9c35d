// SPDX-License-Identifier: Apache-2.0

package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	tests := []struct {
		name                string
		version, commit, at string
		want                string
	}{
		{"stamped", "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z",
			"lifeboat v1.2.3 commit 0123456789abcdef0123456789abcdef01234567 committed 2026-01-02T03:04:05Z "},
		// go test records no VCS revision (and GOFLAGS may say -buildvcs=false).
		{"not stamped", "dev", "", "", "lifeboat dev commit unknown committed unknown "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			saved := [3]string{Version, Commit, CommitTime}
			defer func() { Version, Commit, CommitTime = saved[0], saved[1], saved[2] }()
			Version, Commit, CommitTime = tc.version, tc.commit, tc.at
			got := String()
			if !strings.HasPrefix(got, tc.want) || !strings.HasSuffix(got, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) {
				t.Errorf("String() = %q, want %q followed by the Go version and platform", got, tc.want)
			}
			if ua := UserAgent(); ua != "lifeboat/"+tc.version {
				t.Errorf("UserAgent() = %q", ua)
			}
		})
	}
}

// Package version reports which Lifeboat build is running.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at build time with -ldflags "-X lifeboat.dev/lifeboat/internal/version.Version=v1.2.3".
var Version = "dev"

// String describes the build: version, VCS revision when known, and Go version.
func String() string {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " (" + s.Value[:12] + ")"
			}
		}
	}
	return fmt.Sprintf("lifeboat %s%s %s %s/%s", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// UserAgent is sent to the Kubernetes and AWS APIs, so audit logs show who made a request.
func UserAgent() string { return "lifeboat/" + Version }

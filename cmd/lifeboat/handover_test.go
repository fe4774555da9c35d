// SPDX-License-Identifier: Apache-2.0

package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// Two binaries are of one build when module, version, toolchain, stamp and commit agree;
// each difference is named.
func TestOtherBuild(t *testing.T) {
	build := func(change func(*debug.BuildInfo)) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "lifeboat.dev/lifeboat", Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "-ldflags", Value: "-X v=v1.2.3"}, {Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}
		if change != nil {
			change(b)
		}
		return b
	}
	ours := build(nil)
	tests := []struct {
		name   string
		theirs *debug.BuildInfo
		want   string // "" for one build, else in the reason
	}{
		{"same", build(nil), ""},
		{"another release", build(func(b *debug.BuildInfo) { b.Settings[0].Value = "-X v=v1.2.2" }), `-ldflags "-X v=v1.2.2", this one "-X v=v1.2.3"`},
		{"another commit", build(func(b *debug.BuildInfo) { b.Settings[1].Value = "def" }), "vcs.revision"},
		{"not stamped", build(func(b *debug.BuildInfo) { b.Settings = b.Settings[1:] }), "-ldflags"},
		{"another toolchain", build(func(b *debug.BuildInfo) { b.GoVersion = "go1.25.0" }), "built with go1.25.0"},
		{"another module", build(func(b *debug.BuildInfo) { b.Main.Path = "example.com/fork" }), "module example.com/fork"},
	}
	for _, tc := range tests {
		got := otherBuild(ours, tc.theirs)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

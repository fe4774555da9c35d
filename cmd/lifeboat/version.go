// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/version"
)

// buildInfo is what version prints as JSON or YAML.
type buildInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	CommitTime string `json:"commitTime"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the build: version, commit and its time, Go version, platform",
		GroupID: groupRead,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			f, err := output.Parse(a.output, versionFormats...)
			if err != nil {
				return usageError("%v", err)
			}
			if !f.Structured() {
				_, err := fmt.Fprintln(a.stdout, version.String())
				return err
			}
			commit, at := version.Build()
			return output.Write(a.stdout, buildInfo{APIVersion: output.APIVersion, Kind: "BuildInfo", Version: version.Version,
				Commit: commit, CommitTime: at, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}, f)
		},
	}
}

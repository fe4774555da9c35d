// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// checkExecutable refuses a binary the image could not run or should not carry: another
// platform's, one that needs libc (the image has none), or one holding the build machine's
// paths. The Go toolchain records all three in the binary's build information.
func checkExecutable(binary []byte, p v1.Platform) error {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("not a Go binary with build information: %w", err)
	}
	settings := buildSettings(info)
	want := map[string]string{"GOOS": p.OS, "GOARCH": p.Architecture, "CGO_ENABLED": "0", "-trimpath": "true"}
	for _, k := range []string{"GOOS", "GOARCH", "CGO_ENABLED", "-trimpath"} {
		if settings[k] != want[k] {
			return fmt.Errorf("built with %s=%q, the image needs %q", k, settings[k], want[k])
		}
	}
	return nil
}

func buildSettings(info *debug.BuildInfo) map[string]string {
	m := map[string]string{}
	for _, s := range info.Settings {
		m[s.Key] = s.Value
	}
	return m
}

// A minimal SPDX 2.3 document: the binary's main module, the Go standard library and every
// module linked in, from the build information the Go toolchain records in the binary.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// spdxID makes an SPDX identifier (letters, digits, '.' and '-') from a module path.
func spdxID(kind, name string) string {
	var b strings.Builder
	b.WriteString("SPDXRef-" + kind + "-")
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

func goPackage(kind, path, version string) spdxPackage {
	return spdxPackage{
		Name:             path,
		SPDXID:           spdxID(kind, path),
		VersionInfo:      version,
		DownloadLocation: "NOASSERTION",
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER",
			ReferenceType:     "purl",
			ReferenceLocator:  "pkg:golang/" + path + "@" + version,
		}},
	}
}

// spdxSBOM describes one platform's binary. Its times and names come from the spec and the
// binary only, so it is as reproducible as the rest of the image.
func spdxSBOM(s imageSpec, p v1.Platform, binary []byte) ([]byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(binary)
	return spdxFor(s, p, info, hex.EncodeToString(digest[:]))
}

// spdxFor writes the SBOM of a binary with build information info and SHA-256 sum.
func spdxFor(s imageSpec, p v1.Platform, info *debug.BuildInfo, sum string) ([]byte, error) {
	platform := strings.ReplaceAll(p.String(), "/", "-")

	// The toolchain records no version for the main module of a local build: the stamped
	// release names it.
	main := goPackage("Module", info.Main.Path, s.version)
	main.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sum}}
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              "lifeboat-" + s.version + "-" + platform,
		DocumentNamespace: strings.TrimSuffix(s.source, "/") + "/spdx/" + s.version + "/" + platform + "/" + sum,
		CreationInfo: spdxCreationInfo{
			Created:  s.created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: lifeboat-hack-release"},
		},
		Packages: []spdxPackage{main, goPackage("Go", "stdlib", info.GoVersion)},
		Relationships: []spdxRelationship{
			{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID},
			{main.SPDXID, "DEPENDS_ON", spdxID("Go", "stdlib")},
		},
	}
	ids := map[string]bool{main.SPDXID: true}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		p := goPackage("Module", dep.Path, dep.Version)
		// Identifiers must be unique; two paths can differ only where spdxID replaced a rune.
		for base, n := p.SPDXID, 2; ids[p.SPDXID]; n++ {
			p.SPDXID = fmt.Sprintf("%s-%d", base, n)
		}
		ids[p.SPDXID] = true
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

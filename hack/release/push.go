// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// readLayoutIndex returns the one index a layout written by `release image` holds.
func readLayoutIndex(dir string) (v1.ImageIndex, error) {
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", dir, err)
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s: want exactly one image index in the layout, found %d entries", dir, len(m.Manifests))
	}
	return root.ImageIndex(m.Manifests[0].Digest)
}

// push uploads the layout's index under every tag and returns repository@digest. The bytes
// pushed are the layout's own, so the digest is the one `release image` printed.
func push(ctx context.Context, dir, repository string, tags []string) (string, error) {
	idx, err := readLayoutIndex(dir)
	if err != nil {
		return "", err
	}
	repo, err := name.NewRepository(repository)
	if err != nil {
		return "", fmt.Errorf("-repository %q: %w", repository, err)
	}
	var refs []name.Tag
	for _, t := range tags {
		ref, err := name.NewTag(repo.Name() + ":" + t)
		if err != nil {
			return "", fmt.Errorf("-tag %q: %w", t, err)
		}
		refs = append(refs, ref)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	for _, ref := range refs {
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return "", fmt.Errorf("%s: %w", ref, err)
		}
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return repo.Name() + "@" + digest.String(), nil
}

// SPDX-License-Identifier: Apache-2.0

// Package docs holds the checks on the project's Markdown: every relative link resolves to a
// file and, where it names one, to a heading or anchor of that file; the README stays short;
// the hand-written references name what the code defines.
package docs

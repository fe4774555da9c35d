// SPDX-License-Identifier: Apache-2.0

package record

// Bounds the external tests check against.
const (
	MaxDescription  = maxDescription
	MaxNotices      = maxNotices
	MaxOriginLength = maxOriginLength
	MaxRecordBytes  = maxRecordBytes
)

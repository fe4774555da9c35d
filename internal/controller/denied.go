// SPDX-License-Identifier: Apache-2.0

package controller

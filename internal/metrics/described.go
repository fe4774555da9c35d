// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// fqName finds a metric's name in its Desc, which offers it only in its String form.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Described returns, sorted, the names of the metrics c describes: what a registry can serve
// even before anything is counted. Dashboards and alert rules are checked against it.
func Described(c prometheus.Collector) []string {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	var names []string
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

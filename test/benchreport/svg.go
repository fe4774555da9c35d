// SPDX-License-Identifier: Apache-2.0

package benchreport

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// SVG layout, in pixels.
const (
	svgWidth    = 860
	labelWidth  = 330 // benchmark names, right-aligned against the bars
	barMaxWidth = 420
	barHeight   = 18
	rowHeight   = 24
	panelHead   = 34
	panelGap    = 14
	margin      = 16
)

// panel is one chart: every benchmark that reported a unit, bars scaled to the largest.
type panel struct {
	unit string
	bars []bar
}

type bar struct {
	label string
	value float64
}

// panels groups the results by displayed unit, in the order units first appear.
func panels(rep *Report) []panel {
	var out []panel
	index := map[string]int{}
	for _, r := range rep.Results {
		for _, m := range r.Metrics {
			d := Display(m)
			i, ok := index[d.Unit]
			if !ok {
				i = len(out)
				index[d.Unit] = i
				out = append(out, panel{unit: d.Unit})
			}
			label := r.Name
			if r.Package != "" {
				label = strings.TrimPrefix(ShortPackage(r.Package), "internal/") + " " + r.Name
			}
			out[i].bars = append(out[i].bars, bar{label: label, value: d.Value})
		}
	}
	return out
}

// WriteSVG draws one horizontal bar chart per metric unit (units differ too much to share an
// axis), each bar labelled with its benchmark and value. Written by hand: it needs nothing
// beyond rectangles and text.
func WriteSVG(w io.Writer, rep *Report, title string) error {
	ps := panels(rep)
	height := margin + 28
	for _, p := range ps {
		height += panelHead + len(p.bars)*rowHeight + panelGap
	}
	if len(ps) == 0 {
		height += rowHeight
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, height)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="16" font-weight="bold">%s</text>`+"\n", margin, margin+14, esc(title))
	y := margin + 28
	if len(ps) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no benchmark results</text>`+"\n", margin, y+16)
	}
	for _, p := range ps {
		fmt.Fprintf(&b, `<g class="panel" data-unit="%s">`+"\n", esc(p.unit))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", margin, y+20, esc(p.unit))
		y += panelHead
		top := 0.0
		for _, br := range p.bars {
			top = max(top, br.value)
		}
		for _, br := range p.bars {
			width := 0.0
			if top > 0 && br.value > 0 {
				width = max(br.value/top*barMaxWidth, 1)
			}
			x := margin + labelWidth
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", x-8, y+13, esc(br.label))
			fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" fill="#3b6ea5"><title>%s: %s %s</title></rect>`+"\n",
				x, y, width, barHeight, esc(br.label), FormatValue(br.value), esc(p.unit))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(x)+width+6, y+13, FormatValue(br.value))
			y += rowHeight
		}
		y += panelGap
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return html.EscapeString(s) }

// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// Colours of the timeline's marks.
var tierColours = map[string]string{
	TierWorkload: "#4c78a8", TierCritical: "#e45756", TierDaemonSet: "#f58518", TierMirror: "#9d755d",
}

const (
	colourNotice    = "#333333"
	colourCordon    = "#eeca3b"
	colourDrained   = "#54a24b"
	colourCompleted = "#b279a2"
	colourRefused   = "#d62728"
	colourDetach    = "#e8dff0" // the hand-back waits, in the lifecycle completion's hue
	colourTarget    = "#72b7b2"
	colourDetached  = "#ff9da6"
	colourRelaxed   = "#8e6c8a"
)

// svgLayout is the picture's geometry, in pixels.
const (
	svgWidth   = 980
	svgLeft    = 250 // lane labels
	svgRight   = 30
	svgTop     = 56
	laneHeight = 100
	// detachRow is where, below a lane's line, its target's draining and its volume's
	// detachment are drawn: clear of the evictions above it.
	detachRow = 41
)

// writeTimeline draws the drains, one lane per node and one for the foreign notice, as an
// SVG file at path. Every mark has a tooltip saying what it is.
func writeTimeline(path string, r *Result) error {
	end := time.Second
	for _, c := range r.Cases {
		for _, d := range []time.Duration{c.Notice, c.Cordoned, c.Drained, c.Recorded, c.Completed} {
			end = max(end, d)
		}
		if h := c.Detach; h != nil {
			end = max(end, h.Deregistered, h.TargetGone, h.Detached)
		}
		for _, p := range c.Evicted {
			end = max(end, p.Evicted, p.Gone)
		}
	}
	end = max(end, r.Foreign.Refused)
	if r.Relaxed != nil {
		end = max(end, r.Relaxed.At)
	}
	span := niceSpan(end)
	plot := float64(svgWidth - svgLeft - svgRight)
	x := func(d time.Duration) float64 { return svgLeft + plot*d.Seconds()/span.Seconds() }

	lanes := len(r.Cases) + 1
	height := svgTop + lanes*laneHeight + 90
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">Lifeboat demo: notices handled (seconds from the first notice)</text>`+"\n", 16)

	// Time axis with a grid line per tick.
	axisY := svgTop + lanes*laneHeight
	step := tickStep(span)
	for t := time.Duration(0); t <= span; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", x(t), svgTop-8, x(t), axisY)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(t), axisY+16, trimSeconds(t))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", svgLeft, axisY, svgWidth-svgRight, axisY)

	for i, c := range r.Cases {
		y := float64(svgTop + i*laneHeight + laneHeight/2)
		laneLabel(&b, y, "node "+c.Name+" · "+c.Handler, c.Title, c.Node)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbb"/>`+"\n", svgLeft, y, svgWidth-svgRight, y)
		if c.Cordoned >= 0 && c.Drained >= 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="22" fill="#f2f2f2" stroke="#ddd"><title>draining: %s to %s</title></rect>`+"\n",
				x(c.Cordoned), y-11, math.Max(x(c.Drained)-x(c.Cordoned), 1), at(c.Cordoned), at(c.Drained))
		}
		if c.Detach != nil {
			detachWaits(&b, x, y, c)
		}
		notice(&b, x(c.Notice), y, "notice "+at(c.Notice))
		if c.Cordoned >= 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s" stroke="#333"><title>cordoned %s</title></rect>`+"\n",
				x(c.Cordoned)-5, y-5, colourCordon, at(c.Cordoned))
		}
		for j, p := range c.Evicted {
			// Four levels, above and below the lane, so evictions close in time stay apart.
			dy := []float64{18, -18, 29, -29}[j%4]
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`+"\n", x(p.Evicted), y, x(p.Evicted), y+dy, tierColours[p.Tier])
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s"><title>%s evicted %s (%s), gone %s, %d eviction request(s), %d refused by the PodDisruptionBudget</title></circle>`+"\n",
				x(p.Evicted), y+dy, tierColours[p.Tier], esc(p.Pod), at(p.Evicted), p.Tier, at(p.Gone), p.Attempts, p.Refused)
		}
		if c.Drained >= 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="4" height="30" fill="%s"><title>drained %s (last evicted pod gone)</title></rect>`+"\n",
				x(c.Drained)-2, y-15, colourDrained, at(c.Drained))
			sideLabel(&b, x(c.Drained), 4, y+27, "drained "+at(c.Drained))
		}
		if c.Completed >= 0 {
			cx := x(c.Completed)
			fmt.Fprintf(&b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="#333"><title>lifecycle action completed %s</title></polygon>`+"\n",
				cx, y-8, cx+8, y, cx, y+8, cx-8, y, colourCompleted, at(c.Completed))
			sideLabel(&b, cx, 10, y-10, "lifecycle completed "+at(c.Completed))
		}
		if c.Detach != nil {
			targetDraining(&b, x, y+detachRow, span, c.Detach)
			volumeDetached(&b, x, y+detachRow, c.Detach)
		}
	}

	if r.Relaxed != nil {
		budgetRelaxed(&b, x(r.Relaxed.At), len(r.Cases), r.Relaxed)
	}

	// The foreign notice: refused, nothing else.
	f := r.Foreign
	y := float64(svgTop + len(r.Cases)*laneHeight + laneHeight/2)
	laneLabel(&b, y, "foreign · controller", f.InstanceID, "another cluster's instance")
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#bbb" stroke-dasharray="4 3"/>`+"\n", svgLeft, y, svgWidth-svgRight, y)
	notice(&b, x(f.Notice), y, "notice "+at(f.Notice))
	if f.Refused >= 0 {
		rx := x(f.Refused)
		fmt.Fprintf(&b, `<g stroke="%s" stroke-width="3"><title>refused %s: %s</title><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`+"\n",
			colourRefused, at(f.Refused), esc(f.Reason), rx-6, y-6, rx+6, y+6, rx-6, y+6, rx+6, y-6)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s">refused: %s</text>`+"\n", rx+12, y+4, colourRefused, esc(clip(f.Reason, 90)))
	}

	legend(&b, float64(axisY+44))
	b.WriteString("</svg>\n")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// detachWaits draws, on the lane's line, the stretch from the start of the handler's first
// hand-back wait to the lifecycle completion.
func detachWaits(b *bytes.Buffer, x func(time.Duration) float64, y float64, c Case) {
	if c.Completed < 0 || len(c.Detach.Waits) == 0 {
		return
	}
	start := c.Completed
	var waits []string
	for _, w := range c.Detach.Waits {
		start = min(start, w.Logged-w.Took)
		waits = append(waits, w.String())
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="12" fill="%s" stroke="%s" stroke-dasharray="3 2"><title>hand-back %s to %s: the %s waited %s</title></rect>`+"\n",
		x(start), y-6, math.Max(x(c.Completed)-x(start), 1), colourDetach, colourCompleted, at(start), at(c.Completed), c.Handler, esc(strings.Join(waits, "; ")))
}

// budgetRelaxed draws the owner's relaxation of a budget as a line across the node lanes:
// every drain it held goes on from there.
func budgetRelaxed(b *bytes.Buffer, x float64, lanes int, rx *Relaxation) {
	top, bottom := svgTop-6, svgTop+lanes*laneHeight
	fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 3"><title>app owner relaxed PodDisruptionBudget %s %s (%s)</title></line>`+"\n",
		x, top, x, bottom, colourRelaxed, esc(rx.Budget), at(rx.At), esc(rx.Change))
	sideLabel(b, x, 4, float64(top+4), "budget "+rx.Budget+" relaxed "+at(rx.At))
}

// targetDraining draws the instance's time draining in its target group, from its
// deregistration to the end of the delay (or the picture's end, if it never ended).
func targetDraining(b *bytes.Buffer, x func(time.Duration) float64, y float64, span time.Duration, h *Detach) {
	if h.Deregistered < 0 {
		return
	}
	end, until := h.TargetGone, at(h.TargetGone)
	if end < 0 {
		end, until = span, "the end (still draining)"
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="8" fill="%s" fill-opacity="0.45" stroke="%s"><title>target %s in target group %s: deregistered %s, draining until %s</title></rect>`+"\n",
		x(h.Deregistered), y-4, math.Max(x(end)-x(h.Deregistered), 1), colourTarget, colourTarget, esc(h.Target), esc(h.TargetGroup), at(h.Deregistered), until)
	if h.TargetGone < 0 {
		return
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="3" height="14" fill="%s"><title>gone from target group %s %s: %s no longer draining</title></rect>`+"\n",
		x(h.TargetGone)-1.5, y-7, colourTarget, esc(h.TargetGroup), at(h.TargetGone), esc(h.Target))
	sideLabel(b, x(h.TargetGone), 5, y+4, "target gone "+at(h.TargetGone))
}

// volumeDetached marks the moment the stateful pod's volume was detached from the node.
func volumeDetached(b *bytes.Buffer, x func(time.Duration) float64, y float64, h *Detach) {
	if h.Detached < 0 {
		return
	}
	fmt.Fprintf(b, `<polygon transform="translate(%.1f,%.1f)" points="%s" fill="%s" stroke="#333"><title>volume %s detached %s (VolumeAttachment %s deleted; %s gone %s)</title></polygon>`+"\n",
		x(h.Detached), y, hexagon, colourDetached, esc(h.Volume), at(h.Detached), esc(h.Attachment), esc(h.Pod), at(h.PodGone))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555" text-anchor="middle">volume detached %s</text>`+"\n", x(h.Detached), y+17, at(h.Detached))
}

// hexagon is the volume-detached mark's outline, around its centre.
const hexagon = "-6,0 -3,-5.2 3,-5.2 6,0 3,5.2 -3,5.2"

// sideLabel writes a small label gap pixels right of a mark at x, or left of it when it would
// run off the picture (a mark near the end of the time axis).
func sideLabel(b *bytes.Buffer, x, gap, y float64, text string) {
	anchor := "start"
	if x+gap+float64(len(text))*5.6 > svgWidth-4 {
		x, anchor = x-gap, "end"
	} else {
		x += gap
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="#555" text-anchor="%s">%s</text>`+"\n", x, y, anchor, esc(text))
}

func laneLabel(b *bytes.Buffer, y float64, title, line2, line3 string) {
	fmt.Fprintf(b, `<text x="12" y="%.1f" font-weight="bold">%s</text>`+"\n", y-12, esc(title))
	fmt.Fprintf(b, `<text x="12" y="%.1f" fill="#555" font-size="11">%s</text>`+"\n", y+3, esc(clip(line2, 38)))
	fmt.Fprintf(b, `<text x="12" y="%.1f" fill="#555" font-size="11">%s</text>`+"\n", y+17, esc(clip(line3, 30)))
}

func notice(b *bytes.Buffer, x, y float64, title string) {
	fmt.Fprintf(b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"><title>%s</title></polygon>`+"\n",
		x-6, y-16, x+6, y-16, x, y-4, colourNotice, esc(title))
}

// legend explains every kind of mark, in rows as wide as the picture.
func legend(b *bytes.Buffer, y float64) {
	xPos := 16.0
	item := func(mark, label string) {
		width := 14 + float64(len(label))*6.6 + 18
		if xPos+width > svgWidth-svgRight {
			xPos, y = 16, y+22
		}
		fmt.Fprintf(b, mark+"\n", xPos, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", xPos+14, y+4, esc(label))
		xPos += width
	}
	item(`<polygon transform="translate(%.1f,%.1f)" points="-6,-6 6,-6 0,6" fill="`+colourNotice+`"/>`, "notice")
	item(`<rect transform="translate(%.1f,%.1f)" x="-5" y="-5" width="10" height="10" fill="`+colourCordon+`" stroke="#333"/>`, "cordoned")
	item(`<circle transform="translate(%.1f,%.1f)" r="5" fill="`+tierColours[TierWorkload]+`"/>`, "evicted (workload)")
	item(`<circle transform="translate(%.1f,%.1f)" r="5" fill="`+tierColours[TierCritical]+`"/>`, "evicted (critical, after pods no budget holds)")
	item(`<rect transform="translate(%.1f,%.1f)" x="-2" y="-8" width="4" height="16" fill="`+colourDrained+`"/>`, "drained")
	item(`<rect transform="translate(%.1f,%.1f)" x="-7" y="-6" width="14" height="12" fill="`+colourDetach+`" stroke="`+colourCompleted+`" stroke-dasharray="3 2"/>`, "hand-back waits")
	item(`<polygon transform="translate(%.1f,%.1f)" points="0,-7 7,0 0,7 -7,0" fill="`+colourCompleted+`" stroke="#333"/>`, "lifecycle completed")
	item(`<rect transform="translate(%.1f,%.1f)" x="-7" y="-4" width="14" height="8" fill="`+colourTarget+`" fill-opacity="0.45" stroke="`+colourTarget+`"/>`, "target draining")
	item(`<rect transform="translate(%.1f,%.1f)" x="-1.5" y="-7" width="3" height="14" fill="`+colourTarget+`"/>`, "target gone")
	item(`<polygon transform="translate(%.1f,%.1f)" points="`+hexagon+`" fill="`+colourDetached+`" stroke="#333"/>`, "volume detached")
	item(`<path transform="translate(%.1f,%.1f)" d="M-5,-5 L5,5 M-5,5 L5,-5" stroke="`+colourRefused+`" stroke-width="3"/>`, "refused")
	item(`<line transform="translate(%.1f,%.1f)" x1="0" y1="-8" x2="0" y2="8" stroke="`+colourRelaxed+`" stroke-width="2" stroke-dasharray="6 3"/>`, "budget relaxed by its owner")
}

// niceSpan rounds the axis end up to a whole number of ticks.
func niceSpan(end time.Duration) time.Duration {
	end = time.Duration(float64(end) * 1.05)
	step := tickStep(end)
	return (end/step + 1) * step
}

func tickStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second} {
		if span/s <= 12 {
			return s
		}
	}
	return time.Minute
}

func trimSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

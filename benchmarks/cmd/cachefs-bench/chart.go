package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Chart geometry, in pixels.
const (
	chartWidth = 960
	labelWidth = 250
	plotLeft   = labelWidth + 10
	plotWidth  = 600
	barHeight  = 14
	barGap     = 3
	headHeight = 22
)

var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// chartSVG draws, for each phase, one horizontal bar per system: its
// median time relative to native, on a log scale.
func chartSVG(rep *report, cells []cell) []byte {
	lo, hi := ratioRange(cells)
	x := func(r float64) float64 {
		return plotLeft + (math.Log(r)-math.Log(lo))/(math.Log(hi)-math.Log(lo))*plotWidth
	}
	var body strings.Builder
	y := 40.0
	for _, ph := range rep.Phases {
		fmt.Fprintf(&body, `<text x="4" y="%.0f" font-weight="bold">%s</text>`+"\n", y+15, html.EscapeString(ph))
		y += headHeight
		for i, sys := range rep.Systems {
			c := findCell(cells, sys, ph)
			if sys == "native" || c == nil {
				continue
			}
			bar(&body, c, y, palette[i%len(palette)], x, lo)
			y += barHeight + barGap
		}
		y += 6
	}
	height := y + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="4" y="16" font-size="14">cachefs-bench %s: median time / native (log scale), %s, Linux %s, %d CPUs</text>`+"\n",
		rep.Size, html.EscapeString(rep.Date), html.EscapeString(rep.Kernel), rep.Nproc)
	grid(&b, lo, hi, x, height)
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func bar(b *strings.Builder, c *cell, y float64, color string, x func(float64) float64, lo float64) {
	fmt.Fprintf(b, `<text x="%d" y="%.0f" text-anchor="end">%s</text>`+"\n", labelWidth, y+11, html.EscapeString(c.System))
	if c.N == 0 || c.VsNative == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%.0f" fill="#c00">error</text>`+"\n", plotLeft+4, y+11)
		return
	}
	w := math.Max(1, x(c.VsNative)-x(lo))
	fmt.Fprintf(b, `<rect x="%d" y="%.0f" width="%.1f" height="%d" fill="%s"><title>%s %s: %.3fs, %.2fx native</title></rect>`+"\n",
		plotLeft, y, w, barHeight, color, html.EscapeString(c.System), html.EscapeString(c.Phase), c.Median, c.VsNative)
	fmt.Fprintf(b, `<text x="%.1f" y="%.0f">%s (%ss)%s</text>`+"\n", float64(plotLeft)+w+4, y+11,
		html.EscapeString(c.ratio(c.VsNative)), html.EscapeString(c.time()), mark(c))
}

// ratioRange is the log axis: from below min(1, smallest ratio) to above
// the largest.
func ratioRange(cells []cell) (lo, hi float64) {
	lo, hi = 1, 2
	for _, c := range cells {
		if c.VsNative > 0 {
			lo, hi = math.Min(lo, c.VsNative), math.Max(hi, c.VsNative)
		}
	}
	return lo / 1.5, hi * 1.3
}

// grid draws vertical lines at 1, 2 and 5 times the powers of ten.
func grid(b *strings.Builder, lo, hi float64, x func(float64) float64, height float64) {
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			stroke := "#ddd"
			if v == 1 {
				stroke = "#333"
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="26" x2="%.1f" y2="%.0f" stroke="%s"/>`+"\n", x(v), x(v), height-4, stroke)
			fmt.Fprintf(b, `<text x="%.1f" y="34" text-anchor="middle" font-size="10" fill="#666">%gx</text>`+"\n", x(v), v)
		}
	}
}

package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Plot geometry: two panels side by side, each plotW × plotH inside margins.
const (
	plotW, plotH = 420.0, 260.0
	plotMargin   = 50.0
	plotGap      = 60.0
)

// writeBenchSVG draws throughput per second (left) and the latency CDF
// (right) of a run as a self-contained SVG document.
func writeBenchSVG(w io.Writer, title string, rows []benchRow, lat []time.Duration) error {
	var b strings.Builder
	width := 2*plotW + 2*plotMargin + plotGap
	height := plotH + 2*plotMargin
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">%s</text>`+"\n", plotMargin, html.EscapeString("writctl bench "+title))

	// Throughput over time.
	var xs, ys []float64
	for _, r := range rows {
		xs = append(xs, float64(r.Second)+0.5)
		ys = append(ys, r.OpsPerSec)
	}
	ymax := 1.0
	for _, y := range ys {
		ymax = math.Max(ymax, y)
	}
	plotPanel(&b, plotMargin, plotMargin, "throughput (ops/s)", "seconds", float64(max(1, len(rows))), ymax*1.1, xs, ys)

	// Latency CDF.
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	xs, ys = nil, nil
	step := max(1, len(sorted)/400)
	for i := 0; i < len(sorted); i += step {
		xs = append(xs, float64(sorted[i].Microseconds())/1000)
		ys = append(ys, float64(i+1)/float64(len(sorted)))
	}
	if n := len(sorted); n > 0 {
		xs = append(xs, float64(sorted[n-1].Microseconds())/1000)
		ys = append(ys, 1)
	}
	xmax := 1.0
	if len(xs) > 0 {
		xmax = math.Max(xs[len(xs)-1], 0.001)
	}
	plotPanel(&b, 2*plotMargin+plotW+plotGap-plotMargin, plotMargin, "latency CDF (fraction of ops)", "latency (ms)", xmax, 1, xs, ys)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// plotPanel draws axes with 5 ticks each and the polyline of (xs, ys) over
// [0, xmax] × [0, ymax], with its top-left corner at (x0, y0).
func plotPanel(b *strings.Builder, x0, y0 float64, ylabel, xlabel string, xmax, ymax float64, xs, ys []float64) {
	fmt.Fprintf(b, `<g><rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", x0, y0, plotW, plotH)
	for i := 0; i <= 5; i++ {
		f := float64(i) / 5
		x := x0 + f*plotW
		y := y0 + plotH - f*plotH
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, x0, y, x0+plotW, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, x0-4, y+4, tick(f*ymax))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+plotH+14, tick(f*xmax))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`, x0, y0-6, html.EscapeString(ylabel))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x0+plotW/2, y0+plotH+30, html.EscapeString(xlabel))
	var pts []string
	for i := range xs {
		px := x0 + xs[i]/xmax*plotW
		py := y0 + plotH - ys[i]/ymax*plotH
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="%s"/></g>`+"\n", strings.Join(pts, " "))
}

func tick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

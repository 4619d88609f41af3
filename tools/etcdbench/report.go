package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// row is one line of the table: a metric of a cell on both systems, per
// round.
type row struct {
	label        string
	unit         string
	higherBetter bool
	etcd, writ   []float64 // per round; NaN where not measured
}

func (r row) ratios() []float64 {
	out := make([]float64, len(r.etcd))
	for i := range r.etcd {
		out[i] = r.writ[i] / r.etcd[i]
	}
	return out
}

// advantage orients a ratio so that above 1 means writ did better.
func (r row) advantage(ratio float64) float64 {
	if r.higherBetter {
		return ratio
	}
	return 1 / ratio
}

func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func tableRows(rounds []round) []row {
	get := func(rd round, sys, cell string, f func(result) float64) float64 {
		x, ok := rd.Results[sys][cell]
		if !ok {
			return math.NaN()
		}
		return f(x)
	}
	var rows []row
	add := func(label, unit string, hb bool, etcdCell, writCell string, f func(result) float64) {
		r := row{label: label, unit: unit, higherBetter: hb}
		for _, rd := range rounds {
			r.etcd = append(r.etcd, get(rd, "etcd", etcdCell, f))
			r.writ = append(r.writ, get(rd, "writ", writCell, f))
		}
		if !math.IsNaN(median(r.etcd)) || !math.IsNaN(median(r.writ)) {
			rows = append(rows, r)
		}
	}
	for _, c := range cells {
		ec := c.name
		if c.fact {
			ec = "write, 100 clients" // etcd has no facts: the same put load
		}
		add(c.name+": ops/s", "ops/s", true, ec, c.name, func(x result) float64 { return x.OpsPerSec })
		add(c.name+": p50", "ms", false, ec, c.name, func(x result) float64 { return x.P50 })
		add(c.name+": p99", "ms", false, ec, c.name, func(x result) float64 { return x.P99 })
		if !c.fact { // writctl bench prepares the facts' jobs in the same process run: its CPU would count them
			add(c.name+": server CPU per op", "µs", false, ec, c.name, func(x result) float64 { return x.CPUPerOp })
		}
	}
	add(failoverCell+": longest gap without a commit", "ms", false, failoverCell, failoverCell, func(x result) float64 { return x.GapMs })
	return rows
}

func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func markdown(rounds []round, rows []row) string {
	var b strings.Builder
	b.WriteString("| cell | unit | etcd (median) | writ (median) | writ/etcd per round | writ/etcd median |\n")
	b.WriteString("| --- | --- | ---: | ---: | --- | ---: |\n")
	for _, r := range rows {
		var per []string
		for _, x := range r.ratios() {
			per = append(per, num(x)+"×")
		}
		better := "higher is better"
		if !r.higherBetter {
			better = "lower is better"
		}
		fmt.Fprintf(&b, "| %s | %s (%s) | %s | %s | %s | %s× |\n", r.label, r.unit, better, num(median(r.etcd)), num(median(r.writ)),
			strings.Join(per, " "), num(median(r.ratios())))
	}
	b.WriteString("\nLoad average (1, 5, 15 min) before each cluster started:\n\n")
	for _, rd := range rounds {
		fmt.Fprintf(&b, "- round %d: etcd %s; writ %s\n", rd.N, rd.Load["etcd"], rd.Load["writ"])
	}
	return b.String()
}

// plot draws, per row, writ's advantage (the ratio oriented so that right
// of 1× is better for writ) on a log scale: a bar for the median, a dot per
// round.
func plot(rows []row) string {
	const (
		left, width, rowH, top = 330, 520, 20, 40
		lo, hi                 = -3.0, 3.0 // log2 of the axis ends: 1/8× … 8×
	)
	h := top + rowH*len(rows) + 40
	x := func(adv float64) float64 {
		l := math.Log2(adv)
		l = math.Max(lo, math.Min(hi, l))
		return left + (l-lo)/(hi-lo)*width
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", left+width+30, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="13">writ vs etcd, 3-node clusters: right of 1× writ is better (ops/s: writ/etcd; latency, CPU, gap: etcd/writ)</text>`+"\n")
	for _, t := range []float64{0.125, 0.25, 0.5, 1, 2, 4, 8} {
		stroke := "#ddd"
		if t == 1 {
			stroke = "#333"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x(t), top-5, x(t), h-30, stroke)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g×</text>`+"\n", x(t), h-15, t)
	}
	for i, r := range rows {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+14, html.EscapeString(r.label))
		m := median(r.ratios())
		if math.IsNaN(m) {
			continue
		}
		a := r.advantage(m)
		x0, x1 := x(1), x(a)
		color := "#2a7"
		if a < 1 {
			color, x0, x1 = "#d54", x1, x0
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.7"/>`+"\n", x0, y+4, math.Max(1, x1-x0), rowH-8, color)
		for _, q := range r.ratios() {
			if !math.IsNaN(q) && !math.IsInf(q, 0) && q > 0 {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="2.5" fill="#000"/>`+"\n", x(r.advantage(q)), y+rowH/2)
			}
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

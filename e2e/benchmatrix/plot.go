package benchmatrix

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotCost writes initial-sync-time.png and initial-sync-cpu.png: the
// initial sync against the number of services (x 10 endpoints), log-log.
func plotCost(dir string, tables map[sizeKey]*table, keys []sizeKey) error {
	for _, p := range []struct {
		file, ylabel string
		f            func(Sample) float64
		agg          func([]float64) float64
	}{
		{"initial-sync-time.png", "seconds to programmed", seconds, median},
		{"initial-sync-cpu.png", "CPU seconds", cpu, mean},
	} {
		pl := plot.New()
		pl.Title.Text = "Initial sync, services x 10 endpoints"
		pl.X.Label.Text = "services"
		pl.Y.Label.Text = p.ylabel
		pl.X.Scale, pl.Y.Scale = plot.LogScale{}, plot.LogScale{}
		pl.X.Tick.Marker, pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		var args []any
		var all plotter.XYs
		for _, s := range sinkOrder {
			var xy plotter.XYs
			for _, k := range keys {
				if k.m != 10 {
					continue
				}
				if v := p.agg(tables[k].get(s, ScInitial).values(p.f)); v > 0 {
					xy = append(xy, plotter.XY{X: float64(k.n), Y: v})
				}
			}
			if len(xy) > 0 {
				args = append(args, s, xy)
				all = append(all, xy...)
			}
		}
		if len(args) == 0 {
			continue
		}
		if err := plotutil.AddLinePoints(pl, args...); err != nil {
			return err
		}
		decades(&pl.X, all, func(p plotter.XY) float64 { return p.X })
		decades(&pl.Y, all, func(p plotter.XY) float64 { return p.Y })
		pl.Legend.Top, pl.Legend.Left = true, true
		if err := pl.Save(16*vg.Centimeter, 12*vg.Centimeter, filepath.Join(dir, p.file)); err != nil {
			return err
		}
	}
	return nil
}

// decades widens a log axis to whole powers of ten around the data, so
// that LogTicks labels at least two ticks.
func decades(a *plot.Axis, xy plotter.XYs, f func(plotter.XY) float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range xy {
		lo, hi = math.Min(lo, f(p)), math.Max(hi, f(p))
	}
	if lo <= 0 || math.IsInf(lo, 0) {
		return
	}
	a.Min, a.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if a.Max <= a.Min {
		a.Max = a.Min * 10
	}
}

// latencySize is the size of the latency plot: the one with 10 endpoints
// a service closest to 10,000 services.
func latencySize(keys []sizeKey) sizeKey {
	var k sizeKey
	for _, c := range keys {
		if c.m == 10 && (k.n == 0 || abs(c.n-10000) < abs(k.n-10000)) {
			k = c
		}
	}
	return k
}

// plotLatency writes endpoint-latency.png: the cumulative distribution of
// the one-endpoint change latencies at size k (latencySize).
func plotLatency(dir string, tables map[sizeKey]*table, k sizeKey) error {
	t := tables[k]
	if t == nil {
		return nil
	}
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("One endpoint added or removed, %s: latency CDF", k)
	pl.X.Label.Text = "ms from API write to kernel"
	pl.Y.Label.Text = "fraction of changes"
	pl.X.Scale = plot.LogScale{}
	pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var args []any
	for _, s := range sinksOf(t) {
		v := latencies(t, s)
		var xy plotter.XYs
		for i, x := range v {
			if x > 0 {
				xy = append(xy, plotter.XY{X: 1000 * x, Y: float64(i+1) / float64(len(v))})
			}
		}
		if len(xy) > 0 {
			args = append(args, s, xy)
		}
	}
	if len(args) == 0 {
		return nil
	}
	if err := plotutil.AddLines(pl, args...); err != nil {
		return err
	}
	var all plotter.XYs
	for i := 1; i < len(args); i += 2 {
		all = append(all, args[i].(plotter.XYs)...)
	}
	decades(&pl.X, all, func(p plotter.XY) float64 { return p.X })
	pl.Legend.Top, pl.Legend.Left = true, true
	return pl.Save(16*vg.Centimeter, 12*vg.Centimeter, filepath.Join(dir, "endpoint-latency.png"))
}

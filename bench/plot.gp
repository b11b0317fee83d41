# bench/plot.gp — the expansion-factor plot, called by bench/budget_bench.sh:
#
#   gnuplot -e "dir='RESULTS'; out='PNG'; backends='pread mmap uring'; ttl='TITLE'; xt='(\"min\" 37, ...)';
#               model_mib=4692.8; disk='0.43'; xmin=37; xmax=8192" bench/plot.gp
#
# Reads RESULTS/plot-BACKEND.csv (rows of summary.csv for one backend; column 5 = budget in MiB, the
# "unlimited" row placed right of the largest budget).  Top: decode tok/s (median, bars min–max) per backend,
# the disk bound (device GB/s ÷ bytes read per token) and the planner's prediction.  Bottom: the worst peak
# memory per backend — the cgroup's max usage (RSS + page cache, solid) and VmHWM (dashed) — against the
# budget line y = x and the model's size.  Both axes logarithmic.
set datafile separator ","
set datafile missing ""
set terminal pngcairo size 1100,1000 font "sans,10" noenhanced
set output out
set multiplot layout 2,1 title ttl font "sans,12"
set logscale x 2
set xtics @xt
set xrange [xmin / 1.4 : xmax * 1.4]
set lmargin at screen 0.08
set rmargin at screen 0.70
set grid xtics ytics mytics lc rgb "#dddddd"
set key outside right top
colour(b) = b eq "pread" ? "#1f77b4" : b eq "mmap" ? "#2ca02c" : b eq "uring" ? "#d62728" : "#7f7f7f"
first = word(backends, 1)
f(b) = sprintf("%s/plot-%s.csv", dir, b)

# -- decode speed
set ylabel "decode tok/s (median, min–max)"
set logscale y 10
set format y "%g"
plot for [b in backends] f(b) skip 1 using 5:9:10:11 with yerrorlines lw 2 pt 7 ps 0.8 lc rgb colour(b) title b, \
     f(first) skip 1 using 5:21 with lines dt 2 lw 2 lc rgb "black" title sprintf("disk bound (%s GB/s)", disk), \
     f(first) skip 1 using 5:23 with linespoints dt 3 lw 1 pt 6 lc rgb "#9467bd" title "planner prediction"

# -- peak memory
set ylabel "peak memory, MiB (worst run)"
set xlabel "RAM budget (--ram-budget and cgroup memory.limit_in_bytes)"
set format y "%g"
plot for [b in backends] f(b) skip 1 using 5:($14 / 1048576) with linespoints lw 2 pt 7 ps 0.8 lc rgb colour(b) \
         title b . " cgroup max (RSS + cache)", \
     for [b in backends] f(b) skip 1 using 5:($13 / 1048576) with linespoints dt 2 lw 1 pt 4 ps 0.8 lc rgb colour(b) \
         title b . " peak RSS", \
     f(first) skip 1 using 5:($39 > 0 ? $39 : NaN) with lines lw 1 lc rgb "black" title "budget (y = x)", \
     model_mib with lines dt 3 lc rgb "#555555" title "model file"
unset multiplot

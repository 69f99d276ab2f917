set terminal svg noenhanced size 960,720 font 'Sans,11'
set output "docs/results/comm/allreduce-v100.svg"
cd "docs/results/comm"
set title "allreduce, campaign v100: measured (points) vs fitted model"
set logscale xy
set format x '%.0s%cB'
set format y '%.0s%cs'
set xlabel 'message size S (bytes, nccl-tests size)'
set ylabel 'time of one allreduce (s)'
set key left top
set grid
plot 'allreduce-v100.dat' index 0 using 1:2 with points pt 7 ps 0.45 lc rgb '#1f77b4' title "N=2: B 22.6 GB/s, gamma 11.62 us, MRE 0.0 %", 'allreduce-v100.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#1f77b4' notitle, 'allreduce-v100.dat' index 2 using 1:2 with points pt 7 ps 0.45 lc rgb '#ff7f0e' title "N=3: B 45.2 GB/s, gamma 8.07 us, MRE 0.2 %", 'allreduce-v100.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#ff7f0e' notitle, 'allreduce-v100.dat' index 4 using 1:2 with points pt 7 ps 0.45 lc rgb '#2ca02c' title "N=4: B 85.8 GB/s, gamma 7.45 us, MRE 0.6 %", 'allreduce-v100.dat' index 5 using 1:2 with lines lw 1.5 lc rgb '#2ca02c' notitle, 'allreduce-v100.dat' index 6 using 1:2 with points pt 7 ps 0.45 lc rgb '#d62728' title "N=5: B 37.1 GB/s, gamma 5.18 us, MRE 0.2 %", 'allreduce-v100.dat' index 7 using 1:2 with lines lw 1.5 lc rgb '#d62728' notitle, 'allreduce-v100.dat' index 8 using 1:2 with points pt 7 ps 0.45 lc rgb '#9467bd' title "N=6: B 45.9 GB/s, gamma 4.92 us, MRE 0.3 %", 'allreduce-v100.dat' index 9 using 1:2 with lines lw 1.5 lc rgb '#9467bd' notitle, 'allreduce-v100.dat' index 10 using 1:2 with points pt 7 ps 0.45 lc rgb '#8c564b' title "N=7: B 87.5 GB/s, gamma 5.30 us, MRE 0.6 %", 'allreduce-v100.dat' index 11 using 1:2 with lines lw 1.5 lc rgb '#8c564b' notitle, 'allreduce-v100.dat' index 12 using 1:2 with points pt 7 ps 0.45 lc rgb '#e377c2' title "N=8: B 136.0 GB/s, gamma 5.40 us, MRE 1.1 %", 'allreduce-v100.dat' index 13 using 1:2 with lines lw 1.5 lc rgb '#e377c2' notitle, NaN with lines lw 1.5 lc 'black' title 'lines: T = a(N) S/B + c(N) gamma, ring form, fitted per N'

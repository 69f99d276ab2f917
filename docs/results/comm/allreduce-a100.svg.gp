set terminal svg noenhanced size 960,720 font 'Sans,11'
set output "docs/results/comm/allreduce-a100.svg"
cd "docs/results/comm"
set title "allreduce, campaign a100: measured (points) vs fitted model"
set logscale xy
set format x '%.0s%cB'
set format y '%.0s%cs'
set xlabel 'message size S (bytes, nccl-tests size)'
set ylabel 'time of one allreduce (s)'
set key left top
set grid
plot 'allreduce-a100.dat' index 0 using 1:2 with points pt 7 ps 0.45 lc rgb '#1f77b4' title "N=2: B 192.9 GB/s, gamma 22.64 us, MRE 1.6 %", 'allreduce-a100.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#1f77b4' notitle, 'allreduce-a100.dat' index 2 using 1:2 with points pt 7 ps 0.45 lc rgb '#ff7f0e' title "N=3: B 209.6 GB/s, gamma 13.71 us, MRE 1.3 %", 'allreduce-a100.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#ff7f0e' notitle, 'allreduce-a100.dat' index 4 using 1:2 with points pt 7 ps 0.45 lc rgb '#2ca02c' title "N=4: B 218.4 GB/s, gamma 8.89 us, MRE 1.6 %", 'allreduce-a100.dat' index 5 using 1:2 with lines lw 1.5 lc rgb '#2ca02c' notitle, 'allreduce-a100.dat' index 6 using 1:2 with points pt 7 ps 0.45 lc rgb '#d62728' title "N=5: B 222.2 GB/s, gamma 7.31 us, MRE 1.6 %", 'allreduce-a100.dat' index 7 using 1:2 with lines lw 1.5 lc rgb '#d62728' notitle, 'allreduce-a100.dat' index 8 using 1:2 with points pt 7 ps 0.45 lc rgb '#9467bd' title "N=6: B 224.4 GB/s, gamma 6.64 us, MRE 1.7 %", 'allreduce-a100.dat' index 9 using 1:2 with lines lw 1.5 lc rgb '#9467bd' notitle, 'allreduce-a100.dat' index 10 using 1:2 with points pt 7 ps 0.45 lc rgb '#8c564b' title "N=7: B 226.1 GB/s, gamma 5.83 us, MRE 1.8 %", 'allreduce-a100.dat' index 11 using 1:2 with lines lw 1.5 lc rgb '#8c564b' notitle, 'allreduce-a100.dat' index 12 using 1:2 with points pt 7 ps 0.45 lc rgb '#e377c2' title "N=8: B 227.3 GB/s, gamma 5.56 us, MRE 1.8 %", 'allreduce-a100.dat' index 13 using 1:2 with lines lw 1.5 lc rgb '#e377c2' notitle, NaN with lines lw 1.5 lc 'black' title 'lines: T = a(N) S/B + c(N) gamma, ring form, fitted per N'

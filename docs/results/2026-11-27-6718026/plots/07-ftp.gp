set terminal pngcairo size 800,600 noenhanced font ",9"
set output "07-ftp.png"
set title "FTP: SAN vs kernel TCP, median (up: SAN better, down: worse)"
set style fill solid 0.6
set boxwidth 0.7
set xtics rotate by -35 left
set ytics ("1/64x" -6, "1/32x" -5, "1/16x" -4, "1/8x" -3, "1/4x" -2, "1/2x" -1, "1x" 0, "2x" 1, "4x" 2, "8x" 3, "16x" 4, "32x" 5, "64x" 6, "128x" 7, "256x" 8, "512x" 9, "1024x" 10)
set grid ytics
set bmargin 15
set rmargin 30
set yrange [-0.3:1.22939]
set ylabel "times better than TCP (log scale)"
set xzeroaxis lt -1 lw 2
unset key
plot "07-ftp.dat" using 1:4:xtic(2) with boxes lc rgb "#2060a0"

profile t
mode buffered
file a 100 at 0.25
file b 10 contiguous
RA 1 0 10 7
R 0 0 4096 0
end 2

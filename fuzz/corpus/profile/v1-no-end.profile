file a 10 scattered 4096 0.1 0.2
R 0 0 1 0
